package abuse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubegate/internal/config"
	"kubegate/internal/testenv"
)

// TestThousandSocketsFromOneIdentity: one identity opens 1,000 sockets as
// fast as it can. Each attempt beyond the per-identity limits gets a clear
// answer: HTTP 429 with a metav1.Status (the per-user request rate) or,
// after the upgrade, close 1008 naming the per-client socket limit; no
// more than the limit stay open. A second identity connecting in the
// middle of it is served as usual: snapshot, then live events.
func TestThousandSocketsFromOneIdentity(t *testing.T) {
	const attempts, workers = 1000, 50
	env := testenv.Get(t)
	ns := env.Namespace(t)
	for _, n := range []string{"a", "b", "c"} {
		createCM(t, ns, n, nil)
	}
	g := startGateway(t, gatewayOptions{}) // the defaults: 100 sockets per client
	limit := 100
	ctx := context.Background()
	warmUp(t, g, ns)
	base := measure()
	peak := startSampler()

	// Outcomes of the attempts, counted by kind. Sockets that stay open
	// are kept until the end.
	var (
		mu         sync.Mutex
		open       []*websocket.Conn
		refused    int      // HTTP 429 before the upgrade
		closed     int      // close 1008 after the upgrade
		unexpected []string // anything else
		readers    sync.WaitGroup
	)
	outcome := func(f func()) {
		mu.Lock()
		f()
		mu.Unlock()
	}
	next := make(chan int)
	halfway := make(chan struct{})
	var dialers sync.WaitGroup
	for range workers {
		dialers.Go(func() {
			for i := range next {
				if i == attempts/2 {
					close(halfway)
				}
				c, resp, err := g.dial(ctx, abuser)
				if err != nil {
					msg := refusal(resp, err)
					outcome(func() {
						if msg == "" {
							refused++
						} else {
							unexpected = append(unexpected, msg)
						}
					})
					continue
				}
				outcome(func() { open = append(open, c) })
				readers.Go(func() {
					_, _, err := c.Read(ctx) // the gateway sends nothing unasked
					var ce websocket.CloseError
					switch {
					case errors.As(err, &ce) && ce.Code == websocket.StatusPolicyViolation &&
						ce.Reason == fmt.Sprintf("too many sockets for this client (limit %d)", limit):
						outcome(func() { closed++ })
					case errors.As(err, &ce) && ce.Code == websocket.StatusNormalClosure:
						// closed by the test at the end
					default:
						outcome(func() { unexpected = append(unexpected, fmt.Sprintf("read: %v", err)) })
					}
				})
			}
		})
	}
	go func() {
		for i := range attempts {
			next <- i
		}
		close(next)
	}()

	// The newcomer connects while the flood is at its height.
	<-halfway
	c, _, err := g.dial(ctx, newcomer)
	if err != nil {
		t.Fatalf("%s refused during the flood: %v", newcomer, err)
	}
	bob := &client{c: c}
	if err := bob.send(ctx, subscribe("s", ns)); err != nil {
		t.Fatal(err)
	}
	bob.expect(t, "ack", "s")
	var names []string
	for {
		f, err := bob.next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if f.Type == "END_OF_SNAPSHOT" {
			break
		}
		if f.Type != "ADDED" {
			t.Fatalf("in the snapshot: %v", f)
		}
		names = append(names, f.Object.Name)
	}
	slices.Sort(names) // a snapshot comes in no particular order
	if strings.Join(names, ",") != "a,b,c" {
		t.Fatalf("snapshot %v, want a,b,c", names)
	}
	for i := range 3 {
		cm := createCM(t, ns, fmt.Sprint("live-", i), nil)
		if f := bob.expect(t, "ADDED", "s"); f.Object.Name != cm.Name || f.RV != cm.ResourceVersion {
			t.Fatalf("got %v, want %s@%s", f, cm.Name, cm.ResourceVersion)
		}
	}
	dialers.Wait()

	// Every attempt has been answered or upgraded; wait for the closes of
	// the upgraded sockets over the limit.
	testenv.Eventually(t, "the sockets over the limit to be closed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(unexpected) > 0 || len(open)-closed <= limit
	})
	mu.Lock()
	if len(unexpected) > 0 {
		t.Fatalf("%d attempts got an unclear answer, first: %s", len(unexpected), unexpected[0])
	}
	stillOpen := len(open) - closed
	t.Logf("%d attempts: %d open, %d closed with 1008, %d refused with 429", attempts, stillOpen, closed, refused)
	if stillOpen != limit {
		t.Fatalf("%d sockets of one identity open, want the limit %d", stillOpen, limit)
	}
	if n := g.metric(t, "kubegate_ws_rejected_total", "reason", "max_sockets_per_client"); int(n) != closed {
		t.Fatalf("kubegate_ws_rejected_total{max_sockets_per_client} = %v, want %d", n, closed)
	}
	mu.Unlock()
	testenv.Eventually(t, "the gateway to count the sockets", func() bool { return g.ws.Sockets() == limit+1 })
	during := measure()
	bounded(t, base, during, limit+1)

	// The newcomer still gets live events with the abuser at its limit.
	cm := createCM(t, ns, "after", nil)
	if f := bob.expect(t, "ADDED", "s"); f.Object.Name != cm.Name {
		t.Fatalf("got %v", f)
	}

	for _, c := range open {
		_ = c.Close(websocket.StatusNormalClosure, "")
	}
	_ = bob.c.Close(websocket.StatusNormalClosure, "")
	readers.Wait()
	testenv.Eventually(t, "every socket and listener to be gone", func() bool {
		return g.ws.Sockets() == 0 && g.metric(t, "kubegate_listener_active") == 0
	})
	after := settle(t, base, afterTolerance)
	report(t, base, during, peak.stop(), after)
}

// refusal checks that a refused handshake was answered 429 with a
// metav1.Status; it returns "" if so, else what was wrong.
func refusal(resp *http.Response, err error) string {
	if resp == nil {
		return fmt.Sprintf("dial: %v", err)
	}
	var st metav1.Status
	if jerr := json.NewDecoder(resp.Body).Decode(&st); jerr != nil {
		return fmt.Sprintf("HTTP %d without a Status body: %v", resp.StatusCode, jerr)
	}
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" ||
		!isStatus(&st, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, "rate limit exceeded") {
		return fmt.Sprintf("HTTP %d Retry-After %q: %+v", resp.StatusCode, resp.Header.Get("Retry-After"), st)
	}
	return ""
}

// warmUp opens one socket, subscribes and closes it, so the informer,
// the token and authorization caches and the gateway's connections to
// the apiserver exist before the baseline is taken.
func warmUp(t *testing.T, g *gateway, ns string) {
	t.Helper()
	ctx := context.Background()
	for _, u := range []string{abuser, bystand, newcomer} {
		c, _, err := g.dial(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		cl := &client{c: c}
		if err := cl.send(ctx, subscribe("warm", ns)); err != nil {
			t.Fatal(err)
		}
		cl.expect(t, "ack", "warm")
		for {
			f, err := cl.next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if f.Type == "END_OF_SNAPSHOT" {
				break
			}
		}
		_ = c.Close(websocket.StatusNormalClosure, "")
	}
	testenv.Eventually(t, "the warm-up sockets to close", func() bool { return g.ws.Sockets() == 0 })
}

// TestThousandSilentSocketsFromOneIdentity: the same flood from a client
// that never reads, so never answers the close handshake of the sockets
// refused after the upgrade. Each of those holds a goroutine for up to 5s;
// the per-user request rate and in-flight limits bound how many exist at
// once, and every attempt is still answered (101 or 429).
func TestThousandSilentSocketsFromOneIdentity(t *testing.T) {
	const attempts, workers, limit = 1000, 50, 100
	env := testenv.Get(t)
	ns := env.Namespace(t)
	g := startGateway(t, gatewayOptions{})
	warmUp(t, g, ns)
	base := measure()
	peak := startSampler()

	var (
		mu       sync.Mutex
		conns    []*rawConn
		statuses = map[int]int{}
		failures []error
		dialers  sync.WaitGroup
	)
	next := make(chan int)
	for range workers {
		dialers.Go(func() {
			for range next {
				c, status, err := g.rawHandshake(abuser)
				mu.Lock()
				if err != nil {
					failures = append(failures, err)
				} else {
					statuses[status]++
					if status == http.StatusSwitchingProtocols {
						conns = append(conns, c)
					} else {
						c.Close() // an idle keep-alive connection is the HTTP server's matter, not this test's
					}
				}
				mu.Unlock()
			}
		})
	}
	for i := range attempts {
		next <- i
	}
	close(next)
	dialers.Wait()
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	if len(failures) > 0 {
		t.Fatalf("%d attempts failed, first: %v", len(failures), failures[0])
	}
	upgraded, refused := statuses[http.StatusSwitchingProtocols], statuses[http.StatusTooManyRequests]
	t.Logf("%d attempts: %d upgraded (%d of them over the limit), %d answered 429 (%v by the request rate, %v by the in-flight limit)",
		attempts, upgraded, upgraded-limit, refused,
		g.metric(t, "kubegate_auth_rate_limited_total", "limit", "rate"), g.metric(t, "kubegate_auth_rate_limited_total", "limit", "inflight"))
	if upgraded+refused != attempts {
		t.Fatalf("answers by status: %v", statuses)
	}
	testenv.Eventually(t, "the gateway to hold the limit", func() bool { return g.ws.Sockets() == limit })
	attached := measure()
	// Two goroutines per open socket, one per refused socket waiting for
	// its close reply; the in-flight limit bounds both together.
	if maxG := base.goroutines + 2*config.Default().Auth.UserMaxInflight + afterTolerance.goroutines; attached.goroutines > maxG {
		t.Fatalf("%d goroutines with the flood attached, bound %d", attached.goroutines, maxG)
	}

	for _, c := range conns {
		c.Close()
	}
	testenv.Eventually(t, "every socket to be gone", func() bool { return g.ws.Sockets() == 0 })
	after := settle(t, base, afterTolerance)
	report(t, base, attached, peak.stop(), after)
}
