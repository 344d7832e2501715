package faults

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sync"

	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/coder/websocket"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"kubegate/internal/config"
	"kubegate/internal/gateway"
	"kubegate/internal/gateway/gatewaytest"
	"kubegate/internal/informer"
	"kubegate/internal/webhook"
)

// clientView is what one client holds, built from its events: name →
// resourceVersion. It records as errors any event a correct stream could
// not hold (ADDED for an object it holds, MODIFIED or DELETED for one it
// does not, a MODIFIED not newer than what it holds: a repeat or a
// reordering), and every version it was told of.
type clientView struct {
	name    string
	changed chan struct{} // signalled after each event
	mu      sync.Mutex
	state   map[string]uint64
	seen    map[string]map[uint64]bool
	errs    []string
}

func newClientView(name string, start map[string]uint64) *clientView {
	v := &clientView{name: name, changed: make(chan struct{}, 1), state: maps.Clone(start), seen: map[string]map[uint64]bool{}}
	if v.state == nil {
		v.state = map[string]uint64{}
	}
	return v
}

func rvOf(obj any) (string, uint64) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	cm := obj.(*corev1.ConfigMap)
	rv, _ := strconv.ParseUint(cm.ResourceVersion, 10, 64)
	return cm.Name, rv
}

// event records a config map event.
func (v *clientView) event(typ watch.EventType, obj any) {
	name, rv := rvOf(obj)
	v.record(typ, name, rv)
}

func (v *clientView) record(typ watch.EventType, name string, rv uint64) {
	defer func() {
		select {
		case v.changed <- struct{}{}:
		default:
		}
	}()
	v.mu.Lock()
	defer v.mu.Unlock()
	held, ok := v.state[name]
	switch {
	case typ == watch.Added && ok:
		v.errs = append(v.errs, fmt.Sprintf("ADDED %s@%d while holding it at %d", name, rv, held))
	case typ != watch.Added && !ok:
		v.errs = append(v.errs, fmt.Sprintf("%s %s@%d for an object it does not hold", typ, name, rv))
	case typ == watch.Modified && rv <= held:
		v.errs = append(v.errs, fmt.Sprintf("MODIFIED %s@%d not newer than %d (repeat or reorder)", name, rv, held))
	}
	if v.seen[name] == nil {
		v.seen[name] = map[uint64]bool{}
	}
	v.seen[name][rv] = true
	if typ == watch.Deleted {
		delete(v.state, name)
	} else {
		v.state[name] = rv
	}
}

// listenerClient is a consumer of an informer listener, kept in a view.
type listenerClient struct {
	view *clientView
	l    *informer.Listener
	wake chan struct{}
	buf  []informer.Notification
}

func newListenerClient(t *testing.T, name string, r *informer.Resource, opts informer.ListenerOptions, start map[string]uint64) *listenerClient {
	t.Helper()
	c := &listenerClient{view: newClientView(name, start), wake: make(chan struct{}, 1)}
	opts.Wake = c.wake
	l, err := r.AddListener(opts)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	c.l = l
	t.Cleanup(l.Stop)
	return c
}

var watchTypes = map[informer.NotificationType]watch.EventType{
	informer.Added: watch.Added, informer.Modified: watch.Modified, informer.Deleted: watch.Deleted,
}

func (c *listenerClient) apply() {
	c.buf = c.l.Pop(c.buf[:0])
	for _, n := range c.buf {
		switch {
		case n.Type == informer.Reset:
			c.view.fail("RESET; the test needs a listener that keeps up")
		case n.Object != nil:
			c.view.record(watchTypes[n.Type], n.Object.Name, n.RV)
		}
	}
}

func (c *listenerClient) converge(t *testing.T, want map[string]uint64) {
	t.Helper()
	c.view.converge(t, want, c.wake, c.apply)
}

func (v *clientView) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { v.event(watch.Added, obj) },
		UpdateFunc: func(_, obj any) { v.event(watch.Modified, obj) },
		DeleteFunc: func(obj any) { v.event(watch.Deleted, obj) },
	}
}

// converge waits until the view holds want, reporting its errors. While
// waiting it runs pump at each signal on wake, or waits for events
// recorded from elsewhere when wake is nil.
func (v *clientView) converge(t *testing.T, want map[string]uint64, wake <-chan struct{}, pump func()) {
	t.Helper()
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	for {
		v.mu.Lock()
		done, state := maps.Equal(v.state, want), maps.Clone(v.state)
		for _, e := range v.errs {
			t.Errorf("%s: %s", v.name, e)
		}
		v.errs = nil
		v.mu.Unlock()
		if done {
			return
		}
		select {
		case <-wake:
			pump()
		case <-v.changed:
		case <-deadline.C:
			t.Fatalf("%s: state %v, want %v", v.name, state, want)
		}
	}
}

func (v *clientView) fail(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.errs = append(v.errs, fmt.Sprintf(format, args...))
}

func (v *clientView) told(name string, rv uint64) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.seen[name][rv]
}

// startGateway runs the gateway as cmd/gateway builds it (gateway.New),
// reading from the apiserver through rc, with no authentication and every
// read allowed, until the test ends. Its one webhook sends the config
// maps of ns in the Kubernetes watch format to a receiver that keeps v.
// It returns the gateway's cache, a clientset for its REST API and its
// WebSocket URL.
func startGateway(t *testing.T, rc *rest.Config, log *zap.Logger, ns string, v *clientView) (*informer.Manager, kubernetes.Interface, string) {
	t.Helper()
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct {
			Type   watch.EventType   `json:"type"`
			Object *corev1.ConfigMap `json:"object"`
		}
		if err := json.NewDecoder(r.Body).Decode(&ev); err != nil || ev.Object == nil {
			v.fail("webhook body: %v", err)
			return
		}
		v.event(ev.Type, ev.Object)
	}))
	t.Cleanup(rcv.Close)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("whsec_"+base64.StdEncoding.EncodeToString(make([]byte, 32))), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := gatewaytest.Config()
	cfg.Auth.Authn, cfg.Auth.Authz = "none", "always-allow"
	cfg.ShutdownTimeout = config.Duration(5 * time.Second)
	cfg.Webhooks = []webhook.Spec{{Name: "relist", URL: rcv.URL, Format: "watch", SecretFile: secret,
		Resources:      []webhook.Resource{{Resource: "configmaps", Namespace: ns}},
		AllowAddresses: []string{"127.0.0.0/8"}}}
	g := gatewaytest.Start(t, cfg, gateway.Options{RESTConfig: rc, Logger: log})
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: g.URL(), QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	return g.Informers(), cs, "ws://" + g.Addr().String() + "/ws"
}

// wsFrame is a kubegate.v1 server frame, as docs/protocol.md gives it.
type wsFrame struct {
	Type   string          `json:"type"`
	ID     string          `json:"id"`
	RV     string          `json:"rv"`
	Object json.RawMessage `json:"object"`
	Events []wsFrame       `json:"events"`
	Status json.RawMessage `json:"status"`
}

// wsSub is one subscription over a WebSocket, kept by a reader goroutine
// into a clientView. It records its resume point as the protocol says: the
// rv of the last change or END_OF_SNAPSHOT processed, not of snapshot
// ADDED frames.
type wsSub struct {
	view   *clientView
	conn   *websocket.Conn
	done   chan struct{}
	mu     sync.Mutex
	resume string
	resets int
}

func dialSub(t *testing.T, url, ns, resourceVersion string, v *clientView) *wsSub {
	t.Helper()
	c, _, err := websocket.Dial(context.Background(), url, &websocket.DialOptions{Subprotocols: []string{"kubegate.v1"}})
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	c.SetReadLimit(64 << 20)
	s := &wsSub{view: v, conn: c, done: make(chan struct{}), resume: resourceVersion}
	sub, _ := json.Marshal(map[string]any{"type": "subscribe", "id": "cms", "resource": "configmaps",
		"namespace": ns, "resourceVersion": resourceVersion})
	if err := c.Write(context.Background(), websocket.MessageText, sub); err != nil {
		t.Fatal(err)
	}
	go s.read(resourceVersion == "")
	t.Cleanup(s.close)
	return s
}

func (s *wsSub) read(inSnapshot bool) {
	defer close(s.done)
	for {
		_, b, err := s.conn.Read(context.Background())
		if err != nil {
			return
		}
		var f wsFrame
		if err := json.Unmarshal(b, &f); err != nil {
			s.view.fail("bad frame %q: %v", b, err)
			return
		}
		for _, e := range append([]wsFrame{f}, f.Events...) {
			switch e.Type {
			case "ADDED", "MODIFIED", "DELETED":
				var cm corev1.ConfigMap
				if err := json.Unmarshal(e.Object, &cm); err != nil {
					s.view.fail("bad object %s: %v", e.Object, err)
					return
				}
				s.view.event(watch.EventType(e.Type), &cm)
				if !inSnapshot {
					s.setResume(e.RV)
				}
			case "END_OF_SNAPSHOT":
				inSnapshot = false
				s.setResume(e.RV)
			case "RESET":
				s.mu.Lock()
				s.resets++
				s.mu.Unlock()
				s.view.fail("RESET %s", b)
			case "error":
				s.view.fail("error frame %s", e.Status)
			}
		}
	}
}

func (s *wsSub) setResume(rv string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resume = rv
}

func (s *wsSub) resumePoint() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	rv, _ := strconv.ParseUint(s.resume, 10, 64)
	return rv
}

// close drops the socket and waits for the reader.
func (s *wsSub) close() {
	_ = s.conn.Close(websocket.StatusNormalClosure, "")
	<-s.done
}

// write is one change the test made. A delete's version is not returned
// to the client, so it is 0.
type write struct {
	name    string
	rv      uint64
	deleted bool
}

// deleteLog is a reference watch of kube-apiserver: the versions of the
// deletes of the config maps c0..c19 of a namespace, which the apiserver
// does not return to the client that deletes. It watches live from
// before the changes it must see, read by a goroutine of its own, and
// when a watch ends it watches again from the last version it saw: with
// the watch cache off and compaction every 2s (see TestMain), a watch
// started after the changes, from the first of them, may find them
// compacted (410 Expired) on a loaded machine, and so may one that falls
// behind. A delete's version cannot be guessed from the create after
// it: other writes (leases, say) may come between, and a relist may list
// at the delete's version itself, so that the delete is in the list and
// the create is the first change after it.
type deleteLog struct {
	cs   kubernetes.Interface
	ns   string
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	changed chan struct{} // signalled after each event
	last    uint64        // the version of the last event seen
	deletes []uint64      // of c0..c19, in order
	err     error         // why the log ended early
}

// watchDeletes starts a deleteLog for ns and returns once it watches live:
// it has seen a write made after its watch began (an update of the
// config map "reference", which it creates). A first watch that finds
// its starting version compacted already is started again.
func watchDeletes(t *testing.T, cs kubernetes.Interface, ns string) *deleteLog {
	t.Helper()
	ctx := context.Background()
	ref, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "reference"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for attempt := 1; ; attempt++ {
		l := &deleteLog{cs: cs, ns: ns, stop: make(chan struct{}), done: make(chan struct{}), changed: make(chan struct{}, 1)}
		l.last, _ = strconv.ParseUint(ref.ResourceVersion, 10, 64)
		go l.run()
		ref.Data = map[string]string{"attempt": strconv.Itoa(attempt)}
		if ref, err = cs.CoreV1().ConfigMaps(ns).Update(ctx, ref, metav1.UpdateOptions{}); err != nil {
			l.close()
			t.Fatal(err)
		}
		marker, _ := strconv.ParseUint(ref.ResourceVersion, 10, 64)
		err := l.wait(marker)
		if err == nil {
			t.Cleanup(l.close)
			return l
		}
		l.close()
		if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) || attempt == 5 {
			t.Fatalf("reference watch of %s, attempt %d: %v", ns, attempt, err)
		}
	}
}

// run watches from l.last until stopped, again after each watch that
// ends, and records the deletes.
func (l *deleteLog) run() {
	defer close(l.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-l.stop:
			cancel()
		case <-l.done:
		}
	}()
	for {
		l.mu.Lock()
		from := l.last
		l.mu.Unlock()
		w, err := l.cs.CoreV1().ConfigMaps(l.ns).Watch(ctx, metav1.ListOptions{ResourceVersion: strconv.FormatUint(from, 10)})
		if err != nil {
			if ctx.Err() == nil {
				l.end(fmt.Errorf("watch from %d: %w", from, err))
			}
			return
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				w.Stop()
				l.end(fmt.Errorf("watch from %d: %w", from, apierrors.FromObject(ev.Object)))
				return
			}
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok {
				w.Stop()
				l.end(fmt.Errorf("watch from %d: %s %T", from, ev.Type, ev.Object))
				return
			}
			rv, _ := strconv.ParseUint(cm.ResourceVersion, 10, 64)
			l.mu.Lock()
			l.last = max(l.last, rv)
			if ev.Type == watch.Deleted && strings.HasPrefix(cm.Name, "c") {
				l.deletes = append(l.deletes, rv)
			}
			l.mu.Unlock()
			select {
			case l.changed <- struct{}{}:
			default:
			}
		}
		if ctx.Err() != nil {
			return
		}
	}
}

func (l *deleteLog) end(err error) {
	l.mu.Lock()
	l.err = err
	l.mu.Unlock()
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// wait waits until the log has seen version rv, or ended.
func (l *deleteLog) wait(rv uint64) error {
	deadline := time.NewTimer(time.Minute) // a failure bound, not a period
	defer deadline.Stop()
	for {
		l.mu.Lock()
		last, err := l.last, l.err
		l.mu.Unlock()
		switch {
		case last >= rv:
			return nil
		case err != nil:
			return err
		}
		select {
		case <-l.changed:
		case <-deadline.C:
			return fmt.Errorf("the reference watch saw up to %d in a minute, not %d", last, rv)
		}
	}
}

func (l *deleteLog) close() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
}

// withDeleteVersions returns writes with the version of each delete, as
// the reference watch l saw them.
func withDeleteVersions(t *testing.T, l *deleteLog, writes []write) []write {
	t.Helper()
	if err := l.wait(writes[len(writes)-1].rv); err != nil {
		t.Fatalf("the reference watch of kube-apiserver, up to the last write: %v", err)
	}
	l.mu.Lock()
	deletes := slices.Clone(l.deletes)
	l.mu.Unlock()
	out := slices.Clone(writes)
	for i := range out {
		if out[i].deleted {
			if len(deletes) == 0 {
				t.Fatalf("more deletes written than the apiserver's watch shows")
			}
			out[i].rv, deletes = deletes[0], deletes[1:]
		}
	}
	return out
}

// writeBurst makes changes to the config maps c0..c19 of ns as fast as
// the apiserver takes them: mostly updates, and every 25th change deletes
// an object and creates it again; *written holds those made so far. mid
// is called after n/2 changes, each after every change; after n, it goes
// on while more() holds, up to 20n changes.
func writeBurst(t *testing.T, cs kubernetes.Interface, ns string, n int, written *[]write, mid, each func(), more func() bool) []write {
	t.Helper()
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps(ns)
	var out []write
	for i := 0; i < n || more() && i < 20*n; i++ {
		name := fmt.Sprintf("c%d", i%20)
		var cm *corev1.ConfigMap
		var err error
		if i%25 == 24 {
			if err = cms.Delete(ctx, name, metav1.DeleteOptions{}); err == nil {
				out = append(out, write{name: name, deleted: true})
				cm, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			}
		} else {
			cm, err = cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"i": strconv.Itoa(i)}}, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Fatalf("change %d: %v", i, err)
		}
		rv, _ := strconv.ParseUint(cm.ResourceVersion, 10, 64)
		out = append(out, write{name: name, rv: rv})
		*written = out
		each()
		if i == n/2 {
			mid()
		}
	}
	return out
}

// TestRelistUnderLoad makes the gateway's upstream relist in the middle of
// a burst of writes: the proxy cuts the config maps watch, and answers
// its resume with 410 Expired if the reflector tries to resume rather than
// list. Consumers watch throughout: listeners from a snapshot
// taken before the burst and from a LIST in the middle of it; over the
// gateway's REST API, a client-go shared informer and a client that LISTs
// mid-burst and WATCHes from the LIST's resourceVersion; a WebSocket
// subscriber that drops its socket after the relist and resumes; and a
// webhook receiver. Each must see every change exactly once and in
// order, except that the changes the upstream missed during the relist
// are told as their net effect, and end at the apiserver's state. A
// consumer that resumes from the relist's version misses nothing after it.
func TestRelistUnderLoad(t *testing.T) {
	cs := client(t)
	ns := namespace(t, cs)
	names := make([]string, 20)
	for i := range names {
		names[i] = fmt.Sprintf("c%d", i)
	}
	create(t, cs, ns, names...)
	// Changed only while the upstream is cut off, so only the relist's
	// net effect can tell the consumers: gone is deleted, new is created.
	create(t, cs, ns, "gone")
	deletes := watchDeletes(t, cs, ns)
	p := newFaultProxy(t, "/api/v1/configmaps")
	// The upstream logs each relist with the list's resourceVersion.
	core, logs := observer.New(zapcore.InfoLevel)
	// A webhook receiver. Its webhook sends only changes, so it starts
	// from the objects as they are before the burst.
	hookView := newClientView("webhook receiver", nil)
	m, gw, wsURL := startGateway(t, p.config(), zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), core)), ns, hookView)
	r := configMaps(t, m)
	// Nothing changes before the burst: the receiver starts from the
	// objects as they are.
	objs, _ := r.List(&informer.Filter{Namespace: ns})
	hookView.mu.Lock()
	for _, o := range objs {
		hookView.state[o.Name] = o.RV
	}
	hookView.mu.Unlock()

	live := newListenerClient(t, "live from a snapshot", r, informer.ListenerOptions{Filter: informer.Filter{Namespace: ns}, SendInitialEvents: true}, nil)
	live.apply() // the snapshot

	// Clients of the REST API: a client-go shared informer (watch-list),
	// and one that LISTs mid-burst and watches from the LIST's version.
	// A WebSocket subscriber from a snapshot; after the relist it drops
	// its socket and resumes from its resume point.
	wsView := newClientView("WebSocket, resumed after the relist", nil)
	sub := dialSub(t, wsURL, ns, "", wsView)
	restInformer := newClientView("client-go informer via REST", nil)
	f := informers.NewSharedInformerFactoryWithOptions(gw, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().ConfigMaps().Informer()
	if _, err := inf.AddEventHandler(restInformer.handler()); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); f.Shutdown() })
	f.Start(stop)
	if !cache.WaitForCacheSync(t.Context().Done(), inf.HasSynced) {
		t.Fatal("the REST informer did not sync")
	}
	var restWatch *clientView
	watchDone := make(chan struct{})
	var resumed *listenerClient
	// Go on writing until the relist is done and 100 more changes are in.
	writtenAtRelist := 0
	wsResumed := false
	var writes []write
	writes = writeBurst(t, cs, ns, 200, &writes, func() {
		// A client LISTs, then watches from the LIST's version, just
		// as the upstream is made to relist with changes still coming.
		objs, rv := r.List(&informer.Filter{Namespace: ns})
		start := map[string]uint64{}
		for _, o := range objs {
			start[o.Name] = o.RV
		}
		resumed = newListenerClient(t, "resumed from a LIST", r, informer.ListenerOptions{
			Filter: informer.Filter{Namespace: ns}, ResourceVersion: strconv.FormatUint(rv, 10)}, start)

		l, err := gw.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("REST LIST: %v", err)
		}
		rstart := map[string]uint64{}
		for _, cm := range l.Items {
			rstart[cm.Name], _ = strconv.ParseUint(cm.ResourceVersion, 10, 64)
		}
		restWatch = newClientView("REST LIST then WATCH", rstart)
		w, err := gw.CoreV1().ConfigMaps(ns).Watch(context.Background(), metav1.ListOptions{ResourceVersion: l.ResourceVersion})
		if err != nil {
			t.Fatalf("REST WATCH: %v", err)
		}
		// Cleanups run last first: stop the watch, then wait for its reader.
		t.Cleanup(func() { <-watchDone })
		t.Cleanup(w.Stop)
		go func() {
			defer close(watchDone)
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error || ev.Type == watch.Bookmark {
					if ev.Type == watch.Error {
						restWatch.mu.Lock()
						restWatch.errs = append(restWatch.errs, fmt.Sprintf("ERROR event: %v", ev.Object))
						restWatch.mu.Unlock()
					}
					continue
				}
				restWatch.event(ev.Type, ev.Object)
			}
		}()
		p.expireWatch()
		remove(t, cs, ns, "gone")
		create(t, cs, ns, "new")
	}, func() {
		// Consumers read as they go, as clients do.
		for _, s := range []*listenerClient{live, resumed} {
			if s == nil {
				continue
			}
			select {
			case <-s.wake:
				s.apply()
			default:
			}
		}
	}, func() bool {
		if writtenAtRelist == 0 && logs.FilterMessage("relisted").Len() > 0 {
			writtenAtRelist = len(writes)
		}
		// Once the WebSocket subscriber has a resume point after the
		// relist, it reconnects from it: the resume must be exact.
		if writtenAtRelist > 0 && !wsResumed {
			relistRV := logs.FilterMessage("relisted").All()[0].ContextMap()["resourceVersion"].(uint64)
			if sub.resumePoint() > relistRV {
				// Close first: the reader goes on processing frames
				// until the socket is closed.
				sub.close()
				sub = dialSub(t, wsURL, ns, strconv.FormatUint(sub.resumePoint(), 10), wsView)
				wsResumed = true
			}
		}
		return writtenAtRelist == 0 || len(writes) < writtenAtRelist+100
	})

	want := map[string]uint64{}
	cms, err := cs.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		want[cm.Name], _ = strconv.ParseUint(cm.ResourceVersion, 10, 64)
	}
	live.converge(t, want)
	resumed.converge(t, want)
	for _, v := range []*clientView{restInformer, restWatch, wsView, hookView} {
		v.converge(t, want, nil, nil)
	}
	if !wsResumed {
		t.Error("the WebSocket subscriber never had a resume point after the relist to reconnect from")
	}

	// The upstream relisted once, at a version inside the burst.
	relists := logs.FilterMessage("relisted").All()
	if len(relists) != 1 {
		t.Fatalf("%d relists logged, want 1; requests: %+v", len(relists), p.requests())
	}
	listRV := uint64(relists[0].ContextMap()["resourceVersion"].(uint64))
	// Changes after the relist's version were each told, one for one.
	after := 0
	for _, w := range writes {
		if w.deleted || w.rv <= listRV {
			continue
		}
		after++
		for _, v := range []*clientView{live.view, resumed.view, restInformer, restWatch, wsView, hookView} {
			if !v.told(w.name, w.rv) {
				t.Errorf("%s: missed the change of %s at %d (after the relist at %d)", v.name, w.name, w.rv, listRV)
			}
		}
	}
	if after == 0 {
		t.Fatalf("no change after the relist at %d; the burst ended at %d", listRV, writes[len(writes)-1].rv)
	}
	// A resume from the relist's version replays exactly the changes
	// after it.
	wake := make(chan struct{}, 1)
	from, err := r.AddListener(informer.ListenerOptions{Filter: informer.Filter{Namespace: ns},
		ResourceVersion: strconv.FormatUint(listRV, 10), Wake: wake})
	if err != nil {
		t.Fatalf("resume from the relist's version %d: %v", listRV, err)
	}
	defer from.Stop()
	var replayed []write
	for _, n := range from.Pop(nil) {
		if n.Type == informer.Deleted {
			replayed = append(replayed, write{name: n.Object.Name, deleted: true})
		} else {
			replayed = append(replayed, write{name: n.Object.Name, rv: n.RV})
		}
	}
	var wantReplay []write
	for _, w := range withDeleteVersions(t, deletes, writes) {
		if w.rv > listRV {
			if w.deleted {
				w.rv = 0 // as replayed is recorded
			}
			wantReplay = append(wantReplay, w)
		}
	}
	if !slices.Equal(wantReplay, replayed) {
		t.Errorf("resume from %d replayed %v, want %v", listRV, replayed, wantReplay)
	}
	t.Logf("%d changes, relist at %d, %d changes after it", len(writes), listRV, after)
}
