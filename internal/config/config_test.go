package config

import (
	"flag"
	"io"
	"kubegate/internal/webhook"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func parse(t *testing.T, args ...string) (Config, error) {
	t.Helper()
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return Parse(fs, args)
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaults(t *testing.T) {
	c, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Default(), c); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func TestFlagsWinOverFile(t *testing.T) {
	p := writeFile(t, `
listen: 0.0.0.0:9000
log: {level: debug, format: json}
apiserver: {qps: 20, burst: 30}
cache:
  resources: [pods, deployments.apps]
  minResync: 30s
`)
	c, err := parse(t, "--config", p, "--listen", "127.0.0.1:7000", "--resources", "configmaps, secrets", "--kube-api-qps", "-1")
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:7000" || c.Log.Level != "debug" || c.Log.Format != "json" ||
		c.APIServer != (APIServer{QPS: -1, Burst: 30}) ||
		time.Duration(c.Cache.MinResync) != 30*time.Second ||
		!cmp.Equal(c.Cache.Resources, []string{"configmaps", "secrets"}) {
		t.Fatalf("got %+v", c)
	}
}

func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		file string
		want string
	}{
		{"unknown flag", []string{"--nope"}, "", "flag provided but not defined"},
		{"bad level", []string{"--log-level", "loud"}, "", `log level "loud"`},
		{"bad format", []string{"--log-format", "xml"}, "", `log format "xml"`},
		{"bad listen", []string{"--listen", "8080"}, "", `listen "8080"`},
		{"stray arg", []string{"extra"}, "", `unexpected argument "extra"`},
		{"unknown field", nil, "lisen: x\n", `unknown field "lisen"`},
		{"bad duration", nil, "cache: {minResync: soon}\n", "invalid duration"},
		{"missing file", []string{"--config", "/nonexistent/kubegate.yaml"}, "", "read config"},
		{"bad authn", []string{"--authn", "ldap"}, "", `authn "ldap"`},
		{"bad authz", []string{"--authz", "abac"}, "", `authz "abac"`},
		{"cert without key", []string{"--tls-cert-file", "/etc/tls/tls.crt"}, "", "--tls-cert-file and --tls-private-key-file (tls.certFile, tls.privateKeyFile) go together"},
		{"key without cert", nil, "tls: {privateKeyFile: /etc/tls/tls.key}\n", "go together"},
		{"bad metrics auth", []string{"--metrics-auth", "open"}, "", `metrics auth "open": want rbac or none`},
		{"bad metrics auth in file", nil, "auth: {metrics: token}\n", `metrics auth "token"`},
		{"token-file without file", []string{"--authn", "token-file"}, "", "needs --token-file"},
		{"token file without mode", []string{"--token-file", "/tmp/t.csv"}, "", "only used with --authn=token-file"},
		{"authentication kubeconfig without TokenReview", []string{"--authn=token-file", "--token-file", "/tmp/t.csv", "--authentication-kubeconfig", "/tmp/kc"}, "",
			`--authentication-kubeconfig is only used with --authn=kubernetes, not "token-file"`},
		{"authorization kubeconfig without RBAC", nil, "auth: {authz: always-allow, authorizationKubeconfig: /tmp/kc}\n",
			`--authorization-kubeconfig is only used with --authz=rbac, not "always-allow"`},
		{"anonymous on all interfaces", []string{"--authn", "none", "--listen", "0.0.0.0:8080"}, "", "not loopback"},
		{"anonymous on empty host", []string{"--authn", "none", "--listen", ":8080"}, "", "not loopback"},
		{"anonymous from file", nil, "listen: 10.0.0.1:80\nauth: {authn: none}\n", "not loopback"},
		{"negative ttl", nil, "auth: {allowTTL: -1s}\n", "auth.allowTTL must not be negative"},
		{"negative qps", nil, "auth: {userQPS: -1}\n", "must not be negative"},
		{"negative inflight flag", []string{"--user-max-inflight", "-1"}, "", "must not be negative"},
		{"zero apiserver qps", nil, "apiserver: {qps: 0, burst: 5}\n", "apiserver.qps must not be 0"},
		{"zero apiserver qps flag", []string{"--kube-api-qps", "0"}, "", "apiserver.qps must not be 0"},
		{"zero apiserver burst", []string{"--kube-api-burst", "0"}, "", "apiserver.burst must be at least 1"},
		{"negative ws limit", nil, "websocket: {maxSockets: -1}\n", "websocket.maxSockets must not be negative"},
		{"negative coalesce delay", nil, "websocket: {coalesceDelay: -1ms}\n", "websocket.coalesceDelay must not be negative"},
		{"bad origin pattern", nil, "websocket: {allowedOrigins: ['[']}\n", `websocket.allowedOrigins: pattern "["`},
		{"share above the cap", nil, "websocket: {maxSockets: 10, maxSocketsPerClient: 11}\n", "websocket.maxSocketsPerClient (11) is each client's share of websocket.maxSockets (10)"},
		{"every host without authentication", []string{"--authn=none", "--allowed-hosts", "kubegate.local,*"}, "", `allowedHosts: "*" accepts every host name, which --authn=none does not allow`},
		{"every host pattern in file without authentication", nil, "auth: {authn: none}\nallowedHosts: ['*.*.*']\n", `"*.*.*" accepts every host name`},
		{"bad host pattern", nil, "allowedHosts: ['[']\n", `allowedHosts: "[" is not a host pattern`},
		{"host with a path", []string{"--allowed-hosts", "example.com/x"}, "", `allowedHosts: "example.com/x" is not a host pattern`},
		{"bad trusted proxy", []string{"--trusted-proxies", "10.0.0.0/8,ingress"}, "", `trustedProxies: "ingress" is not a CIDR`},
		{"negative failed auth budget", nil, "auth: {failedAuthBurst: -1}\n", "auth.failedAuthQPS and failedAuthBurst must not be negative"},
		{"negative review queue", nil, "auth: {reviewMaxWait: -1s}\n", "auth.reviewConcurrency, reviewQueueLength and reviewMaxWait must not be negative"},
		{"negative build share", nil, "windows: {userBuildShare: -0.5}\n", "windows.userBuildShare (-0.5) must not be negative (0 disables it)"},
		{"negative build burst", nil, "windows: {userBuildBurst: -1s}\n", "windows.maxViews, maxViewsPerUser, idleViews and userBuildBurst must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				args = append(args, "--config", writeFile(t, tc.file))
			}
			_, err := parse(t, args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestAuthFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		file string
		want Auth
	}{
		{name: "defaults", want: Default().Auth},
		{name: "anonymous on loopback", args: []string{"--authn", "none", "--authz", "always-allow"},
			want: func() Auth { a := Default().Auth; a.Authn, a.Authz = "none", "always-allow"; return a }()},
		{name: "anonymous on localhost", args: []string{"--authn=none", "--listen", "localhost:9000"},
			want: func() Auth { a := Default().Auth; a.Authn = "none"; return a }()},
		{name: "anonymous on ::1", args: []string{"--authn=none", "--listen", "[::1]:9000"},
			want: func() Auth { a := Default().Auth; a.Authn = "none"; return a }()},
		{name: "insecure anonymous", args: []string{"--authn=none", "--listen", "0.0.0.0:8080", "--insecure-allow-anonymous"},
			want: func() Auth { a := Default().Auth; a.Authn, a.InsecureAllowAnonymous = "none", true; return a }()},
		{name: "token file", args: []string{"--authn=token-file", "--token-file", "/etc/kubegate/tokens.csv"},
			want: func() Auth {
				a := Default().Auth
				a.Authn, a.TokenFile = "token-file", "/etc/kubegate/tokens.csv"
				return a
			}()},
		{name: "metrics open", args: []string{"--metrics-auth=none"},
			want: func() Auth { a := Default().Auth; a.Metrics = "none"; return a }()},
		{name: "metrics flag wins over file", args: []string{"--metrics-auth", "rbac"}, file: "auth: {metrics: none, userBurst: 9}\n",
			want: func() Auth { a := Default().Auth; a.UserBurst = 9; return a }()},
		{name: "metrics from file", file: "auth: {metrics: none}\n",
			want: func() Auth { a := Default().Auth; a.Metrics = "none"; return a }()},
		// A second tier: its reviews go to the apiserver, not to the
		// kubegate it reads from.
		{name: "review kubeconfigs", args: []string{"--authentication-kubeconfig", "/etc/apiserver/authn", "--authorization-kubeconfig", "/etc/apiserver/authz"},
			want: func() Auth {
				a := Default().Auth
				a.AuthenticationKubeconfig, a.AuthorizationKubeconfig = "/etc/apiserver/authn", "/etc/apiserver/authz"
				return a
			}()},
		{name: "review kubeconfigs, flag wins over file", args: []string{"--authorization-kubeconfig", "/flag/authz"},
			file: "auth: {authenticationKubeconfig: /file/authn, authorizationKubeconfig: /file/authz}\n",
			want: func() Auth {
				a := Default().Auth
				a.AuthenticationKubeconfig, a.AuthorizationKubeconfig = "/file/authn", "/flag/authz"
				return a
			}()},
		{name: "limits", args: []string{"--user-qps", "0", "--user-burst", "5", "--user-max-inflight", "0"},
			want: func() Auth { a := Default().Auth; a.UserQPS, a.UserBurst, a.UserMaxInflight = 0, 5, 0; return a }()},
		{name: "limit flag wins over file", args: []string{"--user-qps", "7"}, file: "auth: {userQPS: 5, userBurst: 9}\n",
			want: func() Auth { a := Default().Auth; a.UserQPS, a.UserBurst = 7, 9; return a }()},
		{name: "file, flag wins", args: []string{"--authz", "rbac"},
			file: "auth: {authz: always-allow, allowTTL: 1s, userQPS: 5, audiences: [kubegate]}\n",
			want: func() Auth {
				a := Default().Auth
				a.AllowTTL, a.UserQPS, a.Audiences = Duration(time.Second), 5, []string{"kubegate"}
				return a
			}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				args = append(args, "--config", writeFile(t, tc.file))
			}
			c, err := parse(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, c.Auth); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestPassThrough: pass-through is on by default, turned off in the file
// or by --pass-through=false, and the flag wins over the file.
func TestPassThrough(t *testing.T) {
	def := Default().PassThrough
	if !def.Enabled || def.MaxBodyBytes != 3<<20 || time.Duration(def.Timeout) != 70*time.Second {
		t.Fatalf("default %+v, want enabled, 3 MiB, 70s", def)
	}
	for _, tc := range []struct {
		name, file string
		args       []string
		want       PassThrough
	}{
		{name: "default", want: def},
		{name: "off in the file", file: "passThrough: {enabled: false}\n", want: PassThrough{MaxBodyBytes: def.MaxBodyBytes, Timeout: def.Timeout}},
		{name: "off by flag", args: []string{"--pass-through=false"}, want: PassThrough{MaxBodyBytes: def.MaxBodyBytes, Timeout: def.Timeout}},
		{name: "flag wins over file", args: []string{"--pass-through=true"}, file: "passThrough: {enabled: false, maxBodyBytes: 1024, timeout: 5s}\n",
			want: PassThrough{Enabled: true, MaxBodyBytes: 1024, Timeout: Duration(5 * time.Second)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				args = append(args, "--config", writeFile(t, tc.file))
			}
			c, err := parse(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, c.PassThrough); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
	if _, err := parse(t, "--config", writeFile(t, "passThrough: {maxBodyBytes: -1}\n")); err == nil || !strings.Contains(err.Error(), "passThrough.maxBodyBytes") {
		t.Fatalf("negative maxBodyBytes: %v, want an error naming it", err)
	}
}

// TestHostsAndProxies: --allowed-hosts and --trusted-proxies are lists,
// read from the file and overridden by the flags.
func TestHostsAndProxies(t *testing.T) {
	file := writeFile(t, "allowedHosts: [a.example.com]\ntrustedProxies: [10.0.0.0/8]\n")
	for _, tc := range []struct {
		name           string
		args           []string
		hosts, proxies []string
	}{
		{name: "default: none"},
		{name: "file", args: []string{"--config", file}, hosts: []string{"a.example.com"}, proxies: []string{"10.0.0.0/8"}},
		{name: "flags win over file", args: []string{"--config", file, "--allowed-hosts", " kubegate.example.com, *.apps.example.com ,", "--trusted-proxies", "192.0.2.1,2001:db8::/32"},
			hosts: []string{"kubegate.example.com", "*.apps.example.com"}, proxies: []string{"192.0.2.1", "2001:db8::/32"}},
		{name: "every host with authentication", args: []string{"--allowed-hosts", "*"}, hosts: []string{"*"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parse(t, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if !cmp.Equal(tc.hosts, c.AllowedHosts) || !cmp.Equal(tc.proxies, c.TrustedProxies) {
				t.Fatalf("allowedHosts %q, trustedProxies %q; want %q, %q", c.AllowedHosts, c.TrustedProxies, tc.hosts, tc.proxies)
			}
		})
	}
}

func TestTLS(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		file string
		want TLS
	}{
		{name: "default: plain HTTP"},
		{name: "flags", args: []string{"--tls-cert-file", "/tls/tls.crt", "--tls-private-key-file=/tls/tls.key"},
			want: TLS{CertFile: "/tls/tls.crt", PrivateKeyFile: "/tls/tls.key"}},
		{name: "file", file: "tls: {certFile: /a/c.pem, privateKeyFile: /a/k.pem}\n",
			want: TLS{CertFile: "/a/c.pem", PrivateKeyFile: "/a/k.pem"}},
		{name: "flags win over file", args: []string{"--tls-cert-file", "/b/c.pem", "--tls-private-key-file", "/b/k.pem"},
			file: "tls: {certFile: /a/c.pem, privateKeyFile: /a/k.pem}\n", want: TLS{CertFile: "/b/c.pem", PrivateKeyFile: "/b/k.pem"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				args = append(args, "--config", writeFile(t, tc.file))
			}
			c, err := parse(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, c.TLS); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestWebSocketSection(t *testing.T) {
	p := writeFile(t, `
websocket:
  allowedOrigins: ["dashboard.example.com", "*.example.org"]
  maxSockets: 5
  maxSocketsPerClient: 2
  maxSubscriptionsPerSocket: 3
  pingInterval: 10s
  pongTimeout: 4s
  writeTimeout: 3s
  maxMessageBytes: 1024
  subscribeRate: 2.5
  subscribeBurst: 4
  coalesceDelay: 5ms
`)
	c, err := parse(t, "--config", p)
	if err != nil {
		t.Fatal(err)
	}
	want := WebSocket{
		AllowedOrigins: []string{"dashboard.example.com", "*.example.org"}, MaxSockets: 5, MaxSocketsPerClient: 2,
		MaxSubscriptionsPerSocket: 3, PingInterval: Duration(10 * time.Second), PongTimeout: Duration(4 * time.Second),
		WriteTimeout: Duration(3 * time.Second), MaxMessageBytes: 1024, SubscribeRate: 2.5, SubscribeBurst: 4,
		CoalesceDelay: ptr(Duration(5 * time.Millisecond)),
		ResyncBudget:  2000, // not set: the WebSocket server's default
	}
	if diff := cmp.Diff(want, c.WebSocket); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

// TestWindowsSection: the build share defaults to a quarter of a CPU
// after a second, and 0 turns it off, as userQPS does.
func TestWindowsSection(t *testing.T) {
	c, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	if c.Windows.UserBuildShare != 0.25 || c.Windows.UserBuildBurst != Duration(time.Second) {
		t.Errorf("defaults: share %g, burst %v; want 0.25 and 1s", c.Windows.UserBuildShare, time.Duration(c.Windows.UserBuildBurst))
	}
	p := writeFile(t, "windows:\n  maxViews: 32\n  userBuildShare: 0\n  userBuildBurst: 3s\n")
	if c, err = parse(t, "--config", p); err != nil {
		t.Fatal(err)
	}
	want := Windows{MaxViews: 32, MaxViewsPerUser: 16, IdleViews: 8, UserBuildShare: 0, UserBuildBurst: Duration(3 * time.Second)}
	if diff := cmp.Diff(want, c.Windows); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

// TestCoalesceDelay: unset leaves the gateway's default, and 0 is kept
// apart from unset, as it turns coalescing off.
func TestCoalesceDelay(t *testing.T) {
	for _, tc := range []struct {
		file string
		want *Duration
	}{
		{"websocket: {}\n", nil},
		{"websocket: {coalesceDelay: 0s}\n", ptr(Duration(0))},
		{"websocket: {coalesceDelay: 20ms}\n", ptr(Duration(20 * time.Millisecond))},
	} {
		c, err := parse(t, "--config", writeFile(t, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, c.WebSocket.CoalesceDelay); diff != "" {
			t.Errorf("%q: (-want +got):\n%s", tc.file, diff)
		}
	}
}

func ptr[T any](v T) *T { return &v }

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func TestWebhooks(t *testing.T) {
	t.Setenv("KUBEGATE_TEST_SECRET", testSecret+" whsec_"+strings.Repeat("A", 32))
	p := writeFile(t, `
webhooks:
- name: audit
  url: https://receiver.example/hook
  resources:
  - {resource: configmaps, namespace: team-a, labelSelector: "app=web", fieldSelector: "metadata.name!=x"}
  - {resource: deployments.apps}
  eventTypes: [added, deleted]
  resyncPeriod: 10m
  secretEnv: KUBEGATE_TEST_SECRET
  timeout: 5s
  retry: {maxAttempts: 3, maxAge: 10m, initialBackoff: 2s, maxBackoff: 1m}
  format: watch
`)
	c, err := parse(t, "--config", p)
	if err != nil {
		t.Fatal(err)
	}
	if c.ConfigPath != p || len(c.Webhooks) != 1 {
		t.Fatalf("got %+v", c)
	}
	w := c.Webhooks[0].WithDefaults()
	if w.Name != "audit" || len(w.Resources) != 2 || w.Resources[0].LabelSelector != "app=web" ||
		w.Retry.MaxBackoff.Duration != time.Minute || w.Retry.MaxAttempts != 3 || w.Format != "watch" ||
		w.ResyncPeriod.Duration != 10*time.Minute || w.MaxEvents != 4096 {
		t.Fatalf("got %+v", w)
	}
	keys, err := w.Secrets()
	if err != nil || len(keys) != 2 || len(keys[1]) != 24 {
		t.Fatalf("secrets: %d keys, %v", len(keys), err)
	}
}

func TestWebhookDefaults(t *testing.T) {
	w := webhook.Spec{}.WithDefaults()
	if w.Format != "cloudevents" || len(w.EventTypes) != 4 || w.Timeout.Duration != 10*time.Second ||
		w.Retry.MaxAttempts != 12 || w.Retry.MaxAge.Duration != time.Hour ||
		w.Retry.InitialBackoff.Duration != time.Second || w.Retry.MaxBackoff.Duration != 5*time.Minute {
		t.Fatalf("got %+v", w)
	}
}

func TestWebhookBadInput(t *testing.T) {
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte(testSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badSecret := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(badSecret, []byte("hunter2"), 0o600); err != nil {
		t.Fatal(err)
	}
	ok := "name: a\n  url: https://r.example/\n  resources: [{resource: pods}]\n  secretFile: " + secretFile + "\n"
	for _, tc := range []struct{ name, hook, want string }{
		{"valid", ok, ""},
		{"no name", "url: https://r.example/\n  resources: [{resource: pods}]\n  secretFile: " + secretFile, "webhooks[0]: name: required"},
		{"bad name", strings.Replace(ok, "name: a", "name: A_b", 1), `name: "A_b"`},
		{"no url", strings.Replace(ok, "url: https://r.example/", "url: ''", 1), "webhooks[0] (a): url: required"},
		{"relative url", strings.Replace(ok, "https://r.example/", "/hook", 1), "url: \"/hook\": want an http or https URL"},
		{"ftp url", strings.Replace(ok, "https://r.example/", "ftp://r.example/", 1), "want an http or https URL"},
		{"url with user", strings.Replace(ok, "https://r.example/", "https://u:p@r.example/", 1), "credentials in the URL"},
		{"no resources", strings.Replace(ok, "[{resource: pods}]", "[]", 1), "resources: at least one"},
		{"empty resource", strings.Replace(ok, "{resource: pods}", "{namespace: x}", 1), "resources[0].resource: required"},
		{"bad namespace", strings.Replace(ok, "{resource: pods}", "{resource: pods, namespace: Bad_NS}", 1), "resources[0].namespace"},
		{"bad label selector", strings.Replace(ok, "{resource: pods}", "{resource: pods, labelSelector: 'a=(b'}", 1), "resources[0].labelSelector"},
		{"bad field selector", strings.Replace(ok, "{resource: pods}", "{resource: pods, fieldSelector: 'a'}", 1), "resources[0].fieldSelector"},
		{"bad event type", ok + "  eventTypes: [created]\n", `eventTypes: "created"`},
		{"dup event type", ok + "  eventTypes: [added, added]\n", `"added" is listed twice`},
		{"missing secret", strings.Replace(ok, "secretFile: "+secretFile, "format: watch", 1), "secret: a signing secret is required"},
		{"both secrets", ok + "  secretEnv: X\n", "only one of secretFile and secretEnv"},
		{"unreadable secret", strings.Replace(ok, secretFile, "/nonexistent/secret", 1), "secret: secretFile: open /nonexistent/secret"},
		{"unset env", strings.Replace(ok, "secretFile: "+secretFile, "secretEnv: KUBEGATE_NOT_SET_ANYWHERE", 1), "KUBEGATE_NOT_SET_ANYWHERE is not set"},
		{"bad secret", strings.Replace(ok, secretFile, badSecret, 1), `secret 1: want "whsec_"`},
		{"negative timeout", ok + "  timeout: -1s\n", "timeout: -1s"},
		{"bad format", ok + "  format: xml\n", `format: "xml"`},
		{"negative attempts", ok + "  retry: {maxAttempts: -1}\n", "retry.maxAttempts"},
		{"backoff order", ok + "  retry: {initialBackoff: 1m, maxBackoff: 1s}\n", "retry.initialBackoff: 1m0s is more than maxBackoff"},
		{"unknown field", ok + "  retries: 3\n", `unknown field "retries"`},
		{"bad allow", ok + "  allowAddresses: [10.0.0.1]\n", `allowAddresses: "10.0.0.1": want a CIDR`},
		{"bad deny", ok + "  denyAddresses: [nope]\n", `denyAddresses: "nope"`},
		{"bad resync", ok + "  resyncPeriod: later\n", "invalid duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, "--config", writeFile(t, "webhooks:\n- "+tc.hook))
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("error leaks the secret: %v", err)
			}
		})
	}
	t.Run("duplicate name", func(t *testing.T) {
		_, err := parse(t, "--config", writeFile(t, "webhooks:\n- "+ok+"- "+ok))
		if err == nil || !strings.Contains(err.Error(), `webhooks[1] (a): name: "a" is used by another webhook`) {
			t.Fatalf("err = %v", err)
		}
	})
}

// FuzzLoadWebhooks feeds arbitrary files to the loader and validator: they
// must return an error or a configuration, never panic.
func FuzzLoadWebhooks(f *testing.F) {
	f.Add("webhooks:\n- {name: a, url: 'https://x/', resources: [{resource: pods}], secretEnv: X}\n")
	f.Add("webhooks:\n- name: a\n  retry: {maxAge: 1h}\n  resources: [{resource: pods, labelSelector: 'a in (b)'}]\n")
	f.Add("webhooks: [{url: 'http://[::1]:80/'}]\n")
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, body string) {
		p := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Load(p, Default())
		if err != nil {
			return
		}
		_ = c.Validate()
	})
}
