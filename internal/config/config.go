// Package config holds the gateway's configuration: its defaults, the
// optional YAML file and the command-line flags, which win over the file.
package config

import (
	"errors"
	"flag"
	"fmt"
	"kubegate/internal/livequery"
	"kubegate/internal/webhook"
	"kubegate/internal/ws"
	"net"
	"net/netip"
	"os"
	"path"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Config is the gateway's whole configuration. Field comments give the
// defaults applied by Default.
type Config struct {
	// Kubeconfig is the kubeconfig file to use. Default: in-cluster config,
	// then $KUBECONFIG, then ~/.kube/config.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Listen is the HTTP listen address. Default 127.0.0.1:8080.
	Listen string `json:"listen,omitempty"`
	// TLS, when set, serves HTTPS on Listen instead of HTTP.
	TLS TLS `json:"tls"`
	// AllowedHosts are the host names requests may name in their Host
	// header besides loopback names (localhost, *.localhost) and
	// addresses, as host patterns matched with path.Match
	// ("kubegate.example.com", "*.example.com"); a request naming any
	// other host is refused with 403, a guard against DNS rebinding (as
	// kubectl proxy's --accept-hosts). With authn kubernetes or
	// token-file, a Host that is an IP address is accepted too: DNS
	// rebinding needs a name. "*" accepts every host, except with authn
	// none, where the check cannot be turned off. Default none.
	AllowedHosts []string `json:"allowedHosts,omitempty"`
	// TrustedProxies are the CIDRs (or addresses) of the proxies in front
	// of the gateway, an Ingress controller's say: a request whose peer
	// is one of them is attributed to the client address it carries in
	// X-Forwarded-For (or Forwarded), for the limits kept per client
	// address (failed credentials, /login, anonymous callers' rates and
	// sockets). Default none: the peer is the client.
	TrustedProxies []string `json:"trustedProxies,omitempty"`
	// ShutdownTimeout bounds graceful shutdown. Webhook drains and
	// WebSocket close handshakes get half of it, at most 5s. Default 15s.
	ShutdownTimeout Duration  `json:"shutdownTimeout,omitempty"`
	Log             Log       `json:"log"`
	APIServer       APIServer `json:"apiserver"`
	Cache           Cache     `json:"cache"`
	WebSocket       WebSocket `json:"websocket"`
	Windows         Windows   `json:"windows"`
	Auth            Auth      `json:"auth"`
	// PassThrough sends what the cache does not serve on to
	// kube-apiserver with the caller's own credential.
	PassThrough PassThrough `json:"passThrough"`
	// Webhooks are receivers of resource events. Default none.
	Webhooks []webhook.Spec `json:"webhooks,omitempty"`
	// ConfigPath is the --config file, kept so SIGHUP can re-read it.
	ConfigPath string `json:"-"`
}

// TLS configures HTTPS. The flags have kube-apiserver's names.
type TLS struct {
	// CertFile is the PEM serving certificate, followed by any
	// intermediates. With PrivateKeyFile it makes the gateway serve
	// HTTPS (TLS 1.2 at least, HTTP/2 and HTTP/1.1), reading both files
	// again every minute so a rotated pair is served without a restart.
	// Default none: plain HTTP.
	CertFile string `json:"certFile,omitempty"`
	// PrivateKeyFile is CertFile's PEM private key.
	PrivateKeyFile string `json:"privateKeyFile,omitempty"`
}

// Auth configures authentication, authorization and per-user limits.
// docs/auth.md explains the modes.
type Auth struct {
	// Authn is how callers are identified: kubernetes (TokenReview),
	// token-file or none (everyone is system:anonymous). Default
	// kubernetes.
	Authn string `json:"authn,omitempty"`
	// TokenFile is the CSV token file for authn token-file.
	TokenFile string `json:"tokenFile,omitempty"`
	// Authz is how reads are authorized: rbac (SubjectAccessReview) or
	// always-allow. Default rbac.
	Authz string `json:"authz,omitempty"`
	// Metrics is how /metrics is protected: rbac (the caller is
	// authenticated as Authn says and authorized as Authz says for get on
	// the non-resource URL /metrics, as kube-apiserver protects its own)
	// or none (open to anyone who can connect, for scrapes through a
	// trusted path). Default rbac.
	Metrics string `json:"metrics,omitempty"`
	// AuthenticationKubeconfig is the kubeconfig of the apiserver that
	// reviews tokens (TokenReview, authn kubernetes), as
	// k8s.io/apiserver's --authentication-kubeconfig. Set it when the
	// gateway reads from another kubegate, which serves no reviews.
	// Default: the gateway's own kubeconfig.
	AuthenticationKubeconfig string `json:"authenticationKubeconfig,omitempty"`
	// AuthorizationKubeconfig is the kubeconfig of the apiserver that
	// reviews access (SubjectAccessReview, authz rbac), as
	// k8s.io/apiserver's --authorization-kubeconfig. Default: the
	// gateway's own kubeconfig.
	AuthorizationKubeconfig string `json:"authorizationKubeconfig,omitempty"`
	// InsecureAllowAnonymous allows authn none on a non-loopback listen
	// address. Default false.
	InsecureAllowAnonymous bool `json:"insecureAllowAnonymous,omitempty"`
	// Audiences, when set, are the audiences a token must be valid for
	// (TokenReview). Default: the apiserver's.
	Audiences []string `json:"audiences,omitempty"`
	// TokenSuccessTTL caches a valid token. Default 10s.
	TokenSuccessTTL Duration `json:"tokenSuccessTTL"`
	// TokenFailureTTL caches a rejected token. Default 3s.
	TokenFailureTTL Duration `json:"tokenFailureTTL"`
	// AllowTTL caches an allowed SubjectAccessReview. Default 5s.
	AllowTTL Duration `json:"allowTTL"`
	// DenyTTL caches a denied SubjectAccessReview. Default 2s.
	DenyTTL Duration `json:"denyTTL"`
	// NamespaceScanTTL is how often all namespaces are reviewed again for
	// a user whose cluster-wide request is narrowed; namespaces granted
	// since show up within it. Default 30s.
	NamespaceScanTTL Duration `json:"namespaceScanTTL"`
	// RecheckInterval is how often live streams are re-authorized.
	// Default 5s.
	RecheckInterval Duration `json:"recheckInterval,omitempty"`
	// RecheckGrace is how long a live stream goes on while its
	// re-authorizations cannot be made because the apiserver is
	// unreachable; a denial still ends it at once. Negative: no grace.
	// Default 60s.
	RecheckGrace Duration `json:"recheckGrace,omitempty"`
	// UserQPS is each user's sustained request rate; 0 disables it.
	// Default 50.
	UserQPS float64 `json:"userQPS"`
	// UserBurst is each user's request burst. Default 200.
	UserBurst int `json:"userBurst,omitempty"`
	// UserMaxInflight bounds each user's open requests, watches and
	// WebSockets included; 0 disables it. Default 500.
	UserMaxInflight int `json:"userMaxInflight"`
	// FailedAuthQPS is the sustained rate, per client address, of
	// requests and logins whose credentials fail (missing, malformed or
	// rejected); beyond it and FailedAuthBurst such an address is
	// answered 429 before any review, except for tokens known to be
	// valid. Defaults 5 and 50.
	FailedAuthQPS   float64 `json:"failedAuthQPS,omitempty"`
	FailedAuthBurst int     `json:"failedAuthBurst,omitempty"`
	// ReviewConcurrency bounds the TokenReviews and SubjectAccessReviews
	// in flight; the others wait in fair queues, by user (by client
	// address before authentication). Default 8.
	ReviewConcurrency int `json:"reviewConcurrency,omitempty"`
	// ReviewQueueLength bounds each of the 128 review queues; a review
	// whose queue is full is refused at once with 429. Default 16.
	ReviewQueueLength int `json:"reviewQueueLength,omitempty"`
	// ReviewMaxWait bounds a review's wait in its queue before it is
	// refused with 429. Default 5s.
	ReviewMaxWait Duration `json:"reviewMaxWait,omitempty"`
}

// PassThrough configures the requests the gateway sends on to
// kube-apiserver with the caller's own token instead of answering them
// from its cache: writes, subresources (status, scale, log, exec, attach,
// portforward, eviction...; proxy excepted) and self-reviews
// (SelfSubjectAccessReview, SelfSubjectRulesReview, SelfSubjectReview).
// docs/auth.md ("Pass-through") gives the reasoning.
type PassThrough struct {
	// Enabled passes those requests through when callers' tokens are
	// cluster credentials: with auth.authn kubernetes. With token-file or
	// none the gateway holds no credential of the caller's that
	// kube-apiserver would accept, and refuses them as when Enabled is
	// false: writes with 405, subresources with 404, each with a Status
	// saying why. Default true.
	Enabled bool `json:"enabled"`
	// MaxBodyBytes bounds a request body; a larger one is refused with
	// 413 before kube-apiserver sees it. Default 3 MiB, kube-apiserver's
	// own bound.
	MaxBodyBytes int64 `json:"maxBodyBytes,omitempty"`
	// Timeout bounds a request that is not a stream, from the gateway
	// sending it to the end of the answer; beyond it the answer is 504.
	// Streams (logs with follow, exec, attach, portforward, watches) are
	// bounded only by the caller's auth.userMaxInflight. Default 70s,
	// above kube-apiserver's own 60s (--request-timeout), so that its
	// answer comes first.
	Timeout Duration `json:"timeout,omitempty"`
}

// APIServer configures the gateway's own client of kube-apiserver.
type APIServer struct {
	// QPS and Burst bound the gateway's requests to kube-apiserver: LISTs,
	// WATCHes, discovery and, above all, the TokenReviews and
	// SubjectAccessReviews made on behalf of users, which grow with them.
	// client-go's defaults (5 and 10) would queue those reviews behind
	// each other. A negative QPS turns client-side throttling off and
	// leaves protection to the apiserver's priority and fairness.
	// Defaults 50 and 100.
	QPS   float32 `json:"qps,omitempty"`
	Burst int     `json:"burst,omitempty"`
	// Compression asks kube-apiserver to gzip its answers. Default false:
	// the gateway's lists and watches are its largest reads, and
	// compressing them costs kube-apiserver and the gateway CPU that a
	// link inside a cluster or data centre does not repay (measured in
	// docs/benchmarks-history.md). Turn it on for an apiserver across a slow link.
	Compression bool `json:"compression,omitempty"`
}

// Log configures logging.
type Log struct {
	// Level is debug, info, warn or error. Default info.
	Level string `json:"level,omitempty"`
	// Format is console or json. Default console.
	Format string `json:"format,omitempty"`
}

// Cache configures the informers and listeners.
type Cache struct {
	// Resources are started at boot and gate readiness; others start on
	// first use. Names as kubectl accepts them. Default none.
	Resources []string `json:"resources,omitempty"`
	// KeepManagedFields keeps metadata.managedFields. Default false.
	KeepManagedFields bool `json:"keepManagedFields,omitempty"`
	// MinResync is the shortest per-listener resync period. Default 5s.
	MinResync Duration `json:"minResync,omitempty"`
	// HistoryEvents bounds each resource's resume history. Default 10000.
	HistoryEvents int `json:"historyEvents,omitempty"`
	// ListenerMaxEvents bounds each listener's backlog. Default 4096.
	ListenerMaxEvents int `json:"listenerMaxEvents,omitempty"`
	// ListenerMaxBytes bounds each listener's backlog in bytes. Default 16 MiB.
	ListenerMaxBytes int64 `json:"listenerMaxBytes,omitempty"`
}

// Windows bounds the live tables' views: each distinct sort and filter
// of a resource that WebSocket windows and REST sorted lists read (see
// docs/protocol.md, "Windows").
type Windows struct {
	// MaxViews bounds the views of one resource, idle ones included.
	// Default 64.
	MaxViews int `json:"maxViews,omitempty"`
	// MaxViewsPerUser bounds the views one user (or one address, for
	// anonymous callers) holds windows on, per resource. When a resource
	// holds MaxViews and none is idle, the user holding the most gives
	// one up to a user holding fewer. Default 16.
	MaxViewsPerUser int `json:"maxViewsPerUser,omitempty"`
	// IdleViews is how many views without windows a resource keeps up to
	// date, so that a window reopened alike finds its view built.
	// Default 8.
	IdleViews int `json:"idleViews,omitempty"`
	// UserBuildShare is the share of one CPU one user's view builds (new
	// sorts and filters, over every resource) may take on average, after
	// UserBuildBurst of building at once; past it the user's next build
	// waits until the share has paid for the last (docs/reliability.md,
	// "Isolation"). 0 disables it. Default 0.25.
	UserBuildShare float64 `json:"userBuildShare"`
	// UserBuildBurst is the building time one user may take at once
	// before UserBuildShare holds it. Default 1s.
	UserBuildBurst Duration `json:"userBuildBurst,omitempty"`
}

// WebSocket configures /ws.
type WebSocket struct {
	// AllowedOrigins are host patterns browsers may connect from, in
	// addition to the gateway's own host. Default none.
	AllowedOrigins []string `json:"allowedOrigins,omitempty"`
	// MaxSockets bounds open sockets. When they are all taken, a client
	// holding fewer than the client holding the most still gets one:
	// that client gives one up (its newest idle socket, else its newest,
	// closed with 1013). Default 10000.
	MaxSockets int `json:"maxSockets,omitempty"`
	// MaxSocketsPerClient bounds sockets per client (a user, or a client
	// address for anonymous callers): each client's share of MaxSockets,
	// which it cannot exceed. Default 100.
	MaxSocketsPerClient int `json:"maxSocketsPerClient,omitempty"`
	// MaxSubscriptionsPerSocket bounds subscriptions per socket. Default 100.
	MaxSubscriptionsPerSocket int `json:"maxSubscriptionsPerSocket,omitempty"`
	// PingInterval is the keepalive period. Default 30s.
	PingInterval Duration `json:"pingInterval,omitempty"`
	// PongTimeout is how long a ping may go unanswered before the socket
	// is dropped. Default 15s.
	PongTimeout Duration `json:"pongTimeout,omitempty"`
	// WriteTimeout bounds every write to a socket; a client that does not
	// read for this long is dropped. Default 10s.
	WriteTimeout Duration `json:"writeTimeout,omitempty"`
	// MaxMessageBytes bounds one client message (close 1009 beyond).
	// Default 65536.
	MaxMessageBytes int64 `json:"maxMessageBytes,omitempty"`
	// SubscribeRate is the sustained subscribe requests per second per
	// socket, with bursts up to SubscribeBurst. Defaults 10 and 20.
	SubscribeRate  float64 `json:"subscribeRate,omitempty"`
	SubscribeBurst int     `json:"subscribeBurst,omitempty"`
	// ResyncBudget is the objects per second the resyncs of one client's
	// subscriptions may re-send, across its sockets; resyncs beyond it
	// are postponed. Default 2000.
	ResyncBudget float64 `json:"resyncBudget,omitempty"`
	// CoalesceDelay is how long a busy socket (one writing, or that wrote
	// within the last CoalesceDelay) gathers events into one message
	// before it writes them; a socket that is not busy writes at once.
	// 0 turns coalescing off. Default (unset) 2ms.
	CoalesceDelay *Duration `json:"coalesceDelay,omitempty"`
}

// Default returns the configuration used when nothing is set.
func Default() Config {
	return Config{
		Listen:          "127.0.0.1:8080",
		ShutdownTimeout: Duration(15 * time.Second),
		Log:             Log{Level: "info", Format: "console"},
		APIServer:       APIServer{QPS: 50, Burst: 100},
		Cache:           Cache{MinResync: Duration(5 * time.Second), HistoryEvents: 10000},
		WebSocket:       webSocketDefaults(),
		PassThrough:     PassThrough{Enabled: true, MaxBodyBytes: 3 << 20, Timeout: Duration(70 * time.Second)},
		Windows:         windowsDefaults(),
		Auth: Auth{
			Authn: "kubernetes", Authz: "rbac", Metrics: "rbac",
			TokenSuccessTTL: Duration(10 * time.Second), TokenFailureTTL: Duration(3 * time.Second),
			AllowTTL: Duration(5 * time.Second), DenyTTL: Duration(2 * time.Second),
			NamespaceScanTTL: Duration(30 * time.Second),
			RecheckInterval:  Duration(5 * time.Second),
			RecheckGrace:     Duration(60 * time.Second),
			UserQPS:          50, UserBurst: 200, UserMaxInflight: 500,
			FailedAuthQPS: 5, FailedAuthBurst: 50,
			ReviewConcurrency: 8, ReviewQueueLength: 16, ReviewMaxWait: Duration(5 * time.Second),
		},
	}
}

// webSocketDefaults are the WebSocket server's own defaults (ws.Defaults),
// so that they are defined once and the configuration shows them.
func webSocketDefaults() WebSocket {
	d := ws.Defaults()
	return WebSocket{
		MaxSockets:                d.MaxSockets,
		MaxSocketsPerClient:       d.MaxSocketsPerClient,
		MaxSubscriptionsPerSocket: d.MaxSubscriptionsPerSocket,
		PingInterval:              Duration(d.PingInterval),
		PongTimeout:               Duration(d.PongTimeout),
		WriteTimeout:              Duration(d.WriteTimeout),
		MaxMessageBytes:           d.MaxMessageBytes,
		SubscribeRate:             d.SubscribeRate,
		SubscribeBurst:            d.SubscribeBurst,
		ResyncBudget:              d.ResyncBudget,
	}
}

// windowsDefaults are the live tables' own defaults (livequery.Defaults).
func windowsDefaults() Windows {
	d := livequery.Defaults()
	return Windows{MaxViews: d.MaxViews, MaxViewsPerUser: d.MaxViewsPerOwner, IdleViews: d.IdleViews,
		UserBuildShare: 0.25, UserBuildBurst: Duration(time.Second)}
}

// Duration is a time.Duration written as "30s" in YAML.
type Duration time.Duration

// UnmarshalJSON accepts "30s" style strings.
func (d *Duration) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %s: %w", b, err)
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes "30s" style strings.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Duration(d).String() + `"`), nil
}

// Load reads a YAML file over base. Unknown fields are errors, so a typo
// does not silently fall back to a default.
func Load(path string, base Config) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return base, fmt.Errorf("read config: %w", err)
	}
	if err := yaml.UnmarshalStrict(b, &base); err != nil {
		return base, fmt.Errorf("config %s: %w", path, err)
	}
	return base, nil
}

// Validate checks values that flags and files cannot type-check.
func (c *Config) Validate() error {
	var errs []error
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("listen %q: %w", c.Listen, err))
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log level %q: want debug, info, warn or error", c.Log.Level))
	}
	switch c.Log.Format {
	case "console", "json":
	default:
		errs = append(errs, fmt.Errorf("log format %q: want console or json", c.Log.Format))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("shutdownTimeout must be positive"))
	}
	if c.APIServer.QPS == 0 {
		errs = append(errs, errors.New("apiserver.qps must not be 0 (a negative value turns client-side throttling off)"))
	}
	if c.APIServer.QPS > 0 && c.APIServer.Burst < 1 {
		errs = append(errs, errors.New("apiserver.burst must be at least 1"))
	}
	if (c.TLS.CertFile == "") != (c.TLS.PrivateKeyFile == "") {
		errs = append(errs, errors.New("--tls-cert-file and --tls-private-key-file (tls.certFile, tls.privateKeyFile) go together"))
	}
	errs = append(errs, c.Auth.validate(c.Listen)...)
	errs = append(errs, c.validateHosts()...)
	if c.PassThrough.MaxBodyBytes < 0 || c.PassThrough.Timeout < 0 {
		errs = append(errs, errors.New("passThrough.maxBodyBytes and passThrough.timeout must not be negative (0 means the default)"))
	}
	if err := webhook.Validate(c.Webhooks); err != nil {
		errs = append(errs, err)
	}
	ws := c.WebSocket
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"maxSockets", float64(ws.MaxSockets)}, {"maxSocketsPerClient", float64(ws.MaxSocketsPerClient)},
		{"maxSubscriptionsPerSocket", float64(ws.MaxSubscriptionsPerSocket)}, {"pingInterval", float64(ws.PingInterval)},
		{"pongTimeout", float64(ws.PongTimeout)}, {"writeTimeout", float64(ws.WriteTimeout)},
		{"maxMessageBytes", float64(ws.MaxMessageBytes)}, {"subscribeRate", ws.SubscribeRate},
		{"subscribeBurst", float64(ws.SubscribeBurst)}, {"resyncBudget", ws.ResyncBudget},
	} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("websocket.%s must not be negative (0 means the default)", f.name))
		}
	}
	if w := c.Windows; w.MaxViews < 0 || w.MaxViewsPerUser < 0 || w.IdleViews < 0 || w.UserBuildBurst < 0 {
		errs = append(errs, errors.New("windows.maxViews, maxViewsPerUser, idleViews and userBuildBurst must not be negative (0 means the default)"))
	} else if w.UserBuildShare < 0 {
		errs = append(errs, fmt.Errorf("windows.userBuildShare (%g) must not be negative (0 disables it)", w.UserBuildShare))
	} else if w.MaxViewsPerUser > w.MaxViews && w.MaxViews > 0 {
		errs = append(errs, fmt.Errorf("windows.maxViewsPerUser (%d) must not exceed windows.maxViews (%d)", w.MaxViewsPerUser, w.MaxViews))
	}
	if ws.MaxSockets > 0 && ws.MaxSocketsPerClient > ws.MaxSockets {
		errs = append(errs, fmt.Errorf("websocket.maxSocketsPerClient (%d) is each client's share of websocket.maxSockets (%d): it cannot be larger", ws.MaxSocketsPerClient, ws.MaxSockets))
	}
	if ws.CoalesceDelay != nil && *ws.CoalesceDelay < 0 {
		errs = append(errs, errors.New("websocket.coalesceDelay must not be negative (0 turns coalescing off)"))
	}
	for _, p := range ws.AllowedOrigins {
		if _, err := path.Match(p, ""); err != nil {
			errs = append(errs, fmt.Errorf("websocket.allowedOrigins: pattern %q: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

func (a *Auth) validate(listen string) []error {
	var errs []error
	switch a.Authn {
	case "kubernetes", "none":
		if a.TokenFile != "" {
			errs = append(errs, fmt.Errorf("--token-file is only used with --authn=token-file, not %q", a.Authn))
		}
	case "token-file":
		if a.TokenFile == "" {
			errs = append(errs, errors.New("--authn=token-file needs --token-file"))
		}
	default:
		errs = append(errs, fmt.Errorf("authn %q: want kubernetes, token-file or none", a.Authn))
	}
	if a.AuthenticationKubeconfig != "" && a.Authn != "kubernetes" {
		errs = append(errs, fmt.Errorf("--authentication-kubeconfig is only used with --authn=kubernetes, not %q", a.Authn))
	}
	if a.AuthorizationKubeconfig != "" && a.Authz != "rbac" {
		errs = append(errs, fmt.Errorf("--authorization-kubeconfig is only used with --authz=rbac, not %q", a.Authz))
	}
	switch a.Authz {
	case "rbac", "always-allow":
	default:
		errs = append(errs, fmt.Errorf("authz %q: want rbac or always-allow", a.Authz))
	}
	switch a.Metrics {
	case "rbac", "none":
	default:
		errs = append(errs, fmt.Errorf("metrics auth %q: want rbac or none", a.Metrics))
	}
	if a.Authn == "none" && !a.InsecureAllowAnonymous && !IsLoopback(listen) {
		errs = append(errs, fmt.Errorf("--authn=none serves everyone as system:anonymous, so it only listens on loopback; --listen %s is not loopback (add --insecure-allow-anonymous if that is really meant)", listen))
	}
	for name, d := range map[string]Duration{
		"tokenSuccessTTL": a.TokenSuccessTTL, "tokenFailureTTL": a.TokenFailureTTL,
		"allowTTL": a.AllowTTL, "denyTTL": a.DenyTTL, "namespaceScanTTL": a.NamespaceScanTTL,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("auth.%s must not be negative", name))
		}
	}
	if a.RecheckInterval <= 0 {
		errs = append(errs, errors.New("auth.recheckInterval must be positive"))
	}
	if a.UserQPS < 0 || a.UserBurst < 0 || a.UserMaxInflight < 0 {
		errs = append(errs, errors.New("auth.userQPS, userBurst and userMaxInflight must not be negative"))
	}
	if a.FailedAuthQPS < 0 || a.FailedAuthBurst < 0 {
		errs = append(errs, errors.New("auth.failedAuthQPS and failedAuthBurst must not be negative (0 means the default)"))
	}
	if a.ReviewConcurrency < 0 || a.ReviewQueueLength < 0 || a.ReviewMaxWait < 0 {
		errs = append(errs, errors.New("auth.reviewConcurrency, reviewQueueLength and reviewMaxWait must not be negative (0 means the default)"))
	}
	return errs
}

// validateHosts checks allowedHosts and trustedProxies.
func (c *Config) validateHosts() []error {
	var errs []error
	for _, p := range c.AllowedHosts {
		if _, err := path.Match(p, ""); err != nil || p == "" || strings.ContainsAny(p, "/") {
			errs = append(errs, fmt.Errorf("allowedHosts: %q is not a host pattern (a name such as kubegate.example.com, *.example.com, or an address)", p))
		}
		if ok, _ := path.Match(strings.ToLower(p), "any-host.kubegate.invalid"); ok && c.Auth.Authn == "none" {
			errs = append(errs, fmt.Errorf("allowedHosts: %q accepts every host name, which --authn=none does not allow: without credentials, any web page the browser visits could read the gateway through DNS rebinding; list the names the gateway is reached by", p))
		}
	}
	for _, p := range c.TrustedProxies {
		if _, err := netip.ParsePrefix(p); err != nil {
			if _, err := netip.ParseAddr(p); err != nil {
				errs = append(errs, fmt.Errorf("trustedProxies: %q is not a CIDR (10.0.0.0/8) or an address", p))
			}
		}
	}
	return errs
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for v := range strings.SplitSeq(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// IsLoopback reports whether the listen address only accepts local
// connections: a loopback IP or localhost (not "", which is every
// interface).
func IsLoopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Parse builds the configuration from args: defaults, then the --config
// file, then every flag given explicitly.
func Parse(fs *flag.FlagSet, args []string) (Config, error) {
	c := Default()
	var (
		configPath string
		resources  string
		shutdown   time.Duration
		minResync  time.Duration
		apiQPS     float64
		hosts      string
		proxies    string
	)
	fs.StringVar(&configPath, "config", "", "YAML configuration `file`; flags given on the command line override it")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "kubeconfig `file` (default: in-cluster config, then $KUBECONFIG, then ~/.kube/config)")
	fs.StringVar(&c.Listen, "listen", c.Listen, "HTTP listen `address`")
	fs.StringVar(&c.TLS.CertFile, "tls-cert-file", "", "PEM serving certificate `file` (with intermediates); with --tls-private-key-file the gateway serves HTTPS and reloads the files when they change")
	fs.StringVar(&c.TLS.PrivateKeyFile, "tls-private-key-file", "", "PEM private key `file` of --tls-cert-file")
	fs.StringVar(&hosts, "allowed-hosts", "", "comma-separated host `patterns` (kubegate.example.com, *.example.com) requests may name in Host besides loopback names and addresses; others are refused (DNS rebinding)")
	fs.StringVar(&proxies, "trusted-proxies", "", "comma-separated `CIDRs` of proxies whose X-Forwarded-For (or Forwarded) names the client address")
	fs.StringVar(&c.Log.Level, "log-level", c.Log.Level, "log `level`: debug, info, warn or error")
	fs.StringVar(&c.Log.Format, "log-format", c.Log.Format, "log `format`: console or json")
	fs.Float64Var(&apiQPS, "kube-api-qps", float64(c.APIServer.QPS), "requests per second the gateway sends to kube-apiserver, reviews for users included (negative: no client-side limit)")
	fs.IntVar(&c.APIServer.Burst, "kube-api-burst", c.APIServer.Burst, "request burst the gateway sends to kube-apiserver")
	fs.BoolVar(&c.APIServer.Compression, "kube-api-compression", c.APIServer.Compression, "ask kube-apiserver for gzip (for an apiserver across a slow link)")
	fs.StringVar(&resources, "resources", "", "comma-separated `resources` to cache at start and gate readiness on (e.g. pods,deployments.apps)")
	fs.DurationVar(&shutdown, "shutdown-timeout", time.Duration(c.ShutdownTimeout), "bound on graceful shutdown")
	fs.DurationVar(&minResync, "min-resync", time.Duration(c.Cache.MinResync), "shortest resync period a client may ask for")
	fs.StringVar(&c.Auth.Authn, "authn", c.Auth.Authn, "authentication `mode`: kubernetes (TokenReview), token-file or none (anonymous; loopback only)")
	fs.StringVar(&c.Auth.TokenFile, "token-file", "", "CSV `file` of token,user,uid,\"group1,group2\" for --authn=token-file")
	fs.StringVar(&c.Auth.Authz, "authz", c.Auth.Authz, "authorization `mode`: rbac (SubjectAccessReview) or always-allow")
	fs.StringVar(&c.Auth.Metrics, "metrics-auth", c.Auth.Metrics, "how /metrics is protected: rbac (authenticated per --authn, authorized per --authz for get on the path /metrics) or none (open, for scrapes through a trusted path)")
	fs.StringVar(&c.Auth.AuthenticationKubeconfig, "authentication-kubeconfig", "", "kubeconfig `file` of the apiserver that reviews tokens for --authn=kubernetes (default: --kubeconfig's; set it when --kubeconfig points at another kubegate)")
	fs.StringVar(&c.Auth.AuthorizationKubeconfig, "authorization-kubeconfig", "", "kubeconfig `file` of the apiserver that reviews access for --authz=rbac (default: --kubeconfig's; set it when --kubeconfig points at another kubegate)")
	fs.BoolVar(&c.Auth.InsecureAllowAnonymous, "insecure-allow-anonymous", false, "allow --authn=none on a non-loopback --listen address")
	fs.Float64Var(&c.Auth.UserQPS, "user-qps", c.Auth.UserQPS, "sustained requests per second per user (0: no limit)")
	fs.IntVar(&c.Auth.UserBurst, "user-burst", c.Auth.UserBurst, "request burst per user")
	fs.IntVar(&c.Auth.UserMaxInflight, "user-max-inflight", c.Auth.UserMaxInflight, "open requests per user, watches and WebSockets included (0: no limit)")
	fs.BoolVar(&c.PassThrough.Enabled, "pass-through", c.PassThrough.Enabled, "send writes, subresources (logs, exec, port-forward, scale...) and self-reviews on to kube-apiserver with the caller's own token (with --authn=kubernetes only; otherwise they are refused)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if configPath != "" {
		fromFile, err := Load(configPath, Default())
		if err != nil {
			return c, err
		}
		// Re-apply explicitly set flags over the file.
		flagged := c
		c = fromFile
		c.ConfigPath = configPath
		if set["kubeconfig"] {
			c.Kubeconfig = flagged.Kubeconfig
		}
		if set["listen"] {
			c.Listen = flagged.Listen
		}
		if set["tls-cert-file"] {
			c.TLS.CertFile = flagged.TLS.CertFile
		}
		if set["tls-private-key-file"] {
			c.TLS.PrivateKeyFile = flagged.TLS.PrivateKeyFile
		}
		if set["log-level"] {
			c.Log.Level = flagged.Log.Level
		}
		if set["log-format"] {
			c.Log.Format = flagged.Log.Format
		}
		if set["kube-api-burst"] {
			c.APIServer.Burst = flagged.APIServer.Burst
		}
		if set["kube-api-compression"] {
			c.APIServer.Compression = flagged.APIServer.Compression
		}
		if set["authn"] {
			c.Auth.Authn = flagged.Auth.Authn
		}
		if set["token-file"] {
			c.Auth.TokenFile = flagged.Auth.TokenFile
		}
		if set["authz"] {
			c.Auth.Authz = flagged.Auth.Authz
		}
		if set["metrics-auth"] {
			c.Auth.Metrics = flagged.Auth.Metrics
		}
		if set["authentication-kubeconfig"] {
			c.Auth.AuthenticationKubeconfig = flagged.Auth.AuthenticationKubeconfig
		}
		if set["authorization-kubeconfig"] {
			c.Auth.AuthorizationKubeconfig = flagged.Auth.AuthorizationKubeconfig
		}
		if set["insecure-allow-anonymous"] {
			c.Auth.InsecureAllowAnonymous = flagged.Auth.InsecureAllowAnonymous
		}
		if set["user-qps"] {
			c.Auth.UserQPS = flagged.Auth.UserQPS
		}
		if set["user-burst"] {
			c.Auth.UserBurst = flagged.Auth.UserBurst
		}
		if set["user-max-inflight"] {
			c.Auth.UserMaxInflight = flagged.Auth.UserMaxInflight
		}
		if set["pass-through"] {
			c.PassThrough.Enabled = flagged.PassThrough.Enabled
		}
	}
	if set["allowed-hosts"] {
		c.AllowedHosts = splitList(hosts)
	}
	if set["trusted-proxies"] {
		c.TrustedProxies = splitList(proxies)
	}
	if set["resources"] {
		c.Cache.Resources = nil
		for _, r := range strings.Split(resources, ",") {
			if r = strings.TrimSpace(r); r != "" {
				c.Cache.Resources = append(c.Cache.Resources, r)
			}
		}
	}
	if set["shutdown-timeout"] {
		c.ShutdownTimeout = Duration(shutdown)
	}
	if set["min-resync"] {
		c.Cache.MinResync = Duration(minResync)
	}
	if set["kube-api-qps"] {
		c.APIServer.QPS = float32(apiQPS)
	}
	return c, c.Validate()
}
