package informer

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// fakeCluster is an apiserver for one namespaced resource, small enough to
// know its state at every resourceVersion. Changes are sent on the current
// watch unless they are made while the watch is "down", which is how a
// test makes the upstream miss events and relist.
type fakeCluster struct {
	mu      sync.Mutex
	rv      uint64
	objs    map[string]*Object
	history map[uint64]map[string]*Object // state after each version
	events  []Notification                // every change, in order
	w       *watch.FakeWatcher
	watches chan *watch.FakeWatcher // each new watch, for the test
}

func newFakeCluster(rv uint64) *fakeCluster {
	c := &fakeCluster{rv: rv, objs: map[string]*Object{}, history: map[uint64]map[string]*Object{},
		watches: make(chan *watch.FakeWatcher, 16)}
	c.history[rv] = map[string]*Object{}
	return c
}

func (c *fakeCluster) object(name, uid string, rv uint64) *Object {
	o := &Object{RV: rv, Raw: []byte(fmt.Sprintf(`{"metadata":{"name":%q,"uid":%q,"resourceVersion":"%d"}}`, name, uid, rv))}
	o.Namespace, o.Name, o.UID, o.ResourceVersion = "ns", name, types.UID(uid), strconv.FormatUint(rv, 10)
	return o
}

// change makes one change at the next version; send says whether the
// current watch carries it. uid "" deletes.
func (c *fakeCluster) change(name, uid string, send bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rv++
	n := Notification{RV: c.rv}
	old, exists := c.objs["ns/"+name]
	switch {
	case uid == "":
		n.Type, n.Object = Deleted, c.object(name, string(old.UID), c.rv)
		delete(c.objs, "ns/"+name)
	case exists:
		n.Type, n.Object = Modified, c.object(name, uid, c.rv)
		c.objs["ns/"+name] = n.Object
	default:
		n.Type, n.Object = Added, c.object(name, uid, c.rv)
		c.objs["ns/"+name] = n.Object
	}
	c.events = append(c.events, n)
	c.history[c.rv] = maps.Clone(c.objs)
	if send && c.w != nil {
		c.w.Action(watch.EventType(n.Type.String()), n.Object)
	}
}

// expire ends the current watch the way kube-apiserver does when the
// watcher's version has been compacted away.
func (c *fakeCluster) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := apierrors.NewResourceExpired("too old resource version").Status()
	c.w.Error(&st)
	c.w = nil
}

func (c *fakeCluster) stateAt(rv uint64) map[string]*Object {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.history[rv]
	if !ok {
		panic(fmt.Sprintf("no state at %d", rv))
	}
	return s
}

// eventsIn returns the changes with from < RV <= to.
func (c *fakeCluster) eventsIn(from, to uint64) []Notification {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Notification
	for _, n := range c.events {
		if n.RV > from && n.RV <= to {
			out = append(out, n)
		}
	}
	return out
}

// ListWithContext and WatchWithContext serve the reflector. List is always
// of the current state, as a consistent read is.
func (c *fakeCluster) ListWithContext(context.Context, metav1.ListOptions) (runtime.Object, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := &metav1.List{ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatUint(c.rv, 10)}}
	for _, k := range slices.Sorted(maps.Keys(c.objs)) {
		l.Items = append(l.Items, runtime.RawExtension{Object: c.objs[k]})
	}
	return l, nil
}

func (c *fakeCluster) WatchWithContext(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if opts.ResourceVersion != strconv.FormatUint(c.rv, 10) {
		return nil, fmt.Errorf("watch from %s while the cluster is at %d", opts.ResourceVersion, c.rv)
	}
	c.w = watch.NewFakeWithChanSize(100, false)
	c.watches <- c.w
	return c.w, nil
}

func (c *fakeCluster) List(opts metav1.ListOptions) (runtime.Object, error) {
	return c.ListWithContext(context.Background(), opts)
}

func (c *fakeCluster) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return c.WatchWithContext(context.Background(), opts)
}

// IsWatchListSemanticsUnSupported makes the reflector LIST then WATCH;
// watch-list is covered against the real apiserver.
func (c *fakeCluster) IsWatchListSemanticsUnSupported() bool { return true }

// reportingQueue tells the test each time the reflector has queued a
// delta, so it can let the reflector run ahead of the processor.
type reportingQueue struct {
	*boundedFIFO
	queued chan cache.DeltaType
}

func (q *reportingQueue) report(t cache.DeltaType, err error) error {
	if err == nil {
		q.queued <- t
	}
	return err
}
func (q *reportingQueue) Add(obj any) error { return q.report(cache.Added, q.boundedFIFO.Add(obj)) }
func (q *reportingQueue) Update(obj any) error {
	return q.report(cache.Updated, q.boundedFIFO.Update(obj))
}
func (q *reportingQueue) Delete(obj any) error {
	return q.report(cache.Deleted, q.boundedFIFO.Delete(obj))
}
func (q *reportingQueue) Replace(l []any, rv string) error {
	return q.report(cache.ReplacedAll, q.boundedFIFO.Replace(l, rv))
}
func (q *reportingQueue) Bookmark(rv string) error {
	return q.report(cache.Bookmark, q.boundedFIFO.Bookmark(rv))
}

// gatedUpstream runs the real reflector, queue and controller over c, with
// the processor held back: it applies a delta only for a token from allow,
// and reports each applied delta on done.
type gatedUpstream struct {
	ctrl   cache.Controller
	queue  *reportingQueue
	allow  chan struct{}
	done   chan cache.DeltaType
	cancel context.CancelFunc
}

func startGated(t *testing.T, c *fakeCluster, p *processor) *gatedUpstream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	u := &gatedUpstream{
		queue:  &reportingQueue{boundedFIFO: newBoundedFIFO(1000), queued: make(chan cache.DeltaType, 1000)},
		allow:  make(chan struct{}, 1000),
		done:   make(chan cache.DeltaType, 1000),
		cancel: cancel,
	}
	u.ctrl = cache.New(&cache.Config{
		Queue:         u.queue,
		ListerWatcher: c,
		ObjectType:    &Object{},
		Process: func(obj any, init bool) error {
			select {
			case <-u.allow:
			case <-ctx.Done():
				return ctx.Err()
			}
			err := p.process(obj, init)
			u.done <- obj.(cache.Deltas)[0].Type
			return err
		},
	})
	var wg sync.WaitGroup
	wg.Go(func() { u.ctrl.RunWithContext(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return u
}

// expect waits for n deltas on ch and checks their types.
func expect(t *testing.T, what string, ch <-chan cache.DeltaType, want ...cache.DeltaType) {
	t.Helper()
	var got []cache.DeltaType
	timeout := time.After(30 * time.Second)
	for len(got) < len(want) {
		select {
		case d := <-ch:
			got = append(got, d)
		case <-timeout:
			t.Fatalf("%s: got %v after 30s, want %v", what, got, want)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("%s (-want +got):\n%s", what, diff)
	}
}

func (u *gatedUpstream) release(t *testing.T, what string, want ...cache.DeltaType) {
	t.Helper()
	for range want {
		u.allow <- struct{}{}
	}
	expect(t, what, u.done, want...)
}

func repeat(d cache.DeltaType, n int) []cache.DeltaType {
	return slices.Repeat([]cache.DeltaType{d}, n)
}

func stateOf(objs []*Object) map[string]string {
	out := map[string]string{}
	for _, o := range objs {
		out[o.Key()] = o.ResourceVersion + "/" + string(o.UID)
	}
	return out
}

func rvs(m map[string]*Object) map[string]string {
	return stateOf(slices.Collect(maps.Values(m)))
}

// applyAll applies a consumer's notifications to the state it started
// from, failing on any that a correct stream could not contain: an ADDED
// for an object it holds, a MODIFIED or DELETED for one it does not, or a
// change not newer than the state it holds (a repeat or a reordering).
// Tombstones from a relist carry the last version the consumer was sent.
func applyAll(t *testing.T, who string, start map[string]*Object, ns []Notification) map[string]*Object {
	t.Helper()
	s := maps.Clone(start)
	for _, n := range ns {
		k := n.Object.Key()
		old, ok := s[k]
		switch {
		case n.Type == Added && ok:
			t.Fatalf("%s: ADDED %s@%d while holding it@%d (repeat); stream %v", who, k, n.RV, old.RV, seen(ns))
		case n.Type != Added && !ok:
			t.Fatalf("%s: %s %s@%d for an object it does not hold; stream %v", who, n.Type, k, n.RV, seen(ns))
		case n.Type == Modified && n.RV <= old.RV, n.Type == Deleted && !n.tombstone && n.RV <= old.RV:
			t.Fatalf("%s: %s %s@%d not newer than its %d (repeat or reorder); stream %v", who, n.Type, k, n.RV, old.RV, seen(ns))
		}
		if n.Type == Deleted {
			delete(s, k)
		} else {
			s[k] = n.Object
		}
	}
	return s
}

// TestRelistWithReflectorAhead runs client-go's reflector against a fake
// apiserver while the processor is held back, so the reflector's
// LastSyncResourceVersion runs ahead of what the cache holds, as it does
// under load; then a watch expires and the reflector relists while changes
// are still queued. A LIST, a snapshot and the resumes from their
// versions must each see every change exactly once, in order.
func TestRelistWithReflectorAhead(t *testing.T) {
	c := newFakeCluster(10)
	for i := range 5 {
		c.change(fmt.Sprintf("o%d", i), fmt.Sprintf("u%d", i), false) // 11..15
	}
	p, _ := testProc(t, nil)
	u := startGated(t, c, p)

	expect(t, "initial list queued", u.queue.queued, cache.ReplacedAll)
	u.release(t, "initial list applied", cache.ReplacedAll)
	w := <-c.watches
	live, _ := mustListener(t, p, ListenerOptions{})

	// Ten changes reach the reflector; the processor applies four.
	for i := range 10 {
		c.change(fmt.Sprintf("o%d", i%7), fmt.Sprintf("u%d", i%7), true) // 16..25: o5, o6 added
	}
	expect(t, "watch events queued", u.queue.queued, append(repeat(cache.Updated, 5), append(repeat(cache.Added, 2), repeat(cache.Updated, 3)...)...)...)
	u.release(t, "four applied", repeat(cache.Updated, 4)...)
	if got := u.ctrl.LastSyncResourceVersion(); got != "25" {
		t.Fatalf("reflector at %q; the test needs it ahead of the cache, at 25", got)
	}

	// LIST, and a snapshot: exactly the state at 19, labelled 19.
	objs, listRV := p.list(&Filter{})
	if listRV != 19 {
		t.Fatalf("LIST resourceVersion %d; the cache holds the state at 19", listRV)
	}
	if diff := cmp.Diff(rvs(c.stateAt(19)), stateOf(objs)); diff != "" {
		t.Fatalf("LIST at 19 (-want +got):\n%s", diff)
	}
	snap, _ := mustListener(t, p, ListenerOptions{SendInitialEvents: true})
	snapshot := snap.Pop(nil)
	if end := snapshot[len(snapshot)-1]; end.Type != EndOfSnapshot || end.RV != 19 {
		t.Fatalf("snapshot ends with %v, want END@19", seen(snapshot[len(snapshot)-1:]))
	}
	var snapObjs []*Object
	for _, n := range snapshot[:len(snapshot)-1] {
		snapObjs = append(snapObjs, n.Object)
	}
	if diff := cmp.Diff(rvs(c.stateAt(19)), stateOf(snapObjs)); diff != "" {
		t.Fatalf("snapshot (-want +got):\n%s", diff)
	}
	// The consumer of the LIST watches from its version.
	resumed, _ := mustListener(t, p, ListenerOptions{ResourceVersion: "19"})

	// While six changes are still queued, the watch expires after the
	// upstream missed five more (26..30): the reflector relists at 30.
	c.change("o1", "", false)   // deleted
	c.change("o2", "u2", false) // modified
	c.change("o3", "", false)   // deleted and re-created under another UID
	c.change("o3", "u3b", false)
	c.change("o7", "u7", false) // added
	c.expire()
	expect(t, "relist queued", u.queue.queued, cache.ReplacedAll)
	w2 := <-c.watches
	if w2 == w {
		t.Fatal("no new watch after the relist")
	}
	for i := range 5 {
		c.change(fmt.Sprintf("o%d", i+4), fmt.Sprintf("u%d", i+4), true) // 31..35; o8 added
	}
	expect(t, "events after the relist queued", u.queue.queued, append(repeat(cache.Updated, 4), cache.Added)...)

	u.release(t, "backlog, relist and new events applied",
		cache.Updated, cache.Added, cache.Added, cache.Updated, cache.Updated, cache.Updated,
		cache.ReplacedAll, cache.Updated, cache.Updated, cache.Updated, cache.Updated, cache.Added)

	final := rvs(c.stateAt(35))
	objs, listRV = p.list(&Filter{})
	if diff := cmp.Diff(final, stateOf(objs)); diff != "" || listRV != 35 {
		t.Fatalf("LIST at the end: resourceVersion %d, want 35; state (-want +got):\n%s", listRV, diff)
	}
	for _, tc := range []struct {
		who   string
		l     *Listener
		start uint64
	}{
		{"live since 15", live, 15},
		{"snapshot at 19", snap, 19},
		{"resumed from the LIST at 19", resumed, 19},
	} {
		got := tc.l.Pop(nil)
		if diff := cmp.Diff(final, rvs(applyAll(t, tc.who, c.stateAt(tc.start), got))); diff != "" {
			t.Errorf("%s: state after its stream (-want +got):\n%s", tc.who, diff)
		}
		// Watch events before and after the relist come one for one, in
		// order; the relist in between is told as its net effect.
		before, after := c.eventsIn(tc.start, 25), c.eventsIn(30, 35)
		if diff := cmp.Diff(seen(before), seen(got[:len(before)])); diff != "" {
			t.Errorf("%s: changes before the relist (-want +got):\n%s", tc.who, diff)
		}
		if diff := cmp.Diff(seen(after), seen(got[len(got)-len(after):])); diff != "" {
			t.Errorf("%s: changes after the relist (-want +got):\n%s", tc.who, diff)
		}
		if pr := tc.l.Progress(); pr != 35 {
			t.Errorf("%s: progress %d, want 35", tc.who, pr)
		}
	}

	// The history restarts at the relist: 25 cannot resume, 30 can.
	if _, err := p.addListener(ListenerOptions{ResourceVersion: "25", Wake: make(chan struct{}, 1)}); err == nil {
		t.Fatal("resume from 25, before the relist at 30, was accepted")
	}
	after, _ := mustListener(t, p, ListenerOptions{ResourceVersion: "30"})
	if diff := cmp.Diff(seen(c.eventsIn(30, 35)), seen(after.Pop(nil))); diff != "" {
		t.Fatalf("resume from the relist's version (-want +got):\n%s", diff)
	}
}

// TestBookmarkAdvancesProgress: a bookmark moves the cache's version (and
// a LIST's) without a change, and a filtered listener that saw nothing
// reports it as progress.
func TestBookmarkAdvancesProgress(t *testing.T) {
	p, _ := syncedProc(t, obj("a", "p1", 10))
	l, _ := mustListener(t, p, ListenerOptions{Filter: Filter{Namespace: "b"}})
	add(t, p, obj("a", "p2", 11))
	bookmark(t, p, 40)
	if got := l.Pop(nil); len(got) != 0 {
		t.Fatalf("filtered listener got %v", seen(got))
	}
	if pr := l.Progress(); pr != 40 {
		t.Fatalf("progress %d, want the bookmark's 40", pr)
	}
	if _, rv := p.list(&Filter{}); rv != 40 {
		t.Fatalf("LIST resourceVersion %d after a bookmark at 40", rv)
	}
	// A resume from the bookmark's version misses nothing after it.
	r, _ := mustListener(t, p, ListenerOptions{ResourceVersion: "40"})
	add(t, p, obj("a", "p3", 41))
	if diff := cmp.Diff([]string{"ADDED a/p3@41"}, seen(r.Pop(nil))); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

// TestBoundedFIFOHoldsTheReflector: at the bound, Add waits until the
// process loop pops; Close releases a waiting Add.
func TestBoundedFIFOHoldsTheReflector(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newBoundedFIFO(2)
		for i := range 2 {
			if err := q.Add(obj("a", fmt.Sprintf("o%d", i), uint64(i+1))); err != nil {
				t.Fatal(err)
			}
		}
		added := make(chan error, 1)
		go func() { added <- q.Add(obj("a", "o2", 3)) }()
		synctest.Wait()
		select {
		case err := <-added:
			t.Fatalf("Add returned (%v) with the queue at its bound", err)
		default:
		}
		if _, err := q.Pop(func(any, bool) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if err := <-added; err != nil {
			t.Fatalf("Add after a Pop: %v", err)
		}
		go func() { added <- q.Add(obj("a", "o3", 4)) }()
		synctest.Wait()
		q.Close()
		if err := <-added; err == nil {
			t.Fatal("Add waiting at the bound returned no error when the queue closed")
		}
	})
}

// TestBoundedFIFODrain: once the controller has stopped, drain hands the
// processor what the queue still holds, in order, and returns when it is
// empty: the changes queued before a resource went away reach its
// listeners ahead of Ended.
func TestBoundedFIFODrain(t *testing.T) {
	p, _ := syncedProc(t)
	l, _ := mustListener(t, p, ListenerOptions{})
	q := newBoundedFIFO(10)
	for i, typ := range []func(any) error{q.Add, q.Update, q.Delete} {
		if err := typ(obj("a", "x", uint64(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	q.drain(p.process)
	p.end(&ResourceGoneError{GVR: podsGVR})
	want := []string{"ADDED a/x@1", "MODIFIED a/x@2", "DELETED a/x@3", "ENDED@3"}
	if diff := cmp.Diff(want, seen(l.Pop(nil))); diff != "" {
		t.Fatalf("listener after drain and end (-want +got):\n%s", diff)
	}
}
