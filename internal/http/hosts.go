package httpapi

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"path"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubegate/internal/apistatus"
)

// HostPolicy is the Host names requests may carry (Options.Hosts). It
// guards against DNS rebinding: a web page on a name its author controls
// (rebind.example) makes that name resolve to the gateway's address, and
// the browser then sends the page's requests there, as same-origin,
// naming rebind.example in Host. Refusing every name the gateway is not
// reached by refuses those requests, as kubectl proxy's --accept-hosts
// does.
//
// Always allowed: no Host at all (not a browser), loopback addresses and
// the loopback names localhost and *.localhost, which browsers resolve
// to loopback themselves (RFC 6761), so no page can rebind them.
type HostPolicy struct {
	// Patterns are the other host names allowed, as path.Match patterns
	// ("kubegate.example.com", "*.example.com"; "*" allows every name),
	// compared in lower case without the port and a trailing dot.
	Patterns []string
	// AnyAddress allows every IP address, not only loopback ones: a
	// rebinding page names its own host, never an address. The gateway
	// sets it when callers must present credentials (kubelet probes and
	// Prometheus reach Pods by address).
	AnyAddress bool
}

// Allows reports whether host, a request's Host (with or without a
// port), is allowed.
func (p *HostPolicy) Allows(host string) bool {
	if p == nil {
		return true
	}
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
	if h == "" {
		return true
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().IsLoopback() || p.AnyAddress || p.matches(h)
	}
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	return p.matches(h)
}

func (p *HostPolicy) matches(h string) bool {
	for _, pat := range p.Patterns {
		if ok, _ := path.Match(strings.TrimSuffix(strings.ToLower(pat), "."), h); ok {
			return true
		}
	}
	return false
}

// checkHost refuses, with 403 and a Status, a request whose Host the
// policy does not allow, before anything else runs: REST, /ws, /login,
// the dashboard and the health endpoints alike.
func (s *Server) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.opts.Hosts.Allows(r.Host) {
			host := r.Host
			if len(host) > 260 {
				host = host[:260] + "…"
			}
			apistatus.Write(w, apistatus.New(http.StatusForbidden, metav1.StatusReasonForbidden, fmt.Sprintf(
				"the host %q is not a name this gateway is served as: reach it by a loopback address or localhost, or list the name in allowedHosts (--allowed-hosts). Requests naming other hosts are refused, against DNS rebinding",
				host)))
			return
		}
		next.ServeHTTP(w, r)
	})
}
