package livequery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"kubegate/internal/testenv"
)

// slotProbe holds every build that gets a slot, before it scans, until
// the test lets it go, and records which views scanned and in what
// order.
type slotProbe struct {
	arrived chan string // a build's view (its sort key) once it holds a slot
	release chan struct{}
	// blocked receives a view's sort key when its scan stops at its gate.
	blocked chan string

	mu sync.Mutex
	// gates stop the next scan of a view at its first sort value read,
	// until closed; a gate is used once.
	gates map[string]chan struct{}
	// runs are the sort keys the scans read rows for, one entry per run
	// of reads by one scan: a scan that ran while another did shows up
	// in two runs.
	runs []string
}

// newSlotTable returns a table of n rows on slots, whose sort keys are
// names read as a probe that records each scan: "a1" sorts by name, and
// records "a1".
func newSlotTable(n int, slots *BuildSlots, p *slotProbe) *Table {
	tbl := NewTable(Options{BuildSlots: slots, MaxViewsPerOwner: 8, IdleViews: -1,
		SortKey: func(key string) (func(*Row) Value, error) {
			return func(r *Row) Value {
				p.mu.Lock()
				if len(p.runs) == 0 || p.runs[len(p.runs)-1] != key {
					p.runs = append(p.runs, key)
				}
				g := p.gates[key]
				delete(p.gates, key)
				p.mu.Unlock()
				if g != nil {
					p.blocked <- key
					<-g
				}
				return String(r.Name)
			}, nil
		}})
	var rows []*Row
	for i := range n {
		rows = append(rows, &Row{Namespace: "a", Name: fmt.Sprintf("r%05d", i)})
	}
	tbl.Replace(rows, 1)
	tbl.slotHook = func(b *build) {
		p.arrived <- b.key.spec.Key
		<-p.release
	}
	return tbl
}

func newSlotProbe() *slotProbe {
	return &slotProbe{arrived: make(chan string, 16), release: make(chan struct{}), blocked: make(chan string, 16), gates: map[string]chan struct{}{}}
}

// gate stops the next scan of the view sorted by key at its first sort
// value read, until the returned channel is closed.
func (p *slotProbe) gate(key string) chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	g := make(chan struct{})
	p.gates[key] = g
	return g
}

func (p *slotProbe) scans() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.runs)
}

func slotQuery(owner, key string) Query {
	return Query{Sort: SortSpec{Key: key}, Range: Range{Limit: 2}, Owner: owner}
}

// result returns what the Open res stands for returned, failing the
// test if it does not return within bound.
func result(t *testing.T, res <-chan openResult) openResult {
	t.Helper()
	var r openResult
	within(t, "an Open to return", nil, func() { r = <-res })
	return r
}

// closeOpened fails the test unless the Open res stands for returned a
// window, and closes it.
func closeOpened(t *testing.T, res <-chan openResult) {
	t.Helper()
	r := result(t, res)
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.w.Close()
}

// next returns the view of the next build to get a slot.
func (p *slotProbe) next(t *testing.T) string {
	t.Helper()
	var key string
	within(t, "the next build to get a slot", nil, func() { key = <-p.arrived })
	return key
}

// With one slot, builds scan one at a time, and a free slot goes to the
// owner served least recently: alice's four new views, queued first,
// delay bob's (on another table sharing the slots) by the one already
// scanning, not by all four. That one, alice's first ever, keeps its
// slot: bob's claim is no better.
func TestBuildSlotsFairByOwner(t *testing.T) {
	slots := NewBuildSlots(BuildSlotsOptions{Slots: 1})
	p := newSlotProbe()
	tbl := newSlotTable(5000, slots, p)
	other := newSlotTable(5000, slots, p)
	var results []<-chan openResult
	results = append(results, openAsync(context.Background(), tbl, slotQuery("alice", "a1")))
	if got := p.next(t); got != "a1" {
		t.Fatalf("first build %q, want a1", got)
	}
	for i, key := range []string{"a2", "a3", "a4"} {
		results = append(results, openAsync(context.Background(), tbl, slotQuery("alice", key)))
		testenv.Eventually(t, "alice's build "+key+" to queue", func() bool { return slots.Waiting() == i+1 })
	}
	results = append(results, openAsync(context.Background(), other, slotQuery("bob", "b1")))
	testenv.Eventually(t, "bob's build to queue", func() bool { return slots.Waiting() == 4 })

	order := []string{"a1"}
	for range 4 {
		p.release <- struct{}{}
		order = append(order, p.next(t))
	}
	p.release <- struct{}{}
	if want := []string{"a1", "b1", "a2", "a3", "a4"}; !slices.Equal(order, want) {
		t.Errorf("builds got their slots in the order %v, want %v", order, want)
	}
	for _, res := range results {
		r := result(t, res)
		if r.err != nil {
			t.Fatal(r.err)
		}
		r.w.Close()
	}
	if got := p.scans(); !slices.Equal(got, order) {
		t.Errorf("the scans read rows in runs %v, want one run per build, in the order %v", got, order)
	}
	tbl.Wait()
	other.Wait()
	checkSlotsIdle(t, slots)
}

// serve has owner open and close the view sorted by key on tbl, its
// build let through p, so that owner has been served.
func serve(t *testing.T, tbl *Table, p *slotProbe, owner, key string) {
	t.Helper()
	res := openAsync(context.Background(), tbl, slotQuery(owner, key))
	if got := p.next(t); got != key {
		t.Fatalf("build %q got the slot, want %s", got, key)
	}
	p.release <- struct{}{}
	closeOpened(t, res)
}

// checkSlotsIdle fails the test unless slots hold no build: none
// scanning, queued or paused, and no flow with one.
func checkSlotsIdle(t *testing.T, slots *BuildSlots) {
	t.Helper()
	slots.mu.Lock()
	defer slots.mu.Unlock()
	if slots.running != 0 || slots.waiting != 0 || slots.paused != 0 || len(slots.scanning) != 0 || len(slots.queued) != 0 {
		t.Errorf("slots after the builds: %d running, %d waiting, %d paused, %d scanning, %d queued",
			slots.running, slots.waiting, slots.paused, len(slots.scanning), len(slots.queued))
	}
	for owner, f := range slots.flows {
		if f.active != 0 || len(f.queue) != 0 {
			t.Errorf("after the builds, %s's flow holds %d builds, %d queued", owner, f.active, len(f.queue))
		}
	}
}

// paused returns how many builds are paused or asked to pause.
func (s *BuildSlots) pausedBuilds() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paused
}

// A build of alice's, who was served before, scanning when bob (never
// served) queues a build, gives its slot up to bob's at its next check,
// and resumes where it stopped once that build has scanned; bob, served
// since, does not take the slot from it again with his next build,
// which waits.
func TestBuildSlotsNewOwnerPreempts(t *testing.T) {
	slots := NewBuildSlots(BuildSlotsOptions{Slots: 1})
	p := newSlotProbe()
	tbl := newSlotTable(5000, slots, p)
	serve(t, tbl, p, "alice", "a0")
	alice := openAsync(context.Background(), tbl, slotQuery("alice", "a1"))
	if got := p.next(t); got != "a1" {
		t.Fatalf("first build %q, want a1", got)
	}
	bob := openAsync(context.Background(), tbl, slotQuery("bob", "b1"))
	testenv.Eventually(t, "bob's build to queue", func() bool { return slots.Waiting() == 1 })
	if n := slots.pausedBuilds(); n != 1 {
		t.Fatalf("%d builds asked to pause once bob's queued, want alice's", n)
	}
	// a1 resumes after b1, and stops at its first sort value then.
	resumed := p.gate("a1")
	p.release <- struct{}{}
	if got := p.next(t); got != "b1" {
		t.Fatalf("next build to get the slot %q, want bob's b1", got)
	}
	select {
	case r := <-alice:
		t.Fatalf("alice's build ended (%v) before bob's scanned: it did not give its slot up", r.err)
	default:
	}
	if got := p.scans(); !slices.Equal(got, []string{"a0"}) {
		t.Errorf("scans %v before bob's: alice's read sort values before it paused", got)
	}
	p.release <- struct{}{}
	rb := result(t, bob)
	if rb.err != nil {
		t.Fatal(rb.err)
	}
	defer rb.w.Close()
	var key string
	within(t, "alice's build to resume", nil, func() { key = <-p.blocked })
	if key != "a1" {
		t.Fatalf("%q resumed, want a1", key)
	}
	bob2 := openAsync(context.Background(), tbl, slotQuery("bob", "b2"))
	testenv.Eventually(t, "bob's second build to queue", func() bool { return slots.Waiting() == 1 })
	if n := slots.pausedBuilds(); n != 0 {
		t.Errorf("%d builds asked to pause for bob's second, served since alice's started", n)
	}
	close(resumed)
	if got := p.next(t); got != "b2" {
		t.Fatalf("next build to get the slot %q, want b2", got)
	}
	// b2 holds the slot: a1 scanned to its end, not paused again.
	if n := slots.pausedBuilds(); n != 0 {
		t.Errorf("%d builds paused while b2 scans: alice's gave way to bob twice", n)
	}
	p.release <- struct{}{}
	for _, res := range []<-chan openResult{alice, bob2} {
		r := result(t, res)
		if r.err != nil {
			t.Fatal(r.err)
		}
		if got := rowKeys(r.w.Rows()); !slices.Equal(got, []string{"a/r00000", "a/r00001"}) {
			t.Errorf("rows %v", got)
		}
		r.w.Close()
	}
	if got, want := p.scans(), []string{"a0", "b1", "a1", "b2"}; !slices.Equal(got, want) {
		t.Errorf("the scans read rows in runs %v, want %v", got, want)
	}
	tbl.Wait()
	checkSlotsIdle(t, slots)
}

// A paused build whose Opens all give up leaves the queue: it does not
// resume, and holds nothing after.
func TestBuildSlotsPausedBuildCancelled(t *testing.T) {
	slots := NewBuildSlots(BuildSlotsOptions{Slots: 1})
	p := newSlotProbe()
	tbl := newSlotTable(5000, slots, p)
	serve(t, tbl, p, "alice", "a0")
	ctx, cancel := context.WithCancel(context.Background())
	alice := openAsync(ctx, tbl, slotQuery("alice", "a1"))
	if got := p.next(t); got != "a1" {
		t.Fatalf("first build %q, want a1", got)
	}
	bob := openAsync(context.Background(), tbl, slotQuery("bob", "b1"))
	testenv.Eventually(t, "bob's build to queue", func() bool { return slots.Waiting() == 1 })
	p.release <- struct{}{}
	if got := p.next(t); got != "b1" {
		t.Fatalf("next build to get the slot %q, want bob's b1", got)
	}
	cancel()
	if r := result(t, alice); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("paused build's Open after its context ended: %v, want %v", r.err, context.Canceled)
	}
	testenv.Eventually(t, "alice's paused build to leave the queue", func() bool { return slots.Waiting() == 0 })
	p.release <- struct{}{}
	closeOpened(t, bob)
	within(t, "the builds to end", nil, tbl.Wait)
	if got := p.scans(); !slices.Equal(got, []string{"a0", "b1"}) {
		t.Errorf("scans %v, want a0 and b1 only: the cancelled build resumed", got)
	}
	tbl.mu.Lock()
	if len(tbl.builds) != 0 || len(tbl.owned) != 0 {
		t.Errorf("after the builds: %d builds, owned %v", len(tbl.builds), tbl.owned)
	}
	tbl.mu.Unlock()
	checkSlotsIdle(t, slots)
}

// A build whose Open gives up while it waits for a slot leaves the
// queue without scanning, and holds no slot after: the next build gets
// the one freed.
func TestBuildSlotsQueuedBuildCancelled(t *testing.T) {
	slots := NewBuildSlots(BuildSlotsOptions{Slots: 1})
	p := newSlotProbe()
	tbl := newSlotTable(100, slots, p)
	first := openAsync(context.Background(), tbl, slotQuery("alice", "a1"))
	if got := p.next(t); got != "a1" {
		t.Fatalf("first build %q, want a1", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	queued := openAsync(ctx, tbl, slotQuery("bob", "b1"))
	testenv.Eventually(t, "bob's build to queue", func() bool { return slots.Waiting() == 1 })
	cancel()
	if r := result(t, queued); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("queued Open after its context ended: %v, want %v", r.err, context.Canceled)
	}
	testenv.Eventually(t, "bob's build to leave the queue", func() bool { return slots.Waiting() == 0 })
	p.release <- struct{}{}
	closeOpened(t, first)
	// The slot a1 held is free, and nothing else holds it.
	third := openAsync(context.Background(), tbl, slotQuery("bob", "b2"))
	if got := p.next(t); got != "b2" {
		t.Fatalf("next build %q, want b2", got)
	}
	p.release <- struct{}{}
	closeOpened(t, third)
	tbl.Wait()
	if got := p.scans(); !slices.Equal(got, []string{"a1", "b2"}) {
		t.Errorf("scans %v, want a1 and b2 only: the cancelled build scanned", got)
	}
	tbl.mu.Lock()
	defer tbl.mu.Unlock()
	if len(tbl.builds) != 0 || len(tbl.owned) != 0 {
		t.Errorf("after the builds: %d builds, owned %v", len(tbl.builds), tbl.owned)
	}
	checkSlotsIdle(t, slots)
}

// A table that ends while builds wait for a slot ends their Opens with
// its error, and the one scanning with it too; their goroutines end
// (TestMain checks that none is left).
func TestBuildSlotsTableEnded(t *testing.T) {
	slots := NewBuildSlots(BuildSlotsOptions{Slots: 1})
	p := newSlotProbe()
	tbl := newSlotTable(100, slots, p)
	first := openAsync(context.Background(), tbl, slotQuery("alice", "a1"))
	if got := p.next(t); got != "a1" {
		t.Fatalf("first build %q, want a1", got)
	}
	queued := []<-chan openResult{
		openAsync(context.Background(), tbl, slotQuery("alice", "a2")),
		openAsync(context.Background(), tbl, slotQuery("bob", "b1")),
	}
	testenv.Eventually(t, "two builds to queue", func() bool { return slots.Waiting() == 2 })
	gone := errors.New("gone")
	tbl.End(gone)
	for _, res := range queued {
		if r := result(t, res); !errors.Is(r.err, gone) {
			t.Errorf("queued Open when the table ended: %v, want its error", r.err)
		}
	}
	if n := slots.Waiting(); n != 0 {
		t.Errorf("%d builds still queued after the table ended", n)
	}
	p.release <- struct{}{}
	if r := result(t, first); !errors.Is(r.err, gone) {
		t.Errorf("scanning Open when the table ended: %v, want its error", r.err)
	}
	within(t, "the builds to end", nil, tbl.Wait)
	for _, key := range p.scans() {
		if key != "a1" {
			t.Errorf("scans %v: a queued build scanned", p.scans())
			break
		}
	}
}

// An Open of a view whose queued build was just given up gets the view:
// it joins the build before it ended, which queues again, or starts
// another.
func TestBuildSlotsWantedAgainWhileQueued(t *testing.T) {
	slots := NewBuildSlots(BuildSlotsOptions{Slots: 1})
	p := newSlotProbe()
	tbl := newSlotTable(100, slots, p)
	first := openAsync(context.Background(), tbl, slotQuery("alice", "a1"))
	if got := p.next(t); got != "a1" {
		t.Fatalf("first build %q, want a1", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	given := openAsync(ctx, tbl, slotQuery("bob", "b1"))
	testenv.Eventually(t, "bob's build to queue", func() bool { return slots.Waiting() == 1 })
	cancel()
	if r := result(t, given); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("queued Open after its context ended: %v", r.err)
	}
	again := openAsync(context.Background(), tbl, slotQuery("bob", "b1"))
	testenv.Eventually(t, "bob's view to queue again", func() bool { return slots.Waiting() == 1 })
	p.release <- struct{}{}
	closeOpened(t, first)
	if got := p.next(t); got != "b1" {
		t.Fatalf("next build %q, want b1", got)
	}
	p.release <- struct{}{}
	r := result(t, again)
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.w.Close()
	if got := rowKeys(r.w.Rows()); !slices.Equal(got, []string{"a/r00000", "a/r00001"}) {
		t.Errorf("rows %v", got)
	}
	tbl.Wait()
}

// Idle owners are remembered while their last service is among the last
// flowMemory slots given, and no longer: the flows kept stay bounded
// however many owners come and go.
func TestBuildSlotsForgetIdleOwners(t *testing.T) {
	slots := NewBuildSlots(BuildSlotsOptions{Slots: 1})
	const owners = 5 * flowMemory
	for i := range owners {
		sl := slots.enqueue(fmt.Sprintf("owner-%d", i))
		if !sl.wait() {
			t.Fatalf("owner-%d's build got no slot", i)
		}
		slots.release(sl)
	}
	checkSlotsIdle(t, slots)
	slots.mu.Lock()
	defer slots.mu.Unlock()
	if n := len(slots.flows); n < flowMemory || n > 2*flowMemory+1 {
		t.Errorf("%d flows kept after %d owners came and went, want the last %d served, and at most %d", n, owners, flowMemory, 2*flowMemory+1)
	}
	for i := owners - flowMemory; i < owners; i++ {
		if f := slots.flows[fmt.Sprintf("owner-%d", i)]; f == nil || f.served == 0 {
			t.Errorf("owner-%d, served among the last %d, forgotten", i, flowMemory)
			break
		}
	}
}

// scanningBuilds returns how many builds hold a slot.
func (s *BuildSlots) scanningBuilds() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.scanning)
}

// An owner held to a quarter of a CPU, after a second at once: alice's
// builds within her burst get the slot at once; one that holds it for 3
// s (the fake clock stepped while it scans) leaves her owing 2 s, which
// her share pays in 8 s. Her next build waits that long, while bob's,
// who owes nothing, get the free slot at once; and hers, owing, takes no
// slot from his, though she was served less recently (which would give
// her the better claim, TestBuildSlotsNewOwnerPreempts).
func TestBuildSlotsOwnerShare(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1_000_000_000, 0))
	slots := NewBuildSlots(BuildSlotsOptions{Slots: 1, OwnerShare: 0.25, OwnerBurst: time.Second, Clock: clk})
	p := newSlotProbe()
	tbl := newSlotTable(5000, slots, p)
	serve(t, tbl, p, "alice", "a0")
	a1 := openAsync(context.Background(), tbl, slotQuery("alice", "a1"))
	if got := p.next(t); got != "a1" {
		t.Fatalf("alice's second build within her burst: %q got the slot, want a1", got)
	}
	clk.Step(3 * time.Second)
	p.release <- struct{}{}
	closeOpened(t, a1)

	serve(t, tbl, p, "bob", "b0")
	bob := openAsync(context.Background(), tbl, slotQuery("bob", "b1"))
	if got := p.next(t); got != "b1" {
		t.Fatalf("%q got the free slot, want bob's b1", got)
	}
	a2 := openAsync(context.Background(), tbl, slotQuery("alice", "a2"))
	testenv.Eventually(t, "alice's build to queue", func() bool { return slots.Waiting() == 1 })
	if n := slots.pausedBuilds(); n != 0 {
		t.Errorf("%d builds asked to pause: alice's, owing, took the slot from bob's", n)
	}
	p.release <- struct{}{}
	closeOpened(t, bob)
	if n, w := slots.scanningBuilds(), slots.Waiting(); n != 0 || w != 1 {
		t.Fatalf("with the slot free: %d builds scanning, %d waiting; want alice's waiting while she owes 2 s", n, w)
	}

	clk.Step(7 * time.Second)       // alice still owes a quarter of a second
	serve(t, tbl, p, "carol", "c0") // the slot, freed again, is not alice's yet
	if n, w := slots.scanningBuilds(), slots.Waiting(); n != 0 || w != 1 {
		t.Fatalf("after 7 s: %d builds scanning, %d waiting; want alice's waiting until 8 s", n, w)
	}
	clk.Step(time.Second)
	if got := p.next(t); got != "a2" {
		t.Fatalf("%q got the slot once alice had paid, want a2", got)
	}
	p.release <- struct{}{}
	closeOpened(t, a2)
	if got, want := p.scans(), []string{"a0", "a1", "b0", "b1", "c0", "a2"}; !slices.Equal(got, want) {
		t.Errorf("the scans read rows in runs %v, want %v", got, want)
	}
	tbl.Wait()
	checkSlotsIdle(t, slots)
}

// A share so small that an owner's wait would overflow a Duration is
// waited an hour at a time: the timer is set once, for an hour, and set
// again when it fires with the owner still owing, never for a past time
// (which would fire at once, again and again).
func TestBuildSlotsOwnerShareTiny(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1_000_000_000, 0))
	slots := NewBuildSlots(BuildSlotsOptions{Slots: 1, OwnerShare: 1e-15, OwnerBurst: time.Nanosecond, Clock: clk})
	p := newSlotProbe()
	tbl := newSlotTable(100, slots, p)
	a0 := openAsync(context.Background(), tbl, slotQuery("alice", "a0"))
	if got := p.next(t); got != "a0" {
		t.Fatalf("%q got the slot, want a0", got)
	}
	clk.Step(time.Second)
	p.release <- struct{}{}
	closeOpened(t, a0)
	ctx, cancel := context.WithCancel(context.Background())
	a1 := openAsync(ctx, tbl, slotQuery("alice", "a1"))
	testenv.Eventually(t, "alice's build to queue", func() bool { return slots.Waiting() == 1 })
	for range 3 {
		if n := clk.Waiters(); n != 1 {
			t.Fatalf("%d timers set, want one", n)
		}
		clk.Step(time.Hour - time.Nanosecond)
		if n := clk.Waiters(); n != 1 {
			t.Fatalf("%d timers set an instant before the hour, want the one", n)
		}
		clk.Step(time.Nanosecond) // the timer fires; alice still owes
		testenv.Eventually(t, "the timer to be set again", func() bool {
			slots.mu.Lock()
			defer slots.mu.Unlock()
			return clk.Waiters() == 1 && slots.timer != nil
		})
		if n := slots.scanningBuilds(); n != 0 {
			t.Fatalf("%d builds scanning while alice owes", n)
		}
	}
	cancel()
	if r := result(t, a1); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("alice's Open: %v, want %v", r.err, context.Canceled)
	}
	tbl.Wait()
	checkSlotsIdle(t, slots)
}
