package auth

import (
	"net/http"
	"net/netip"
)

// ClientKey names the client that per-client shares and limits apply to
// (sockets, live views): the user, or the client address for anonymous
// callers, who all share one name: the one the HTTP server found
// (WithSource), which behind trusted proxies is the address they
// forwarded for, else the connection's.
func ClientKey(u *User, r *http.Request) string {
	if u != nil && u.Name != "" && u.Name != AnonymousUser.Name {
		return "user:" + u.Name
	}
	a, ok := SourceFrom(r.Context())
	if !ok {
		if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
			a = ap.Addr().Unmap()
		}
	}
	return "ip:" + SourceKey(a)
}
