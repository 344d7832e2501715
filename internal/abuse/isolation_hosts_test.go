package abuse

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubegate/internal/config"
	"kubegate/internal/testenv"
	"kubegate/internal/ws"
)

// TestHostCheck (issue 30, finding 6): a request naming a host the gateway is not
// served as (DNS rebinding: a page on rebind.example whose name now
// resolves to the gateway) is refused with 403 and a complete Status, on
// REST and /ws, in the no-auth mode of make run and with authentication.
// Loopback names and addresses pass, as do allowedHosts; with
// authentication any address does.
func TestHostCheck(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	for _, mode := range []struct {
		name string
		cfg  func(*config.Config)
		// codes of a read of Secrets naming each host.
		codes map[string]int
	}{
		{"authn none", func(c *config.Config) {
			c.Auth.Authn, c.Auth.Authz = "none", "always-allow"
			c.AllowedHosts = []string{"*.example.test"}
		}, map[string]int{
			"rebind.example": 403, "localhost": 200, "LocalHost.": 200, "app.localhost": 200, "127.0.0.1": 200, "[::1]": 200,
			"kubegate.example.test": 200, "10.1.2.3": 403, "example.test": 403,
		}},
		{"authn kubernetes", nil, map[string]int{
			"rebind.example": 403, "localhost": 401, "10.1.2.3": 401, "[2001:db8::1]": 401,
		}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			g := startGateway(t, gatewayOptions{config: mode.cfg})
			_, port, _ := net.SplitHostPort(g.addr)
			c := httpClient("127.0.0.1")
			for host, want := range mode.codes {
				hdr := http.Header{"Host": {net.JoinHostPort(strings.Trim(host, "[]"), port)}, "Origin": {"http://" + net.JoinHostPort(strings.Trim(host, "[]"), port)}}
				a := g.do(t, c, http.MethodGet, "/api/v1/namespaces/"+ns+"/secrets", "", hdr, "")
				if a.code != want {
					t.Errorf("Host %s: %v, want %d", host, a, want)
				}
				if want == 403 && !isStatus(&a.status, 403, metav1.StatusReasonForbidden, "allowedHosts") {
					t.Errorf("Host %s: %v, want a complete Status naming allowedHosts", host, a)
				}
			}
			// The WebSocket handshake likewise.
			_, resp, err := websocket.Dial(context.Background(), "ws://"+g.addr+"/ws", &websocket.DialOptions{
				Host: "rebind.example:" + port, Subprotocols: []string{ws.Subprotocol},
				HTTPHeader: http.Header{"Origin": {"http://rebind.example:" + port}},
			})
			if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
				t.Fatalf("/ws naming rebind.example: %v, %v; want 403", err, resp)
			}
			var st metav1.Status
			if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || !isStatus(&st, 403, metav1.StatusReasonForbidden, "allowedHosts") {
				t.Fatalf("/ws naming rebind.example: %+v, %v", st, err)
			}
		})
	}
}
