package httpapi

import "testing"

func TestHostPolicy(t *testing.T) {
	named := &HostPolicy{Patterns: []string{"kubegate.example.com", "*.apps.example.org", "10.9.8.7"}}
	credentials := &HostPolicy{Patterns: named.Patterns, AnyAddress: true}
	for _, tc := range []struct {
		host               string
		named, credentials bool
	}{
		{"", true, true},
		{"localhost", true, true},
		{"localhost:8080", true, true},
		{"LOCALHOST.:8080", true, true},
		{"dash.localhost:8080", true, true},
		{"127.0.0.1:8080", true, true},
		{"127.8.9.10", true, true},
		{"[::1]:8080", true, true},
		{"[::ffff:127.0.0.1]:8080", true, true},
		{"kubegate.example.com", true, true},
		{"KubeGate.Example.Com:443", true, true},
		{"kubegate.example.com.", true, true},
		{"x.apps.example.org", true, true},
		{"apps.example.org", false, false},
		{"10.9.8.7:8080", true, true},
		{"10.1.2.3:8080", false, true},
		{"[2001:db8::1]:8080", false, true},
		{"rebind.example", false, false},
		{"rebind.example:8080", false, false},
		{"localhost.rebind.example", false, false},
		{"kubegate.example.com.rebind.example", false, false},
	} {
		if got := named.Allows(tc.host); got != tc.named {
			t.Errorf("without credentials, Host %q: allowed %v, want %v", tc.host, got, tc.named)
		}
		if got := credentials.Allows(tc.host); got != tc.credentials {
			t.Errorf("with credentials, Host %q: allowed %v, want %v", tc.host, got, tc.credentials)
		}
	}
	var none *HostPolicy
	if !none.Allows("rebind.example") {
		t.Error("no policy refuses a host")
	}
	if !(&HostPolicy{Patterns: []string{"*"}}).Allows("anything.example") {
		t.Error(`"*" does not allow every name`)
	}
}
