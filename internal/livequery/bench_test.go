package livequery

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
)

const benchLimit = 50

// benchTable returns a table of n pod-like rows in 100 namespaces, with
// the columns status and restarts. It keeps no idle view, so that a
// view is built for every Open that finds no window sorting and
// filtering alike (BenchmarkOpen's index=new).
func benchTable(n int) (*Table, []*Row) {
	rng := rand.New(rand.NewPCG(1, 2))
	tbl := NewTable(Options{Columns: []string{"status", "restarts"}, IdleViews: -1})
	rows := make([]*Row, n)
	for i := range rows {
		rows[i] = benchRow(rng, i)
	}
	tbl.Replace(rows, 1)
	return tbl, rows
}

func benchRow(rng *rand.Rand, i int) *Row {
	return &Row{
		Namespace: fmt.Sprintf("ns-%02d", i%100),
		Name:      fmt.Sprintf("pod-%07d", i),
		Labels:    map[string]string{"app": fmt.Sprintf("app-%d", i%10)},
		Created:   time.Unix(int64(1_700_000_000+i), 0),
		Cells:     []Value{String(testStatuses[rng.IntN(3)]), Int(int64(rng.IntN(1000)))},
	}
}

// BenchmarkChange measures one row's change (its restarts, so its place
// in the sort) with windows of 50 rows open at random offsets, each
// popped after the change. views=10 narrows the windows to one of ten
// namespace sets, as RBAC does, so ten derived indexes are kept.
func BenchmarkChange(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		tbl, rows := benchTable(n)
		for _, views := range []int{1, 10} {
			for _, windows := range []int{1, 100, 1000} {
				b.Run(fmt.Sprintf("objects=%d/views=%d/windows=%d", n, views, windows), func(b *testing.B) {
					rng := rand.New(rand.NewPCG(3, 4))
					ws := make([]*Window, windows)
					for i := range ws {
						q := Query{Sort: SortSpec{Key: "restarts", Desc: true}, Range: Range{Offset: rng.IntN(n / 2), Limit: benchLimit}}
						if views > 1 {
							v := i % views
							q.Filter.Namespaces = sets.New(fmt.Sprintf("ns-%02d", v), fmt.Sprintf("ns-%02d", v+50))
							q.Range.Offset /= 50
						}
						w, err := tbl.Open(context.Background(), q)
						if err != nil {
							b.Fatal(err)
						}
						w.Pop(nil)
						ws[i] = w
					}
					defer func() {
						for _, w := range ws {
							w.Close()
						}
					}()
					var buf []Op
					rv := uint64(2)
					ops := 0
					for b.Loop() {
						i := rng.IntN(n)
						r := *rows[i]
						r.Cells = []Value{r.Cells[0], Int(int64(rng.IntN(1000)))}
						rows[i] = &r
						rv++
						tbl.Upsert(&r, rv)
						for _, w := range ws {
							buf, _ = w.Pop(buf[:0])
							ops += len(buf)
						}
					}
					b.ReportMetric(float64(ops)/float64(b.N), "ops/change")
				})
			}
		}
	}
}

// BenchmarkScroll measures moving a window of 50 rows by 10 rows, down
// and up again.
func BenchmarkScroll(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		tbl, _ := benchTable(n)
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			off := n / 2
			w, err := tbl.Open(context.Background(), Query{Sort: SortSpec{Key: "restarts"}, Range: Range{Offset: off, Limit: benchLimit}})
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			w.Pop(nil)
			step := 10
			for b.Loop() {
				off += step
				step = -step
				if _, _, err := w.Move(Range{Offset: off, Limit: benchLimit}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOpen measures opening a window of 50 rows and popping its
// rows, on an index another window keeps (index=shared) and on none
// (index=new: the index and its view are built for it, which is the
// index build cost).
func BenchmarkOpen(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		tbl, _ := benchTable(n)
		for _, shared := range []bool{true, false} {
			name := map[bool]string{true: "shared", false: "new"}[shared]
			b.Run(fmt.Sprintf("objects=%d/index=%s", n, name), func(b *testing.B) {
				benchOpen(b, tbl, Query{Sort: SortSpec{Key: "metadata.creationTimestamp", Desc: true}, Range: Range{Offset: n / 3, Limit: benchLimit}}, shared)
			})
		}
	}
}

// BenchmarkOpenSort measures a new sort order's first window, by sort
// key: a time (distinct values), a count (1,000 values), a status (3
// values, so ties, ordered by namespace and name) and the name itself,
// descending.
func BenchmarkOpenSort(b *testing.B) {
	const n = 100_000
	tbl, _ := benchTable(n)
	for _, spec := range []SortSpec{{Key: "metadata.creationTimestamp", Desc: true}, {Key: "restarts"}, {Key: "status"}, {Key: "metadata.name", Desc: true}} {
		b.Run(fmt.Sprintf("objects=%d/key=%s", n, spec.Key), func(b *testing.B) {
			benchOpen(b, tbl, Query{Sort: spec, Range: Range{Offset: n / 3, Limit: benchLimit}}, false)
		})
	}
}

// benchOpen opens and closes a window of q on tbl, with another window
// keeping its view if shared, or building it for every window if not.
func benchOpen(b *testing.B, tbl *Table, q Query, shared bool) {
	if shared {
		keep, err := tbl.Open(context.Background(), q)
		if err != nil {
			b.Fatal(err)
		}
		defer keep.Close()
	}
	var buf []Op
	for b.Loop() {
		w, err := tbl.Open(context.Background(), q)
		if err != nil {
			b.Fatal(err)
		}
		buf, _ = w.Pop(buf[:0])
		w.Close()
	}
}
