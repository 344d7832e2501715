// Command gateway runs kubegate: it caches the resources clients ask for
// with one LIST+WATCH each and serves them over Kubernetes-compatible REST,
// WebSocket subscriptions and webhooks.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/zapr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"kubegate/internal/config"
	httpapi "kubegate/internal/http"
	"kubegate/internal/informer"
	"kubegate/internal/livequery/wire"
	"kubegate/internal/servingcert"
	"kubegate/internal/webhook"
	"kubegate/internal/ws"
	"kubegate/web"
)

func main() {
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `kubegate gateway: serves Kubernetes objects from one shared cache over
REST (kubectl/client-go compatible), WebSocket (/ws) and webhooks.

Usage: gateway [flags]

Flags:
`)
		fs.PrintDefaults()
	}
	cfg, err := config.Parse(fs, os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "gateway: %v (see gateway --help)\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "gateway: %v\n", err)
		os.Exit(1)
	}
}

func newLogger(c config.Log) (*zap.Logger, error) {
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

// restConfig finds the cluster the way the brief promises: an explicit
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

// clientConfig is the gateway's own client configuration: the cluster
// restConfig finds, with the gateway's user agent and request limits.
func clientConfig(cfg config.Config) (*rest.Config, string, error) {
	kc, source, err := restConfig(cfg.Kubeconfig)
	if err != nil {
		return nil, "", err
	}
	kc.UserAgent = "kubegate"
	kc.QPS, kc.Burst = cfg.APIServer.QPS, cfg.APIServer.Burst
	kc.DisableCompression = !cfg.APIServer.Compression
	return kc, source, nil
}

func run(ctx context.Context, cfg config.Config) error {
	log, err := newLogger(cfg.Log)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	klog.SetLogger(zapr.NewLogger(log.Named("client-go")))
	setMemoryLimit(log, memlimit.FromCgroup)

	kc, source, err := clientConfig(cfg)
	if err != nil {
		return err
	}
	// Fail fast with one clear line when the apiserver cannot be reached.
	probe := rest.CopyConfig(kc)
	probe.Timeout = 10 * time.Second
	dc, err := discovery.NewDiscoveryClientForConfig(probe)
	if err != nil {
		return fmt.Errorf("apiserver client: %w", err)
	}
	version, err := dc.ServerVersion()
	if err != nil {
		return fmt.Errorf("cannot reach the apiserver at %s (from %s): %v%s; check the kubeconfig or start a local cluster with `make cluster`", kc.Host, source, err, credentialsHint(kc, err))
	}
	log.Info("connected to apiserver", zap.String("host", kc.Host), zap.String("version", version.GitVersion), zap.String("config", source))

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	mgr, err := informer.New(informer.Options{
		Config:            kc,
		Resources:         cfg.Cache.Resources,
		KeepManagedFields: cfg.Cache.KeepManagedFields,
		MinResync:         time.Duration(cfg.Cache.MinResync),
		HistoryEvents:     cfg.Cache.HistoryEvents,
		Logger:            log.Named("informer"),
		Registerer:        reg,
	})
	if err != nil {
		return err
	}
	// Webhook drains and WebSocket close handshakes run alongside the HTTP
	// server's shutdown; half the shutdown timeout, at most 5s, keeps the
	// whole within it.
	grace := min(5*time.Second, time.Duration(cfg.ShutdownTimeout)/2)
	hooks, err := webhook.New(webhook.Options{
		Resources:    mgr,
		Webhooks:     cfg.Webhooks,
		Source:       kc.Host,
		MaxBytes:     cfg.Cache.ListenerMaxBytes,
		DrainTimeout: grace,
		Logger:       log.Named("webhook"),
		Registerer:   reg,
	})
	if err != nil {
		return err
	}
	authn, err := newAuth(cfg, kc, mgr, reg, log.Named("auth"))
	if err != nil {
		return err
	}
	// One set of live tables serves the windows of WebSocket and REST.
	tables := wire.NewTables(mgr, log.Named("livequery"))
	wsc := cfg.WebSocket
	wsServer, err := ws.New(ws.Options{
		Manager:                   mgr,
		Tables:                    tables,
		Authorizer:                authn.authorizer,
		RecheckInterval:           time.Duration(cfg.Auth.RecheckInterval),
		RecheckGrace:              time.Duration(cfg.Auth.RecheckGrace),
		Logger:                    log.Named("ws"),
		Registerer:                reg,
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
	})
	if err != nil {
		return err
	}
	// A pair that does not load stops the start here, naming the files.
	var certs *servingcert.Pair
	var getCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	if cfg.TLS.CertFile != "" {
		certs, err = servingcert.New(servingcert.Options{
			CertFile: cfg.TLS.CertFile, KeyFile: cfg.TLS.PrivateKeyFile, Logger: log.Named("tls"),
		})
		if err != nil {
			return fmt.Errorf("--tls-cert-file, --tls-private-key-file: %w", err)
		}
		getCertificate = certs.GetCertificate
	}
	httpServer, err := httpapi.New(httpapi.Options{
		Manager:         mgr,
		Tables:          tables,
		Logger:          log.Named("http"),
		Registry:        reg,
		OpenMetrics:     cfg.Auth.Metrics == "none",
		Listen:          cfg.Listen,
		GetCertificate:  getCertificate,
		Authenticator:   authn.authenticator,
		Authorizer:      authn.authorizer,
		Login:           authn.login,
		RateLimiter:     authn.limiter,
		RecheckInterval: time.Duration(cfg.Auth.RecheckInterval),
		RecheckGrace:    time.Duration(cfg.Auth.RecheckGrace),
		WebSocket:       wsServer,
		Web:             web.Handler(),
		ShutdownTimeout: time.Duration(cfg.ShutdownTimeout),
		Version:         version,
	})
	if err != nil {
		return err
	}
	if cfg.Auth.Metrics == "none" {
		log.Warn("/metrics is served to anyone who can connect (--metrics-auth=none)")
	}

	// Every part runs until ctx ends; the first to fail stops the others.
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return mgr.Start(gctx) })
	// The live tables stop after the sockets have closed, so that no
	// window ends with them while its socket is still open.
	tablesCtx, stopTables := context.WithCancel(context.Background())
	g.Go(func() error { return tables.Start(tablesCtx) })
	g.Go(func() error { return httpServer.Start(gctx) })
	g.Go(func() error {
		defer stopTables()
		return wsServer.Start(gctx)
	})
	g.Go(func() error { return hooks.Start(gctx) })
	g.Go(func() error { return reloadWebhooks(gctx, cfg.ConfigPath, hooks, log.Named("webhook")) })
	if certs != nil {
		g.Go(func() error { return certs.Start(gctx) })
	}

	done := make(chan error, 1)
	go func() { done <- g.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		log.Info("shutting down", zap.Duration("timeout", time.Duration(cfg.ShutdownTimeout)))
	}
	select {
	case err := <-done:
		log.Info("stopped")
		return err
	case <-time.After(time.Duration(cfg.ShutdownTimeout) + 5*time.Second):
		return errors.New("shutdown did not finish in time; exiting anyway")
	}
}
