package ws

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"kubegate/internal/informer"
	"kubegate/internal/testenv"
)

func createCM(t *testing.T, ns, name string, labels map[string]string) *corev1.ConfigMap {
	t.Helper()
	cm, err := testenv.Get(t).Client.CoreV1().ConfigMaps(ns).Create(context.Background(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

func updateCM(t *testing.T, cm *corev1.ConfigMap, data string) *corev1.ConfigMap {
	t.Helper()
	cm = cm.DeepCopy()
	cm.Data = map[string]string{"v": data}
	cm, err := testenv.Get(t).Client.CoreV1().ConfigMaps(cm.Namespace).Update(context.Background(), cm, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

func deleteCM(t *testing.T, ns, name string) {
	t.Helper()
	if err := testenv.Get(t).Client.CoreV1().ConfigMaps(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestSnapshotThenLiveEventsInOrder(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	for _, n := range []string{"a", "b", "c"} {
		createCM(t, ns, n, nil)
	}
	ts := startServer(t, startManager(t, env.Config, nil), nil)
	c := dial(t, ts)
	c.subscribe("cms", "cm", ns)

	ack := c.expect("ack", "cms")
	if ack.Request != "subscribe" || ack.Resource == nil || ack.Resource.Resource != "configmaps" || ack.Resource.Kind != "ConfigMap" || !ack.Resource.Namespaced {
		t.Fatalf("ack = %+v (resource %+v)", ack, ack.Resource)
	}
	names, rv := c.snapshotBody("cms")
	slices.Sort(names)
	if !slices.Equal(names, []string{"a", "b", "c"}) || rv == "" || rv == "0" {
		t.Fatalf("snapshot = %v at rv %q", names, rv)
	}

	d := createCM(t, ns, "d", nil)
	d = updateCM(t, d, "1")
	deleteCM(t, ns, "d")
	var got []string
	for len(got) < 3 {
		f := c.next()
		if f.ID != "cms" || f.name() != "d" {
			t.Fatalf("unexpected frame %v", f)
		}
		got = append(got, f.Type)
		if f.Type == "MODIFIED" && f.RV != d.ResourceVersion {
			t.Errorf("MODIFIED rv = %s, want %s", f.RV, d.ResourceVersion)
		}
	}
	if want := []string{"ADDED", "MODIFIED", "DELETED"}; !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
}

func TestSubscriptionsAreMultiplexedAndUnsubscribeStopsOne(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ts := startServer(t, startManager(t, env.Config, nil), nil)
	c := dial(t, ts)
	c.subscribe("web", "configmaps", ns, func(m map[string]any) { m["labelSelector"] = "app=web" })
	c.snapshot("web")
	c.subscribe("db", "configmaps", ns, func(m map[string]any) { m["labelSelector"] = "app=db" })
	c.snapshot("db")
	c.subscribe("names", "configmaps", "", func(m map[string]any) {
		m["fieldSelector"] = "metadata.namespace=" + ns + ",metadata.name=w2"
		m["sendInitialEvents"] = false
	})
	c.expect("ack", "names")

	createCM(t, ns, "w1", map[string]string{"app": "web"})
	createCM(t, ns, "d1", map[string]string{"app": "db"})
	createCM(t, ns, "w2", map[string]string{"app": "web"})
	want := map[string][]string{"web": {"w1", "w2"}, "db": {"d1"}, "names": {"w2"}}
	got := map[string][]string{}
	for range 4 {
		f := c.next()
		if f.Type != "ADDED" {
			t.Fatalf("unexpected frame %v", f)
		}
		got[f.ID] = append(got[f.ID], f.name())
	}
	for id, w := range want {
		if !slices.Equal(got[id], w) {
			t.Errorf("subscription %s got %v, want %v", id, got[id], w)
		}
	}

	c.send(`{"type":"unsubscribe","id":"web"}`)
	if f := c.expect("ack", "web"); f.Request != "unsubscribe" {
		t.Fatalf("unsubscribe ack = %v", f)
	}
	createCM(t, ns, "w3", map[string]string{"app": "web"})
	createCM(t, ns, "d2", map[string]string{"app": "db"})
	if f := c.expect("ADDED", "db"); f.name() != "d2" {
		t.Fatalf("after unsubscribe: %v", f)
	}
	// The id is free again.
	c.subscribe("web", "configmaps", ns, func(m map[string]any) { m["labelSelector"] = "app=web" })
	names, _ := c.snapshot("web")
	slices.Sort(names)
	if !slices.Equal(names, []string{"w1", "w2", "w3"}) {
		t.Fatalf("re-subscribed snapshot = %v", names)
	}
}

func TestResumeContinuesWithoutSnapshot(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	createCM(t, ns, "old", nil)
	ts := startServer(t, startManager(t, env.Config, nil), nil)
	c := dial(t, ts)
	c.subscribe("s", "configmaps", ns)
	_, rv := c.snapshot("s")
	_ = c.c.Close(websocket.StatusNormalClosure, "")

	// Missed while disconnected.
	x := createCM(t, ns, "x", nil)
	updateCM(t, x, "1")

	c2 := dial(t, ts)
	c2.subscribe("s", "configmaps", ns, func(m map[string]any) { m["resourceVersion"] = rv })
	c2.expect("ack", "s")
	if f := c2.next(); f.Type != "ADDED" || f.name() != "x" {
		t.Fatalf("first resumed frame = %v, want ADDED x", f)
	}
	if f := c2.next(); f.Type != "MODIFIED" || f.name() != "x" {
		t.Fatalf("second resumed frame = %v, want MODIFIED x", f)
	}
	// Live changes follow; no snapshot was sent.
	createCM(t, ns, "y", nil)
	if f := c2.next(); f.Type != "ADDED" || f.name() != "y" {
		t.Fatalf("live frame = %v, want ADDED y", f)
	}
}

func TestExpiredResumeGetsResetAndSnapshot(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	m := startManager(t, env.Config, func(o *informer.Options) { o.HistoryEvents = 2 })
	ts := startServer(t, m, nil)
	c := dial(t, ts)
	c.subscribe("s", "configmaps", ns)
	_, rv := c.snapshot("s")
	for i := range 5 {
		createCM(t, ns, fmt.Sprint("cm-", i), nil)
	}
	for range 5 {
		c.expect("ADDED", "s") // the gateway has seen them all
	}

	c2 := dial(t, ts)
	c2.subscribe("s", "configmaps", ns, func(m map[string]any) { m["resourceVersion"] = rv })
	c2.expect("ack", "s")
	if f := c2.expect("RESET", "s"); f.Reason != "Expired" {
		t.Fatalf("RESET reason = %q", f.Reason)
	}
	names, _ := c2.snapshotBody("s")
	if len(names) != 5 {
		t.Fatalf("snapshot after RESET = %v", names)
	}
}

func TestResyncArrivesAtItsPeriod(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	createCM(t, ns, "a", nil)
	m := startManager(t, env.Config, func(o *informer.Options) {
		o.MinResync = 100 * time.Millisecond
		o.ResyncCheckPeriod = 20 * time.Millisecond
	})
	ts := startServer(t, m, nil)
	c := dial(t, ts)
	c.subscribe("fast", "configmaps", ns, func(m map[string]any) { m["resyncPeriod"] = "200ms" })
	c.snapshot("fast")
	c.subscribe("slow", "configmaps", ns, func(m map[string]any) { m["resyncPeriod"] = "1s" })
	c.snapshot("slow")
	c.subscribe("none", "configmaps", ns)
	c.snapshot("none")
	// By the slow subscription's first resync, the fast one has had
	// several (about five); the one without resync has had none.
	fast := 0
	for {
		f := c.next()
		if f.Type != "SYNC" || f.name() != "a" {
			t.Fatalf("got %v, want only SYNC frames of a", f)
		}
		if f.ID == "none" {
			t.Fatalf("SYNC for a subscription without resync")
		}
		if f.ID == "slow" {
			break
		}
		fast++
	}
	if fast < 2 {
		t.Fatalf("%d resyncs of the 200ms subscription before the first of the 1s one", fast)
	}
}

func TestNeverReadingClientDoesNotBlockOthers(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	// Enough object bytes to fill the never-reading client's TCP buffers.
	big := strings.Repeat("x", 512<<10)
	cms := env.Client.CoreV1().ConfigMaps(ns)
	t.Cleanup(func() {
		// Namespaces are never emptied without a controller-manager; free
		// the bytes so later tests' informers do not list them.
		_ = cms.DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	for i := range 16 {
		if _, err := cms.Create(context.Background(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("big-", i)}, Data: map[string]string{"x": big},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ts := startServer(t, startManager(t, env.Config, nil), func(o *Options) {
		o.WriteTimeout = 500 * time.Millisecond
		o.ListenerMaxEvents = 4
		o.PingInterval = time.Hour // isolate the write deadline from keepalive
	})

	stuck := dial(t, ts)
	stuck.subscribe("s", "configmaps", ns) // and never reads again
	healthy := dial(t, ts)
	healthy.subscribe("h", "configmaps", ns, func(m map[string]any) { m["labelSelector"] = "small" })
	healthy.snapshot("h")

	cm := createCM(t, ns, "tick", map[string]string{"small": "true"})
	healthy.expect("ADDED", "h")
	for i := range 20 {
		cm = updateCM(t, cm, fmt.Sprint(i))
		if f := healthy.expect("MODIFIED", "h"); f.RV != cm.ResourceVersion {
			t.Fatalf("healthy client got rv %s, want %s", f.RV, cm.ResourceVersion)
		}
	}
	testenv.Eventually(t, "the stuck socket to be dropped", func() bool {
		return counterValue(ts.metrics.closes.WithLabelValues(closeWriteTimeout)) == 1 && ts.Sockets() == 1
	})
	// The healthy client is still served.
	updateCM(t, cm, "after")
	healthy.expect("MODIFIED", "h")
}

func TestShutdownClosesWithGoingAway(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ts := startServer(t, startManager(t, env.Config, nil), nil)
	var clients []*client
	for i := range 3 {
		c := dial(t, ts)
		c.subscribe(fmt.Sprint(i), "configmaps", ns)
		c.snapshot(fmt.Sprint(i))
		clients = append(clients, c)
	}
	codes := make(chan websocket.StatusCode, len(clients))
	for _, c := range clients {
		go func() {
			for {
				if _, _, err := c.c.Read(context.Background()); err != nil {
					codes <- websocket.CloseStatus(err)
					return
				}
			}
		}()
	}
	ts.stop() // returns once every socket is gone
	if n := ts.Sockets(); n != 0 {
		t.Fatalf("%d sockets left after Start returned", n)
	}
	for range clients {
		if code := <-codes; code != websocket.StatusGoingAway {
			t.Fatalf("close code = %d, want 1001", code)
		}
	}
	if n := counterValue(ts.metrics.closes.WithLabelValues(closeShutdown)); n != 3 {
		t.Fatalf("shutdown closes = %v, want 3", n)
	}
}

// TestClientThatKeepsFallingBehindIsClosed: a client that reads, but too
// slowly for the change rate, overflows into RESET and a snapshot again
// and again; after MaxSlowResets, each within SlowResetWindow of the one
// before, it is closed with 4001.
func TestClientThatKeepsFallingBehindIsClosed(t *testing.T) {
	t.Run("stops reading at each RESET", func(t *testing.T) {
		fallBehind(t, false, 0)
	})
	// Reading each snapshot to its end is not catching up: each RESET
	// costs another snapshot.
	t.Run("reads each snapshot to its end", func(t *testing.T) {
		fallBehind(t, true, 0)
	})
	// RESETs further apart than SlowResetWindow start the count afresh.
	t.Run("falls behind once a window", func(t *testing.T) {
		fallBehind(t, false, time.Minute+time.Second)
	})
}

// fallBehind drives a client into overflow RESETs round after round,
// reading up to each RESET (and the snapshot after it, if readSnapshot)
// before it stops reading again. With a gap, the gateway's clock moves
// on by gap between rounds and the client must never be closed;
// otherwise it must be closed with 4001 after MaxSlowResets.
func fallBehind(t *testing.T, readSnapshot bool, gap time.Duration) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	big := strings.Repeat("x", 700<<10)
	cms := env.Client.CoreV1().ConfigMaps(ns)
	t.Cleanup(func() {
		_ = cms.DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	// A snapshot larger than the TCP buffers, so that the writer blocks
	// on it while the client does not read.
	for i := range 12 {
		if _, err := cms.Create(context.Background(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("big-", i)}, Data: map[string]string{"x": big},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tick, err := cms.Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "tick"}, Data: map[string]string{"x": big},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clk := &fakeClock{FakeClock: clocktesting.NewFakeClock(time.Now()), realDelays: true}
	ts := startServer(t, startManager(t, env.Config, nil), func(o *Options) {
		o.ListenerMaxEvents = 2
		o.WriteTimeout = time.Minute
		o.PingInterval = time.Hour
		o.RecheckInterval = time.Hour
		o.clock = clk
	})
	// A fixed, small receive buffer: the kernel would otherwise grow it
	// (up to tens of MiB) as the client reads, and the client would stop
	// falling behind.
	c := dialSmallReceiveBuffer(t, ts)
	c.subscribe("s", "configmaps", ns)

	listener := func() *informer.Listener {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		for sock := range ts.sockets {
			sock.mu.Lock()
			defer sock.mu.Unlock()
			if sub := sock.subs["s"]; sub != nil {
				l, _ := sub.l.(*informer.Listener) // nil while pending
				return l
			}
		}
		return nil
	}
	testenv.Eventually(t, "the subscription to start", func() bool { return listener() != nil })
	l := listener()
	// The first message (the ack and the start of the snapshot) shows the
	// writer has taken the snapshot; the rest of it blocks the writer.
	if f := c.next(); f.Type != "ack" {
		t.Fatalf("first frame %v", f)
	}
	// read reads messages until one holds want; false when the socket
	// was closed with 4001.
	read := func(round int, want string) bool {
		t.Helper()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, data, err := c.c.Read(ctx)
			cancel()
			if err != nil {
				if code := websocket.CloseStatus(err); code != 4001 {
					t.Fatalf("round %d: %v, want close 4001", round, err)
				}
				return false
			}
			if strings.Contains(string(data), want) {
				return true
			}
		}
	}
	// Each round: overflow the subscription while the writer is blocked,
	// then read up to the RESET that follows, and stop reading again.
	resets := 0
	rounds := 10
	if gap > 0 {
		rounds = ts.opts.MaxSlowResets + 2
	}
	for round := 1; round <= rounds; round++ {
		if gap > 0 && round > 1 {
			clk.Step(gap)
		}
		// Large changes fill whatever the TCP buffers still take; once the
		// writer is blocked, they overflow the subscription's bound.
		for i := 0; !l.Overflowed(); i++ {
			if i == 100 {
				t.Fatalf("round %d: no overflow after %d changes", round, i)
			}
			tick = tick.DeepCopy()
			tick.Data["i"] = fmt.Sprint(round, "-", i)
			if tick, err = cms.Update(context.Background(), tick, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		open := read(round, `{"type":"RESET","id":"s","reason":"Overflow"}`)
		if open && readSnapshot {
			open = read(round, `"type":"END_OF_SNAPSHOT","id":"s"`)
		}
		if !open {
			if gap > 0 {
				t.Fatalf("closed after %d RESETs %v apart", resets, gap)
			}
			if resets < ts.opts.MaxSlowResets {
				t.Fatalf("closed after %d RESETs, want %d", resets, ts.opts.MaxSlowResets)
			}
			testenv.Eventually(t, "the slow_consumer close to be counted", func() bool {
				return counterValue(ts.metrics.closes.WithLabelValues(closeSlowConsumer)) == 1
			})
			return
		}
		resets++
	}
	if gap == 0 {
		t.Fatalf("not closed after %d overflow RESETs", resets)
	}
}

func dialSmallReceiveBuffer(t *testing.T, ts *testServer) *client {
	t.Helper()
	dialer := &net.Dialer{}
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			if err := conn.(*net.TCPConn).SetReadBuffer(128 << 10); err != nil {
				conn.Close()
				return nil, err
			}
			return conn, nil
		},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, ts.url, &websocket.DialOptions{Subprotocols: []string{Subprotocol}, HTTPClient: hc})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	c.SetReadLimit(-1)
	t.Cleanup(func() {
		_ = c.CloseNow()
		hc.CloseIdleConnections()
	})
	return &client{t: t, c: c}
}
