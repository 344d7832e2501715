package auth

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// TrustedProxies finds a request's client address: the address of the
// connection's peer, unless that peer is one of the configured proxies,
// in which case the address the proxies say they forwarded for. Behind an
// Ingress every request comes from the Ingress controller, so without it
// every user would share one address's budgets (failed credentials,
// /login, anonymous rate limits and sockets).
//
// The forwarded address is read from X-Forwarded-For, or from Forwarded
// (RFC 7239) when there is no X-Forwarded-For: walking the list from the
// right, past the hops that are trusted proxies themselves, the first
// address that is not one is the client. Entries to its left were written
// by the client and are not believed. A hop that is not an address
// ("unknown", an obfuscated name) stops the walk at the proxy that wrote
// it. A nil *TrustedProxies trusts nobody.
type TrustedProxies struct {
	prefixes []netip.Prefix
}

// ParseTrustedProxies parses CIDRs ("10.0.0.0/8") and single addresses.
func ParseTrustedProxies(cidrs []string) (*TrustedProxies, error) {
	if len(cidrs) == 0 {
		return nil, nil
	}
	p := &TrustedProxies{}
	for _, c := range cidrs {
		c = strings.TrimSpace(c)
		if pfx, err := netip.ParsePrefix(c); err == nil {
			p.prefixes = append(p.prefixes, pfx.Masked())
			continue
		}
		a, err := netip.ParseAddr(c)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: want a CIDR (10.0.0.0/8) or an address", c)
		}
		a = a.Unmap()
		p.prefixes = append(p.prefixes, netip.PrefixFrom(a, a.BitLen()))
	}
	return p, nil
}

func (p *TrustedProxies) trusts(a netip.Addr) bool {
	if p == nil {
		return false
	}
	for _, pfx := range p.prefixes {
		if pfx.Contains(a) {
			return true
		}
	}
	return false
}

// ClientAddr returns r's client address (see TrustedProxies). It is the
// zero Addr only when r.RemoteAddr is not an address (a test's request).
func (p *TrustedProxies) ClientAddr(r *http.Request) netip.Addr {
	peer := parseHop(r.RemoteAddr)
	if !peer.IsValid() || !p.trusts(peer) {
		return peer
	}
	hops := forwardedFor(r.Header)
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a := parseHop(hops[i])
		if !a.IsValid() {
			return client
		}
		client = a
		if !p.trusts(a) {
			return a
		}
	}
	return client
}

// forwardedFor returns the hops of X-Forwarded-For, all of its headers in
// order, or else the for= parameters of Forwarded.
func forwardedFor(h http.Header) []string {
	var hops []string
	if xff := h.Values("X-Forwarded-For"); len(xff) > 0 {
		for _, v := range xff {
			for hop := range strings.SplitSeq(v, ",") {
				hops = append(hops, strings.TrimSpace(hop))
			}
		}
		return hops
	}
	for _, v := range h.Values("Forwarded") {
		for elem := range strings.SplitSeq(v, ",") {
			for pair := range strings.SplitSeq(elem, ";") {
				k, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
				if ok && strings.EqualFold(strings.TrimSpace(k), "for") {
					hops = append(hops, strings.Trim(strings.TrimSpace(val), `"`))
				}
			}
		}
	}
	return hops
}

// parseHop parses an address as RemoteAddr and the forwarding headers
// write it: "192.0.2.1", "192.0.2.1:1234", "2001:db8::1",
// "[2001:db8::1]:1234". IPv4-mapped IPv6 addresses become IPv4.
func parseHop(s string) netip.Addr {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap()
	}
	if a, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return a.Unmap().WithZone("")
	}
	if host, _, err := net.SplitHostPort(s); err == nil {
		if a, err := netip.ParseAddr(host); err == nil {
			return a.Unmap().WithZone("")
		}
	}
	return netip.Addr{}
}

// SourceKey is the key that budgets per client address use: the IPv4
// address, or the /64 network of an IPv6 address (what one host is
// usually given, so one host cannot take a budget per address of its
// network). Invalid addresses share the key "unknown".
func SourceKey(a netip.Addr) string {
	switch {
	case !a.IsValid():
		return "unknown"
	case a.Is4():
		return a.String()
	}
	pfx, _ := a.WithZone("").Prefix(64)
	return pfx.String()
}

type sourceKey struct{}

// WithSource returns ctx carrying the request's client address, found by
// TrustedProxies.ClientAddr; the HTTP server stores it for every request.
func WithSource(ctx context.Context, a netip.Addr) context.Context {
	return context.WithValue(ctx, sourceKey{}, a)
}

// SourceFrom returns the client address WithSource stored.
func SourceFrom(ctx context.Context) (netip.Addr, bool) {
	a, ok := ctx.Value(sourceKey{}).(netip.Addr)
	return a, ok
}

// requestSource is r's client address: the one stored by WithSource, or
// else its peer's.
func requestSource(r *http.Request) netip.Addr {
	if a, ok := SourceFrom(r.Context()); ok {
		return a
	}
	return parseHop(r.RemoteAddr)
}

// Detached returns a context that carries what auth stored in ctx (the
// user, the client address and the rate limiter's review charge) and
// nothing else: not ctx's values, deadline or cancellation. A stream
// that outlives its request (a WebSocket) keeps its identity with it.
func Detached(ctx context.Context) context.Context {
	out := context.Background()
	if u := UserFrom(ctx); u != nil {
		out = WithUser(out, u)
	}
	if a, ok := SourceFrom(ctx); ok {
		out = WithSource(out, a)
	}
	if c := chargeFrom(ctx); c != nil {
		out = context.WithValue(out, chargeKey{}, c)
	}
	return out
}
