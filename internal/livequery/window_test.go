package livequery

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"

	"kubegate/internal/apistatus"
)

// score is the one column of the tables below.
var scoreColumns = []string{"score"}

func scored(ns, name string, score Value, lbls ...string) *Row {
	r := &Row{Namespace: ns, Name: name, Cells: []Value{score}}
	if len(lbls) > 0 {
		r.Labels = map[string]string{}
		for i := 0; i+1 < len(lbls); i += 2 {
			r.Labels[lbls[i]] = lbls[i+1]
		}
	}
	return r
}

// tenRows are r0 … r9 in namespace "a", scored 0, 10, …, 90.
func tenRows() []*Row {
	var rows []*Row
	for i := range 10 {
		rows = append(rows, scored("a", fmt.Sprintf("r%d", i), Int(int64(i*10))))
	}
	return rows
}

func opStrings(ops []Op) []string {
	out := make([]string, len(ops))
	for i, op := range ops {
		out[i] = op.String()
	}
	return out
}

// openAndDrain opens a window and applies its first Pop to a client.
func openAndDrain(t *testing.T, tbl *Table, q Query) (*Window, *client) {
	t.Helper()
	w, err := tbl.Open(context.Background(), q)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(w.Close)
	c := &client{}
	ops, _ := w.Pop(nil)
	if err := c.apply(ops); err != nil {
		t.Fatal(err)
	}
	return w, c
}

func TestWindowDiffs(t *testing.T) {
	byScore := SortSpec{Key: "score"}
	tests := []struct {
		name   string
		rows   []*Row
		q      Query
		change func(*Table)
		want   []string // ops of the change
		rows2  []string // the window after it
	}{{
		name:   "insert inside a full window pushes its last row out",
		rows:   tenRows(),
		q:      Query{Sort: byScore, Range: Range{Offset: 2, Limit: 3}},
		change: func(tbl *Table) { tbl.Upsert(scored("a", "x", Int(35)), 2) },
		want:   []string{"remove(2)", "insert(2,a/x)", "count(11,@2)"},
		rows2:  []string{"a/r2", "a/r3", "a/x"},
	}, {
		name:   "insert above an offset window shifts its content down",
		rows:   tenRows(),
		q:      Query{Sort: byScore, Range: Range{Offset: 2, Limit: 3}},
		change: func(tbl *Table) { tbl.Upsert(scored("a", "x", Int(5)), 2) },
		want:   []string{"remove(2)", "insert(0,a/r1)", "count(11,@2)"},
		rows2:  []string{"a/r1", "a/r2", "a/r3"},
	}, {
		name:   "insert below a window changes only the count",
		rows:   tenRows(),
		q:      Query{Sort: byScore, Range: Range{Offset: 2, Limit: 3}},
		change: func(tbl *Table) { tbl.Upsert(scored("a", "x", Int(75)), 2) },
		want:   []string{"count(11,@2)"},
		rows2:  []string{"a/r2", "a/r3", "a/r4"},
	}, {
		name:   "delete inside a window pulls the next row up into it",
		rows:   tenRows(),
		q:      Query{Sort: byScore, Range: Range{Offset: 2, Limit: 3}},
		change: func(tbl *Table) { tbl.Delete("a", "r3", 2) },
		want:   []string{"remove(1)", "insert(2,a/r5)", "count(9,@2)"},
		rows2:  []string{"a/r2", "a/r4", "a/r5"},
	}, {
		name:   "delete above a window shifts its content up",
		rows:   tenRows(),
		q:      Query{Sort: byScore, Range: Range{Offset: 2, Limit: 3}},
		change: func(tbl *Table) { tbl.Delete("a", "r0", 2) },
		want:   []string{"remove(0)", "insert(2,a/r5)", "count(9,@2)"},
		rows2:  []string{"a/r3", "a/r4", "a/r5"},
	}, {
		name:   "a key change within the window is one move",
		rows:   tenRows(),
		q:      Query{Sort: byScore, Range: Range{Offset: 2, Limit: 3}},
		change: func(tbl *Table) { tbl.Upsert(scored("a", "r2", Int(45)), 2) },
		want:   []string{"move(0,2,a/r2)"},
		rows2:  []string{"a/r3", "a/r4", "a/r2"},
	}, {
		name:   "a change that keeps the row's place is one update",
		rows:   tenRows(),
		q:      Query{Sort: byScore, Range: Range{Offset: 2, Limit: 3}},
		change: func(tbl *Table) { tbl.Upsert(scored("a", "r3", Int(31)), 2) },
		want:   []string{"update(1,a/r3)"},
		rows2:  []string{"a/r2", "a/r3", "a/r4"},
	}, {
		name:   "a row leaving at the bottom is replaced by the next",
		rows:   tenRows(),
		q:      Query{Sort: byScore, Range: Range{Offset: 2, Limit: 3}},
		change: func(tbl *Table) { tbl.Upsert(scored("a", "r3", Int(99)), 2) },
		want:   []string{"remove(1)", "insert(2,a/r5)"},
		rows2:  []string{"a/r2", "a/r4", "a/r5"},
	}, {
		name:   "a row leaving at the top lets the row above in",
		rows:   tenRows(),
		q:      Query{Sort: byScore, Range: Range{Offset: 2, Limit: 3}},
		change: func(tbl *Table) { tbl.Upsert(scored("a", "r3", Int(1)), 2) },
		want:   []string{"remove(1)", "insert(0,a/r1)"},
		rows2:  []string{"a/r1", "a/r2", "a/r4"},
	}, {
		name:   "a row entering from above pushes the top row out",
		rows:   tenRows(),
		q:      Query{Sort: byScore, Range: Range{Offset: 2, Limit: 3}},
		change: func(tbl *Table) { tbl.Upsert(scored("a", "r0", Int(33)), 2) },
		want:   []string{"remove(0)", "insert(1,a/r0)"},
		rows2:  []string{"a/r3", "a/r0", "a/r4"},
	}, {
		name:   "a row entering from below pushes the last row out",
		rows:   tenRows(),
		q:      Query{Sort: byScore, Range: Range{Offset: 2, Limit: 3}},
		change: func(tbl *Table) { tbl.Upsert(scored("a", "r9", Int(25)), 2) },
		want:   []string{"remove(2)", "insert(1,a/r9)"},
		rows2:  []string{"a/r2", "a/r9", "a/r3"},
	}, {
		name:   "a row jumping from above to below shifts the window up",
		rows:   tenRows(),
		q:      Query{Sort: byScore, Range: Range{Offset: 2, Limit: 3}},
		change: func(tbl *Table) { tbl.Upsert(scored("a", "r0", Int(95)), 2) },
		want:   []string{"remove(0)", "insert(2,a/r5)"},
		rows2:  []string{"a/r3", "a/r4", "a/r5"},
	}, {
		name:   "a row jumping from below to above shifts the window down",
		rows:   tenRows(),
		q:      Query{Sort: byScore, Range: Range{Offset: 2, Limit: 3}},
		change: func(tbl *Table) { tbl.Upsert(scored("a", "r9", Int(-1)), 2) },
		want:   []string{"remove(2)", "insert(0,a/r1)"},
		rows2:  []string{"a/r1", "a/r2", "a/r3"},
	}, {
		name:   "a change above or below that stays there sends nothing",
		rows:   tenRows(),
		q:      Query{Sort: byScore, Range: Range{Offset: 2, Limit: 3}},
		change: func(tbl *Table) { tbl.Upsert(scored("a", "r0", Int(15)), 2); tbl.Upsert(scored("a", "r9", Int(60)), 3) },
		want:   []string{},
		rows2:  []string{"a/r2", "a/r3", "a/r4"},
	}, {
		name: "equal keys order by namespace, then name",
		rows: []*Row{scored("b", "x", Int(1)), scored("a", "y", Int(1)), scored("a", "x", Int(1)), scored("a", "z", Int(0))},
		q:    Query{Sort: byScore, Range: Range{Limit: 5}},
		change: func(tbl *Table) {
			tbl.Upsert(scored("a", "w", Int(1)), 2)
		},
		want:  []string{"insert(1,a/w)", "count(5,@0)"},
		rows2: []string{"a/z", "a/w", "a/x", "a/y", "b/x"},
	}, {
		name: "equal keys keep the namespace, name order when descending",
		rows: []*Row{scored("b", "x", Int(1)), scored("a", "y", Int(1)), scored("a", "z", Int(2))},
		q:    Query{Sort: SortSpec{Key: "score", Desc: true}, Range: Range{Limit: 5}},
		change: func(tbl *Table) {
			tbl.Upsert(scored("a", "x", Int(1)), 2)
		},
		want:  []string{"insert(1,a/x)", "count(4,@0)"},
		rows2: []string{"a/z", "a/x", "a/y", "b/x"},
	}, {
		name: "missing values sort last ascending",
		rows: []*Row{scored("a", "none", Value{}), scored("a", "one", Int(1)), scored("a", "text", String("x"))},
		q:    Query{Sort: byScore, Range: Range{Limit: 5}},
		change: func(tbl *Table) {
			tbl.Upsert(scored("a", "two", Int(2)), 2)
		},
		want:  []string{"insert(1,a/two)", "count(4,@0)"},
		rows2: []string{"a/one", "a/two", "a/text", "a/none"},
	}, {
		name: "missing values sort first descending",
		rows: []*Row{scored("a", "none", Value{}), scored("a", "one", Int(1))},
		q:    Query{Sort: SortSpec{Key: "score", Desc: true}, Range: Range{Limit: 5}},
		change: func(tbl *Table) {
			tbl.Upsert(scored("a", "two", Int(2)), 2)
		},
		want:  []string{"insert(1,a/two)", "count(3,@0)"},
		rows2: []string{"a/none", "a/two", "a/one"},
	}, {
		name: "a reversed sort keeps missing values last ascending",
		rows: []*Row{scored("a", "none", Value{}), scored("a", "one", Int(1))},
		q:    Query{Sort: SortSpec{Key: "score", Desc: true, Reversed: true}, Range: Range{Limit: 5}},
		change: func(tbl *Table) {
			tbl.Upsert(scored("a", "two", Int(2)), 2)
		},
		want:  []string{"insert(0,a/two)", "count(3,@0)"},
		rows2: []string{"a/two", "a/one", "a/none"},
	}, {
		name: "a reversed sort keeps missing values first descending",
		rows: []*Row{scored("a", "none", Value{}), scored("a", "one", Int(1))},
		q:    Query{Sort: SortSpec{Key: "score", Reversed: true}, Range: Range{Limit: 5}},
		change: func(tbl *Table) {
			tbl.Upsert(scored("a", "two", Int(2)), 2)
		},
		want:  []string{"insert(2,a/two)", "count(3,@0)"},
		rows2: []string{"a/none", "a/one", "a/two"},
	}, {
		name: "a label change moves a row out of the filter",
		rows: []*Row{scored("a", "p", Int(1), "app", "web"), scored("a", "q", Int(2), "app", "web"),
			scored("a", "r", Int(3), "app", "web"), scored("a", "s", Int(4), "app", "db")},
		q: Query{Sort: byScore, Filter: Filter{Label: labels.SelectorFromSet(labels.Set{"app": "web"})}, Range: Range{Limit: 2}},
		change: func(tbl *Table) {
			tbl.Upsert(scored("a", "p", Int(1), "app", "db"), 2)
		},
		want:  []string{"remove(0)", "insert(1,a/r)", "count(2,@0)"},
		rows2: []string{"a/q", "a/r"},
	}, {
		name: "a window narrowed to some namespaces never sees the others",
		rows: []*Row{scored("a", "p", Int(1)), scored("secret", "q", Int(2)), scored("b", "r", Int(3))},
		q:    Query{Sort: byScore, Filter: Filter{Namespaces: sets.New("a", "b")}, Range: Range{Limit: 5}},
		change: func(tbl *Table) {
			tbl.Upsert(scored("secret", "s", Int(0)), 2)
			tbl.Delete("secret", "q", 3)
			tbl.Upsert(scored("b", "t", Int(0)), 4)
		},
		want:  []string{"insert(0,b/t)", "count(3,@0)"},
		rows2: []string{"b/t", "a/p", "b/r"},
	}, {
		name: "a text filter matches the name or a cell, ignoring case",
		rows: []*Row{scored("a", "web-1", String("Running")), scored("a", "db-1", String("Running")), scored("a", "db-2", String("Pending"))},
		q:    Query{Sort: SortSpec{Key: "metadata.name"}, Filter: Filter{Text: "WEB"}, Range: Range{Limit: 5}},
		change: func(tbl *Table) {
			tbl.Upsert(scored("a", "db-2", String("WebhookWait")), 2)
		},
		want:  []string{"insert(0,a/db-2)", "count(2,@0)"},
		rows2: []string{"a/db-2", "a/web-1"},
	}, {
		name:   "a window past the end is empty until rows reach it",
		rows:   tenRows(),
		q:      Query{Sort: byScore, Range: Range{Offset: 10, Limit: 3}},
		change: func(tbl *Table) { tbl.Upsert(scored("a", "x", Int(-5)), 2) },
		want:   []string{"insert(0,a/r9)", "count(11,@10)"},
		rows2:  []string{"a/r9"},
	}, {
		name:   "a window far past the end stays empty",
		rows:   tenRows(),
		q:      Query{Sort: byScore, Range: Range{Offset: 20, Limit: 3}},
		change: func(tbl *Table) { tbl.Upsert(scored("a", "x", Int(-5)), 2); tbl.Delete("a", "r0", 3) },
		want:   []string{"count(10,@20)"},
		rows2:  []string{},
	}, {
		name:   "a window at the end grows as rows are added",
		rows:   tenRows(),
		q:      Query{Sort: byScore, Range: Range{Offset: 8, Limit: 5}},
		change: func(tbl *Table) { tbl.Upsert(scored("a", "x", Int(100)), 2) },
		want:   []string{"insert(2,a/x)", "count(11,@8)"},
		rows2:  []string{"a/r8", "a/r9", "a/x"},
	}, {
		name:   "a window at the end shrinks as rows go",
		rows:   tenRows(),
		q:      Query{Sort: byScore, Range: Range{Offset: 8, Limit: 5}},
		change: func(tbl *Table) { tbl.Delete("a", "r1", 2) },
		want:   []string{"remove(0)", "count(9,@8)"},
		rows2:  []string{"a/r9"},
	}, {
		name: "a cursor window keeps its rows when rows above change",
		rows: tenRows(),
		q:    Query{Sort: byScore, Range: Range{Cursor: &Cursor{Value: Int(20), Namespace: "a", Name: "r2"}, Limit: 3}},
		change: func(tbl *Table) {
			tbl.Upsert(scored("a", "x", Int(5)), 2)
			tbl.Upsert(scored("a", "y", Int(6)), 3)
			tbl.Delete("a", "r0", 4)
		},
		want:  []string{"count(11,@3)"},
		rows2: []string{"a/r2", "a/r3", "a/r4"},
	}, {
		name:   "a cursor window outlives its anchor row",
		rows:   tenRows(),
		q:      Query{Sort: byScore, Range: Range{Cursor: &Cursor{Value: Int(20), Namespace: "a", Name: "r2"}, Limit: 3}},
		change: func(tbl *Table) { tbl.Delete("a", "r2", 2); tbl.Upsert(scored("a", "x", Int(20)), 3) },
		want:   []string{"remove(0)", "insert(2,a/r5)", "count(9,@2)", "remove(2)", "insert(0,a/x)", "count(10,@2)"},
		rows2:  []string{"a/x", "a/r3", "a/r4"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tbl := NewTable(Options{Columns: scoreColumns})
			tbl.Replace(tt.rows, 1)
			w, c := openAndDrain(t, tbl, tt.q)
			tt.change(tbl)
			ops, _ := w.Pop(nil)
			if diff := cmp.Diff(tt.want, opStrings(ops)); diff != "" {
				t.Errorf("ops (-want +got):\n%s", diff)
			}
			if err := c.apply(ops); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.rows2, c.keys()); diff != "" {
				t.Errorf("client rows (-want +got):\n%s", diff)
			}
			var now []string
			for _, r := range w.Rows() {
				now = append(now, r.Key())
			}
			if diff := cmp.Diff(tt.rows2, append([]string{}, now...)); diff != "" {
				t.Errorf("window rows (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWindowFirstPop(t *testing.T) {
	tbl := NewTable(Options{Columns: scoreColumns})
	tbl.Replace(tenRows(), 7)
	w, err := tbl.Open(context.Background(), Query{Sort: SortSpec{Key: "score", Desc: true}, Range: Range{Offset: 1, Limit: 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ops, rv := w.Pop(nil)
	want := []string{"insert(0,a/r8)", "insert(1,a/r7)", "count(10,@1)"}
	if diff := cmp.Diff(want, opStrings(ops)); diff != "" {
		t.Errorf("first pop (-want +got):\n%s", diff)
	}
	if rv != 7 {
		t.Errorf("version %d, want 7", rv)
	}
	if ops, _ := w.Pop(nil); len(ops) != 0 {
		t.Errorf("second pop: %v, want nothing", opStrings(ops))
	}
}

func TestWindowMove(t *testing.T) {
	byScore := SortSpec{Key: "score"}
	tests := []struct {
		name  string
		from  Range
		to    Range
		want  []string
		rows2 []string
	}{{
		name:  "scrolling down sends only the rows that enter",
		from:  Range{Offset: 2, Limit: 3},
		to:    Range{Offset: 4, Limit: 3},
		want:  []string{"remove(0)", "remove(0)", "insert(1,a/r5)", "insert(2,a/r6)", "count(10,@4)"},
		rows2: []string{"a/r4", "a/r5", "a/r6"},
	}, {
		name:  "scrolling up sends only the rows that enter",
		from:  Range{Offset: 4, Limit: 3},
		to:    Range{Offset: 3, Limit: 3},
		want:  []string{"remove(2)", "insert(0,a/r3)", "count(10,@3)"},
		rows2: []string{"a/r3", "a/r4", "a/r5"},
	}, {
		name:  "a jump to rows not held resets the window",
		from:  Range{Offset: 0, Limit: 2},
		to:    Range{Offset: 6, Limit: 2},
		want:  []string{"reset", "insert(0,a/r6)", "insert(1,a/r7)", "count(10,@6)"},
		rows2: []string{"a/r6", "a/r7"},
	}, {
		name:  "growing the limit appends rows",
		from:  Range{Offset: 7, Limit: 2},
		to:    Range{Offset: 7, Limit: 5},
		want:  []string{"insert(2,a/r9)", "count(10,@7)"}, // a move's answer always ends with a count
		rows2: []string{"a/r7", "a/r8", "a/r9"},
	}, {
		name:  "shrinking the limit removes the last rows",
		from:  Range{Offset: 0, Limit: 4},
		to:    Range{Offset: 0, Limit: 2},
		want:  []string{"remove(3)", "remove(2)", "count(10,@0)"},
		rows2: []string{"a/r0", "a/r1"},
	}, {
		name:  "moving to a cursor places the window at its row",
		from:  Range{Offset: 0, Limit: 3},
		to:    Range{Cursor: &Cursor{Value: Int(15)}, Limit: 3},
		want:  []string{"remove(0)", "remove(0)", "insert(1,a/r3)", "insert(2,a/r4)", "count(10,@2)"},
		rows2: []string{"a/r2", "a/r3", "a/r4"},
	}, {
		name:  "moving past the end empties the window",
		from:  Range{Offset: 8, Limit: 3},
		to:    Range{Offset: 30, Limit: 3},
		want:  []string{"reset", "count(10,@30)"},
		rows2: []string{},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tbl := NewTable(Options{Columns: scoreColumns})
			tbl.Replace(tenRows(), 1)
			w, c := openAndDrain(t, tbl, Query{Sort: byScore, Range: tt.from})
			ops, _, err := w.Move(tt.to)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, opStrings(ops)); diff != "" {
				t.Errorf("ops (-want +got):\n%s", diff)
			}
			if err := c.apply(ops); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.rows2, c.keys()); diff != "" {
				t.Errorf("client rows (-want +got):\n%s", diff)
			}
		})
	}
}

// A Move returns the changes pending before it first, so that the
// consumer applies them to the range they were computed for.
func TestWindowMoveAfterChanges(t *testing.T) {
	tbl := NewTable(Options{Columns: scoreColumns})
	tbl.Replace(tenRows(), 1)
	w, c := openAndDrain(t, tbl, Query{Sort: SortSpec{Key: "score"}, Range: Range{Offset: 0, Limit: 3}})
	tbl.Delete("a", "r1", 2)
	ops, _, err := w.Move(Range{Offset: 1, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"remove(1)", "insert(2,a/r3)", "count(9,@0)", "remove(0)", "insert(2,a/r4)", "count(9,@1)"}
	if diff := cmp.Diff(want, opStrings(ops)); diff != "" {
		t.Errorf("ops (-want +got):\n%s", diff)
	}
	if err := c.apply(ops); err != nil {
		t.Fatal(err)
	}
	if got, want := c.keys(), []string{"a/r2", "a/r3", "a/r4"}; !slices.Equal(got, want) {
		t.Errorf("client rows %v, want %v", got, want)
	}
}

// A consumer that does not pop has its backlog replaced by the window
// itself: what it holds never grows past a bound set by its limit.
func TestWindowOverflowResets(t *testing.T) {
	tbl := NewTable(Options{Columns: scoreColumns, MaxPending: 4})
	tbl.Replace(tenRows(), 1)
	w, c := openAndDrain(t, tbl, Query{Sort: SortSpec{Key: "score"}, Range: Range{Limit: 2}})
	for i := range 20 {
		tbl.Upsert(scored("a", "r0", Int(int64(i%2*50))), uint64(2+i))
		if n := len(w.pending); n > 4*2+4 {
			t.Fatalf("after %d changes, %d operations pending", i+1, n)
		}
	}
	ops, rv := w.Pop(nil)
	want := []string{"reset", "insert(0,a/r1)", "insert(1,a/r2)", "count(10,@0)"}
	if diff := cmp.Diff(want, opStrings(ops)); diff != "" {
		t.Errorf("ops (-want +got):\n%s", diff)
	}
	if rv != 21 {
		t.Errorf("version %d, want 21", rv)
	}
	if err := c.apply(ops); err != nil {
		t.Fatal(err)
	}
}

// Windows that sort and filter alike share one view; the view goes with
// its last window (when no idle view is kept) and the index with its
// last view.
func TestViewsShared(t *testing.T) {
	tbl := NewTable(Options{Columns: scoreColumns, IdleViews: -1})
	tbl.Replace(tenRows(), 1)
	web := func() Filter {
		return Filter{Label: labels.SelectorFromSet(labels.Set{"app": "web"}), Namespaces: sets.New("b", "a")}
	}
	q := Query{Sort: SortSpec{Key: "score"}, Filter: web(), Range: Range{Limit: 3}}
	w1, err := tbl.Open(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	q.Filter = web() // an equal filter, not the same value
	q.Range = Range{Offset: 5, Limit: 2}
	w2, err := tbl.Open(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if w1.v != w2.v {
		t.Errorf("equal filters got two views")
	}
	q.Filter.Text = "r1"
	w3, err := tbl.Open(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if w3.v == w1.v || w3.v.x != w1.v.x {
		t.Errorf("another filter on the same sort must get its own view of the same index")
	}
	w1.Close()
	w3.Close()
	if n := len(tbl.indexes[q.Sort].views); n != 1 {
		t.Errorf("%d views left, want 1", n)
	}
	w2.Close()
	w2.Close()
	if n := len(tbl.indexes); n != 0 {
		t.Errorf("%d indexes left after the last window closed", n)
	}
	if ops, _ := w2.Pop(nil); len(ops) != 0 {
		t.Errorf("a closed window popped %v", opStrings(ops))
	}
}

// The consumer is woken once per batch of changes, after the table's
// lock is released (the wake function may call into the table).
func TestWindowWake(t *testing.T) {
	tbl := NewTable(Options{Columns: scoreColumns})
	tbl.Replace(tenRows(), 1)
	wakes := 0
	q := Query{Sort: SortSpec{Key: "score"}, Range: Range{Limit: 3}, Wake: func() {
		wakes++
		_ = tbl.Len() // deadlocks if called under the lock
	}}
	w, _ := openAndDrain(t, tbl, q)
	tbl.Upsert(scored("a", "x", Int(1)), 2)
	tbl.Upsert(scored("a", "y", Int(2)), 3)
	if wakes != 1 {
		t.Errorf("%d wakes before the consumer popped, want 1", wakes)
	}
	w.Pop(nil)
	tbl.Upsert(scored("a", "z", Int(95)), 4) // below: the count changes
	if wakes != 2 {
		t.Errorf("%d wakes, want 2", wakes)
	}
	w.Pop(nil)
	tbl.Upsert(scored("a", "z", Int(95)), 5) // same row, same place: an update below the window
	if wakes != 2 {
		t.Errorf("%d wakes after a change the window does not show, want 2", wakes)
	}
}

func TestOpenErrors(t *testing.T) {
	tbl := NewTable(Options{Columns: scoreColumns, MaxLimit: 100})
	tests := []struct {
		name  string
		q     Query
		field string
		msg   string
	}{
		{"zero limit", Query{Range: Range{}}, "limit", "0 is not between 1 and 100"},
		{"limit above the maximum", Query{Range: Range{Limit: 101}}, "limit", "101 is not between 1 and 100"},
		{"negative offset", Query{Range: Range{Offset: -1, Limit: 1}}, "offset", "-1 is negative"},
		{"offset and cursor", Query{Range: Range{Offset: 3, Cursor: &Cursor{}, Limit: 1}}, "cursor", "exclude each other"},
		{"unknown sort key", Query{Sort: SortSpec{Key: "spec.nodeName"}, Range: Range{Limit: 1}}, "sort",
			`unknown sort key "spec.nodeName"; known keys: metadata.name, metadata.namespace, metadata.creationTimestamp, score`},
		{"long text", Query{Filter: Filter{Text: strings.Repeat("x", 257)}, Range: Range{Limit: 1}}, "filter", "longer than 256"},
		{"NUL in text", Query{Filter: Filter{Text: "a\x00b"}, Range: Range{Limit: 1}}, "filter", "NUL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tbl.Open(context.Background(), tt.q)
			var qe *InvalidQueryError
			if !errors.As(err, &qe) || qe.Field != tt.field || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error %v, want an invalid %s: …%s…", err, tt.field, tt.msg)
			}
			st := apistatus.FromError(err)
			want := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
				Code: http.StatusBadRequest, Reason: metav1.StatusReasonBadRequest, Message: err.Error()}
			if diff := cmp.Diff(want, *st); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
	if len(tbl.indexes) != 0 {
		t.Errorf("a refused query left %d indexes", len(tbl.indexes))
	}
}

// Options.SortKey resolves keys the table does not know, such as field
// paths, and its error reaches the client.
func TestSortKeyResolver(t *testing.T) {
	tbl := NewTable(Options{SortKey: func(key string) (func(*Row) Value, error) {
		if key != "spec.nodeName" {
			return nil, fmt.Errorf("cannot sort by %q", key)
		}
		return func(r *Row) Value { return String(r.Fields.Get(key)) }, nil
	}})
	node := func(ns, name, n string) *Row {
		return &Row{Namespace: ns, Name: name, Fields: fieldsSet{"spec.nodeName": n}}
	}
	tbl.Replace([]*Row{node("a", "p", "n2"), node("a", "q", "n1"), node("a", "r", "n3")}, 1)
	w, c := openAndDrain(t, tbl, Query{Sort: SortSpec{Key: "spec.nodeName"}, Range: Range{Limit: 3}})
	if got, want := c.keys(), []string{"a/q", "a/p", "a/r"}; !slices.Equal(got, want) {
		t.Errorf("rows %v, want %v", got, want)
	}
	cur, ok := w.CursorAt(1)
	if want := (Cursor{Value: String("n2"), Namespace: "a", Name: "p"}); !ok || Compare(cur.Value, want.Value) != 0 || cur.Name != want.Name {
		t.Errorf("cursor at 1: %+v %v, want %+v", cur, ok, want)
	}
	if _, ok := w.CursorAt(3); ok {
		t.Errorf("a cursor past the rows")
	}
	_, err := tbl.Open(context.Background(), Query{Sort: SortSpec{Key: "status.phase"}, Range: Range{Limit: 3}})
	if err == nil || !strings.Contains(err.Error(), `cannot sort by "status.phase"`) {
		t.Errorf("error %v", err)
	}
}

type fieldsSet map[string]string

func (f fieldsSet) Has(k string) bool   { _, ok := f[k]; return ok }
func (f fieldsSet) Get(k string) string { return f[k] }

// TestTooManyViews: windows that need a new view past MaxViews are
// refused with a 429, windows on an existing view are not, and a view
// closed frees its place.
func TestTooManyViews(t *testing.T) {
	tbl := NewTable(Options{Columns: scoreColumns, MaxViews: 2})
	tbl.Replace(tenRows(), 1)
	open := func(sort string, text string) (*Window, error) {
		return tbl.Open(context.Background(), Query{Sort: SortSpec{Key: sort}, Filter: Filter{Text: text}, Range: Range{Limit: 3}})
	}
	w1, err := open("score", "")
	if err != nil {
		t.Fatal(err)
	}
	w2, err := open("metadata.name", "r1")
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	_, err = open("score", "r") // a new filter on an existing index
	var tm *TooManyViewsError
	if !errors.As(err, &tm) || apistatus.FromError(err).Code != http.StatusTooManyRequests {
		t.Fatalf("a third view: %v, want a 429 TooManyViewsError", err)
	}
	if _, err := open("metadata.creationTimestamp", ""); !errors.As(err, &tm) {
		t.Fatalf("a third view on a new index: %v", err)
	}
	same, err := open("score", "") // shares w1's view
	if err != nil {
		t.Fatalf("a window on an open view: %v", err)
	}
	same.Close()
	w1.Close() // the view goes with its last window
	w3, err := open("score", "r")
	if err != nil {
		t.Fatalf("after closing a view: %v", err)
	}
	w3.Close()
}

// TestIdleViewsKept: a view whose last window closed is kept, up to date,
// for the next window that sorts and filters alike; past IdleViews the
// least recently used goes, and an Open past MaxViews drops an idle view
// rather than refusing.
func TestIdleViewsKept(t *testing.T) {
	tbl := NewTable(Options{Columns: scoreColumns, IdleViews: 2, MaxViews: 3})
	tbl.Replace(tenRows(), 1)
	q := func(text string) Query {
		return Query{Sort: SortSpec{Key: "score", Desc: true}, Filter: Filter{Text: text}, Range: Range{Limit: 3}}
	}
	views := map[string]*view{}
	for _, text := range []string{"r", "r1", "r2"} {
		w, err := tbl.Open(context.Background(), q(text))
		if err != nil {
			t.Fatal(err)
		}
		views[text] = w.v
		w.Close()
	}
	if tbl.views != 2 || len(tbl.idle) != 2 || tbl.idle[0] != views["r1"] || tbl.idle[1] != views["r2"] {
		t.Fatalf("idle views %d (%v), want r1 then r2", tbl.views, tbl.idle)
	}
	// A change while idle reaches the view; reopened, it is the same view.
	tbl.Upsert(scored("a", "r11", Int(95)), 2)
	w, c := openAndDrain(t, tbl, q("r1"))
	if w.v != views["r1"] {
		t.Error("the idle view was built again")
	}
	if diff := cmp.Diff([]string{"a/r11", "a/r1"}, c.keys()); diff != "" {
		t.Errorf("reopened idle view (-want +got):\n%s", diff)
	}
	if len(tbl.idle) != 1 || tbl.idle[0] != views["r2"] {
		t.Errorf("idle after reopening r1: %v, want r2 only", tbl.idle)
	}
	// Past MaxViews, the idle view goes rather than the Open failing.
	w2, err := tbl.Open(context.Background(), q("r9"))
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	w3, err := tbl.Open(context.Background(), q("r8"))
	if err != nil {
		t.Fatalf("an Open past MaxViews with an idle view: %v", err)
	}
	defer w3.Close()
	if len(tbl.idle) != 0 || tbl.views != 3 {
		t.Errorf("idle %v, views %d: the idle view should have made room", tbl.idle, tbl.views)
	}
	var tm *TooManyViewsError
	if _, err := tbl.Open(context.Background(), q("r7")); !errors.As(err, &tm) {
		t.Errorf("an Open past MaxViews with no idle view: %v, want TooManyViewsError", err)
	}
}
