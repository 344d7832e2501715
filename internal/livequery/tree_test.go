package livequery

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func intEntry(i int) *entry {
	return &entry{r: &row{Row: &Row{Name: fmt.Sprintf("%06d", i)}}}
}

func compareInts(a, b *entry) int { return cmp.Compare(a.r.Name, b.r.Name) }

// checkTree verifies the treap's invariants: order, heap order of the
// priorities and subtree sizes.
func checkTree(t *testing.T, tr *tree) {
	t.Helper()
	var walk func(n *node, lo, hi *entry) int
	walk = func(n *node, lo, hi *entry) int {
		if n == nil {
			return 0
		}
		if lo != nil && tr.cmp(lo, &n.e) >= 0 || hi != nil && tr.cmp(&n.e, hi) >= 0 {
			t.Fatalf("%s out of order", n.e.r.Name)
		}
		for _, c := range []*node{n.l, n.r} {
			if c != nil && c.prio > n.prio {
				t.Fatalf("%s: child priority above its parent's", n.e.r.Name)
			}
		}
		s := 1 + walk(n.l, lo, &n.e) + walk(n.r, &n.e, hi)
		if s != int(n.size) {
			t.Fatalf("%s: size %d, counted %d", n.e.r.Name, n.size, s)
		}
		return s
	}
	walk(tr.root, nil, nil)
}

// The tree against a sorted slice, under random insertions, deletions,
// rank and select.
func TestTreeModel(t *testing.T) {
	for seed := range uint64(5) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			tr := newTree(compareInts, seed)
			var model []*entry
			held := map[int]*entry{}
			for step := range 4000 {
				k := rng.IntN(600)
				switch e := held[k]; {
				case e == nil:
					e = intEntry(k)
					held[k] = e
					i, _ := slices.BinarySearchFunc(model, e, compareInts)
					model = slices.Insert(model, i, e)
					if r := tr.insert(e); r != i {
						t.Fatalf("step %d: insert %d at rank %d, want %d", step, k, r, i)
					}
				default:
					delete(held, k)
					i, _ := slices.BinarySearchFunc(model, e, compareInts)
					model = slices.Delete(model, i, i+1)
					if r := tr.delete(e); r != i {
						t.Fatalf("step %d: delete %d from rank %d, want %d", step, k, r, i)
					}
					if r := tr.delete(e); r != -1 {
						t.Fatalf("step %d: deleting %d again: rank %d, want -1", step, k, r)
					}
				}
				if tr.Len() != len(model) {
					t.Fatalf("step %d: %d elements, want %d", step, tr.Len(), len(model))
				}
				if len(model) > 0 {
					i := rng.IntN(len(model))
					if got := tr.at(i); got.r != model[i].r {
						t.Fatalf("step %d: at(%d) = %s, want %s", step, i, got.r.Name, model[i].r.Name)
					}
					probe := intEntry(rng.IntN(600))
					want, _ := slices.BinarySearchFunc(model, probe, compareInts)
					if got := tr.rank(probe); got != want {
						t.Fatalf("step %d: rank(%s) = %d, want %d", step, probe.r.Name, got, want)
					}
					from := rng.IntN(len(model) + 1)
					to := from + rng.IntN(len(model)+2-from)
					var got, in []*row
					tr.each(from, to, func(e *entry) { got = append(got, e.r) })
					for _, e := range model[from:min(to, len(model))] {
						in = append(in, e.r)
					}
					if !slices.Equal(got, in) {
						t.Fatalf("step %d: each(%d,%d) gave %d elements", step, from, to, len(got))
					}
				}
			}
			checkTree(t, tr)
		})
	}
}

func TestTreeBuild(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 100, 5000} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			sorted := make([]*entry, n)
			nodes := make([]node, n)
			for i := range sorted {
				sorted[i] = intEntry(i)
				nodes[i].e = *sorted[i]
			}
			tr := newTree(compareInts, 1)
			tr.build(nodes, nil)
			checkTree(t, tr)
			if tr.Len() != n {
				t.Fatalf("%d elements, want %d", tr.Len(), n)
			}
			for i, e := range sorted {
				if tr.at(i).r != e.r || tr.rank(e) != i {
					t.Fatalf("element %d misplaced", i)
				}
			}
			// It stays a treap under further changes.
			for i := 0; i < n; i += 2 {
				tr.delete(sorted[i])
			}
			tr.insert(intEntry(n + 1))
			checkTree(t, tr)
		})
	}
}

// The expected depth of a treap is logarithmic whatever the insertion
// order; sorted insertions are the worst case of an unbalanced tree.
func TestTreeDepth(t *testing.T) {
	tr := newTree(compareInts, 3)
	const n = 1 << 16
	for i := range n {
		tr.insert(intEntry(i))
	}
	var depth func(*node) int
	depth = func(n *node) int {
		if n == nil {
			return 0
		}
		return 1 + max(depth(n.l), depth(n.r))
	}
	// The expected depth is about 2.99·log2(n) = 48; 4·log2(n) leaves room.
	if d := depth(tr.root); d > 64 {
		t.Errorf("depth %d after %d sorted insertions", d, n)
	}
}
