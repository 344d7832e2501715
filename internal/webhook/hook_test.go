package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"kubegate/internal/testenv"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"

	"kubegate/internal/informer"
)

// fakeSource stands in for an informer listener. Notifications pushed
// are handed out as they are. Those passed to change also update the
// state it keeps, which is what it hands out, as a listener does, after a
// Reset: Reset, the state as Added, EndOfSnapshot.
type fakeSource struct {
	wake chan<- struct{}
	// mu guards everything below.
	mu      sync.Mutex
	q       []informer.Notification
	stopped bool
	stats   informer.ListenerStats
	// pushes counts push calls; idleAt is pushes as of the last Pop that
	// found nothing. See idle.
	pushes, idleAt int
	state          map[string]informer.Notification // by name
	lastRV         uint64
	resetDue       bool
	err            error // set by end
}

// end ends the source as its resource going away ends a listener: Ended
// after what it holds, then nothing; a Reset hands out Ended again.
func (f *fakeSource) end(err error) {
	f.mu.Lock()
	f.err = err
	f.state = nil
	f.q = append(f.q, informer.Notification{Type: informer.Ended, RV: f.lastRV})
	f.pushes++
	f.mu.Unlock()
	f.signal()
}

func (f *fakeSource) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func (f *fakeSource) push(ns ...informer.Notification) {
	f.mu.Lock()
	if !f.resetDue { // as a listener that is to reset drops changes
		f.q = append(f.q, ns...)
	}
	f.pushes++
	f.mu.Unlock()
	f.signal()
}

func (f *fakeSource) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// seed sets the state a source starts with, as the cache holds it when
// its listener is added, without pushing anything.
func (f *fakeSource) seed(ns ...informer.Notification) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.state = map[string]informer.Notification{}
	for _, n := range ns {
		f.state[n.Object.Name] = informer.Notification{Type: informer.Added, Object: n.Object, RV: n.RV}
		f.lastRV = max(f.lastRV, n.RV)
	}
}

// change records live changes in the state, then pushes them.
func (f *fakeSource) change(ns ...informer.Notification) {
	f.mu.Lock()
	if f.state == nil {
		f.state = map[string]informer.Notification{}
	}
	for _, n := range ns {
		if n.Type == informer.Deleted {
			delete(f.state, n.Object.Name)
		} else {
			f.state[n.Object.Name] = informer.Notification{Type: informer.Added, Object: n.Object, RV: n.RV}
		}
		f.lastRV = max(f.lastRV, n.RV)
	}
	f.mu.Unlock()
	f.push(ns...)
}

func (f *fakeSource) PopAtMost(buf []informer.Notification, limit int) []informer.Notification {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.resetDue {
		// As a listener does: the snapshot goes ahead of what is queued.
		f.resetDue = false
		snap := []informer.Notification{{Type: informer.Reset}}
		for _, name := range slices.Sorted(maps.Keys(f.state)) {
			snap = append(snap, f.state[name])
		}
		f.q = append(append(snap, informer.Notification{Type: informer.EndOfSnapshot, RV: f.lastRV}), f.q...)
	}
	if len(f.q) == 0 {
		f.idleAt = f.pushes
	}
	n := len(f.q)
	if limit > 0 {
		n = min(n, limit)
	}
	buf = append(buf, f.q[:n]...)
	f.q = f.q[n:]
	if len(f.q) == 0 {
		f.q = nil
	}
	return buf
}

func (f *fakeSource) Reset() {
	f.mu.Lock()
	if f.stopped {
		f.mu.Unlock()
		return
	}
	f.q = nil
	if f.err != nil {
		f.q = []informer.Notification{{Type: informer.Ended, RV: f.lastRV}}
	} else {
		f.resetDue = true
	}
	f.stats.Resets++
	f.mu.Unlock()
	f.signal()
}

// idle reports whether the hook has found nothing to take since the last
// push. A hook pops only once it has settled every event it took, and
// waits for a wake after an empty pop, so then every request it will send
// for what was pushed has been answered.
func (f *fakeSource) idle() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.idleAt == f.pushes
}

// settle waits until the hook has settled everything pushed to f and
// waits for more: the point after which a receiver's none is sound.
func (f *fakeSource) settle(t *testing.T) {
	t.Helper()
	testenv.Eventually(t, "the hook to settle what was pushed", f.idle)
}

func (f *fakeSource) Stats() informer.ListenerStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.stats
	s.Buffered = len(f.q)
	return s
}

func (f *fakeSource) Stop() {
	f.mu.Lock()
	f.stopped = true
	f.mu.Unlock()
}

func (f *fakeSource) isStopped() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stopped
}

var configmaps = &informer.ResourceInfo{
	GVR:        schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
	GVK:        schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
	Namespaced: true,
}

func object(name string, rv int) *informer.Object { return objectUID(name, "uid-"+name, rv) }

// objectUID is object with a given UID, for an object re-created under
// its name.
func objectUID(name, uid string, rv int) *informer.Object {
	raw := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"ns","uid":%q,"resourceVersion":"%d"},"data":{"rv":"%d"}}`,
		name, uid, rv, rv)
	return &informer.Object{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid), ResourceVersion: fmt.Sprint(rv)},
		RV:         uint64(rv),
		Raw:        []byte(raw),
	}
}

func note(t informer.NotificationType, name string, rv int) informer.Notification {
	return informer.Notification{Type: t, Object: object(name, rv), RV: uint64(rv)}
}

// request is one request a test receiver got.
type request struct {
	header http.Header
	body   []byte
	verify error
}

// receiver is an HTTP receiver that verifies signatures and answers with
// respond (200 when nil).
type receiver struct {
	t   *testing.T
	srv *httptest.Server
	got chan request

	mu      sync.Mutex
	now     func() time.Time                   // guarded by mu
	respond func(n int, w http.ResponseWriter) // guarded by mu
	status  func(n int) int                    // guarded by mu
	n       int                                // guarded by mu
}

func newReceiver(t *testing.T, now func() time.Time) *receiver {
	r := &receiver{t: t, got: make(chan request, 1000), now: now}
	quit := make(chan struct{})
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.n++
		n, respond, status, now := r.n, r.respond, r.status, r.now
		r.mu.Unlock()
		code := 0
		if status != nil {
			code = status(n) // before the test can read the request
		}
		select {
		case r.got <- request{header: req.Header.Clone(), body: body,
			verify: verifyAt([][]byte{testKey(t)}, req.Header, body, 5*time.Minute, now())}:
		case <-quit:
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if code != 0 {
			w.WriteHeader(code)
			return
		}
		if respond != nil {
			respond(n, w)
		}
	}))
	t.Cleanup(r.srv.Close)
	t.Cleanup(func() { close(quit) }) // runs first: unblock handlers
	return r
}

func (r *receiver) setNow(now func() time.Time) {
	r.mu.Lock()
	r.now = now
	r.mu.Unlock()
}

func (r *receiver) setRespond(f func(n int, w http.ResponseWriter)) {
	r.mu.Lock()
	r.respond = f
	r.mu.Unlock()
}

// setStatus answers the nth request with f(n), or as setRespond says
// where f(n) is 0. f is called as the request arrives, before the test
// can read it: a respond function runs after, so an outage a test turns
// on once it has read a request would fail that request too, and the
// hook would retry it.
func (r *receiver) setStatus(f func(n int) int) {
	r.mu.Lock()
	r.status = f
	r.mu.Unlock()
}

// next returns the next request, failing the test after 10s.
func (r *receiver) next() request {
	r.t.Helper()
	select {
	case req := <-r.got:
		if req.verify != nil {
			r.t.Errorf("signature: %v", req.verify)
		}
		return req
	case <-time.After(10 * time.Second):
		r.t.Fatal("no request within 10s")
		return request{}
	}
}

// none fails if a request came that the test has not read. It does not
// wait, so it is sound only at a point where nothing can be on its way:
// the hook settled what it was given (fakeSource.settle) or is parked on
// the fake clock. Once the hooks have stopped, use noMore.
func (r *receiver) none() {
	r.t.Helper()
	select {
	case req := <-r.got:
		r.t.Fatalf("unexpected request %s", req.body)
	default:
	}
}

// noMore closes the receiver, which waits for every request it is still
// handling (one a stopping hook gave up on may still be arriving), then
// fails if any came that the test has not read. Call it once nothing is
// meant to send to the receiver any more.
func (r *receiver) noMore() {
	r.t.Helper()
	r.srv.Close()
	r.none()
}

func testKey(t testing.TB) []byte { return mustKey(t, specSecret) }

func secretFile(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(specSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

type harness struct {
	t     *testing.T
	m     *Manager
	clock *clocktesting.FakeClock
	reg   *prometheus.Registry
	// cancel cancels Start's context; stop cancels it and waits for Start.
	cancel func()
	stop   func()

	mu      sync.Mutex
	sources map[string][]*fakeSource // by webhook name, guarded by mu
	// served is closed by serve: the resource a listener was ended for
	// is served again, holding seed (guarded by mu), which new sources
	// start with.
	served chan struct{}
	seed   []informer.Notification
}

// serve makes every resource served again, holding the objects of ns:
// hooks waiting for it attach new sources, which start with them.
func (h *harness) serve(ns ...informer.Notification) {
	h.mu.Lock()
	h.seed = ns
	h.mu.Unlock()
	close(h.served)
}

func (h *harness) source(name string, i int) *fakeSource {
	h.t.Helper()
	var s *fakeSource
	_ = wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if len(h.sources[name]) > i {
			s = h.sources[name][i]
			return true, nil
		}
		return false, nil
	})
	if s == nil {
		h.t.Fatalf("no source %s[%d]", name, i)
	}
	return s
}

// start runs a Manager with fake listeners, a fake clock and jitter that
// always waits the full backoff.
func start(t *testing.T, hooks ...Spec) *harness {
	h := &harness{t: t, clock: clocktesting.NewFakeClock(time.Now()), reg: prometheus.NewRegistry(), sources: map[string][]*fakeSource{},
		served: make(chan struct{})}
	m, err := New(Options{
		Webhooks:   hooks,
		Logger:     zaptest.NewLogger(t),
		Registerer: h.reg,
		Clock:      h.clock,
		Source:     "https://cluster.example",
		jitter:     func(d time.Duration) time.Duration { return d },
		listen: func(ctx context.Context, hook string, r Resource, opts informer.ListenerOptions) (*informer.ResourceInfo, source, error) {
			if r.Resource != "configmaps" {
				return nil, nil, fmt.Errorf("unknown resource %q", r.Resource)
			}
			s := &fakeSource{wake: opts.Wake}
			h.mu.Lock()
			defer h.mu.Unlock()
			s.seed(h.seed...)
			h.sources[hook] = append(h.sources[hook], s)
			return configmaps, s, nil
		},
		await: func(ctx context.Context, _ string) error {
			select {
			case <-h.served:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.m = m
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	var once sync.Once
	h.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Start: %v", err)
			}
		})
	}
	t.Cleanup(h.stop)
	return h
}

// reconciler is a receiver's copy of the objects, kept as
// docs/webhooks.md tells receivers to: by namespace/name; a reset marks
// every object of its collection stale (same apiVersion and kind, and
// the same namespace if the marker names one); added, modified and sync
// store an object and unmark it; deleted removes it; snapshot.end removes
// what is still stale in its collection.
type reconciler struct {
	objects map[string]heldObject
	stale   map[string]bool
	// types counts the events applied by type.
	types map[string]int
}

type heldObject struct {
	apiVersion, kind, namespace string
	state                       string // uid@resourceVersion
}

func newReconciler() *reconciler {
	return &reconciler{objects: map[string]heldObject{}, stale: map[string]bool{}, types: map[string]int{}}
}

func (r *reconciler) apply(t *testing.T, ce cloudEvent) {
	t.Helper()
	var o struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Namespace       string `json:"namespace"`
			Name            string `json:"name"`
			UID             string `json:"uid"`
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(ce.Data, &o); err != nil {
		t.Fatalf("data %s: %v", ce.Data, err)
	}
	m := o.Metadata
	key := m.Namespace + "/" + m.Name
	inScope := func(h heldObject) bool {
		return h.apiVersion == o.APIVersion && h.kind == o.Kind && (m.Namespace == "" || h.namespace == m.Namespace)
	}
	typ := strings.TrimPrefix(ce.Type, eventTypePrefix)
	r.types[typ]++
	switch typ {
	case "added", "modified", "sync":
		r.objects[key] = heldObject{o.APIVersion, o.Kind, m.Namespace, m.UID + "@" + m.ResourceVersion}
		delete(r.stale, key)
	case "deleted":
		delete(r.objects, key)
		delete(r.stale, key)
	case "reset":
		for k, h := range r.objects {
			if inScope(h) {
				r.stale[k] = true
			}
		}
	case "snapshot.end":
		for k := range r.stale {
			if inScope(r.objects[k]) {
				delete(r.objects, k)
				delete(r.stale, k)
			}
		}
	default:
		t.Fatalf("unknown event type %s", ce.Type)
	}
}

// view is what the receiver holds: namespace/name → uid@resourceVersion.
func (r *reconciler) view() map[string]string {
	v := map[string]string{}
	for k, h := range r.objects {
		v[k] = h.state
	}
	return v
}

// converge applies what rcv receives until the receiver holds want,
// failing with the difference if nothing comes for 10s.
func (r *reconciler) converge(t *testing.T, rcv *receiver, want map[string]string) {
	t.Helper()
	for !maps.Equal(r.view(), want) {
		select {
		case req := <-rcv.got:
			if req.verify != nil {
				t.Errorf("signature: %v", req.verify)
			}
			r.apply(t, decode(t, req))
		case <-time.After(10 * time.Second):
			t.Fatalf("the receiver's objects (-want +got):\n%s", cmp.Diff(want, r.view()))
		}
	}
}

// view is what a receiver should hold of f's state.
func (f *fakeSource) view() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := map[string]string{}
	for _, n := range f.state {
		v[n.Object.Namespace+"/"+n.Object.Name] = string(n.Object.UID) + "@" + n.Object.ResourceVersion
	}
	return v
}
