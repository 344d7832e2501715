package livequery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"kubegate/internal/testenv"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// bound is how long a step that must not block may take before the test
// fails: a bound for a loaded machine, not a period anything waits for.
const bound = time.Minute

// within runs f and fails the test if it does not return within bound,
// after calling unblock, if set, to let it finish.
func within(t *testing.T, what string, unblock func(), f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(bound):
		if unblock != nil {
			unblock()
			<-done
		}
		t.Fatalf("%s: blocked for %s", what, bound)
	}
}

// pausedBuilds makes every view build of tbl wait, off the lock, until
// the test lets it go: building receives one value per build that
// reached the pause, and each value sent on release lets one go.
func pausedBuilds(tbl *Table) (building <-chan struct{}, release chan<- struct{}) {
	b, r := make(chan struct{}, 16), make(chan struct{})
	tbl.buildHook = func() {
		b <- struct{}{}
		<-r
	}
	return b, r
}

// waiters returns how many Opens wait for the build of q's view.
func waiters(tbl *Table, q Query) int {
	tbl.mu.Lock()
	defer tbl.mu.Unlock()
	if b := tbl.builds[viewKey{q.Sort, q.Filter.key()}]; b != nil {
		return len(b.waiters)
	}
	return -1
}

type openResult struct {
	w   *Window
	err error
}

func openAsync(ctx context.Context, tbl *Table, q Query) <-chan openResult {
	c := make(chan openResult, 1)
	go func() {
		w, err := tbl.Open(ctx, q)
		c <- openResult{w, err}
	}()
	return c
}

// While a view is built, the table serves everything else: changes,
// pops, moves and windows on other views. The view, once built, holds
// the changes made during its build.
func TestBuildDoesNotHoldTheLock(t *testing.T) {
	tbl := NewTable(Options{Columns: scoreColumns})
	tbl.Replace(tenRows(), 1)
	byScore := Query{Sort: SortSpec{Key: "score"}, Range: Range{Limit: 3}}
	a, ca := openAndDrain(t, tbl, byScore)

	building, release := pausedBuilds(tbl)
	nameQ := Query{Sort: SortSpec{Key: "metadata.name", Desc: true}, Range: Range{Limit: 20}}
	res := openAsync(context.Background(), tbl, nameQ)
	<-building

	within(t, "changes, pops, moves and opens during a build", func() { release <- struct{}{} }, func() {
		tbl.Upsert(scored("a", "zz", Int(-1)), 2)
		tbl.Delete("a", "r9", 3)
		ops, rv := a.Pop(nil)
		if err := ca.apply(ops); err != nil || rv != 3 {
			t.Errorf("pop during the build: %v, rv %d", err, rv)
		}
		if got := ca.keys(); !slices.Equal(got, []string{"a/zz", "a/r0", "a/r1"}) {
			t.Errorf("window during the build: %v", got)
		}
		if _, _, err := a.Move(Range{Offset: 1, Limit: 3}); err != nil {
			t.Errorf("move during the build: %v", err)
		}
		// A window on a view that exists needs no build.
		b, _ := openAndDrain(t, tbl, byScore)
		b.Close()
	})
	release <- struct{}{}
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.w.Close()
	c := &client{}
	ops, _ := r.w.Pop(nil)
	if err := c.apply(ops); err != nil {
		t.Fatal(err)
	}
	want := []string{"a/zz", "a/r8", "a/r7", "a/r6", "a/r5", "a/r4", "a/r3", "a/r2", "a/r1", "a/r0"}
	if got := c.keys(); !slices.Equal(got, want) || c.count != 10 {
		t.Errorf("view built during changes: %v (count %d), want %v", got, c.count, want)
	}
}

// Opens of one view share its build, and a build whose Opens have all
// given up stops: nothing is installed, and no goroutine is left.
func TestBuildSharedAndStopped(t *testing.T) {
	tbl := NewTable(Options{Columns: scoreColumns})
	tbl.Replace(tenRows(), 1)
	building, release := pausedBuilds(tbl)
	q := Query{Sort: SortSpec{Key: "score", Desc: true}, Range: Range{Limit: 2}, Owner: "alice"}

	ctx1, cancel1 := context.WithCancel(context.Background())
	first := openAsync(ctx1, tbl, q)
	<-building
	ctx2, cancel2 := context.WithCancel(context.Background())
	second := openAsync(ctx2, tbl, q)
	testenv.Eventually(t, "the second Open to join the build", func() bool { return waiters(tbl, q) == 2 })
	cancel1()
	if r := <-first; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("first Open after its context ended: %v", r.err)
	}
	cancel2()
	if r := <-second; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("second Open after its context ended: %v", r.err)
	}
	release <- struct{}{}
	within(t, "the stopped build to end", nil, tbl.Wait)
	if len(building) != 0 {
		t.Error("the two Opens started two builds")
	}
	tbl.mu.Lock()
	defer tbl.mu.Unlock()
	if len(tbl.builds) != 0 || tbl.views != 0 || len(tbl.indexes) != 0 || len(tbl.owned) != 0 {
		t.Errorf("after a stopped build: %d builds, %d views, %d indexes, owned %v", len(tbl.builds), tbl.views, len(tbl.indexes), tbl.owned)
	}
}

// An Open that comes after every earlier one gave up, before the build
// noticed, gets the view.
func TestBuildWantedAgain(t *testing.T) {
	tbl := NewTable(Options{Columns: scoreColumns})
	tbl.Replace(tenRows(), 1)
	building, release := pausedBuilds(tbl)
	q := Query{Sort: SortSpec{Key: "score", Desc: true}, Range: Range{Limit: 2}}
	ctx, cancel := context.WithCancel(context.Background())
	first := openAsync(ctx, tbl, q)
	<-building
	cancel()
	if r := <-first; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Open after its context ended: %v", r.err)
	}
	second := openAsync(context.Background(), tbl, q)
	testenv.Eventually(t, "the second Open to join the build", func() bool { return waiters(tbl, q) == 1 })
	release <- struct{}{}
	r := <-second
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.w.Close()
	if got := rowKeys(r.w.Rows()); !slices.Equal(got, []string{"a/r9", "a/r8"}) {
		t.Errorf("rows %v", got)
	}
}

// A table that ends during a build ends the build's Opens with its
// error.
func TestBuildEndedByTheTable(t *testing.T) {
	tbl := NewTable(Options{Columns: scoreColumns})
	tbl.Replace(tenRows(), 1)
	building, release := pausedBuilds(tbl)
	res := openAsync(context.Background(), tbl, Query{Sort: SortSpec{Key: "score"}, Range: Range{Limit: 2}})
	<-building
	gone := errors.New("gone")
	tbl.End(gone)
	release <- struct{}{}
	if r := <-res; !errors.Is(r.err, gone) {
		t.Fatalf("Open during the table's end: %v, want its error", r.err)
	}
	tbl.Wait()
}

// No owner holds more than its share of a table's views, and once the
// table holds all it may, the owner holding the most gives way.
func TestViewShares(t *testing.T) {
	tbl := NewTable(Options{Columns: scoreColumns, MaxViews: 4, MaxViewsPerOwner: 3, IdleViews: -1})
	tbl.Replace(tenRows(), 1)
	open := func(owner string, text string) (*Window, error) {
		return tbl.Open(context.Background(), Query{Sort: SortSpec{Key: "score"}, Filter: Filter{Text: text},
			Range: Range{Limit: 2}, Owner: owner})
	}
	var mallory []*Window
	for i := range 3 {
		w, err := open("mallory", fmt.Sprint("r", i))
		if err != nil {
			t.Fatal(err)
		}
		mallory = append(mallory, w)
	}
	// Past its share, whatever room the table has.
	_, err := open("mallory", "r3")
	var tooMany *TooManyViewsError
	if !errors.As(err, &tooMany) || !tooMany.PerOwner {
		t.Fatalf("mallory's 4th view: %v, want its share full", err)
	}
	st := apierrors.APIStatus(tooMany).Status()
	if st.Code != http.StatusTooManyRequests || st.Details == nil || st.Details.RetryAfterSeconds < 1 {
		t.Errorf("Status %+v, want 429 with Retry-After", st)
	}
	// A view mallory already holds costs nothing more.
	if w, err := open("mallory", "r0"); err != nil {
		t.Fatalf("a 2nd window on one of mallory's views: %v", err)
	} else {
		w.Close()
	}
	alice1, err := open("alice", "r5")
	if err != nil {
		t.Fatal(err)
	}
	defer alice1.Close()
	// The table is full: alice (1) would hold 2, mallory holds 3, so
	// mallory's oldest view ends to make room.
	woken := make(chan struct{}, 1)
	tbl.mu.Lock()
	mallory[0].wake = func() { woken <- struct{}{} }
	tbl.mu.Unlock()
	alice2, err := open("alice", "r6")
	if err != nil {
		t.Fatalf("alice's 2nd view in a full table: %v", err)
	}
	defer alice2.Close()
	<-woken
	var evicted *ViewEvictedError
	if err := mallory[0].Err(); !errors.As(err, &evicted) || apierrors.APIStatus(evicted).Status().Code != http.StatusTooManyRequests {
		t.Fatalf("mallory's oldest window: Err %v, want ViewEvictedError (429)", err)
	}
	if mallory[1].Err() != nil || mallory[2].Err() != nil {
		t.Error("more than one of mallory's windows ended")
	}
	// The evicted window's view is gone, its nodes kept for another
	// build's: the window reads nothing of it any more.
	if _, err := mallory[0].Snapshot(); !errors.As(err, &evicted) {
		t.Errorf("the evicted window's Snapshot: %v, want ViewEvictedError", err)
	}
	if rows := mallory[0].Rows(); rows != nil {
		t.Errorf("the evicted window's Rows: %v, want none", rowKeys(rows))
	}
	if _, ok := mallory[0].CursorAt(0); ok {
		t.Error("the evicted window has a cursor at 0")
	}
	// Now mallory holds 2 and alice 2: neither gives way to the other.
	if _, err := open("alice", "r7"); !errors.As(err, &tooMany) || tooMany.PerOwner {
		t.Fatalf("alice's 3rd view with mallory holding as many: %v, want the table full", err)
	}
	if _, err := open("mallory", "r8"); !errors.As(err, &tooMany) {
		t.Fatalf("mallory's view in a full table: %v, want 429", err)
	}
	for _, w := range mallory {
		w.Close()
	}
	tbl.mu.Lock()
	defer tbl.mu.Unlock()
	if tbl.owned["mallory"] != 0 || tbl.owned["alice"] != 2 {
		t.Errorf("owned %v after mallory closed its windows, want alice 2", tbl.owned)
	}
}

// orderOf is x's order as its docs give it, on the rows' values: the
// model that index.compare and sortEntries must agree with.
func orderOf(x *index) func(a, b *row) int {
	missingFirst := x.spec.Desc != x.spec.Reversed
	return func(a, b *row) int {
		av, bv := x.value(a.Row), x.value(b.Row)
		if am, bm := av.Kind() == KindMissing, bv.Kind() == KindMissing; am != bm {
			if am == missingFirst {
				return -1
			}
			return 1
		}
		c := Compare(av, bv)
		if x.spec.Desc {
			c = -c
		}
		if c != 0 {
			return c
		}
		if c := cmp.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	}
}

// TestSortEntriesIsTheIndexOrder checks a view build's sort (prefixes,
// then values, then the rows' key order) and index.compare, the order
// the view's tree keeps afterwards, against the order on values
// (orderOf), for every direction: on rows of every kind of value,
// missing ones, equal values and shared string heads, in namespaces one
// of which begins another (kube, kube-system), where "namespace/name"
// keys would order otherwise; for a column, and for a field (a key whose
// values entries keep where their prefix is not exact). Cursors, which
// have no row, compare as the rows they name.
func TestSortEntriesIsTheIndexOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	values := []func() Value{
		func() Value { return Value{} },
		func() Value { return Int(int64(rng.IntN(5) - 2)) },
		func() Value { return Parse([]string{"500m", "1", "1.5", "2Gi", "-0.5", "1e30", "3k"}[rng.IntN(7)]) },
		func() Value { return Time(t0.Add(time.Duration(rng.IntN(4)) * time.Nanosecond)) },
		func() Value {
			return String([]string{"", "Running", "Runnin", "Running-long-a", "a\x00", "10.244.1.2", "10.244.10.2", "shared-15-bytes", "shared-15-bytes-a", "shared-15-bytes-b", "shared-15-bytes\x00"}[rng.IntN(11)])
		},
	}
	namespaces := []string{"", "kube", "kube-system", "kube.x", "a"}
	var rows []*row
	seen := map[string]bool{}
	for len(rows) < 2000 {
		r := &Row{Namespace: namespaces[rng.IntN(len(namespaces))], Name: fmt.Sprintf("n%d", rng.IntN(1000))}
		if seen[r.Key()] {
			continue
		}
		seen[r.Key()] = true
		if rng.IntN(8) > 0 { // else a row short of the column: its value is missing
			r.Cells = []Value{values[rng.IntN(len(values))]()}
		}
		r.Created = t0.Add(time.Duration(rng.IntN(3)) * time.Second)
		rows = append(rows, newRow(r))
	}
	slices.SortFunc(rows, func(a, b *row) int { return strings.Compare(a.key, b.key) }) // as a scan finds them
	// "f" is the column read as a field would be: parsed, not a column.
	tbl := NewTable(Options{Columns: []string{"v"}, SortKey: func(key string) (func(*Row) Value, error) {
		if key != "f" {
			return nil, fmt.Errorf("unknown sort key %q", key)
		}
		return func(r *Row) Value {
			if len(r.Cells) == 0 {
				return Value{}
			}
			return r.Cells[0]
		}, nil
	}})
	specs := []SortSpec{{Key: "metadata.name"}, {Key: "metadata.creationTimestamp", Desc: true}}
	for _, key := range []string{"v", "f"} {
		for _, desc := range []bool{false, true} {
			for _, reversed := range []bool{false, true} {
				specs = append(specs, SortSpec{Key: key, Desc: desc, Reversed: reversed})
			}
		}
	}
	kept := 0
	for _, spec := range specs {
		x, err := tbl.newIndex(spec)
		if err != nil {
			t.Fatal(err)
		}
		if want := spec.Key == "f"; x.parsed != want {
			t.Fatalf("%+v: parsed %v, want %v", spec, x.parsed, want)
		}
		order := orderOf(x)
		nodes, _ := x.sortEntries(rows, new(scratch), nil)
		want := slices.Clone(rows)
		slices.SortFunc(want, order)
		for i := range want {
			e := &nodes[i].e
			if e.r != want[i] {
				t.Fatalf("%+v: entry %d is %s=%q, want %s=%q", spec, i, e.r.Key(), x.valueOf(e), want[i].Key(), x.value(want[i].Row))
			}
			if me := x.entry(e.r); e.rank != me.rank || e.hi != me.hi || e.lo != me.lo || e.exact != me.exact || (e.val != nil) != (me.val != nil) {
				t.Fatalf("%+v: %s's entry is %+v, the index makes %+v", spec, e.r.Key(), *e, *me)
			}
			if e.val != nil {
				kept++
			}
			if got, want := x.valueOf(e), x.value(e.r.Row); got.Kind() != want.Kind() || Compare(got, want) != 0 {
				t.Fatalf("%+v: %s has the value %q, the index reads %q", spec, e.r.Key(), got, want)
			}
		}
		// compare, on the entries changes make and on cursors, agrees
		// with the order on values.
		for range 20000 {
			a, b := rows[rng.IntN(len(rows))], rows[rng.IntN(len(rows))]
			ea, eb := x.entry(a), x.entry(b)
			if rng.IntN(2) == 0 {
				ea = x.cursorEntry(&Cursor{Value: x.value(a.Row), Namespace: a.Namespace, Name: a.Name})
			}
			if got, want := x.compare(ea, eb), order(a, b); cmp.Compare(got, 0) != cmp.Compare(want, 0) {
				t.Fatalf("%+v: compare(%s=%q, %s=%q) = %d, want the sign of %d", spec, a.Key(), x.value(a.Row), b.Key(), x.value(b.Row), got, want)
			}
		}
	}
	if kept == 0 {
		t.Fatal("no entry kept its value: the field's long strings and quantities were not tried")
	}
}

// TestSortEntriesPausesEveryBlock checks that a view build's sort checks
// in (pause) every buildCheck rows of each of its passes, so that no
// stretch of it keeps a change or a window update from a processor for
// longer: reading values (no more than buildCheck values read between
// two pauses), counting and moving the radix sort's bytes, and writing
// the nodes. And that it stops wherever pause says so.
func TestSortEntriesPausesEveryBlock(t *testing.T) {
	const n = 8 * buildCheck
	reads := 0
	tbl := NewTable(Options{Columns: []string{"v"}, SortKey: func(key string) (func(*Row) Value, error) {
		return func(r *Row) Value {
			reads++
			return r.Cells[0]
		}, nil
	}})
	rows := make([]*row, n)
	for i := range rows {
		// Two bytes of the prefix vary: two radix passes.
		rows[i] = newRow(&Row{Name: fmt.Sprintf("n%05d", i), Cells: []Value{Int(int64(i * 7 % 65536))}})
	}
	for _, key := range []string{"v", "f"} {
		x, err := tbl.newIndex(SortSpec{Key: key})
		if err != nil {
			t.Fatal(err)
		}
		pauses, most := 0, 0
		reads = 0
		nodes, ok := x.sortEntries(rows, new(scratch), func() bool {
			pauses++
			most, reads = max(most, reads), 0
			return true
		})
		if !ok || len(nodes) != n {
			t.Fatalf("%s: sortEntries gave %d nodes, %v", key, len(nodes), ok)
		}
		if key == "f" && max(most, reads) > buildCheck {
			t.Errorf("%s: %d values read between two pauses, want at most %d", key, max(most, reads), buildCheck)
		}
		// Blocks after the first of: values, radix counts, two radix
		// passes, nodes.
		if want := 5 * (n/buildCheck - 1); pauses < want {
			t.Errorf("%s: %d pauses over %d rows, want at least %d (one every %d rows of each pass)", key, pauses, n, want, buildCheck)
		}
		for stop := 1; stop <= pauses; stop += 3 {
			calls := 0
			if _, ok := x.sortEntries(rows, new(scratch), func() bool { calls++; return calls < stop }); ok || calls != stop {
				t.Fatalf("%s: pause said stop at its call %d: sortEntries went on to call %d, reporting %v", key, stop, calls, ok)
			}
		}
	}
}
