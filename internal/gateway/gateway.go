package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sync/errgroup"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"

	"kubegate/internal/auth"
	"kubegate/internal/config"
	httpapi "kubegate/internal/http"
	"kubegate/internal/informer"
	"kubegate/internal/livequery"
	"kubegate/internal/livequery/feed"
	"kubegate/internal/livequery/wire"
	"kubegate/internal/openapi"
	"kubegate/internal/servingcert"
	"kubegate/internal/webhook"
	"kubegate/internal/ws"
	"kubegate/web"
)

// Options are what a configuration file cannot say: the process's
// environment, and hooks for tests. The zero value builds the gateway
// cmd/gateway runs.
type Options struct {
	// RESTConfig is the gateway's client of kube-apiserver, used as given
	// but for the user agent, limits and compression cfg.APIServer sets
	// (on a copy). Default: the cluster cfg.Kubeconfig names, found as
	// cmd/gateway documents (--kubeconfig, in-cluster, $KUBECONFIG,
	// ~/.kube/config).
	RESTConfig *rest.Config
	// Listener, when set, is served instead of cfg.Listen (tests listen on
	// 127.0.0.1:0 and read the address from Gateway.Addr).
	Listener net.Listener
	// Logger. Default: one built from cfg.Log (NewLogger).
	Logger *zap.Logger
	// Registry receives every metric and is served at /metrics. Default:
	// a new registry with the Go runtime and process collectors.
	Registry *prometheus.Registry
	// Registerer, when set, is where the informers, auth, webhooks and
	// WebSocket server register their metrics instead of Registry; it
	// must register them on Registry (tests that list what is
	// registered wrap Registry).
	Registerer prometheus.Registerer
	// Web serves the dashboard at /. Default: web.Handler().
	Web http.Handler

	// TokenAuthenticator, when set, checks bearer tokens instead of what
	// cfg.Auth.Authn builds (tests with tokens of their own). Ignored with
	// authn none.
	TokenAuthenticator auth.TokenAuthenticator
	// WrapAuthorizer, when set, wraps the authorizer cfg.Auth.Authz builds
	// (tests that count reviews or make them fail).
	WrapAuthorizer func(auth.Authorizer) auth.Authorizer
	// Clock drives page expiry and the ages in Tables. Default: the real
	// clock.
	Clock clock.Clock
	// ViewBuildHook, if set, runs on every live view build, off the
	// table's lock, once the build has scanned and released its build
	// slot, before the view is installed (tests that hold a build to see
	// what goes on meanwhile; a held build holds no slot).
	ViewBuildHook func()
	// DiscoveryRefreshInterval is how often, at most, the discovery the
	// gateway serves is fetched again (informer
	// Options.DiscoveryRefreshInterval). Default 5s; tests that must see
	// every request fetch it set it short.
	DiscoveryRefreshInterval time.Duration
}

// Gateway is kubegate: the informers, the live tables, the webhooks and
// the HTTP server with its WebSocket endpoint, wired as one. New builds
// it and binds its address; Start runs it.
type Gateway struct {
	cfg     config.Config
	log     *zap.Logger
	kc      *rest.Config
	reg     *prometheus.Registry
	rr      prometheus.Registerer
	mgr     *informer.Manager
	tables  *feed.Tables
	hooks   *webhook.Manager
	ws      *ws.Server
	http    *httpapi.Server
	certs   *servingcert.Pair // nil without TLS
	version *version.Info
	// passTransports carry pass-through requests (none when it is off);
	// Start closes their idle connections once the server has stopped.
	passTransports []http.RoundTripper
}

// New builds the gateway cfg describes. It reaches the apiserver once, to
// fail at once with one clear message when it cannot, and binds the
// listen address. cfg must be valid (config.Parse validates it).
func New(cfg config.Config, opts Options) (*Gateway, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		var err error
		if log, err = NewLogger(cfg.Log); err != nil {
			return nil, err
		}
	}
	g := &Gateway{cfg: cfg, log: log, reg: opts.Registry}
	kc, source, err := clientConfig(cfg, opts.RESTConfig)
	if err != nil {
		return nil, err
	}
	g.kc = kc
	// Fail fast with one clear line when the apiserver cannot be reached.
	probe := rest.CopyConfig(kc)
	probe.Timeout = 10 * time.Second
	dc, err := discovery.NewDiscoveryClientForConfig(probe)
	if err != nil {
		return nil, fmt.Errorf("apiserver client: %w", err)
	}
	if g.version, err = dc.ServerVersion(); err != nil {
		return nil, fmt.Errorf("cannot reach the apiserver at %s (from %s): %v%s; check the kubeconfig or start a local cluster with `make cluster`", kc.Host, source, err, credentialsHint(kc, err))
	}
	log.Info("connected to apiserver", zap.String("host", kc.Host), zap.String("version", g.version.GitVersion), zap.String("config", source))

	if g.reg == nil {
		g.reg = prometheus.NewRegistry()
		g.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	g.rr = g.reg
	if opts.Registerer != nil {
		g.rr = opts.Registerer
	}
	if g.mgr, err = informer.New(informer.Options{
		Config:                   kc,
		Resources:                cfg.Cache.Resources,
		KeepManagedFields:        cfg.Cache.KeepManagedFields,
		MinResync:                time.Duration(cfg.Cache.MinResync),
		HistoryEvents:            cfg.Cache.HistoryEvents,
		Logger:                   log.Named("informer"),
		DiscoveryRefreshInterval: opts.DiscoveryRefreshInterval,
		Registerer:               g.rr,
		// The live tables of configured resources are built as their
		// caches sync, and gate readiness with them (httpapi's
		// /readyz): a first window on one builds only its own view.
		OnStart: func(r *informer.Resource, configured bool) {
			if configured {
				g.tables.Warm(r)
			}
		},
	}); err != nil {
		return nil, err
	}
	// Webhook drains and WebSocket close handshakes run alongside the HTTP
	// server's shutdown; half the shutdown timeout, at most 5s, keeps the
	// whole within it.
	grace := min(5*time.Second, time.Duration(cfg.ShutdownTimeout)/2)
	if g.hooks, err = webhook.New(webhook.Options{
		Resources:    g.mgr,
		Webhooks:     cfg.Webhooks,
		Source:       kc.Host,
		MaxBytes:     cfg.Cache.ListenerMaxBytes,
		DrainTimeout: grace,
		Logger:       log.Named("webhook"),
		Registerer:   g.rr,
	}); err != nil {
		return nil, err
	}
	authn, err := newAuth(cfg, kc, g.mgr, g.rr, log.Named("auth"), opts)
	if err != nil {
		return nil, err
	}
	// One set of live tables serves the windows of WebSocket and REST;
	// their view builds share one set of slots, fairly between users,
	// each held to its share of a CPU.
	slots := livequery.NewBuildSlots(livequery.BuildSlotsOptions{
		OwnerShare: cfg.Windows.UserBuildShare, OwnerBurst: time.Duration(cfg.Windows.UserBuildBurst)})
	g.rr.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kubegate_view_builds_waiting",
		Help: "Live view builds (new sorts and filters) waiting for a build slot.",
	}, func() float64 { return float64(slots.Waiting()) }))
	g.tables = wire.NewTables(g.mgr, log.Named("livequery"), wire.ViewLimits{
		MaxViews: cfg.Windows.MaxViews, MaxViewsPerUser: cfg.Windows.MaxViewsPerUser, IdleViews: cfg.Windows.IdleViews,
		BuildSlots: slots, BuildHook: opts.ViewBuildHook})
	wsc := cfg.WebSocket
	if g.ws, err = ws.New(ws.Options{
		Manager:                   g.mgr,
		Tables:                    g.tables,
		Authorizer:                authn.authorizer,
		RecheckInterval:           time.Duration(cfg.Auth.RecheckInterval),
		RecheckGrace:              time.Duration(cfg.Auth.RecheckGrace),
		Logger:                    log.Named("ws"),
		Registerer:                g.rr,
		AllowedOrigins:            wsc.AllowedOrigins,
		MaxSockets:                wsc.MaxSockets,
		MaxSocketsPerClient:       wsc.MaxSocketsPerClient,
		MaxSubscriptionsPerSocket: wsc.MaxSubscriptionsPerSocket,
		SubscribeRate:             wsc.SubscribeRate,
		SubscribeBurst:            wsc.SubscribeBurst,
		ResyncBudget:              wsc.ResyncBudget,
		PingInterval:              time.Duration(wsc.PingInterval),
		PongTimeout:               time.Duration(wsc.PongTimeout),
		WriteTimeout:              time.Duration(wsc.WriteTimeout),
		MaxMessageBytes:           wsc.MaxMessageBytes,
		CoalesceDelay:             (*time.Duration)(wsc.CoalesceDelay),
		ListenerMaxEvents:         cfg.Cache.ListenerMaxEvents,
		ListenerMaxBytes:          cfg.Cache.ListenerMaxBytes,
		ShutdownGrace:             grace,
	}); err != nil {
		return nil, err
	}
	// A pair that does not load stops the start here, naming the files.
	var getCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	if cfg.TLS.CertFile != "" {
		if g.certs, err = servingcert.New(servingcert.Options{
			CertFile: cfg.TLS.CertFile, KeyFile: cfg.TLS.PrivateKeyFile, Logger: log.Named("tls"),
		}); err != nil {
			return nil, fmt.Errorf("--tls-cert-file, --tls-private-key-file: %w", err)
		}
		getCertificate = g.certs.GetCertificate
	}
	pass, passTransports, passOff, err := passThrough(cfg, kc)
	if err != nil {
		return nil, err
	}
	g.passTransports = passTransports
	if pass != nil {
		log.Info("pass-through: writes, subresources and self-reviews go to kube-apiserver with the caller's own token",
			zap.String("apiserver", pass.Upstream.String()), zap.Int64("maxBodyBytes", pass.MaxBodyBytes), zap.Duration("timeout", pass.Timeout))
	} else {
		log.Info("pass-through off: writes and subresources are refused", zap.String("why", passOff))
	}
	oapi, err := openapi.New(openapi.Options{
		Config:     kc,
		Logger:     log.Named("openapi"),
		Registerer: g.rr,
	})
	if err != nil {
		return nil, err
	}
	webHandler := opts.Web
	if webHandler == nil {
		webHandler = web.Handler()
	}
	if g.http, err = httpapi.New(httpapi.Options{
		Manager:        g.mgr,
		Tables:         g.tables,
		Logger:         log.Named("http"),
		Registry:       g.reg,
		OpenMetrics:    cfg.Auth.Metrics == "none",
		Listen:         cfg.Listen,
		Listener:       opts.Listener,
		GetCertificate: getCertificate,
		Authenticator:  authn.authenticator,
		Authorizer:     authn.authorizer,
		Login:          authn.login,
		RateLimiter:    authn.limiter,
		PassThrough:    pass,
		PassThroughOff: passOff,
		// Hosts are checked in every mode. A Host that is an address
		// cannot be a rebinding page's; with credentials required, any
		// address is accepted (probes and scrapes reach Pods by address).
		Hosts:           &httpapi.HostPolicy{Patterns: cfg.AllowedHosts, AnyAddress: cfg.Auth.Authn != "none"},
		TrustedProxies:  authn.proxies,
		RecheckInterval: time.Duration(cfg.Auth.RecheckInterval),
		RecheckGrace:    time.Duration(cfg.Auth.RecheckGrace),
		WebSocket:       g.ws,
		OpenAPI:         oapi,
		Web:             webHandler,
		ShutdownTimeout: time.Duration(cfg.ShutdownTimeout),
		Version:         g.version,
		Clock:           opts.Clock,
	}); err != nil {
		return nil, err
	}
	if cfg.Auth.Metrics == "none" {
		log.Warn("/metrics is served to anyone who can connect (--metrics-auth=none)")
	}
	return g, nil
}

// Start runs every part until ctx ends, then shuts them down and returns
// once all their goroutines have exited. The first part to fail stops
// the others, and its error is returned.
func (g *Gateway) Start(ctx context.Context) error {
	eg, ctx := errgroup.WithContext(ctx)
	eg.Go(func() error { return g.mgr.Start(ctx) })
	// The live tables stop after the sockets have closed, so that no
	// window ends with them while its socket is still open.
	tablesCtx, stopTables := context.WithCancel(context.Background())
	eg.Go(func() error { return g.tables.Start(tablesCtx) })
	eg.Go(func() error {
		err := g.http.Start(ctx)
		for _, t := range g.passTransports {
			utilnet.CloseIdleConnectionsFor(t)
		}
		return err
	})
	eg.Go(func() error {
		defer stopTables()
		return g.ws.Start(ctx)
	})
	eg.Go(func() error { return g.hooks.Start(ctx) })
	if g.certs != nil {
		eg.Go(func() error { return g.certs.Start(ctx) })
	}
	return eg.Wait()
}

// ReloadWebhooks reads the configuration file the gateway was started
// with (config.Config.ConfigPath) again and applies its webhooks section:
// webhooks whose configuration did not change keep their queues. An
// invalid file changes nothing. Other settings need a restart.
func (g *Gateway) ReloadWebhooks(ctx context.Context) (int, error) {
	if g.cfg.ConfigPath == "" {
		return 0, errors.New("no --config file to re-read")
	}
	c, err := config.Load(g.cfg.ConfigPath, config.Default())
	if err == nil {
		err = g.hooks.Apply(ctx, c.Webhooks)
	}
	return len(c.Webhooks), err
}

// Addr is the address the gateway serves on.
func (g *Gateway) Addr() net.Addr { return g.http.Addr() }

// URL is the gateway's base URL: http:// or https:// and its address.
func (g *Gateway) URL() string {
	if g.certs != nil {
		return "https://" + g.Addr().String()
	}
	return "http://" + g.Addr().String()
}

// Registry holds the gateway's metrics.
func (g *Gateway) Registry() *prometheus.Registry { return g.reg }

// Informers is the gateway's cache.
func (g *Gateway) Informers() *informer.Manager { return g.mgr }

// Tables are the live tables of WebSocket windows and REST sorted lists.
func (g *Gateway) Tables() *feed.Tables { return g.tables }

// WebSocket is the /ws server.
func (g *Gateway) WebSocket() *ws.Server { return g.ws }

// ServingCertificate is the serving certificate pair, which follows its
// files; nil when the gateway serves plain HTTP.
func (g *Gateway) ServingCertificate() *servingcert.Pair { return g.certs }

// Version is the apiserver's version, as New found it.
func (g *Gateway) Version() *version.Info { return g.version }

// NewLogger builds the logger cfg describes.
func NewLogger(c config.Log) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(c.Level)
	if err != nil {
		return nil, err
	}
	zc := zap.NewProductionConfig()
	if c.Format == "console" {
		zc = zap.NewDevelopmentConfig()
		zc.DisableStacktrace = true
	}
	zc.Level = zap.NewAtomicLevelAt(level)
	return zc.Build()
}

// restConfig finds the cluster as cmd/gateway documents: an explicit
// --kubeconfig, else in-cluster, else $KUBECONFIG, else ~/.kube/config.
func restConfig(path string) (*rest.Config, string, error) {
	if path != "" {
		c, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, "", fmt.Errorf("kubeconfig %s: %w", path, err)
		}
		return c, path, nil
	}
	if c, err := rest.InClusterConfig(); err == nil {
		return c, "in-cluster service account", nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	c, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("no cluster configured (%v): pass --kubeconfig, set $KUBECONFIG, or run `make cluster` for a local one", err)
	}
	return c, fmt.Sprintf("kubeconfig %v", rules.Precedence), nil
}

// clientConfig is the gateway's own client configuration: given, or the
// cluster restConfig finds, with the gateway's user agent and request
// limits.
func clientConfig(cfg config.Config, given *rest.Config) (*rest.Config, string, error) {
	var kc *rest.Config
	source := "the given client configuration"
	if given != nil {
		kc = rest.CopyConfig(given)
	} else {
		var err error
		if kc, source, err = restConfig(cfg.Kubeconfig); err != nil {
			return nil, "", err
		}
	}
	kc.UserAgent = "kubegate"
	kc.QPS, kc.Burst = cfg.APIServer.QPS, cfg.APIServer.Burst
	kc.DisableCompression = !cfg.APIServer.Compression
	return kc, source, nil
}
