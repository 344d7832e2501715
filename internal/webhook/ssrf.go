package webhook

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// refusedByDefault are address ranges a webhook may not connect to unless
// its allowAddresses says so: a configured URL must not reach the
// gateway's own host or the cloud metadata service.
var refusedByDefault = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"),    // loopback
	netip.MustParsePrefix("::1/128"),        // loopback
	netip.MustParsePrefix("169.254.0.0/16"), // link-local, cloud metadata
	netip.MustParsePrefix("fe80::/10"),      // link-local
	netip.MustParsePrefix("0.0.0.0/8"),      // "this host"
	netip.MustParsePrefix("::/128"),         // unspecified
	netip.MustParsePrefix("fd00:ec2::254/128"),
}

// AddressRefusedError reports a connection the address guard refused.
type AddressRefusedError struct{ Addr netip.Addr }

func (e *AddressRefusedError) Error() string {
	return fmt.Sprintf("connecting to %s is refused (loopback, link-local or denyAddresses); list it in allowAddresses to permit it", e.Addr)
}

// addressGuard decides at connect time, after DNS resolution, so a name
// that resolves to a refused address is caught too.
type addressGuard struct {
	allow, deny []netip.Prefix
}

func newAddressGuard(allow, deny []string) *addressGuard {
	g := &addressGuard{deny: append([]netip.Prefix(nil), refusedByDefault...)}
	for _, s := range allow {
		if p, err := netip.ParsePrefix(s); err == nil { // validated at load
			g.allow = append(g.allow, p)
		}
	}
	for _, s := range deny {
		if p, err := netip.ParsePrefix(s); err == nil {
			g.deny = append(g.deny, p)
		}
	}
	return g
}

func (g *addressGuard) check(a netip.Addr) error {
	a = a.Unmap()
	for _, p := range g.allow {
		if p.Contains(a) {
			return nil
		}
	}
	for _, p := range g.deny {
		if p.Contains(a) {
			return &AddressRefusedError{Addr: a}
		}
	}
	return nil
}

// control is a net.Dialer Control function.
func (g *addressGuard) control(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("unexpected dial address %q", address)
	}
	return g.check(a)
}

// newTransport returns a webhook's transport: no proxy (a proxy would
// connect on the gateway's behalf, past the guard) and the guard on
// every connection.
func newTransport(g *addressGuard) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: g.control}).DialContext
	t.MaxIdleConnsPerHost = 4
	return t
}
