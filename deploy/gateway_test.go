package deploy_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"kubegate/internal/config"
	kgateway "kubegate/internal/gateway"
	"kubegate/internal/gateway/gatewaytest"
	"kubegate/internal/informer"
)

// gateway is one in-process gateway, built by gateway.New as cmd/gateway
// builds it, against the apiserver cfg points at.
type gateway struct {
	mgr *informer.Manager
	url string
}

type gatewayOptions struct {
	// Resources are started at boot. Default none.
	Resources []string
	// HistoryEvents is cache.historyEvents. Default config.Default's.
	HistoryEvents int
	// RBAC, when set, authenticates with TokenReview and authorizes with
	// SubjectAccessReview, as the shipped config does, with no caching;
	// else every caller is anonymous and allowed.
	RBAC bool
	// TLS serves HTTPS with these files. Default: HTTP.
	TLS config.TLS
	// Registry is served at /metrics. Default a new one.
	Registry *prometheus.Registry
	// Registerer receives the metrics of the informers, auth, webhooks
	// and ws. Default Registry.
	Registerer prometheus.Registerer
}

// startGateway runs a gateway until the test ends; its goroutines have
// exited when the test's cleanups have run.
func startGateway(t *testing.T, cfg *rest.Config, o gatewayOptions) *gateway {
	t.Helper()
	c := gatewaytest.Config()
	c.Cache.Resources = o.Resources
	if o.HistoryEvents > 0 {
		c.Cache.HistoryEvents = o.HistoryEvents
	}
	if o.RBAC {
		// Every request reviewed: 0 turns a cache off.
		c.Auth.TokenSuccessTTL, c.Auth.TokenFailureTTL = 0, 0
		c.Auth.AllowTTL, c.Auth.DenyTTL, c.Auth.NamespaceScanTTL = 0, 0, 0
	} else {
		c.Auth.Authn, c.Auth.Authz = "none", "always-allow"
	}
	c.TLS = o.TLS
	g := gatewaytest.Start(t, c, kgateway.Options{RESTConfig: cfg, Registry: o.Registry, Registerer: o.Registerer})
	return &gateway{mgr: g.Informers(), url: g.URL()}
}
