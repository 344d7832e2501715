package informer

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/sets"
)

// A live consumer drains after every change; its ring must keep its array
// rather than free it and allocate it again for the next change, so the
// cost of a change does not grow with the number of listeners.
func TestDrainedRingKeepsItsArray(t *testing.T) {
	allocs := func(n int) float64 {
		p, _ := syncedProc(t, obj("a", "p", 1))
		ls := make([]*Listener, n)
		for i := range ls {
			ls[i], _ = mustListener(t, p, ListenerOptions{})
		}
		objs := make([]*Object, 200)
		for i := range objs {
			objs[i] = obj("a", "p", uint64(i+2))
		}
		buf := make([]Notification, 0, 4)
		i := 0
		return testing.AllocsPerRun(100, func() {
			update(t, p, objs[i])
			i++
			for _, l := range ls {
				buf = l.Pop(buf[:0])
				if len(buf) != 1 {
					t.Fatalf("popped %d", len(buf))
				}
			}
		})
	}
	one, many := allocs(1), allocs(100)
	if many > one {
		t.Fatalf("allocations per change: %v with 1 listener, %v with 100 drained after each change; want no more", one, many)
	}
	p, _ := syncedProc(t, obj("a", "p", 1))
	l, _ := mustListener(t, p, ListenerOptions{})
	for rv := uint64(2); rv < 40; rv++ {
		update(t, p, obj("a", "p", rv))
	}
	l.Pop(nil)
	if c := l.Stats().Capacity; c != ringNormalSize {
		t.Fatalf("drained ring has capacity %d, want %d", c, ringNormalSize)
	}
}

// Consumers are woken after the processor has released its lock: a wake
// that starts work (a socket's writer) must not hold up every LIST,
// snapshot and resync of the resource.
func TestWakeAfterUnlock(t *testing.T) {
	p, clk := syncedProc(t, obj("a", "p", 1))
	var wakes, locked atomic.Int32
	onWake := func() {
		wakes.Add(1)
		if !p.mu.TryLock() {
			locked.Add(1)
			return
		}
		p.mu.Unlock()
	}
	l, err := p.addListener(ListenerOptions{OnWake: onWake, SendInitialEvents: true, ResyncPeriod: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	l.Pop(nil)
	update(t, p, obj("a", "p", 2))
	l.Pop(nil)
	relist(t, p, 5, obj("a", "q", 4))
	l.Pop(nil)
	clk.Step(time.Second)
	p.resyncTick(clk.Now())
	if wakes.Load() != 4 || locked.Load() != 0 {
		t.Fatalf("%d wakes, %d of them with the processor's lock held; want 4 and 0", wakes.Load(), locked.Load())
	}
}

// A listener is signalled when it goes from nothing pending to something
// pending; changes that join a backlog its consumer has not popped yet are
// covered by the signal already sent.
func TestSignalledWhenBacklogStarts(t *testing.T) {
	p, _ := syncedProc(t, obj("a", "p", 1))
	var wakes atomic.Int32
	l, err := p.addListener(ListenerOptions{OnWake: func() { wakes.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	for rv := uint64(2); rv <= 4; rv++ {
		update(t, p, obj("a", "p", rv))
	}
	if got := wakes.Load(); got != 1 {
		t.Fatalf("%d wakes for a backlog of 3, want 1", got)
	}
	if got := len(l.Pop(nil)); got != 3 {
		t.Fatalf("popped %d, want 3", got)
	}
	update(t, p, obj("a", "p", 5))
	if got := wakes.Load(); got != 2 {
		t.Fatalf("%d wakes after the backlog was drained and a change came, want 2", got)
	}
}

// Every listener receives exactly what it would if every change were
// offered to every listener: the index only skips listeners that cannot
// want a change, including listeners an object leaves.
func TestIndexedDistributionMatchesUnindexed(t *testing.T) {
	info := &ResourceInfo{GVR: podsGVR, Namespaced: true,
		fields: testFields("spec.nodeName")}
	selectors := []struct{ ns, label, field string }{
		{}, {ns: "a"}, {label: "app=web"}, {label: "app in (web,db)"}, {label: "app!=web"},
		{label: "app=web,tier=front"}, {label: "tier"}, {field: "spec.nodeName=n1"},
		{field: "spec.nodeName=n2,metadata.name=p1"}, {field: "spec.nodeName!=n1"}, {field: "spec.nodeName="},
		{ns: "b", label: "app=db"}, {ns: "a", field: "spec.nodeName=n2"},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 20 {
		t.Run(strconv.Itoa(round), func(t *testing.T) {
			indexed, _ := syncedProc(t)
			flat, _ := syncedProc(t)
			var pairs [][2]*Listener
			for _, s := range selectors {
				f, err := ParseFilter(info, s.ns, s.label, s.field)
				if err != nil {
					t.Fatal(err)
				}
				a, _ := mustListener(t, indexed, ListenerOptions{Filter: f})
				b, _ := mustListener(t, flat, ListenerOptions{Filter: f})
				// The reference files every listener unkeyed.
				flat.mu.Lock()
				flat.listeners.remove(b)
				b.key = indexKey{}
				flat.listeners.add(b)
				flat.mu.Unlock()
				pairs = append(pairs, [2]*Listener{a, b})
			}
			// A namespace set filter, as authorization narrows one.
			setF := Filter{Namespaces: sets.New("a", "c")}
			a, _ := mustListener(t, indexed, ListenerOptions{Filter: setF})
			b, _ := mustListener(t, flat, ListenerOptions{Filter: setF})
			pairs = append(pairs, [2]*Listener{a, b})

			live := map[string]bool{}
			for rv := uint64(1); rv <= 300; rv++ {
				ns := []string{"a", "b", "c", ""}[rng.IntN(4)]
				name := "p" + strconv.Itoa(rng.IntN(6))
				key := ns + "/" + name
				o := obj(ns, name, rv, randomLabels(rng)...)
				if rng.IntN(3) > 0 {
					o.extra = []string{"spec.nodeName", []string{"n1", "n2", ""}[rng.IntN(3)]}
				}
				deleting := live[key] && rng.IntN(5) == 0
				for _, p := range []*processor{indexed, flat} {
					if deleting {
						del(t, p, o)
					} else {
						update(t, p, o)
					}
				}
				live[key] = !deleting
			}
			for i, pr := range pairs {
				want, got := seen(pr[1].Pop(nil)), seen(pr[0].Pop(nil))
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("listener %d %+v (-unindexed +indexed):\n%s", i, pr[0].filter, diff)
				}
			}
		})
	}
}

func randomLabels(rng *rand.Rand) []string {
	var l []string
	if v := rng.IntN(4); v > 0 {
		l = append(l, "app", []string{"", "web", "db", "api"}[v])
	}
	if rng.IntN(2) == 0 {
		l = append(l, "tier", []string{"front", "back"}[rng.IntN(2)])
	}
	return l
}

// A listener is filed under an equality its selectors require, and only
// then.
func TestIndexKeyOf(t *testing.T) {
	info := &ResourceInfo{GVR: podsGVR, Namespaced: true,
		fields: testFields("spec.nodeName")}
	for _, c := range []struct {
		label, field string
		want         indexKey
	}{
		{"", "", indexKey{}},
		{"app=web", "", indexKey{kind: keyLabel, key: "app", values: []string{"web"}}},
		{"app in (web,db)", "", indexKey{kind: keyLabel, key: "app", values: []string{"web", "db"}}},
		{"app!=web", "", indexKey{}},
		{"tier", "", indexKey{}},
		{"app=web", "spec.nodeName=n1", indexKey{kind: keyField, key: "spec.nodeName", values: []string{"n1"}}},
		{"", "spec.nodeName!=n1", indexKey{}},
	} {
		f, err := ParseFilter(info, "", c.label, c.field)
		if err != nil {
			t.Fatal(err)
		}
		got := indexKeyOf(&f)
		slices.Sort(got.values)
		slices.Sort(c.want.values)
		if diff := cmp.Diff(c.want, got, cmp.AllowUnexported(indexKey{})); diff != "" {
			t.Errorf("%q %q (-want +got):\n%s", c.label, c.field, diff)
		}
	}
}

// A resync is placed among the changes where it fell due: changes before
// the tick come before its Sync notifications, which carry the state at
// the tick, and changes after it come after them.
func TestResyncTakesItsPlaceAmongChanges(t *testing.T) {
	p, clk := syncedProc(t, obj("a", "p1", 10), obj("a", "p2", 11))
	l, _ := mustListener(t, p, ListenerOptions{ResyncPeriod: time.Second})
	update(t, p, obj("a", "p1", 12))
	clk.Step(time.Second)
	p.resyncTick(clk.Now())
	update(t, p, obj("a", "p1", 13))
	del(t, p, obj("a", "p2", 14))
	got := seen(l.Pop(nil))
	slices.Sort(got[1:3])
	want := []string{"MODIFIED a/p1@12", "SYNC a/p1@12", "SYNC a/p2@11", "MODIFIED a/p1@13", "DELETED a/p2@14"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

// Listeners due at one tick share one cut of the store rather than each
// listing it, and a stopped listener leaves the schedule.
func TestResyncSharesOneCut(t *testing.T) {
	var objs []*Object
	for i := range 50 {
		objs = append(objs, obj("ns-"+strconv.Itoa(i%5), "p"+strconv.Itoa(i), uint64(i+1)))
	}
	p, clk := syncedProc(t, objs...)
	all1, _ := mustListener(t, p, ListenerOptions{ResyncPeriod: time.Second})
	all2, _ := mustListener(t, p, ListenerOptions{ResyncPeriod: time.Second})
	ns1, _ := mustListener(t, p, ListenerOptions{ResyncPeriod: time.Second, Filter: Filter{Namespace: "ns-1"}})
	ns2, _ := mustListener(t, p, ListenerOptions{ResyncPeriod: time.Second, Filter: Filter{Namespaces: sets.New("ns-1", "ns-2")}})
	later, _ := mustListener(t, p, ListenerOptions{ResyncPeriod: 5 * time.Second})
	clk.Step(time.Second)
	p.resyncTick(clk.Now())
	if later.view != nil {
		t.Fatal("a listener not due got a resync")
	}
	if &all1.view.chunks[0][0] != &all2.view.chunks[0][0] {
		t.Error("two listeners of all namespaces got separate cuts")
	}
	if &ns1.view.chunks[0][0] != &ns2.view.chunks[0][0] {
		t.Error("two listeners of namespace ns-1 got separate cuts")
	}
	for l, want := range map[*Listener]int{all1: 50, all2: 50, ns1: 10, ns2: 20} {
		if got := len(l.Pop(nil)); got != want {
			t.Errorf("resync sent %d, want %d", got, want)
		}
	}
	all2.Stop()
	if len(p.resyncs) != 4 || len(p.scheduled) != 4 || p.scheduled[all2] != nil {
		t.Fatalf("%d listeners scheduled (%d entries) after one stopped, want 4", len(p.resyncs), len(p.scheduled))
	}
	for i, e := range p.resyncs {
		if e.index != i || p.scheduled[e.l] != e {
			t.Fatalf("schedule entry %d thinks it is at %d", i, e.index)
		}
	}
}

// One client asking for 100 subscriptions at the shortest resync period
// over a large resource gets no more than its budget; a client without
// that load keeps its period.
func TestResyncBudgetBoundsAClient(t *testing.T) {
	var objs []*Object
	for i := range 1000 {
		objs = append(objs, obj("ns", "p"+strconv.Itoa(i), uint64(i+1)))
	}
	p, clk := syncedProc(t, objs...)
	const rate, burst = 2000, 5000
	budget := NewResyncBudget(rate, burst)
	var abusive []*Listener
	for range 100 {
		l, _ := mustListener(t, p, ListenerOptions{ResyncPeriod: time.Second, ResyncBudget: budget})
		abusive = append(abusive, l)
	}
	other, _ := mustListener(t, p, ListenerOptions{ResyncPeriod: 2 * time.Second, ResyncBudget: NewResyncBudget(rate, burst)})
	const seconds = 60
	sent, otherSent := 0, 0
	for range seconds {
		clk.Step(time.Second)
		p.resyncTick(clk.Now())
		for _, l := range abusive {
			sent += len(l.Pop(nil))
		}
		otherSent += len(other.Pop(nil))
	}
	// The budget may be overdrawn by one resync, never more.
	if limit := rate*seconds + burst + 1000; sent > limit {
		t.Fatalf("the client was sent %d objects in %ds, budget allows %d", sent, seconds, limit)
	}
	if sent < rate*seconds/2 {
		t.Fatalf("the client was sent only %d objects in %ds; the budget allows %d", sent, seconds, rate*seconds)
	}
	if want := seconds / 2 * 1000; otherSent != want {
		t.Fatalf("the other client was sent %d, want %d", otherSent, want)
	}
	var deferred uint64
	for _, l := range abusive {
		deferred += l.Stats().Deferred
	}
	if deferred == 0 {
		t.Fatal("no resync was deferred")
	}
}

// A consumer can stream a large snapshot in chunks while changes keep
// arriving: the snapshot comes first, whole, then the changes after its
// cut, in order; Progress stays 0 until the end marker has been popped.
func TestPopAtMostStreamsASnapshot(t *testing.T) {
	var objs []*Object
	for i := range 1000 {
		objs = append(objs, obj("ns", fmt.Sprintf("p%04d", i), uint64(i+1)))
	}
	p, _ := syncedProc(t, objs...)
	l, _ := mustListener(t, p, ListenerOptions{SendInitialEvents: true, MaxEvents: 100000})
	var got []Notification
	rv := uint64(1000)
	for {
		chunk := l.PopAtMost(nil, 64)
		if len(chunk) > 64 {
			t.Fatalf("popped %d, limit 64", len(chunk))
		}
		if len(chunk) == 0 {
			break
		}
		got = append(got, chunk...)
		ended := slices.ContainsFunc(got, func(n Notification) bool { return n.Type == EndOfSnapshot })
		if !ended && l.Progress() != 0 {
			t.Fatalf("progress %d in the middle of the snapshot", l.Progress())
		}
		if rv < 1010 {
			rv++
			update(t, p, obj("ns", "p0000", rv))
		}
	}
	if got[0].Type != Added || len(got) != 1000+1+10 {
		t.Fatalf("got %d notifications, first %v", len(got), got[0].Type)
	}
	end := got[1000]
	if end.Type != EndOfSnapshot || end.RV != 1000 {
		t.Fatalf("notification 1000 is %v@%d, want the end marker at the cut's version 1000", end.Type, end.RV)
	}
	want := []string{}
	for v := 1001; v <= 1010; v++ {
		want = append(want, fmt.Sprintf("MODIFIED ns/p0000@%d", v))
	}
	if diff := cmp.Diff(want, seen(got[1001:])); diff != "" {
		t.Fatalf("changes after the snapshot (-want +got):\n%s", diff)
	}
	if l.Progress() != 1010 {
		t.Fatalf("progress %d after draining, want 1010", l.Progress())
	}
}
