package abuse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"kubegate/internal/config"
	"kubegate/internal/testenv"
)

// TestClientsThatDoNotRead: clients that subscribe and then never read,
// or read one byte at a time, are dropped within the write timeout (when
// the gateway has data for them) or the ping timeout (when it has none);
// clients that flood pings without reading the pongs are dropped too.
// Until then each holds at most one batch; afterwards nothing of them is
// left, and the bystander missed nothing.
func TestClientsThatDoNotRead(t *testing.T) {
	const n = 10       // clients of each kind
	const flooders = 1 // clients that send pings and never read
	big := bigNamespace(t, 8, 900<<10)
	s := newScene(t, gatewayOptions{config: func(c *config.Config) {
		// Writes start as soon as a subscription does and time out 1s
		// later; pings start after 5s and time out 2s later. So clients
		// with data are dropped by the write timeout, unless starting the
		// subscription took over 5s (a machine under heavy load), and
		// idle ones by the pong timeout.
		c.WebSocket.WriteTimeout = config.Duration(time.Second)
		c.WebSocket.PingInterval = config.Duration(5 * time.Second)
		c.WebSocket.PongTimeout = config.Duration(2 * time.Second)
	}})
	g := s.g

	peers := g.metric(t, "kubegate_ws_closes_total", "reason", "peer") // the warm-up's
	var neverBig, neverIdle, slow []*rawConn
	for range n {
		neverBig = append(neverBig, g.rawDial(t, abuser))
		neverIdle = append(neverIdle, g.rawDial(t, abuser))
		slow = append(slow, g.rawDial(t, abuser))
	}
	for i := range n {
		for _, c := range []struct {
			conn *rawConn
			ns   string
		}{{neverBig[i], big}, {neverIdle[i], s.ns}, {slow[i], big}} {
			if err := c.conn.writeFrame(opText, mustJSON(subscribe("s", c.ns))); err != nil {
				t.Fatal(err)
			}
		}
	}
	closes := func(reason string) float64 { return g.metric(t, "kubegate_ws_closes_total", "reason", reason) }
	// dropped counts the abusive clients dropped so far: a ping flooder's
	// reader fails (peer) unless its missing pong is noticed first.
	dropped := func() float64 { return closes("write_timeout") + closes("pong_timeout") + closes("peer") - peers }

	// Clients that send pings as fast as they can and read no pong: the
	// gateway answers each ping from its reader, and drops the client
	// once a pong has been blocked for 5s (coder/websocket's bound).
	pingers := make(chan int, flooders)
	for range flooders {
		c := g.rawDial(t, abuser)
		go func() {
			ping := make([]byte, 125)
			sent := 0
			for c.writeFrames(opPing, ping, 256) == nil {
				sent += 256
			}
			pingers <- sent
		}()
	}

	testenv.Eventually(t, "every client to be attached", func() bool {
		return g.metric(t, "kubegate_ws_subscriptions") == 3*n+1 || dropped() > 0
	})
	attached := measure()
	// A blocked writer holds one batch: one object here, as each is larger
	// than MaxBatchBytes.
	maxHeap := s.base.heap + 2*n*(2<<20) + 3*n*uint64(perSocket.heap) + afterTolerance.heap
	if attached.heap > maxHeap {
		t.Fatalf("heap %s with %d stuck clients, bound %s", mib(attached.heap), 3*n, mib(maxHeap))
	}

	// The slow clients read one byte per poll, until the gateway has
	// dropped everyone.
	done := make([]bool, n)
	b := make([]byte, 1)
	read := 0
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, time.Minute, true,
		func(context.Context) (bool, error) {
			for i, c := range slow {
				if done[i] {
					continue
				}
				_ = c.SetReadDeadline(time.Now().Add(30 * time.Second)) // a failure bound
				if _, err := c.Read(b); err != nil {
					done[i] = true
					continue
				}
				read++
			}
			return dropped() >= 3*n+flooders, nil
		})
	if err != nil {
		t.Fatalf("%v of %d clients dropped", dropped(), 3*n+flooders)
	}
	t.Logf("the slow clients read %d bytes, one per poll, before they were dropped", read)
	for range flooders {
		t.Logf("a client sent %d pings without reading a pong before it was dropped", <-pingers)
	}
	wt, pt, peer := closes("write_timeout"), closes("pong_timeout"), closes("peer")-peers
	t.Logf("dropped: %v by the write timeout, %v by the pong timeout, %v by a failed read", wt, pt, peer)
	if pt < n || wt == 0 || wt > 2*n || peer > flooders {
		t.Fatalf("want the %d idle clients dropped by the pong timeout, some of the %d with data by the write timeout, and only the ping flooders by a failed read",
			n, 2*n)
	}
	// Each client finds its connection ended once it reads what its
	// buffers still hold.
	for _, c := range append(append(neverBig, neverIdle...), slow...) {
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil && !isReset(err) {
			t.Fatalf("after the drop: %v", err)
		}
		c.Close()
	}
	s.finish(t, attached)
}

// isReset reports whether err is the peer resetting the connection, as a
// dropped socket with unread data does.
func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET)
}

// TestOversizedFrames: clients that send 1 MiB frames (text and binary)
// are closed with 1009 without the gateway reading the frames: the heap
// never holds their megabytes.
func TestOversizedFrames(t *testing.T) {
	const n = 50
	s := newScene(t, gatewayOptions{})
	g := s.g
	ctx := context.Background()
	var conns []*websocket.Conn
	for range n {
		c, _, err := g.dial(ctx, abuser)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	attached := measure()
	bounded(t, s.base, attached, n+1)

	payload := []byte(`{"type":"subscribe","id":"` + strings.Repeat("x", 1<<20) + `","resource":"configmaps"}`)
	codes := make(chan error, n)
	for i, c := range conns {
		go func() {
			typ := websocket.MessageText
			if i%2 == 1 {
				typ = websocket.MessageBinary
			}
			// The gateway may close before the whole frame is written.
			_ = c.Write(ctx, typ, payload)
			_, _, err := c.Read(ctx)
			codes <- err
		}()
	}
	for range n {
		err := <-codes
		if code := websocket.CloseStatus(err); code != websocket.StatusMessageTooBig {
			t.Fatalf("after a 1 MiB frame: %v, want close 1009", err)
		}
	}
	testenv.Eventually(t, "the too_big closes to be counted", func() bool {
		return g.metric(t, "kubegate_ws_closes_total", "reason", "too_big") == n
	})
	peak := s.finish(t, attached)
	// Had the gateway buffered the frames, n MiB would have been live.
	if limit := 2*s.base.heap + n*(1<<20)/2; peak.heap > limit {
		t.Fatalf("heap in use peaked at %s while %d clients sent 1 MiB each (limit %s)", mib(peak.heap), n, mib(limit))
	}
}

// TestGarbage: clients that send garbage get one error frame (a
// metav1.Status) per message and keep their socket; an id too large for
// the read limit closes the socket with 1009.
func TestGarbage(t *testing.T) {
	const clients, rounds = 4, 5
	s := newScene(t, gatewayOptions{})
	g := s.g
	ctx := context.Background()
	fields := make([]string, 2000)
	for i := range fields {
		fields[i] = fmt.Sprintf(`"f%d":1`, i)
	}
	garbage := []struct {
		name string
		typ  websocket.MessageType
		data string
		code int32
		msg  string
	}{
		{"not JSON", websocket.MessageText, "hello, gateway", 400, "invalid frame"},
		{"binary", websocket.MessageBinary, `{"type":"subscribe","id":"b","resource":"configmaps"}`, 400, "binary frames are not supported"},
		{"binary noise", websocket.MessageBinary, "\x00\x01\x02\xff", 400, "binary frames are not supported"},
		{"invalid UTF-8", websocket.MessageText, "\xff\xfe\xfd", 400, "invalid frame"},
		{"invalid UTF-8 in a string", websocket.MessageText, "{\"type\":\"subscribe\",\"id\":\"u\",\"resource\":\"config\xffmaps\"}", 404, "resource type"},
		{"NUL bytes", websocket.MessageText, "\x00\x00\x00", 400, "invalid frame"},
		{"huge id", websocket.MessageText, `{"type":"subscribe","id":"` + strings.Repeat("i", 60<<10) + `","resource":"configmaps"}`, 400, "longer than 128"},
		{"huge type", websocket.MessageText, `{"type":"` + strings.Repeat("t", 60<<10) + `"}`, 400, "unknown type"},
		{"deep nesting", websocket.MessageText, strings.Repeat("[", 30000), 400, "invalid frame"},
		{"huge number", websocket.MessageText, `{"type":"subscribe","id":"n","resource":"configmaps","sendInitialEvents":1e999999}`, 400, "sendInitialEvents"},
		{"many fields", websocket.MessageText, `{"type":"subscribe","id":"m","resource":"configmaps",` + strings.Join(fields, ",") + `}`, 400, "unknown field"},
		{"null", websocket.MessageText, "null", 400, "not null"},
	}
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	cls := make([]*client, clients)
	for i := range clients {
		c, _, err := g.dial(ctx, abuser)
		if err != nil {
			t.Fatal(err)
		}
		cls[i] = &client{c: c}
	}
	for _, c := range cls {
		wg.Go(func() {
			for range rounds {
				for _, gb := range garbage {
					wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
					err := c.c.Write(wctx, gb.typ, []byte(gb.data))
					cancel()
					if err != nil {
						errs <- fmt.Errorf("%s: write: %w", gb.name, err)
						return
					}
					f, err := c.next(ctx)
					if err != nil {
						errs <- fmt.Errorf("%s: %w", gb.name, err)
						return
					}
					if f.Type != "error" || f.Status == nil || f.Status.Code != gb.code || f.Status.Kind != "Status" ||
						!strings.Contains(f.Status.Message, gb.msg) || len(f.Status.Message) > 1024 {
						errs <- fmt.Errorf("%s: got %.300v, want an error frame %d containing %q", gb.name, f, gb.code, gb.msg)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	sent := clients * rounds * len(garbage)
	if got := g.metric(t, "kubegate_ws_error_frames_total"); int(got) != sent {
		t.Fatalf("%v error frames for %d garbage messages", got, sent)
	}
	attached := measure()
	bounded(t, s.base, attached, clients+1)

	// Every socket still serves subscriptions.
	for _, c := range cls {
		if err := c.send(ctx, subscribe("ok", s.ns)); err != nil {
			t.Fatal(err)
		}
		c.expect(t, "ack", "ok")
		for range 3 {
			c.expect(t, "ADDED", "ok")
		}
		c.expect(t, "END_OF_SNAPSHOT", "ok")
	}
	t.Logf("%d garbage messages answered with %d error frames; every socket still subscribes", sent, sent)

	// An id beyond the read limit ends the socket with 1009. The gateway
	// may close before the whole frame is written.
	_ = cls[0].send(ctx, []byte(`{"type":"subscribe","id":"`+strings.Repeat("i", 100<<10)+`"}`))
	if _, err := cls[0].next(ctx); websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
		t.Fatalf("after a 100 KiB id: %v, want close 1009", err)
	}
	for _, c := range cls[1:] {
		_ = c.c.Close(websocket.StatusNormalClosure, "")
	}
	s.finish(t, attached)
}

// TestSubscribeFlood: one socket sends 10,000 subscribe requests. The
// per-socket cap (100) and the subscribe rate answer each one beyond them
// with a 429 error frame; at most 100 subscriptions ever exist for it.
//
// The gateway here allows a burst of 150 subscribes at 1 per second, so
// that one burst reaches the cap: the first 5,000 requests meet the cap;
// after the client unsubscribes everything, the next 5,000 meet the rate
// limit (50 tokens left, plus about one per second since).
func TestSubscribeFlood(t *testing.T) {
	const perRound = 5000
	s := newScene(t, gatewayOptions{config: func(c *config.Config) {
		c.WebSocket.SubscribeRate = 1
		c.WebSocket.SubscribeBurst = 150
	}})
	g := s.g
	ctx := context.Background()
	conn, _, err := g.dial(ctx, abuser)
	if err != nil {
		t.Fatal(err)
	}
	c := &client{c: conn}

	// The reader tallies the answers.
	var (
		mu                          sync.Mutex
		acked                       []string
		unsubscribed, ends, added   int
		capped, tooFast, unexpected int
		firstUnexpected             string
	)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			f, err := c.next(ctx)
			if err != nil {
				return
			}
			mu.Lock()
			switch {
			case f.Type == "ack" && f.Request == "subscribe":
				acked = append(acked, f.ID)
			case f.Type == "ack" && f.Request == "unsubscribe":
				unsubscribed++
			case f.Type == "ADDED":
				added++
			case f.Type == "END_OF_SNAPSHOT":
				ends++
			case f.Type == "error" && isStatus(f.Status, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, "too many subscriptions on this socket (limit 100)"):
				capped++
			case f.Type == "error" && isStatus(f.Status, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, "subscribing too fast (limit 1 per second)"):
				tooFast++
			default:
				if unexpected++; unexpected == 1 {
					firstUnexpected = f.String()
				}
			}
			mu.Unlock()
		}
	}()
	answered := func(want int) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return unexpected > 0 || len(acked)+capped+tooFast >= want && ends == len(acked)
		}
	}
	flood := func(round int) {
		for i := range perRound {
			if err := c.send(ctx, subscribe(fmt.Sprintf("r%d-%d", round, i), s.ns)); err != nil {
				t.Fatal(err)
			}
		}
	}

	flood(1)
	testenv.Eventually(t, "every subscribe of round 1 to be answered", answered(perRound))
	mu.Lock()
	if unexpected > 0 {
		t.Fatalf("%d unexpected frames, first %s", unexpected, firstUnexpected)
	}
	if len(acked) != 100 || capped != perRound-100 || tooFast != 0 || added != 3*len(acked) {
		t.Fatalf("round 1: %d acks (%d snapshot objects), %d capped, %d too fast; want 100, 300, %d, 0",
			len(acked), added, capped, tooFast, perRound-100)
	}
	ids := acked
	mu.Unlock()
	if got := g.metric(t, "kubegate_ws_subscriptions"); got != 101 {
		t.Fatalf("%v subscriptions, want 100 and the bystander's", got)
	}
	attached := measure()
	bounded(t, s.base, attached, 2)

	for _, id := range ids {
		if err := c.send(ctx, map[string]string{"type": "unsubscribe", "id": id}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, "the unsubscribes to be acknowledged", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return unsubscribed == len(ids)
	})
	flood(2)
	testenv.Eventually(t, "every subscribe of round 2 to be answered", answered(2*perRound))
	mu.Lock()
	acks2, capped2 := len(acked)-len(ids), capped-(perRound-100)
	t.Logf("round 1: 100 acks, %d capped; round 2: %d acks, %d too fast, %d capped", perRound-100, acks2, tooFast, capped2)
	if unexpected > 0 {
		t.Fatalf("%d unexpected frames, first %s", unexpected, firstUnexpected)
	}
	if acks2 < 50 || acks2 >= 100 || tooFast+capped2+acks2 != perRound || tooFast == 0 {
		t.Fatalf("round 2: %d acks, %d too fast, %d capped; want 50..99 acks and the rest too fast", acks2, tooFast, capped2)
	}
	mu.Unlock()
	if got := g.metric(t, "kubegate_ws_subscriptions"); got != float64(acks2+1) {
		t.Fatalf("%v subscriptions, want %d", got, acks2+1)
	}
	_ = conn.Close(websocket.StatusNormalClosure, "")
	<-readerDone
	testenv.Eventually(t, "the subscriptions to end", func() bool { return g.metric(t, "kubegate_ws_subscriptions") == 1 })
	s.finish(t, attached)
}

// TestConnectCloseLoop: 2,000 sockets opened, subscribed and closed in a
// tight loop (half closed abruptly, half with a close handshake) leave no
// goroutine, subscription or buffer behind. The per-user request rate is
// off here so that every attempt reaches the WebSocket server; with the
// default it would answer 429 after 200 (TestThousandSocketsFromOneIdentity).
func TestConnectCloseLoop(t *testing.T) {
	const loops, perLoop = 2, 1000
	s := newScene(t, gatewayOptions{config: func(c *config.Config) { c.Auth.UserQPS = 0 }})
	g := s.g
	ctx := context.Background()
	errs := make(chan error, loops)
	halfway := make(chan struct{})
	resume := make(chan struct{})
	var wg sync.WaitGroup
	for l := range loops {
		wg.Go(func() {
			for i := range perLoop {
				if l == 0 && i == perLoop/2 {
					close(halfway)
					<-resume
				}
				conn, _, err := g.dial(ctx, abuser)
				if err != nil {
					errs <- fmt.Errorf("attempt %d: %w", i, err)
					return
				}
				c := &client{c: conn}
				if err := c.send(ctx, subscribe("s", s.ns)); err != nil {
					errs <- err
					return
				}
				if i%2 == 0 {
					_ = conn.CloseNow()
					continue
				}
				if f, err := c.next(ctx); err != nil || f.Type != "ack" {
					errs <- fmt.Errorf("attempt %d: %v %v", i, f, err)
					return
				}
				if err := conn.Close(websocket.StatusNormalClosure, ""); err != nil && !errors.Is(err, io.EOF) {
					errs <- fmt.Errorf("attempt %d: close: %w", i, err)
					return
				}
			}
		})
	}
	<-halfway
	attached := measure() // with the other loop still running
	close(resume)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	bounded(t, s.base, attached, 2*loops+1)
	testenv.Eventually(t, "the subscriptions to end", func() bool { return g.metric(t, "kubegate_ws_subscriptions") == 1 })
	if n := g.metric(t, "kubegate_ws_closes_total"); n < loops*perLoop {
		t.Fatalf("%v closes counted, want at least %d", n, loops*perLoop)
	}
	s.finish(t, attached)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
