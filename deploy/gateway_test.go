package deploy_test

import (
	"context"
	"crypto/tls"
	"net"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubegate/internal/auth"
	httpapi "kubegate/internal/http"
	"kubegate/internal/informer"
	"kubegate/internal/namespaces"
	"kubegate/internal/ws"
)

// gateway is one in-process gateway: the informers and the HTTP server
// that cmd/gateway wires, against the apiserver cfg points at.
type gateway struct {
	mgr *informer.Manager
	url string
}

type gatewayOptions struct {
	// Resources are started at boot. Default none.
	Resources []string
	// HistoryEvents is cache.historyEvents. Default the informer's.
	HistoryEvents int
	// RBAC, when set, authenticates with TokenReview and authorizes with
	// SubjectAccessReview, as the shipped config does; else every caller
	// is anonymous and allowed.
	RBAC bool
	// GetCertificate, when set, serves HTTPS with it. Default: HTTP.
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// Registry is served at /metrics. Default a new one.
	Registry *prometheus.Registry
	// Registerer receives the metrics of the informers, auth and ws.
	// Default Registry.
	Registerer prometheus.Registerer
}

// startGateway runs a gateway until the test ends; its goroutines have
// exited when the test's cleanups have run.
func startGateway(t *testing.T, cfg *rest.Config, o gatewayOptions) *gateway {
	t.Helper()
	log := zaptest.NewLogger(t)
	reg := o.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	var rr prometheus.Registerer = reg
	if o.Registerer != nil {
		rr = o.Registerer
	}
	mgr, err := informer.New(informer.Options{
		Config: cfg, Resources: o.Resources, HistoryEvents: o.HistoryEvents,
		Logger: log.Named("informer"), Registerer: rr,
	})
	if err != nil {
		t.Fatal(err)
	}
	var (
		authn auth.Authenticator = auth.Anonymous{}
		authz auth.Authorizer    = auth.AlwaysAllow{}
	)
	if o.RBAC {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		m := auth.NewMetrics(rr)
		tr, err := auth.NewTokenReview(auth.TokenReviewOptions{Client: cs, SuccessTTL: -1, FailureTTL: -1, Metrics: m, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		if authn, err = auth.NewBearer(auth.BearerOptions{Tokens: tr, Metrics: m, Logger: log}); err != nil {
			t.Fatal(err)
		}
		if authz, err = auth.NewSubjectAccessReview(auth.SubjectAccessReviewOptions{
			Client: cs, Namespaces: namespaces.FromInformer(mgr), AllowTTL: -1, DenyTTL: -1, ScanTTL: -1,
			Metrics: m, Logger: log,
		}); err != nil {
			t.Fatal(err)
		}
	}
	wsServer, err := ws.New(ws.Options{Manager: mgr, Authorizer: authz, Logger: log.Named("ws"), Registerer: rr})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := httpapi.New(httpapi.Options{
		Manager: mgr, Logger: log.Named("http"), Registry: reg, Listener: ln,
		Authenticator: authn, Authorizer: authz, WebSocket: wsServer, GetCertificate: o.GetCertificate,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 3)
	go func() { done <- mgr.Start(ctx) }()
	go func() { done <- srv.Start(ctx) }()
	go func() { done <- wsServer.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		for range 3 {
			if err := <-done; err != nil {
				t.Errorf("gateway: %v", err)
			}
		}
	})
	scheme := "http"
	if o.GetCertificate != nil {
		scheme = "https"
	}
	return &gateway{mgr: mgr, url: scheme + "://" + srv.Addr().String()}
}
