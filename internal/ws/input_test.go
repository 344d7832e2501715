package ws

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubegate/internal/informer"
	"kubegate/internal/testenv"
)

// TestBadInputGetsErrorFramesAndTheSocketSurvives sends every kind of bad
// request on one socket that also carries a live subscription, and checks
// each error frame and that the subscription keeps working.
func TestBadInputGetsErrorFramesAndTheSocketSurvives(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ts := startServer(t, startManager(t, env.Config, nil), func(o *Options) { o.MaxSubscriptionsPerSocket = 2 })
	c := dial(t, ts)
	c.subscribe("live", "configmaps", ns)
	c.snapshot("live")

	for _, tc := range []struct {
		name    string
		send    string
		id      string // expected id on the error frame
		request string
		code    int32
		reason  metav1.StatusReason
		msg     string
	}{
		{"malformed JSON", `{"type":"subscribe",`, "", "", 400, metav1.StatusReasonBadRequest, "invalid frame"},
		{"not an object", `[1,2]`, "", "", 400, metav1.StatusReasonBadRequest, "invalid frame"},
		{"two objects", `{"type":"unsubscribe","id":"a"} {"type":"unsubscribe","id":"b"}`, "", "", 400, metav1.StatusReasonBadRequest, "exactly one JSON object"},
		{"empty frame", ``, "", "", 400, metav1.StatusReasonBadRequest, "empty frame"},
		{"no type", `{"id":"x"}`, "", "", 400, metav1.StatusReasonBadRequest, `"type" is required`},
		{"unknown type", `{"type":"watch","id":"x"}`, "", "", 400, metav1.StatusReasonBadRequest, `unknown type "watch"`},
		{"no id", `{"type":"subscribe","resource":"pods"}`, "", "subscribe", 400, metav1.StatusReasonBadRequest, `"id" is required`},
		{"long id", `{"type":"subscribe","id":"` + strings.Repeat("i", 129) + `","resource":"pods"}`, strings.Repeat("i", 129), "subscribe", 400,
			metav1.StatusReasonBadRequest, "longer than 128"},
		{"id not a string", `{"type":"unsubscribe","id":7}`, "", "unsubscribe", 400, metav1.StatusReasonBadRequest, `field "id" must be a string`},
		{"unknown field", `{"type":"subscribe","id":"x","resource":"pods","labelselector":"a=b"}`, "x", "subscribe", 400, metav1.StatusReasonBadRequest, `unknown field "labelselector"`},
		{"wrong field type", `{"type":"subscribe","id":"x","resource":"pods","sendInitialEvents":"yes"}`, "x", "subscribe", 400, metav1.StatusReasonBadRequest, `field "sendInitialEvents" must be a boolean, not string`},
		{"no resource", `{"type":"subscribe","id":"x"}`, "x", "subscribe", 400, metav1.StatusReasonBadRequest, `"resource" is required`},
		{"bad resync", `{"type":"subscribe","id":"x","resource":"pods","resyncPeriod":"often"}`, "x", "subscribe", 400, metav1.StatusReasonBadRequest, `"resyncPeriod"`},
		{"negative resync", `{"type":"subscribe","id":"x","resource":"pods","resyncPeriod":"-1s"}`, "x", "subscribe", 400, metav1.StatusReasonBadRequest, `"resyncPeriod"`},
		{"bad resourceVersion", `{"type":"subscribe","id":"x","resource":"pods","resourceVersion":"abc"}`, "x", "subscribe", 400, metav1.StatusReasonBadRequest, `"resourceVersion"`},
		{"unknown resource", `{"type":"subscribe","id":"x","resource":"podz"}`, "x", "subscribe", 404, metav1.StatusReasonNotFound, `resource type "podz"`},
		{"bad label selector", `{"type":"subscribe","id":"x","resource":"pods","labelSelector":"a=(b"}`, "x", "subscribe", 400, metav1.StatusReasonBadRequest, "invalid labelSelector"},
		{"unsupported field selector", `{"type":"subscribe","id":"x","resource":"configmaps","fieldSelector":"spec.nodeName=n1"}`, "x", "subscribe", 400, metav1.StatusReasonBadRequest, `field "spec.nodeName" is not supported`},
		{"namespace on cluster-scoped", `{"type":"subscribe","id":"x","resource":"nodes","namespace":"default"}`, "x", "subscribe", 400, metav1.StatusReasonBadRequest, "cluster-scoped"},
		{"duplicate id", `{"type":"subscribe","id":"live","resource":"secrets"}`, "live", "subscribe", 409, metav1.StatusReasonAlreadyExists, `"live" already exists`},
		{"unsubscribe unknown", `{"type":"unsubscribe","id":"nope"}`, "nope", "unsubscribe", 404, metav1.StatusReasonNotFound, `no subscription "nope"`},
		{"unsubscribe with extras", `{"type":"unsubscribe","id":"live","resource":"pods"}`, "live", "unsubscribe", 400, metav1.StatusReasonBadRequest, "only \"type\" and \"id\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.send(tc.send)
			f := c.next()
			if f.Type != "error" || f.Status == nil {
				t.Fatalf("got %v, want an error frame", f)
			}
			st := f.Status
			if f.ID != tc.id || f.Request != tc.request || f.Ended || st.Code != tc.code || st.Reason != tc.reason ||
				st.Kind != "Status" || st.Status != metav1.StatusFailure || !strings.Contains(st.Message, tc.msg) {
				t.Fatalf("got error id=%q request=%q ended=%v status=%+v; want id=%q request=%q code=%d reason=%s message containing %q",
					f.ID, f.Request, f.Ended, st, tc.id, tc.request, tc.code, tc.reason, tc.msg)
			}
		})
	}

	t.Run("binary frame", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.c.Write(ctx, websocket.MessageBinary, []byte(`{"type":"unsubscribe","id":"live"}`)); err != nil {
			t.Fatal(err)
		}
		if f := c.next(); f.Type != "error" || f.Status.Code != 400 || !strings.Contains(f.Status.Message, "binary frames are not supported") {
			t.Fatalf("got %v", f)
		}
	})

	t.Run("too many subscriptions", func(t *testing.T) {
		c.subscribe("second", "configmaps", ns, func(m map[string]any) { m["sendInitialEvents"] = false })
		c.expect("ack", "second")
		c.subscribe("third", "configmaps", ns)
		if f := c.expect("error", "third"); f.Status.Code != 429 || f.Status.Reason != metav1.StatusReasonTooManyRequests {
			t.Fatalf("got %v", f)
		}
		c.send(`{"type":"unsubscribe","id":"second"}`)
		c.expect("ack", "second")
	})

	// After all that, the original subscription still delivers.
	createCM(t, ns, "still-here", nil)
	if f := c.expect("ADDED", "live"); f.name() != "still-here" {
		t.Fatalf("got %v", f)
	}
}

func TestSubscribeRateLimit(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ts := startServer(t, startManager(t, env.Config, nil), func(o *Options) {
		o.SubscribeRate = 0.001 // no refill during the test
		o.SubscribeBurst = 2
	})
	c := dial(t, ts)
	for _, id := range []string{"a", "b"} {
		c.subscribe(id, "configmaps", ns, func(m map[string]any) { m["sendInitialEvents"] = false })
		c.expect("ack", id)
	}
	c.subscribe("c", "configmaps", ns)
	if f := c.expect("error", "c"); f.Status.Code != 429 || !strings.Contains(f.Status.Message, "too fast") {
		t.Fatalf("got %v", f)
	}
}

func TestOversizedMessageClosesWith1009(t *testing.T) {
	env := testenv.Get(t)
	ts := startServer(t, startManager(t, env.Config, nil), func(o *Options) { o.MaxMessageBytes = 1024 })
	c := dial(t, ts)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	big := `{"type":"subscribe","id":"x","resource":"pods","labelSelector":"` + strings.Repeat("a", 2048) + `"}`
	if err := c.c.Write(ctx, websocket.MessageText, []byte(big)); err != nil {
		t.Fatal(err)
	}
	if code := c.closeStatus(); code != websocket.StatusMessageTooBig {
		t.Fatalf("close code = %d, want 1009", code)
	}
	testenv.Eventually(t, "the socket to be closed", func() bool { return ts.Sockets() == 0 })
	if n := counterValue(ts.metrics.closes.WithLabelValues(closeTooBig)); n != 1 {
		t.Fatalf("too_big closes = %v", n)
	}
}

// checkRefusal checks that a refused handshake was answered with a
// complete Status, as every other error is.
func checkRefusal(t *testing.T, resp *http.Response, code int, reason metav1.StatusReason, msg string) {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var st metav1.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("body is not a Status: %v", err)
	}
	if st.Kind != "Status" || st.APIVersion != "v1" || st.Status != metav1.StatusFailure || st.Code != int32(code) ||
		(reason != "" && st.Reason != reason) || st.Reason == "" || !strings.Contains(st.Message, msg) {
		t.Fatalf("status %+v; want a complete %d %s mentioning %q", st, code, reason, msg)
	}
}

func TestHandshake(t *testing.T) {
	env := testenv.Get(t)
	ts := startServer(t, startManager(t, env.Config, nil), func(o *Options) {
		o.AllowedOrigins = []string{"dashboard.example.com"}
	})

	t.Run("without kubegate.v1", func(t *testing.T) {
		_, resp, err := dialOpts(t, ts, nil, "chat")
		if err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("dial: %v, response %v; want 400", err, resp)
		}
		var st metav1.Status
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || !strings.Contains(st.Message, "kubegate.v1") {
			t.Fatalf("body: %+v %v", st, err)
		}
	})
	t.Run("plain HTTP", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, ts.http.URL, nil)
		req.Header.Set("Sec-WebSocket-Protocol", Subprotocol)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusUpgradeRequired {
			t.Fatalf("status %d, want 426", resp.StatusCode)
		}
		checkRefusal(t, resp, http.StatusUpgradeRequired, "", "Upgrade")
	})
	t.Run("token protocol is never selected", func(t *testing.T) {
		tok := "base64url.bearer.authorization.k8s.io.c2VjcmV0"
		c, resp, err := dialOpts(t, ts, nil, tok, Subprotocol)
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		if got := resp.Header.Get("Sec-WebSocket-Protocol"); got != Subprotocol {
			t.Fatalf("selected %q", got)
		}
	})
	for origin, ok := range map[string]bool{
		"https://dashboard.example.com": true,
		"https://evil.example.com":      false,
		"null":                          false,
	} {
		t.Run("origin "+origin, func(t *testing.T) {
			c, resp, err := dialOpts(t, ts, http.Header{"Origin": {origin}})
			if ok {
				if err != nil {
					t.Fatal(err)
				}
				c.CloseNow()
				return
			}
			if err == nil {
				c.CloseNow()
				t.Fatal("cross-site handshake accepted")
			}
			if resp == nil || resp.StatusCode != http.StatusForbidden {
				t.Fatalf("response %v, want 403", resp)
			}
			checkRefusal(t, resp, http.StatusForbidden, metav1.StatusReasonForbidden, "websocket.allowedOrigins")
		})
	}
	t.Run("same host", func(t *testing.T) {
		c, _, err := dialOpts(t, ts, http.Header{"Origin": {ts.http.URL}})
		if err != nil {
			t.Fatal(err)
		}
		c.CloseNow()
	})
	t.Run("frame right behind the handshake", func(t *testing.T) {
		// net/http reads the frame along with the handshake; the socket's
		// own buffers must still deliver it.
		nc, err := net.Dial("tcp", ts.http.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		if err := nc.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
			t.Fatal(err)
		}
		handshake := "GET / HTTP/1.1\r\nHost: gateway\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
			"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
			"Sec-WebSocket-Protocol: " + Subprotocol + "\r\n\r\n"
		early := maskedTextFrame(`{"type":"unsubscribe","id":"early"}`)
		if _, err := nc.Write(append([]byte(handshake), early...)); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(nc)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("handshake: %v %v", resp, err)
		}
		hdr := make([]byte, 2)
		if _, err := io.ReadFull(br, hdr); err != nil {
			t.Fatal(err)
		}
		if hdr[0] != 0x81 || hdr[1] > 126 {
			t.Fatalf("frame header % x, want an unfragmented text frame under 64 KiB", hdr)
		}
		size := int(hdr[1])
		if size == 126 {
			if _, err := io.ReadFull(br, hdr); err != nil {
				t.Fatal(err)
			}
			size = int(binary.BigEndian.Uint16(hdr))
		}
		payload := make([]byte, size)
		if _, err := io.ReadFull(br, payload); err != nil {
			t.Fatal(err)
		}
		var f frame
		if err := json.Unmarshal(payload, &f); err != nil || f.Type != "error" || f.ID != "early" || f.Status == nil || f.Status.Code != http.StatusNotFound {
			t.Fatalf("answer %s (%v), want a 404 error frame for \"early\"", payload, err)
		}
	})
}

// maskedTextFrame encodes a short text message as a client sends it.
func maskedTextFrame(msg string) []byte {
	key := [4]byte{1, 2, 3, 4}
	b := append([]byte{0x81, 0x80 | byte(len(msg))}, key[:]...)
	for i := range len(msg) {
		b = append(b, msg[i]^key[i%4])
	}
	return b
}

// TestSocketLimits: a client gets at most MaxSocketsPerClient sockets
// (1008 beyond). At MaxSockets, a newcomer holding fewer sockets than
// the client holding the most is admitted, and that client gives up its
// newest idle socket (1013, saying why), keeping the one with a
// subscription; when every client holds about as many, the newcomer is
// refused (1013).
func TestSocketLimits(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ts := startServer(t, startManager(t, env.Config, nil), func(o *Options) {
		o.MaxSockets = 3
		o.MaxSocketsPerClient = 2
	})
	idle := dialAs(t, ts, "alice")
	busy := dialAs(t, ts, "alice")
	busy.send(map[string]any{"type": "subscribe", "id": "s", "resource": "configmaps", "namespace": ns})
	busy.snapshot("s")
	testenv.Eventually(t, "two sockets", func() bool { return ts.Sockets() == 2 })
	if code := dialAs(t, ts, "alice").closeStatus(); code != websocket.StatusPolicyViolation {
		t.Fatalf("third socket of alice: close %d, want 1008", code)
	}
	dialAs(t, ts, "bob")
	testenv.Eventually(t, "three sockets", func() bool { return ts.Sockets() == 3 })

	carol := dialAs(t, ts, "carol")
	carol.send(map[string]any{"type": "subscribe", "id": "s", "resource": "configmaps", "namespace": ns})
	carol.snapshot("s")
	_, err := idle.read(30 * time.Second)
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusTryAgainLater || !strings.Contains(ce.Reason, "to make room for another client") {
		t.Fatalf("alice's idle socket: %v, want close 1013 saying why", err)
	}
	busy.send(map[string]any{"type": "unsubscribe", "id": "s"})
	busy.expect("ack", "s")
	if code := dialAs(t, ts, "dave").closeStatus(); code != websocket.StatusTryAgainLater {
		t.Fatalf("a socket over the total, every client holding one: close %d, want 1013", code)
	}
	testenv.Eventually(t, "three sockets", func() bool { return ts.Sockets() == 3 })
	for reason, want := range map[string]float64{"max_sockets_per_client": 1, "max_sockets": 1} {
		if n := counterValue(ts.metrics.rejected.WithLabelValues(reason)); n != want {
			t.Errorf("rejected %s = %v, want %v", reason, n, want)
		}
	}
	if n := counterValue(ts.metrics.evicted); n != 1 {
		t.Errorf("evicted = %v, want 1", n)
	}
}

// TestClientThatDoesNotReadItsAnswersIsDropped: a client that keeps
// sending bad requests without reading the error frames cannot make the
// server queue answers without bound.
func TestClientThatDoesNotReadItsAnswersIsDropped(t *testing.T) {
	env := testenv.Get(t)
	ts := startServer(t, startManager(t, env.Config, nil), func(o *Options) { o.PingInterval = time.Hour })
	c := dialSmallReceiveBuffer(t, ts)
	frame := []byte(`{"type":"unsubscribe","id":"` + strings.Repeat("n", 100) + `"}`)
	for i := 0; ; i++ {
		if i == 1_000_000 {
			t.Fatal("still connected after a million unanswered requests")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := c.c.Write(ctx, websocket.MessageText, frame)
		cancel()
		if err != nil {
			break
		}
		if counterValue(ts.metrics.closes.WithLabelValues(closeFlood)) == 1 {
			break
		}
	}
	testenv.Eventually(t, "the flood close to be counted", func() bool {
		return counterValue(ts.metrics.closes.WithLabelValues(closeFlood)) == 1 && ts.Sockets() == 0
	})
}

// TestClientSocketsShareOneResyncBudget: the resync budget is the
// client's, not the socket's, so opening more sockets does not buy more
// resyncs; it is freed with the client's last socket.
func TestClientSocketsShareOneResyncBudget(t *testing.T) {
	env := testenv.Get(t)
	ts := startServer(t, startManager(t, env.Config, nil), nil)
	a1, a2, b := dialAs(t, ts, "alice"), dialAs(t, ts, "alice"), dialAs(t, ts, "bob")
	testenv.Eventually(t, "three sockets", func() bool { return ts.Sockets() == 3 })
	budgets := map[string]map[*informer.ResyncBudget]int{}
	ts.mu.Lock()
	for sock := range ts.sockets {
		if budgets[sock.client] == nil {
			budgets[sock.client] = map[*informer.ResyncBudget]int{}
		}
		budgets[sock.client][sock.budget]++
	}
	ts.mu.Unlock()
	alice, bob := budgets["user:alice"], budgets["user:bob"]
	if len(alice) != 1 || len(bob) != 1 {
		t.Fatalf("budgets per client: alice %v, bob %v; want one each", alice, bob)
	}
	for ab := range alice {
		if alice[ab] != 2 || bob[ab] != 0 || ab == nil {
			t.Fatalf("alice's two sockets must share one budget, not bob's: alice %v, bob %v", alice, bob)
		}
	}
	for _, c := range []*client{a1, a2, b} {
		_ = c.c.Close(websocket.StatusNormalClosure, "")
	}
	testenv.Eventually(t, "no sockets", func() bool { return ts.Sockets() == 0 })
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if len(ts.perClient) != 0 {
		t.Fatalf("%d clients kept after their sockets closed", len(ts.perClient))
	}
}
