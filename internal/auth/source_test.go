package auth

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

func TestClientAddr(t *testing.T) {
	proxies := must[*TrustedProxies](t)(ParseTrustedProxies([]string{"10.0.0.0/8", "192.0.2.1", "2001:db8::/32"}))
	for _, tc := range []struct {
		name, peer string
		hdr        map[string]string
		want       string
	}{
		{"no proxy", "198.51.100.7:1234", map[string]string{"X-Forwarded-For": "203.0.113.5"}, "198.51.100.7"},
		{"trusted proxy", "10.1.2.3:1234", map[string]string{"X-Forwarded-For": "203.0.113.5"}, "203.0.113.5"},
		{"chain of proxies", "10.1.2.3:1234", map[string]string{"X-Forwarded-For": "203.0.113.5, 10.9.9.9, 192.0.2.1"}, "203.0.113.5"},
		{"spoofed left of the client", "10.1.2.3:1234", map[string]string{"X-Forwarded-For": "1.1.1.1, 203.0.113.5"}, "203.0.113.5"},
		{"only proxies", "10.1.2.3:1234", map[string]string{"X-Forwarded-For": "10.4.4.4"}, "10.4.4.4"},
		{"no header", "10.1.2.3:1234", nil, "10.1.2.3"},
		{"unknown hop", "10.1.2.3:1234", map[string]string{"X-Forwarded-For": "203.0.113.5, unknown"}, "10.1.2.3"},
		{"with port", "10.1.2.3:1234", map[string]string{"X-Forwarded-For": "203.0.113.5:4711"}, "203.0.113.5"},
		{"IPv6", "[2001:db8::1]:1234", map[string]string{"X-Forwarded-For": "2001:db9::5"}, "2001:db9::5"},
		{"mapped IPv4 peer", "[::ffff:10.1.2.3]:1234", map[string]string{"X-Forwarded-For": "203.0.113.5"}, "203.0.113.5"},
		{"Forwarded", "10.1.2.3:1234", map[string]string{"Forwarded": `for=203.0.113.5;proto=https, for="[2001:db9::5]:4711"`}, "2001:db9::5"},
		{"X-Forwarded-For wins", "10.1.2.3:1234", map[string]string{"Forwarded": "for=1.1.1.1", "X-Forwarded-For": "203.0.113.5"}, "203.0.113.5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = tc.peer
			for k, v := range tc.hdr {
				r.Header.Set(k, v)
			}
			if got := proxies.ClientAddr(r); got != netip.MustParseAddr(tc.want) {
				t.Fatalf("got %v, want %s", got, tc.want)
			}
		})
	}
	var none *TrustedProxies
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.1.2.3:1"
	r.Header.Set("X-Forwarded-For", "203.0.113.5")
	if got := none.ClientAddr(r); got.String() != "10.1.2.3" {
		t.Fatalf("no trusted proxies: %v", got)
	}
	if _, err := ParseTrustedProxies([]string{"10.0.0.0/33"}); err == nil {
		t.Fatal("a bad CIDR parsed")
	}
}

func TestSourceKey(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.1": "192.0.2.1", "2001:db8:1:2:3:4:5:6": "2001:db8:1:2::/64", "2001:db8:1:2::9": "2001:db8:1:2::/64",
	} {
		if got := SourceKey(netip.MustParseAddr(in)); got != want {
			t.Errorf("SourceKey(%s) = %s, want %s", in, got, want)
		}
	}
	if SourceKey(netip.Addr{}) != "unknown" {
		t.Error("invalid address")
	}
}
