package abuse

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"kubegate/internal/config"
	"kubegate/internal/testenv"
)

// socketWatch reads one socket until it closes and keeps how.
type socketWatch struct {
	user string
	c    *websocket.Conn
	done chan struct{}
	err  error
}

func (g *gateway) openSocket(t *testing.T, user string) *socketWatch {
	t.Helper()
	c, resp, err := g.dial(context.Background(), user)
	if err != nil {
		t.Fatalf("%s's socket: %v (%v)", user, err, resp)
	}
	w := &socketWatch{user: user, c: c, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		_, _, w.err = c.Read(context.Background()) // nothing comes unasked
	}()
	t.Cleanup(func() { _ = c.CloseNow(); <-w.done })
	return w
}

func (w *socketWatch) closed() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// TestSocketShares (issue 30, finding 5): identities with no RBAC at all fill the
// gateway's sockets (10 here, 4 per identity). A newcomer is still
// admitted and served: the identity holding the most gives one socket up,
// closed with 1013 and a reason saying why. An identity at its share is
// refused another (1008), and one that already gave way is refused
// (1013) rather than taking a socket back from a smaller one.
func TestSocketShares(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	createCM(t, ns, "a", nil)
	g := startGateway(t, gatewayOptions{config: func(c *config.Config) {
		c.WebSocket.MaxSockets, c.WebSocket.MaxSocketsPerClient = 10, 4
	}})
	var held []*socketWatch
	for _, u := range []string{abuser, abuser, abuser, abuser, newcomer, newcomer, newcomer, newcomer, accomplice, accomplice} {
		held = append(held, g.openSocket(t, u))
	}
	testenv.Eventually(t, "10 sockets open", func() bool { return g.ws.Sockets() == 10 })

	c, resp, err := g.dial(context.Background(), bystand)
	if err != nil {
		t.Fatalf("a newcomer at the cap: %v (%v)", err, resp)
	}
	alice := &client{c: c}
	defer c.CloseNow()
	if err := alice.send(context.Background(), subscribe("s", ns)); err != nil {
		t.Fatal(err)
	}
	if f, err := alice.next(context.Background()); err != nil || f.Type != "ack" {
		t.Fatalf("a newcomer at the cap: %v, %v; want its subscription served", f, err)
	}
	if f := alice.expect(t, "ADDED", "s"); f.Object.Name != "a" {
		t.Fatalf("snapshot: %v", f)
	}
	alice.expect(t, "END_OF_SNAPSHOT", "s")

	testenv.Eventually(t, "a socket given up", func() bool {
		return slices.ContainsFunc(held, (*socketWatch).closed)
	})
	var gaveWay *socketWatch
	for _, w := range held {
		if w.closed() {
			if gaveWay != nil {
				t.Fatalf("%s's and %s's sockets both closed", gaveWay.user, w.user)
			}
			gaveWay = w
		}
	}
	var ce websocket.CloseError
	if !errors.As(gaveWay.err, &ce) || ce.Code != websocket.StatusTryAgainLater || !strings.Contains(ce.Reason, "to make room for another client") {
		t.Fatalf("%s's socket ended with %v, want close 1013 saying why", gaveWay.user, gaveWay.err)
	}
	if gaveWay.user != abuser && gaveWay.user != newcomer {
		t.Fatalf("%s gave a socket up, not one of those holding the most", gaveWay.user)
	}
	if n := g.metric(t, "kubegate_ws_evicted_total"); n != 1 {
		t.Fatalf("kubegate_ws_evicted_total = %v, want 1", n)
	}

	other := newcomer
	if gaveWay.user == newcomer {
		other = abuser
	}
	for _, tc := range []struct {
		user string
		code websocket.StatusCode
		msg  string
	}{
		{other, websocket.StatusPolicyViolation, "too many sockets for this client (limit 4)"},
		{gaveWay.user, websocket.StatusTryAgainLater, "too many sockets on this gateway (limit 10)"},
	} {
		c, _, err := g.dial(context.Background(), tc.user)
		if err != nil {
			t.Fatalf("%s: %v", tc.user, err)
		}
		_, _, err = c.Read(context.Background())
		if !errors.As(err, &ce) || ce.Code != tc.code || !strings.Contains(ce.Reason, tc.msg) {
			t.Errorf("%s's extra socket: %v, want close %d %q", tc.user, err, tc.code, tc.msg)
		}
	}
	if n := g.ws.Sockets(); n > 10 {
		t.Fatalf("%d sockets open, over the cap", n)
	}
}
