package livequery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"kubegate/internal/testenv"
)

// slotProbe holds every build that gets a slot, before it scans, until
// the test lets it go, and records which views scanned and in what
// order.
type slotProbe struct {
	arrived chan string // a build's view (its sort key) once it holds a slot
	release chan struct{}

	mu sync.Mutex
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
				p.mu.Unlock()
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
	return &slotProbe{arrived: make(chan string, 16), release: make(chan struct{})}
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
// scanning, not by all four.
func TestBuildSlotsFairByOwner(t *testing.T) {
	slots := NewBuildSlots(1)
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
}

// A build whose Open gives up while it waits for a slot leaves the
// queue without scanning, and holds no slot after: the next build gets
// the one freed.
func TestBuildSlotsQueuedBuildCancelled(t *testing.T) {
	slots := NewBuildSlots(1)
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
	if r := result(t, first); r.err != nil {
		t.Fatal(r.err)
	} else {
		r.w.Close()
	}
	// The slot a1 held is free, and nothing else holds it.
	third := openAsync(context.Background(), tbl, slotQuery("bob", "b2"))
	if got := p.next(t); got != "b2" {
		t.Fatalf("next build %q, want b2", got)
	}
	p.release <- struct{}{}
	if r := result(t, third); r.err != nil {
		t.Fatal(r.err)
	} else {
		r.w.Close()
	}
	tbl.Wait()
	if got := p.scans(); !slices.Equal(got, []string{"a1", "b2"}) {
		t.Errorf("scans %v, want a1 and b2 only: the cancelled build scanned", got)
	}
	tbl.mu.Lock()
	defer tbl.mu.Unlock()
	if len(tbl.builds) != 0 || len(tbl.owned) != 0 {
		t.Errorf("after the builds: %d builds, owned %v", len(tbl.builds), tbl.owned)
	}
	slots.mu.Lock()
	defer slots.mu.Unlock()
	if slots.running != 0 || len(slots.flows) != 0 || len(slots.queued) != 0 {
		t.Errorf("slots after the builds: %d running, flows %v, %d queued", slots.running, slots.flows, len(slots.queued))
	}
}

// A table that ends while builds wait for a slot ends their Opens with
// its error, and the one scanning with it too; their goroutines end
// (TestMain checks that none is left).
func TestBuildSlotsTableEnded(t *testing.T) {
	slots := NewBuildSlots(1)
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
	slots := NewBuildSlots(1)
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
	if r := result(t, first); r.err != nil {
		t.Fatal(r.err)
	} else {
		r.w.Close()
	}
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
