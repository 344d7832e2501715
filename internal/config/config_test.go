package config

import (
	"flag"
	"io"
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
cache:
  resources: [pods, deployments.apps]
  minResync: 30s
`)
	c, err := parse(t, "--config", p, "--listen", "127.0.0.1:7000", "--resources", "configmaps, secrets")
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:7000" || c.Log.Level != "debug" || c.Log.Format != "json" ||
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
		{"token-file without file", []string{"--authn", "token-file"}, "", "needs --token-file"},
		{"token file without mode", []string{"--token-file", "/tmp/t.csv"}, "", "only used with --authn=token-file"},
		{"anonymous on all interfaces", []string{"--authn", "none", "--listen", "0.0.0.0:8080"}, "", "not loopback"},
		{"anonymous on empty host", []string{"--authn", "none", "--listen", ":8080"}, "", "not loopback"},
		{"anonymous from file", nil, "listen: 10.0.0.1:80\nauth: {authn: none}\n", "not loopback"},
		{"negative ttl", nil, "auth: {allowTTL: -1s}\n", "auth.allowTTL must not be negative"},
		{"negative qps", nil, "auth: {userQPS: -1}\n", "must not be negative"},
		{"negative inflight flag", []string{"--user-max-inflight", "-1"}, "", "must not be negative"},
		{"negative ws limit", nil, "websocket: {maxSockets: -1}\n", "websocket.maxSockets must not be negative"},
		{"bad origin pattern", nil, "websocket: {allowedOrigins: ['[']}\n", `websocket.allowedOrigins: pattern "["`},
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
`)
	c, err := parse(t, "--config", p)
	if err != nil {
		t.Fatal(err)
	}
	want := WebSocket{
		AllowedOrigins: []string{"dashboard.example.com", "*.example.org"}, MaxSockets: 5, MaxSocketsPerClient: 2,
		MaxSubscriptionsPerSocket: 3, PingInterval: Duration(10 * time.Second), PongTimeout: Duration(4 * time.Second),
		WriteTimeout: Duration(3 * time.Second), MaxMessageBytes: 1024, SubscribeRate: 2.5, SubscribeBurst: 4,
	}
	if diff := cmp.Diff(want, c.WebSocket); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}
