package livequery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

// Every count of nodes from minPooledNodes on has an array class at
// most 1/16 larger, whose capacity is its own class, and no two
// capacities share a pool.
func TestNodeClass(t *testing.T) {
	caps := map[*sync.Pool]int{}
	for n := 1; n < 1<<24; n += 1 + n/97 {
		c, p := nodeClass(n)
		if n < minPooledNodes {
			if c != n || p != nil {
				t.Fatalf("nodeClass(%d) = %d, %p: want %d and no pool", n, c, p, n)
			}
			continue
		}
		if p == nil || c < n || c-n > n/nodeSteps {
			t.Fatalf("nodeClass(%d) = %d, %p: want a pool and a capacity in [n, n+n/%d]", n, c, p, nodeSteps)
		}
		if c2, p2 := nodeClass(c); c2 != c || p2 != p {
			t.Fatalf("nodeClass(%d) = %d, %p, but nodeClass(%d) = %d, %p", n, c, p, c, c2, p2)
		}
		if old, ok := caps[p]; ok && old != c {
			t.Fatalf("capacities %d and %d share a pool", old, c)
		}
		caps[p] = c
	}
}

// A build that takes the nodes of a dropped view overwrites every one:
// nodes left as a poisoned array left them (rows, values, priorities,
// sizes, links all wrong) would show in the view's rows, its count or
// the changes after. And a dropped view gives its nodes back.
func TestBuildReusesDroppedViewsNodes(t *testing.T) {
	const n = 3000
	tbl := NewTable(Options{Columns: scoreColumns, IdleViews: -1, MaxLimit: n})
	rnd := rand.New(rand.NewPCG(1, 2))
	scores := map[string]int64{}
	var rows []*Row
	for i := range n {
		name := fmt.Sprintf("r%04d", i)
		scores[name] = rnd.Int64N(500)
		rows = append(rows, scored("a", name, Int(scores[name])))
	}
	tbl.Replace(rows, 1)
	want := func() []string {
		names := make([]string, 0, len(scores))
		for name := range scores {
			names = append(names, name)
		}
		slices.SortFunc(names, func(a, b string) int {
			if c := cmp.Compare(scores[b], scores[a]); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
		for i := range names {
			names[i] = "a/" + names[i]
		}
		return names
	}
	check := func(what string, w *Window) {
		t.Helper()
		s, err := w.Snapshot()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := rowKeys(s.Rows); s.Count != n || !slices.Equal(got, want()) {
			t.Fatalf("%s: count %d, rows %v…, want %d rows %v…", what, s.Count, got[:min(5, len(got))], n, want()[:5])
		}
	}
	// poison puts arrays of n nodes back as wrong as they can be, and
	// returns them.
	bogus := &row{Row: &Row{Namespace: "x", Name: "bogus"}}
	poison := func() map[*node]bool {
		arrays := map[*node]bool{}
		for range 4 {
			nodes := newNodes(n)
			nodes = nodes[:cap(nodes)]
			for i := range nodes {
				nodes[i] = node{e: entry{r: bogus, hi: ^uint64(0), lo: 1, val: &Value{}, rank: 9}, prio: 7, size: 99, l: &nodes[0], r: &nodes[i]}
			}
			arrays[&nodes[0]] = true
			freeNodes(nodes)
		}
		return arrays
	}
	reused := false
	for attempt := 0; attempt < 50 && !reused; attempt++ {
		poisoned := poison()
		sel, err := labels.Parse(fmt.Sprintf("!absent-%d", attempt))
		if err != nil {
			t.Fatal(err)
		}
		w, err := tbl.Open(context.Background(), Query{Sort: SortSpec{Key: "score", Desc: true}, Filter: Filter{Label: sel}, Range: Range{Limit: n}})
		if err != nil {
			t.Fatal(err)
		}
		tbl.mu.Lock()
		v := w.v
		reused = poisoned[&v.nodes[0]]
		tbl.mu.Unlock()
		check(fmt.Sprintf("view %d (on a poisoned array: %v)", attempt, reused), w)
		// The tree the build linked takes changes as any other.
		for range 20 {
			name := fmt.Sprintf("r%04d", rnd.IntN(n))
			scores[name] = rnd.Int64N(500)
			tbl.Upsert(scored("a", name, Int(scores[name])), 0)
		}
		check(fmt.Sprintf("view %d after changes", attempt), w)
		w.Close()
		tbl.mu.Lock()
		dropped := v.nodes == nil && v.tree == nil
		tbl.mu.Unlock()
		if !dropped {
			t.Fatalf("view %d dropped with its last window kept its nodes", attempt)
		}
		if _, err := w.Snapshot(); !errors.Is(err, errWindowClosed) {
			t.Fatalf("a closed window's Snapshot: %v, want %v", err, errWindowClosed)
		}
	}
	if !reused {
		t.Fatal("no build in 50 took a poisoned array its pool held")
	}
}
