package informer

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// testProc builds a processor fed by hand, as the informer would feed it.
func testProc(t *testing.T, mod func(*Options)) (*processor, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	opts := Options{MinResync: time.Second, HistoryEvents: 100, HistoryBytes: 1 << 20, Logger: zap.NewNop(), clock: clk}
	if mod != nil {
		mod(&opts)
	}
	p := newProcessor(podsGVR, &opts, newMetrics(nil).forResource(podsGVR))
	return p, clk
}

// feed hands the processor one delta, as the upstream's queue pops it.
func feed(t testing.TB, p *processor, typ cache.DeltaType, obj any) {
	t.Helper()
	if err := p.process(cache.Deltas{{Type: typ, Object: obj}}, false); err != nil {
		t.Fatalf("process %s: %v", typ, err)
	}
}

// add, update and del feed watch events; relist feeds a (re)list at rv;
// bookmark a watch bookmark.
func add(t testing.TB, p *processor, o *Object)    { t.Helper(); feed(t, p, cache.Added, o) }
func update(t testing.TB, p *processor, o *Object) { t.Helper(); feed(t, p, cache.Updated, o) }
func del(t testing.TB, p *processor, o any)        { t.Helper(); feed(t, p, cache.Deleted, o) }
func bookmark(t testing.TB, p *processor, rv uint64) {
	t.Helper()
	feed(t, p, cache.Bookmark, cache.BookmarkInfo{ResourceVersion: strconv.FormatUint(rv, 10)})
}
func relist(t testing.TB, p *processor, rv uint64, objs ...*Object) {
	t.Helper()
	items := make([]any, len(objs))
	for i, o := range objs {
		items[i] = o
	}
	feed(t, p, cache.ReplacedAll, cache.ReplacedAllInfo{ResourceVersion: strconv.FormatUint(rv, 10), Objects: items})
}

func obj(ns, name string, rv uint64, lbls ...string) *Object {
	o := &Object{RV: rv, Raw: []byte(fmt.Sprintf(`{"metadata":{"name":%q,"rv":%d}}`, name, rv))}
	o.Namespace, o.Name, o.ResourceVersion = ns, name, strconv.FormatUint(rv, 10)
	if len(lbls) > 0 {
		o.Labels = map[string]string{}
		for i := 0; i+1 < len(lbls); i += 2 {
			o.Labels[lbls[i]] = lbls[i+1]
		}
	}
	return o
}

// seen renders notifications compactly: "ADDED ns/name@rv".
func seen(ns []Notification) []string {
	out := make([]string, 0, len(ns))
	for _, n := range ns {
		switch n.Type {
		case EndOfSnapshot:
			out = append(out, fmt.Sprintf("END@%d", n.RV))
		case Reset:
			out = append(out, "RESET")
		case Ended:
			out = append(out, fmt.Sprintf("ENDED@%d", n.RV))
		default:
			out = append(out, fmt.Sprintf("%s %s@%d", n.Type, n.Object.Key(), n.RV))
		}
	}
	return out
}

func mustListener(t *testing.T, p *processor, opts ListenerOptions) (*Listener, chan struct{}) {
	t.Helper()
	wake := make(chan struct{}, 1)
	opts.Wake = wake
	l, err := p.addListener(opts)
	if err != nil {
		t.Fatalf("addListener: %v", err)
	}
	t.Cleanup(l.Stop)
	return l, wake
}

// syncedProc is a processor whose initial list held objs, at the
// newest of their versions.
func syncedProc(t *testing.T, objs ...*Object) (*processor, *clocktesting.FakeClock) {
	p, clk := testProc(t, nil)
	var rv uint64
	for _, o := range objs {
		rv = max(rv, o.RV)
	}
	relist(t, p, rv, objs...)
	return p, clk
}

func TestSnapshotThenLiveInOrder(t *testing.T) {
	p, _ := syncedProc(t, obj("a", "p1", 10), obj("b", "p2", 12))
	l, wake := mustListener(t, p, ListenerOptions{SendInitialEvents: true})
	select {
	case <-wake:
	default:
		t.Fatal("new listener with a snapshot due was not woken")
	}
	update(t, p, obj("a", "p1", 13))
	add(t, p, obj("a", "p3", 14))
	del(t, p, obj("b", "p2", 15))

	got := seen(l.Pop(nil))
	// The snapshot is cut when popped, so it already reflects the changes,
	// and they are not repeated after the end marker.
	snapshot := map[string]bool{}
	for _, s := range got[:len(got)-1] {
		snapshot[s] = true
	}
	want := map[string]bool{"ADDED a/p1@13": true, "ADDED a/p3@14": true}
	if diff := cmp.Diff(want, snapshot); diff != "" || got[len(got)-1] != "END@15" {
		t.Fatalf("snapshot mismatch (-want +got):\n%s\nall: %v", diff, got)
	}

	update(t, p, obj("a", "p3", 16))
	del(t, p, cache.DeletedFinalStateUnknown{Key: "a/p1", Obj: obj("a", "p1", 13)})
	if diff := cmp.Diff([]string{"MODIFIED a/p3@16", "DELETED a/p1@13"}, seen(l.Pop(nil))); diff != "" {
		t.Fatalf("live events (-want +got):\n%s", diff)
	}
}

func TestOnWakeIsCalledInsteadOfWake(t *testing.T) {
	p, _ := syncedProc(t, obj("a", "p1", 10))
	wakes := 0
	l, err := p.addListener(ListenerOptions{SendInitialEvents: true, OnWake: func() { wakes++ }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Stop)
	if wakes != 1 {
		t.Fatalf("OnWake called %d times for a due snapshot, want 1", wakes)
	}
	if got := seen(l.Pop(nil)); len(got) != 2 || got[1] != "END@10" {
		t.Fatalf("popped %v, want a snapshot of one object", got)
	}
	add(t, p, obj("a", "p2", 11))
	if wakes != 2 {
		t.Fatalf("OnWake called %d times after a change, want 2", wakes)
	}
	if diff := cmp.Diff([]string{"ADDED a/p2@11"}, seen(l.Pop(nil))); diff != "" {
		t.Fatalf("live events (-want +got):\n%s", diff)
	}
}

// TestWakeOnProgress: a listener that asks for it is woken when the
// resource moves on with nothing for it (a bookmark, a relist that
// changed nothing, a change its filter drops), and its Progress then
// follows; others are woken by their notifications only.
func TestWakeOnProgress(t *testing.T) {
	p, _ := syncedProc(t, obj("a", "p1", 10))
	follows, fw := mustListener(t, p, ListenerOptions{WakeOnProgress: true, Filter: Filter{Namespace: "a"}})
	plain, pw := mustListener(t, p, ListenerOptions{Filter: Filter{Namespace: "a"}})
	woken := func(w chan struct{}) bool {
		select {
		case <-w:
			return true
		default:
			return false
		}
	}
	for _, step := range []struct {
		what string
		do   func()
		rv   uint64
	}{
		{"a bookmark", func() { bookmark(t, p, 20) }, 20},
		{"a relist that changed nothing", func() { relist(t, p, 25, obj("a", "p1", 10)) }, 25},
		{"a change the filter drops", func() { add(t, p, obj("b", "p2", 30)) }, 30},
	} {
		step.do()
		if !woken(fw) {
			t.Fatalf("after %s: the listener following progress was not woken", step.what)
		}
		if got := follows.Pop(nil); len(got) != 0 || follows.Progress() != step.rv {
			t.Fatalf("after %s: popped %v, progress %d; want nothing at %d", step.what, seen(got), follows.Progress(), step.rv)
		}
		if woken(pw) {
			t.Fatalf("after %s: a listener with nothing to pop was woken", step.what)
		}
	}
	// A bookmark that does not move the version wakes nobody.
	bookmark(t, p, 30)
	if woken(fw) {
		t.Fatal("a bookmark at the version reached woke the listener")
	}
	if got := plain.Pop(nil); len(got) != 0 || plain.Progress() != 30 {
		t.Fatalf("the other listener: popped %v, progress %d", seen(got), plain.Progress())
	}
}

func TestUnchangedUpdateIsNotDistributed(t *testing.T) {
	p, _ := syncedProc(t, obj("a", "p1", 10))
	l, _ := mustListener(t, p, ListenerOptions{})
	update(t, p, obj("a", "p1", 10))
	if got := l.Pop(nil); len(got) != 0 {
		t.Fatalf("relist of an unchanged object produced %v", seen(got))
	}
}

func TestFilters(t *testing.T) {
	p, _ := syncedProc(t)
	info := &ResourceInfo{GVR: podsGVR, fields: testFields("spec.nodeName")}
	tests := []struct {
		name           string
		ns, lsel, fsel string
		want           []string
	}{
		{"all", "", "", "", []string{"ADDED a/x@20", "ADDED b/y@21", "ADDED a/z@22"}},
		{"namespace", "a", "", "", []string{"ADDED a/x@20", "ADDED a/z@22"}},
		{"label", "", "app=web", "", []string{"ADDED a/x@20", "ADDED b/y@21"}},
		{"label set", "", "app in (web),tier!=db", "", []string{"ADDED a/x@20"}},
		{"field name", "", "", "metadata.name=y", []string{"ADDED b/y@21"}},
		{"field extra", "", "", "spec.nodeName=n1", []string{"ADDED a/z@22"}},
		{"field and ns", "a", "", "metadata.name!=x", []string{"ADDED a/z@22"}},
	}
	var ls []*Listener
	for _, tc := range tests {
		f, err := ParseFilter(info, tc.ns, tc.lsel, tc.fsel)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		l, _ := mustListener(t, p, ListenerOptions{Filter: f})
		ls = append(ls, l)
	}
	add(t, p, obj("a", "x", 20, "app", "web", "tier", "fe"))
	add(t, p, obj("b", "y", 21, "app", "web", "tier", "db"))
	z := obj("a", "z", 22, "app", "api")
	z.extra = []string{"spec.nodeName", "n1"}
	add(t, p, z)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, seen(ls[i].Pop(nil))); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseFilterErrors(t *testing.T) {
	info := &ResourceInfo{GVR: podsGVR, fields: testFields()}
	for _, tc := range []struct{ lsel, fsel, param string }{
		{"app in (", "", "labelSelector"},
		{"", "spec.bogus=1", "fieldSelector"},
		{"", "metadata.name", "fieldSelector"},
		{string(make([]byte, maxSelectorLen+1)), "", "labelSelector"},
	} {
		_, err := ParseFilter(info, "", tc.lsel, tc.fsel)
		var fe *InvalidFilterError
		if !errors.As(err, &fe) || fe.Param != tc.param {
			t.Errorf("ParseFilter(%q, %q) = %v, want InvalidFilterError for %s", tc.lsel, tc.fsel, err, tc.param)
		}
	}
}

func TestOverflowResetKeepsBoundAndOthersUnaffected(t *testing.T) {
	p, _ := syncedProc(t, obj("a", "seed", 1))
	stuck, _ := mustListener(t, p, ListenerOptions{MaxEvents: 8})
	healthy, _ := mustListener(t, p, ListenerOptions{MaxEvents: 8})
	var healthyGot []string
	for i := 0; i < 100; i++ {
		add(t, p, obj("a", fmt.Sprintf("o%d", i), uint64(10+i)))
		if s := stuck.Stats(); s.Buffered > 8 || s.Capacity > 16 {
			t.Fatalf("stuck listener exceeded its bound: %+v", s)
		}
		healthyGot = append(healthyGot, seen(healthy.Pop(nil))...)
	}
	if len(healthyGot) != 100 {
		t.Fatalf("healthy listener got %d events, want 100", len(healthyGot))
	}
	if s := stuck.Stats(); s.Overflows == 0 || s.Resets == 0 {
		t.Fatalf("stats after overflow: %+v", s)
	}
	if !stuck.Overflowed() {
		t.Fatal("Overflowed() = false after a reset")
	}
	got := seen(stuck.Pop(nil))
	if got[0] != "RESET" || got[len(got)-1] != "END@109" || len(got) != 1+101+1 {
		t.Fatalf("after overflow got %d notifications: first %q last %q", len(got), got[0], got[len(got)-1])
	}
	add(t, p, obj("a", "after", 200))
	if diff := cmp.Diff([]string{"ADDED a/after@200"}, seen(stuck.Pop(nil))); diff != "" {
		t.Fatalf("buffering did not resume after the reset: %s", diff)
	}
}

func TestOverflowByBytes(t *testing.T) {
	p, _ := syncedProc(t)
	l, _ := mustListener(t, p, ListenerOptions{MaxBytes: 100})
	for i := 0; i < 5; i++ {
		add(t, p, obj("a", fmt.Sprintf("o%d", i), uint64(10+i))) // ~35 bytes each
	}
	if s := l.Stats(); s.Bytes > 100 || s.Resets == 0 {
		t.Fatalf("byte bound not enforced: %+v", s)
	}
}

func TestOverflowCollapse(t *testing.T) {
	p, _ := syncedProc(t, obj("a", "old", 1), obj("a", "gone", 2), obj("a", "recreated", 3))
	l, _ := mustListener(t, p, ListenerOptions{MaxEvents: 11, Overflow: OverflowCollapse})
	rv := uint64(10)
	next := func() uint64 { rv++; return rv }
	for i := 0; i < 5; i++ {
		update(t, p, obj("a", "old", next()))
	}
	add(t, p, obj("a", "brief", next()))
	del(t, p, obj("a", "brief", next()))
	add(t, p, obj("a", "new", next()))
	update(t, p, obj("a", "new", next()))
	del(t, p, obj("a", "gone", next()))
	del(t, p, obj("a", "recreated", next()))
	add(t, p, obj("a", "recreated", next())) // 12th change overflows
	got := seen(l.Pop(nil))
	want := []string{
		"MODIFIED a/old@15",
		"ADDED a/new@19",
		"DELETED a/gone@20",
		"DELETED a/recreated@21",
		"ADDED a/recreated@22",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("collapsed backlog (-want +got):\n%s", diff)
	}
	if s := l.Stats(); s.Collapses != 1 || s.Resets != 0 {
		t.Fatalf("stats: %+v", s)
	}
}

func TestCollapseFallsBackToReset(t *testing.T) {
	p, _ := syncedProc(t)
	l, _ := mustListener(t, p, ListenerOptions{MaxEvents: 4, Overflow: OverflowCollapse})
	for i := 0; i < 5; i++ { // five distinct objects cannot collapse below 3/4 of 4
		add(t, p, obj("a", fmt.Sprintf("o%d", i), uint64(10+i)))
	}
	got := seen(l.Pop(nil))
	if got[0] != "RESET" {
		t.Fatalf("want RESET after an uncollapsible overflow, got %v", got)
	}
}

func TestResume(t *testing.T) {
	p, _ := syncedProc(t, obj("a", "p1", 10))
	for rv := uint64(11); rv <= 15; rv++ {
		update(t, p, obj("a", "p1", rv))
	}
	l, _ := mustListener(t, p, ListenerOptions{ResourceVersion: "13", SendInitialEvents: true})
	if diff := cmp.Diff([]string{"MODIFIED a/p1@14", "MODIFIED a/p1@15"}, seen(l.Pop(nil))); diff != "" {
		t.Fatalf("resume inside history (-want +got):\n%s", diff)
	}
	// A version from a replica that is ahead: changes up to it are skipped.
	ahead, _ := mustListener(t, p, ListenerOptions{ResourceVersion: "17"})
	update(t, p, obj("a", "p1", 16))
	update(t, p, obj("a", "p1", 18))
	if diff := cmp.Diff([]string{"MODIFIED a/p1@18"}, seen(ahead.Pop(nil))); diff != "" {
		t.Fatalf("resume ahead (-want +got):\n%s", diff)
	}

	if _, err := p.addListener(ListenerOptions{ResourceVersion: "5", Wake: make(chan struct{}, 1)}); !errors.Is(err, ErrExpired) {
		t.Fatalf("resume before the history: err = %v, want ErrExpired", err)
	}
	if _, err := p.addListener(ListenerOptions{ResourceVersion: "x1", Wake: make(chan struct{}, 1)}); !errors.Is(err, ErrInvalidResourceVersion) {
		t.Fatalf("malformed version: err = %v", err)
	}
}

func TestHistoryEviction(t *testing.T) {
	p, _ := testProc(t, func(o *Options) { o.HistoryEvents = 3 })
	relist(t, p, 10, obj("a", "p", 10))
	for rv := uint64(11); rv <= 20; rv++ {
		update(t, p, obj("a", "p", rv))
	}
	if _, err := p.addListener(ListenerOptions{ResourceVersion: "16", Wake: make(chan struct{}, 1)}); !errors.Is(err, ErrExpired) {
		t.Fatalf("resume at 16 with history 18..20: err = %v, want ErrExpired", err)
	}
	l, _ := mustListener(t, p, ListenerOptions{ResourceVersion: "17"})
	if diff := cmp.Diff([]string{"MODIFIED a/p@18", "MODIFIED a/p@19", "MODIFIED a/p@20"}, seen(l.Pop(nil))); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func TestRelistRestartsHistory(t *testing.T) {
	p, _ := syncedProc(t, obj("a", "p1", 10), obj("a", "p2", 11), obj("a", "p3", 12), obj("a", "same", 5))
	update(t, p, obj("a", "p1", 20))
	live, _ := mustListener(t, p, ListenerOptions{})
	// A relist at 30 after an outage: p1 was deleted, p2 changed at 25,
	// p3 was deleted and re-created (another UID), p4 is new and "same"
	// did not change.
	p3 := obj("a", "p3", 26)
	p3.UID = "second"
	relist(t, p, 30, obj("a", "p2", 25), p3, obj("a", "p4", 27), obj("a", "same", 5))
	want := []string{"DELETED a/p1@20", "DELETED a/p3@12", "MODIFIED a/p2@25", "ADDED a/p3@26", "ADDED a/p4@27"}
	got := seen(live.Pop(nil))
	// Deletions come first, in no particular order among themselves.
	slices.Sort(got[:2])
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("live listener during relist (-want +got):\n%s", diff)
	}
	objs, rv := p.list(&Filter{})
	if rv != 30 || len(objs) != 4 {
		t.Fatalf("list after relist: %d objects at %d, want 4 at the list's version 30", len(objs), rv)
	}
	// A consumer that had seen 20 cannot resume: what changed between 20
	// and 30 is not known change by change.
	if _, err := p.addListener(ListenerOptions{ResourceVersion: "20", Wake: make(chan struct{}, 1)}); !errors.Is(err, ErrExpired) {
		t.Fatalf("resume across a relist: err = %v, want ErrExpired", err)
	}
	update(t, p, obj("a", "p2", 31))
	l, _ := mustListener(t, p, ListenerOptions{ResourceVersion: "30"})
	if diff := cmp.Diff([]string{"MODIFIED a/p2@31"}, seen(l.Pop(nil))); diff != "" {
		t.Fatalf("resume after relist (-want +got):\n%s", diff)
	}
}

func TestResyncPerListener(t *testing.T) {
	p, clk := syncedProc(t, obj("a", "p1", 10), obj("b", "p2", 11))
	fast, fastWake := mustListener(t, p, ListenerOptions{ResyncPeriod: 2 * time.Second, Filter: Filter{Namespace: "a"}})
	slow, _ := mustListener(t, p, ListenerOptions{ResyncPeriod: 5 * time.Second})
	clamped, _ := mustListener(t, p, ListenerOptions{ResyncPeriod: time.Millisecond}) // raised to MinResync (1s)
	none, _ := mustListener(t, p, ListenerOptions{})

	counts := map[*Listener]int{}
	for s := 1; s <= 10; s++ {
		clk.Step(time.Second)
		p.resyncTick(clk.Now())
		for _, l := range []*Listener{fast, slow, clamped, none} {
			for _, n := range l.Pop(nil) {
				if n.Type == Sync {
					counts[l]++
				}
			}
		}
	}
	// fast: every 2s over 10s, 1 object each; slow: 2 resyncs x 2 objects.
	if counts[fast] != 5 || counts[slow] != 4 || counts[clamped] != 20 || counts[none] != 0 {
		t.Fatalf("sync counts fast=%d slow=%d clamped=%d none=%d", counts[fast], counts[slow], counts[clamped], counts[none])
	}
	select {
	case <-fastWake:
	default:
	}
	// Pending changes are delivered before the resync's Sync notifications.
	clk.Step(2 * time.Second)
	update(t, p, obj("a", "p1", 12))
	p.resyncTick(clk.Now())
	if diff := cmp.Diff([]string{"MODIFIED a/p1@12", "SYNC a/p1@12"}, seen(fast.Pop(nil))); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func TestStoppedListenerGetsNothing(t *testing.T) {
	p, _ := syncedProc(t)
	l, _ := mustListener(t, p, ListenerOptions{Filter: Filter{Namespace: "a"}})
	l.Stop()
	l.Stop()
	add(t, p, obj("a", "x", 5))
	if got := l.Pop(nil); len(got) != 0 {
		t.Fatalf("stopped listener got %v", seen(got))
	}
	if len(p.listeners.scopes) != 0 || p.listeners.n != 0 {
		t.Fatal("the listener index kept a stopped listener")
	}
}

func TestSelectorLabelsIgnoreNil(t *testing.T) {
	f := Filter{Label: labels.Everything(), Field: fields.Everything()}
	if !f.Matches(obj("a", "x", 1)) {
		t.Fatal("everything selectors must match")
	}
}

func TestNamespaceSetFilter(t *testing.T) {
	p, _ := syncedProc(t, obj("a", "p1", 10), obj("b", "p2", 11), obj("c", "p3", 12), obj("", "node1", 13))
	f := Filter{Namespaces: sets.New("a", "c")}
	l, _ := mustListener(t, p, ListenerOptions{Filter: f, SendInitialEvents: true})
	empty, _ := mustListener(t, p, ListenerOptions{Filter: Filter{Namespaces: sets.New[string]()}, SendInitialEvents: true})

	got := seen(l.Pop(nil))
	slices.Sort(got[:len(got)-1])
	if diff := cmp.Diff([]string{"ADDED a/p1@10", "ADDED c/p3@12", "END@13"}, got); diff != "" {
		t.Fatalf("snapshot (-want +got):\n%s", diff)
	}
	add(t, p, obj("b", "p4", 14))
	add(t, p, obj("c", "p5", 15))
	del(t, p, obj("a", "p1", 16))
	if diff := cmp.Diff([]string{"ADDED c/p5@15", "DELETED a/p1@16"}, seen(l.Pop(nil))); diff != "" {
		t.Fatalf("live (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"END@16"}, seen(empty.Pop(nil))); diff != "" {
		t.Fatalf("empty set must see nothing but the end marker, cut when popped (-want +got):\n%s", diff)
	}
	objs, _ := p.list(&f)
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key())
	}
	slices.Sort(keys)
	if diff := cmp.Diff([]string{"c/p3", "c/p5"}, keys); diff != "" {
		t.Fatalf("list (-want +got):\n%s", diff)
	}
	l.Stop()
	l.Stop() // idempotent
	p.mu.RLock()
	defer p.mu.RUnlock()
	for ns, scope := range p.listeners.scopes {
		if _, ok := scope.plain[l]; ok {
			t.Fatalf("stopped listener still indexed under namespace %q", ns)
		}
	}
}

// An object whose labels move it into or out of a listener's selector
// arrives as ADDED or DELETED, as from the apiserver's watch, both live and
// when replayed from the history on resume.
func TestSelectorTransitions(t *testing.T) {
	p, _ := syncedProc(t, obj("a", "x", 10, "app", "web"), obj("a", "y", 11, "app", "db"))
	info := &ResourceInfo{GVR: podsGVR}
	f, err := ParseFilter(info, "", "app=web", "")
	if err != nil {
		t.Fatal(err)
	}
	live, _ := mustListener(t, p, ListenerOptions{Filter: f})
	all, _ := mustListener(t, p, ListenerOptions{})

	update(t, p, obj("a", "x", 12, "app", "db"))  // leaves
	update(t, p, obj("a", "y", 13, "app", "web")) // enters
	update(t, p, obj("a", "y", 14, "app", "web")) // stays
	update(t, p, obj("a", "x", 15, "app", "dbx")) // stays out

	want := []string{"DELETED a/x@12", "ADDED a/y@13", "MODIFIED a/y@14"}
	if diff := cmp.Diff(want, seen(live.Pop(nil))); diff != "" {
		t.Fatalf("selected listener (-want +got):\n%s", diff)
	}
	wantAll := []string{"MODIFIED a/x@12", "MODIFIED a/y@13", "MODIFIED a/y@14", "MODIFIED a/x@15"}
	if diff := cmp.Diff(wantAll, seen(all.Pop(nil))); diff != "" {
		t.Fatalf("unfiltered listener (-want +got):\n%s", diff)
	}
	resumed, _ := mustListener(t, p, ListenerOptions{Filter: f, ResourceVersion: "11"})
	if diff := cmp.Diff(want, seen(resumed.Pop(nil))); diff != "" {
		t.Fatalf("resumed listener (-want +got):\n%s", diff)
	}
}

// TestTombstoneReachesResumedListener: a consumer resumes (minRV set),
// then an outage's relist finds an object gone. The tombstone carries the
// object's last version, older than the resume point; it must still be
// delivered, or the consumer keeps the deleted object for ever.
func TestTombstoneReachesResumedListener(t *testing.T) {
	p, _ := syncedProc(t, obj("a", "p1", 10), obj("a", "p2", 11))
	update(t, p, obj("a", "p2", 20))
	resumed, _ := mustListener(t, p, ListenerOptions{ResourceVersion: "20"})
	ahead, _ := mustListener(t, p, ListenerOptions{ResourceVersion: "25"})
	relist(t, p, 22, obj("a", "p2", 20))
	for _, l := range []*Listener{resumed, ahead} {
		if diff := cmp.Diff([]string{"DELETED a/p1@10"}, seen(l.Pop(nil))); diff != "" {
			t.Errorf("tombstone after a resume (-want +got):\n%s", diff)
		}
	}
	// A live delete at or below the resume point is still skipped.
	del(t, p, obj("a", "p2", 24))
	if got := seen(ahead.Pop(nil)); len(got) != 0 {
		t.Errorf("listener resumed at 25 got %v for a change at 24", got)
	}
}

// TestEndedAfterWhatListenersHold: when the resource is gone, every
// listener is detached and pops Ended once it has popped what it held (a
// snapshot it was due included), within its pop limit; new listeners are
// refused with the error, and a Reset of an ended listener hands out
// Ended again.
func TestEndedAfterWhatListenersHold(t *testing.T) {
	p, _ := syncedProc(t, obj("a", "p1", 10), obj("b", "p2", 11))
	live, wake := mustListener(t, p, ListenerOptions{})
	snap, _ := mustListener(t, p, ListenerOptions{SendInitialEvents: true})
	keyed, _ := mustListener(t, p, ListenerOptions{Filter: Filter{Label: labels.SelectorFromSet(labels.Set{"app": "web"})}})
	limited, _ := mustListener(t, p, ListenerOptions{})
	del(t, p, obj("a", "p1", 12))
	update(t, p, obj("b", "p2", 13, "app", "web"))
	<-wake

	gone := &ResourceGoneError{GVR: podsGVR}
	p.end(gone)
	select {
	case <-wake:
	default:
		t.Fatal("an ended listener's consumer was not woken")
	}
	if n := p.listenerCount(); n != 0 {
		t.Fatalf("%d listeners still attached after the end", n)
	}
	for _, tc := range []struct {
		name string
		l    *Listener
		want []string
	}{
		{"live", live, []string{"DELETED a/p1@12", "MODIFIED b/p2@13", "ENDED@13"}},
		{"snapshot", snap, []string{"ADDED b/p2@13", "END@13", "ENDED@13"}},
		{"keyed", keyed, []string{"ADDED b/p2@13", "ENDED@13"}},
	} {
		if diff := cmp.Diff(tc.want, seen(tc.l.Pop(nil))); diff != "" {
			t.Errorf("%s listener (-want +got):\n%s", tc.name, diff)
		}
		if got := seen(tc.l.Pop(nil)); len(got) != 0 {
			t.Errorf("%s listener popped %v after Ended", tc.name, got)
		}
		if err := tc.l.Err(); err != gone {
			t.Errorf("%s listener: Err() = %v, want the end's error", tc.name, err)
		}
	}
	// Ended comes only with room for it.
	if diff := cmp.Diff([]string{"DELETED a/p1@12", "MODIFIED b/p2@13"}, seen(limited.PopAtMost(nil, 2))); diff != "" {
		t.Errorf("PopAtMost(2) (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"ENDED@13"}, seen(limited.PopAtMost(nil, 2))); diff != "" {
		t.Errorf("next PopAtMost(2) (-want +got):\n%s", diff)
	}

	live.Reset()
	if diff := cmp.Diff([]string{"ENDED@13"}, seen(live.Pop(nil))); diff != "" {
		t.Errorf("Pop after Reset of an ended listener (-want +got):\n%s", diff)
	}
	if _, err := p.addListener(ListenerOptions{Wake: make(chan struct{}, 1)}); !errors.Is(err, gone) {
		t.Fatalf("addListener after the end: err = %v, want the end's error", err)
	}
}

// relistWithColumns feeds a (re)list as boundedFIFO.Replace queues it:
// its objects, then its columns.
func relistWithColumns(t testing.TB, p *processor, rv uint64, cols *Columns, objs ...*Object) {
	t.Helper()
	items := make([]any, 0, len(objs)+1)
	for _, o := range objs {
		items = append(items, o)
	}
	items = append(items, listedColumns{cols})
	feed(t, p, cache.ReplacedAll, cache.ReplacedAllInfo{ResourceVersion: strconv.FormatUint(rv, 10), Objects: items})
}

func printed(o *Object, cols *Columns, cells string) *Object {
	o.Columns, o.Cells = cols, []byte(cells)
	return o
}

// TestRelistWithOtherColumns: a relist whose columns changed restates
// every object at its version, even to a listener resumed past it; one
// with the same columns changes nothing, whatever its relative cells.
func TestRelistWithOtherColumns(t *testing.T) {
	p, _ := testProc(t, nil)
	c1 := &Columns{Raw: []byte(`[{"name":"Name"}]`)}
	c2 := &Columns{Raw: []byte(`[{"name":"Name"},{"name":"Color"}]`)}
	relistWithColumns(t, p, 10, c1, printed(obj("a", "x", 5), c1, `["x","1s"]`))
	if p.columns.Load() != c1 {
		t.Fatal("the list's columns were not taken")
	}
	resumed, _ := mustListener(t, p, ListenerOptions{ResourceVersion: "10"})

	// Same version, same columns, a later age: nothing changed.
	relistWithColumns(t, p, 11, c1, printed(obj("a", "x", 5), c1, `["x","9m"]`))
	if got := resumed.Pop(nil); len(got) != 0 {
		t.Fatalf("a relist with the same columns gave %v", seen(got))
	}
	// Other columns: x is restated, and the columns follow.
	relistWithColumns(t, p, 12, c2, printed(obj("a", "x", 5), c2, `["x","red"]`))
	got := resumed.Pop(nil)
	if diff := cmp.Diff([]string{"MODIFIED a/x@5"}, seen(got)); diff != "" {
		t.Fatalf("relist with other columns (-want +got):\n%s", diff)
	}
	if got[0].Object.Columns != c2 || p.columns.Load() != c2 {
		t.Fatal("the relist's columns were not taken")
	}
	// A watch event repeating what the store holds is still ignored.
	update(t, p, printed(obj("a", "x", 5), c2, `["x","red"]`))
	if got := resumed.Pop(nil); len(got) != 0 {
		t.Fatalf("a repeated event gave %v", seen(got))
	}
	// An empty list still brings its columns; a plain one, none.
	relistWithColumns(t, p, 13, c1)
	if p.columns.Load() != c1 {
		t.Fatal("an empty list's columns were not taken")
	}
	relist(t, p, 14)
	if p.columns.Load() != nil {
		t.Fatal("a list without columns kept the old ones")
	}
}

// testFields is a namespaced resource's field set with the given fields
// beyond metadata.name and metadata.namespace, each read at its path.
func testFields(paths ...string) *sharedFields {
	fs := make([]selectableField, len(paths))
	for i, p := range paths {
		fs[i] = field(p)
	}
	return newSharedFields(newFieldSet(true, fs, nil), false)
}
