package ws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap/zaptest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"kubegate/internal/auth"
	"kubegate/internal/informer"
	"kubegate/internal/livequery/wire"
	"kubegate/internal/testenv"
)

func TestMain(m *testing.M) {
	if os.Getenv(envIdleURL) != "" {
		os.Exit(runIdleClients()) // the client process of BenchmarkIdleSocket
	}
	testenv.Main(m, testenv.Options{})
}

// startManager runs an informer Manager against the test apiserver until
// the test ends.
func startManager(t testing.TB, cfg *rest.Config, mod func(*informer.Options)) *informer.Manager {
	t.Helper()
	opts := informer.Options{Config: cfg, Logger: zaptest.NewLogger(t).Named("informer")}
	if mod != nil {
		mod(&opts)
	}
	m, err := informer.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Manager.Start: %v", err)
		}
	})
	return m
}

// testServer is a ws.Server behind httptest, optionally with a user set
// in the request context as the HTTP server's authenticate middleware
// would.
type testServer struct {
	*Server
	http *httptest.Server
	url  string
	reg  *prometheus.Registry
	stop func() // cancels Start and waits for it
}

func startServer(t testing.TB, m *informer.Manager, mod func(*Options)) *testServer {
	t.Helper()
	reg := prometheus.NewRegistry()
	log := zaptest.NewLogger(t)
	opts := Options{Manager: m, Logger: log.Named("ws"), Registerer: reg}
	if mod != nil {
		mod(&opts)
	}
	if opts.Tables == nil {
		opts.Tables = wire.NewTables(m, log.Named("livequery"), wire.ViewLimits{})
		// Stopped after the server (cleanups run last first), as the
		// gateway stops them after the sockets.
		t.Cleanup(opts.Tables.Run())
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{Server: s, reg: reg}
	ts.http = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if name := r.Header.Get("X-Test-User"); name != "" {
			r = r.WithContext(auth.WithUser(r.Context(), &auth.User{Name: name}))
		}
		s.ServeHTTP(w, r)
	}))
	ts.url = "ws" + strings.TrimPrefix(ts.http.URL, "http")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	var once sync.Once
	ts.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Server.Start: %v", err)
			}
			ts.http.Close()
		})
	}
	t.Cleanup(ts.stop)
	return ts
}

// client is a test WebSocket client that reads frames one at a time,
// unpacking batches.
type client struct {
	t       testing.TB
	c       *websocket.Conn
	pending []frame
}

// frame is any server frame, decoded loosely for assertions.
type frame struct {
	Type       string            `json:"type"`
	ID         string            `json:"id"`
	RV         string            `json:"rv"`
	Request    string            `json:"request"`
	Reason     string            `json:"reason"`
	Ended      bool              `json:"ended"`
	Status     *metav1.Status    `json:"status"`
	Resource   *resourceRef      `json:"resource"`
	Namespaces []string          `json:"namespaces"`
	Object     json.RawMessage   `json:"object"`
	Row        json.RawMessage   `json:"row"`
	Columns    []column          `json:"columns"`
	Events     []json.RawMessage `json:"events"`
	// A window's ack and WINDOW frames.
	Sort   string   `json:"sort"`
	Order  string   `json:"order"`
	Cursor string   `json:"cursor"`
	Ops    []wireOp `json:"ops"`
}

// column is a row column in the ack of a subscription with rows, as
// docs/protocol.md describes it.
type column struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Format      string `json:"format"`
	Description string `json:"description"`
	Priority    int32  `json:"priority"`
	Relative    bool   `json:"relative"`
}

func (f frame) name() string {
	if f.Row != nil {
		var r struct{ Name string }
		_ = json.Unmarshal(f.Row, &r)
		return r.Name
	}
	var o struct {
		Metadata struct{ Name string } `json:"metadata"`
	}
	_ = json.Unmarshal(f.Object, &o)
	return o.Metadata.Name
}

func (f frame) String() string {
	switch {
	case f.Status != nil:
		return fmt.Sprintf("%s %s %d %s", f.Type, f.ID, f.Status.Code, f.Status.Message)
	case f.Object != nil || f.Row != nil:
		return fmt.Sprintf("%s %s %s@%s", f.Type, f.ID, f.name(), f.RV)
	}
	return fmt.Sprintf("%s %s %s%s", f.Type, f.ID, f.Request, f.Reason)
}

func dialOpts(t testing.TB, ts *testServer, h http.Header, protocols ...string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	if protocols == nil {
		protocols = []string{Subprotocol}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return websocket.Dial(ctx, ts.url, &websocket.DialOptions{Subprotocols: protocols, HTTPHeader: h})
}

func dial(t testing.TB, ts *testServer) *client {
	t.Helper()
	return dialAs(t, ts, "")
}

func dialAs(t testing.TB, ts *testServer, user string) *client {
	t.Helper()
	h := http.Header{}
	if user != "" {
		h.Set("X-Test-User", user)
	}
	c, _, err := dialOpts(t, ts, h)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	c.SetReadLimit(-1)
	t.Cleanup(func() { _ = c.CloseNow() })
	return &client{t: t, c: c}
}

func (c *client) send(v any) {
	c.t.Helper()
	var b []byte
	switch v := v.(type) {
	case string:
		b = []byte(v)
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			c.t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.c.Write(ctx, websocket.MessageText, b); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

func (c *client) subscribe(id, resource, namespace string, extra ...func(map[string]any)) {
	c.t.Helper()
	m := map[string]any{"type": "subscribe", "id": id, "resource": resource}
	if namespace != "" {
		m["namespace"] = namespace
	}
	for _, e := range extra {
		e(m)
	}
	c.send(m)
}

// next returns the next frame, failing the test after 30s (a failure
// bound, not a delay).
func (c *client) next() frame {
	c.t.Helper()
	f, err := c.read(30 * time.Second)
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	return f
}

func (c *client) read(timeout time.Duration) (frame, error) {
	for len(c.pending) == 0 {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		typ, data, err := c.c.Read(ctx)
		cancel()
		if err != nil {
			return frame{}, err
		}
		if typ != websocket.MessageText {
			return frame{}, errors.New("binary message from server")
		}
		var f frame
		if err := json.Unmarshal(data, &f); err != nil {
			return frame{}, fmt.Errorf("server sent invalid JSON %q: %w", data, err)
		}
		if f.Type != "batch" {
			c.pending = append(c.pending, f)
			continue
		}
		if len(f.Events) < 2 {
			return frame{}, fmt.Errorf("batch of %d frames", len(f.Events))
		}
		for _, raw := range f.Events {
			var e frame
			if err := json.Unmarshal(raw, &e); err != nil {
				return frame{}, err
			}
			if e.Type == "batch" {
				return frame{}, errors.New("nested batch")
			}
			c.pending = append(c.pending, e)
		}
	}
	f := c.pending[0]
	c.pending = c.pending[1:]
	return f, nil
}

// expect reads the next frame and checks its type and id.
func (c *client) expect(typ, id string) frame {
	c.t.Helper()
	f := c.next()
	if f.Type != typ || f.ID != id {
		c.t.Fatalf("got frame %v, want %s for %q", f, typ, id)
	}
	return f
}

// snapshot reads the ack, a snapshot and its end marker for id, and returns
// the names in the snapshot and the marker's rv.
func (c *client) snapshot(id string) (names []string, rv string) {
	c.t.Helper()
	c.expect("ack", id)
	return c.snapshotBody(id)
}

func (c *client) snapshotBody(id string) (names []string, rv string) {
	c.t.Helper()
	for {
		f := c.next()
		switch {
		case f.ID == id && f.Type == "ADDED":
			names = append(names, f.name())
		case f.ID == id && f.Type == "END_OF_SNAPSHOT":
			return names, f.RV
		default:
			c.t.Fatalf("in snapshot of %q: unexpected frame %v", id, f)
		}
	}
}

// closeStatus reads until the connection ends and returns its close code.
func (c *client) closeStatus() websocket.StatusCode {
	c.t.Helper()
	for {
		_, err := c.read(30 * time.Second)
		if err != nil {
			return websocket.CloseStatus(err)
		}
	}
}

func counterValue(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	if m.Gauge != nil {
		return m.Gauge.GetValue()
	}
	return m.Counter.GetValue()
}

// fakeClock is a clocktesting.FakeClock for a socket's timers, which a
// test steps by hand. Two things differ:
//
//   - Its AfterFunc timers can be Reset after they fired, as the socket
//     re-arms its ping and re-authorization timers. FakeClock sends each
//     firing's time on the timer's channel, of capacity one, even for
//     AfterFunc timers, whose channel nobody reads: the second firing of
//     a timer Reset after the first would block Step forever.
//   - With realDelays, NewTimer runs in real time. The socket uses
//     NewTimer only for its writer's coalescing delay, so writers go on
//     sending (and exit) as in a gateway while the test steps keepalive
//     and re-authorization.
type fakeClock struct {
	*clocktesting.FakeClock
	realDelays bool
}

func newFakeClock() *fakeClock { return &fakeClock{FakeClock: clocktesting.NewFakeClock(time.Now())} }

func (c *fakeClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return drainingTimer{c.FakeClock.AfterFunc(d, f)}
}

func (c *fakeClock) NewTimer(d time.Duration) clock.Timer {
	if c.realDelays {
		return clock.RealClock{}.NewTimer(d)
	}
	return c.FakeClock.NewTimer(d)
}

// stepArmed advances the clock by d once at least armed timers wait on
// it. A pass that re-arms its timer when done (keepalive,
// re-authorization) has then finished, so the step is not lost on a
// timer that is not armed yet.
func (c *fakeClock) stepArmed(t *testing.T, armed int, d time.Duration) {
	t.Helper()
	c.waitArmed(t, armed)
	c.Step(d)
}

// waitArmed returns once at least armed timers wait on the clock.
func (c *fakeClock) waitArmed(t *testing.T, armed int) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("%d timers to be armed", armed), func() bool { return c.Waiters() >= armed })
}

type drainingTimer struct{ clock.Timer }

func (t drainingTimer) Reset(d time.Duration) bool {
	select {
	case <-t.C():
	default:
	}
	return t.Timer.Reset(d)
}
