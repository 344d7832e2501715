package livequery

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
)

// client is a consumer's copy of a window, edited only by operations.
type client struct {
	rows          []*Row
	count, offset int
}

// apply edits c by ops, failing on an operation that does not fit it.
func (c *client) apply(ops []Op) error {
	for _, op := range ops {
		switch op.Type {
		case OpInsert:
			if op.Pos < 0 || op.Pos > len(c.rows) {
				return fmt.Errorf("%v: position out of [0,%d]", op, len(c.rows))
			}
			c.rows = slices.Insert(c.rows, op.Pos, op.Row)
		case OpRemove:
			if op.Pos < 0 || op.Pos >= len(c.rows) {
				return fmt.Errorf("%v: position out of [0,%d)", op, len(c.rows))
			}
			c.rows = slices.Delete(c.rows, op.Pos, op.Pos+1)
		case OpMove:
			if op.Pos < 0 || op.Pos >= len(c.rows) || op.To < 0 || op.To >= len(c.rows) {
				return fmt.Errorf("%v: position out of [0,%d)", op, len(c.rows))
			}
			if c.rows[op.Pos].Key() != op.Row.Key() {
				return fmt.Errorf("%v: moves %s", op, c.rows[op.Pos].Key())
			}
			c.rows = slices.Delete(c.rows, op.Pos, op.Pos+1)
			c.rows = slices.Insert(c.rows, op.To, op.Row)
		case OpUpdate:
			if op.Pos < 0 || op.Pos >= len(c.rows) {
				return fmt.Errorf("%v: position out of [0,%d)", op, len(c.rows))
			}
			if c.rows[op.Pos].Key() != op.Row.Key() {
				return fmt.Errorf("%v: updates %s", op, c.rows[op.Pos].Key())
			}
			c.rows[op.Pos] = op.Row
		case OpCount:
			c.count, c.offset = op.Count, op.Offset
		case OpReset:
			c.rows = nil
		default:
			return fmt.Errorf("unknown op %v", op)
		}
	}
	return nil
}

func (c *client) keys() []string { return rowKeys(c.rows) }

func rowKeys(rows []*Row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Key()
	}
	return out
}

// The model: "filter all rows, sort, slice", written without the engine's
// trees, views or windows.

var testColumns = []string{"status", "restarts", "cpu"}

func modelValue(r *Row, key string) Value {
	switch key {
	case "metadata.name":
		return String(r.Name)
	case "metadata.namespace":
		return String(r.Namespace)
	case "metadata.creationTimestamp":
		return Time(r.Created)
	}
	i := slices.Index(testColumns, key)
	if i < 0 || i >= len(r.Cells) {
		return Value{}
	}
	return r.Cells[i]
}

func modelMatches(f Filter, r *Row) bool {
	if f.Namespaces != nil && !f.Namespaces.Has(r.Namespace) {
		return false
	}
	if f.Label != nil && !f.Label.Matches(labels.Set(r.Labels)) {
		return false
	}
	if f.Field != nil && !f.Field.Matches(&row{Row: r}) {
		return false
	}
	if f.Text == "" {
		return true
	}
	texts := []string{r.Name}
	for _, c := range r.Cells {
		texts = append(texts, c.String())
	}
	for _, s := range texts {
		if strings.Contains(strings.ToLower(s), strings.ToLower(f.Text)) {
			return true
		}
	}
	return false
}

func modelCompare(spec SortSpec, a, b *Row) int {
	c := modelCompareValues(spec, modelValue(a, spec.Key), modelValue(b, spec.Key))
	return cmp.Or(c, cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// modelCompareValues orders two sort values in spec's direction: a
// missing value goes last ascending and first descending, in the
// direction the client asked for, which a reversed sort's Desc is not.
func modelCompareValues(spec SortSpec, va, vb Value) int {
	c := Compare(va, vb)
	if spec.Desc {
		c = -c
	}
	if spec.Reversed && (va.Kind() == KindMissing) != (vb.Kind() == KindMissing) {
		c = -c
	}
	return c
}

// modelWindow returns the rows of the window, the count and the offset.
func modelWindow(rows map[string]*Row, q Query) ([]string, int, int) {
	var all []*Row
	for _, r := range rows {
		if modelMatches(q.Filter, r) {
			all = append(all, r)
		}
	}
	slices.SortFunc(all, func(a, b *Row) int { return modelCompare(q.Sort, a, b) })
	off := q.Range.Offset
	if cur := q.Range.Cursor; cur != nil {
		anchor := &Row{Namespace: cur.Namespace, Name: cur.Name}
		off = 0
		for _, r := range all {
			c := modelCompareValues(q.Sort, modelValue(r, q.Sort.Key), cur.Value)
			if cmp.Or(c, cmp.Compare(r.Namespace, anchor.Namespace), cmp.Compare(r.Name, anchor.Name)) < 0 {
				off++
			}
		}
	}
	var keys []string
	for i := off; i < len(all) && i < off+q.Range.Limit; i++ {
		keys = append(keys, all[i].Key())
	}
	return keys, len(all), off
}

// chooser drives the randomized test: a seeded generator, or fuzz input.
type chooser interface {
	Intn(n int) int
}

type randChooser struct{ r *rand.Rand }

func (c randChooser) Intn(n int) int { return c.r.IntN(n) }

// bytesChooser reads choices from fuzz input; once it is used up, every
// choice is 0.
type bytesChooser struct{ b []byte }

func (c *bytesChooser) Intn(n int) int {
	if len(c.b) == 0 {
		return 0
	}
	v := int(c.b[0])
	c.b = c.b[1:]
	return v % n
}

var (
	testNamespaces = []string{"ns-a", "ns-b", "ns-c", "ns-d"}
	testStatuses   = []string{"Running", "Pending", "Failed"}
	testSortKeys   = []string{"metadata.name", "metadata.namespace", "metadata.creationTimestamp", "status", "restarts", "cpu"}
	testT0         = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

func randomRow(c chooser, rv uint64) *Row {
	r := &Row{
		Namespace: testNamespaces[c.Intn(len(testNamespaces))],
		Name:      fmt.Sprintf("pod-%d", c.Intn(24)),
		RV:        rv,
	}
	if app := c.Intn(4); app > 0 {
		r.Labels = map[string]string{"app": string(rune('a' + app - 1))}
	}
	if c.Intn(4) > 0 {
		r.Created = testT0.Add(time.Duration(c.Intn(6)) * time.Minute)
	}
	status := Value{}
	if c.Intn(5) > 0 {
		status = String(testStatuses[c.Intn(len(testStatuses))])
	}
	restarts := Value{}
	if c.Intn(5) > 0 {
		restarts = Int(int64(c.Intn(5)))
	}
	cpu := Value{}
	switch c.Intn(3) {
	case 1:
		cpu = Int(int64(c.Intn(3)))
	case 2:
		cpu = Quantity(resource.MustParse([]string{"500m", "1", "1500m", "2"}[c.Intn(4)]))
	}
	r.Cells = []Value{status, restarts, cpu}
	return r
}

func randomFilter(c chooser) Filter {
	var f Filter
	if c.Intn(3) == 0 {
		f.Namespaces = sets.New[string]()
		for _, ns := range testNamespaces {
			if c.Intn(2) == 0 {
				f.Namespaces.Insert(ns)
			}
		}
	}
	switch c.Intn(4) {
	case 1:
		f.Label = labels.SelectorFromSet(labels.Set{"app": "a"})
	case 2:
		f.Label, _ = labels.Parse("app in (a,b)")
	}
	if c.Intn(4) == 0 {
		f.Field = fields.OneTermNotEqualSelector("metadata.namespace", "ns-b")
	}
	switch c.Intn(4) {
	case 1:
		f.Text = "POD-1" // pod-1, pod-10 … pod-19
	case 2:
		f.Text = "run"
	}
	return f
}

func randomRange(c chooser, rows map[string]*Row, spec SortSpec) Range {
	r := Range{Limit: 1 + c.Intn(7)}
	if c.Intn(3) > 0 || len(rows) == 0 {
		r.Offset = c.Intn(30)
		return r
	}
	// A cursor at some row's key, which may since have moved or gone.
	keys := make([]string, 0, len(rows))
	for k := range rows {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	a := rows[keys[c.Intn(len(keys))]]
	r.Cursor = &Cursor{Value: modelValue(a, spec.Key), Namespace: a.Namespace, Name: a.Name}
	return r
}

type modelWin struct {
	w     *Window
	q     Query
	c     client
	fresh bool // not popped yet: its first Pop sends it whole
}

// runModel applies steps random operations to a table and to the model
// and checks every window's client against the model after each.
func runModel(t *testing.T, c chooser, steps int) {
	// Few idle views, so that windows reopen idle views kept up to date
	// and the oldest are dropped.
	tbl := NewTable(Options{Columns: testColumns, MaxPending: 8, IdleViews: 3})
	rows := map[string]*Row{}
	rv := uint64(1)
	// Views are built off the table's lock while changes go on: each
	// build meets a few changes, which it must catch up with, applied
	// off the lock once more than catchUp are queued.
	tbl.catchUp = c.Intn(3)
	tbl.buildHook = func() {
		for range c.Intn(4) {
			rv++
			if c.Intn(3) == 0 {
				ns, name := testNamespaces[c.Intn(len(testNamespaces))], fmt.Sprintf("pod-%d", c.Intn(24))
				delete(rows, ns+"/"+name)
				tbl.Delete(ns, name, rv)
				continue
			}
			r := randomRow(c, rv)
			rows[r.Key()] = r
			tbl.Upsert(r, rv)
		}
	}
	var wins []*modelWin
	defer func() {
		for _, mw := range wins {
			mw.w.Close()
		}
		n := 0
		for _, x := range tbl.indexes {
			for _, v := range x.views {
				if len(v.windows) != 0 {
					t.Errorf("a view with windows after every window closed")
				}
				n++
			}
		}
		if n != len(tbl.idle) || n != tbl.views || n > 3 {
			t.Errorf("%d views left (%d idle, %d counted), want at most 3, all idle", n, len(tbl.idle), tbl.views)
		}
	}()
	open := func() {
		q := Query{
			Sort:   SortSpec{Key: testSortKeys[c.Intn(len(testSortKeys))], Desc: c.Intn(2) == 0, Reversed: c.Intn(4) == 0},
			Filter: randomFilter(c),
		}
		q.Range = randomRange(c, rows, q.Sort)
		w, err := tbl.Open(context.Background(), q)
		if err != nil {
			t.Fatalf("open %+v: %v", q, err)
		}
		wins = append(wins, &modelWin{w: w, q: q, fresh: true})
	}
	for step := range steps {
		var what string
		single := false // one row changed: each window's diff is at most two edits
		moved := map[*modelWin]bool{}
		switch op := c.Intn(20); {
		case op < 10:
			rv++
			r := randomRow(c, rv)
			if old := rows[r.Key()]; old != nil && c.Intn(8) == 0 {
				r = old // a repeat: nothing changes
			}
			what = "upsert " + r.Key()
			rows[r.Key()] = r
			tbl.Upsert(r, rv)
			single = true
		case op < 14:
			rv++
			ns, name := testNamespaces[c.Intn(len(testNamespaces))], fmt.Sprintf("pod-%d", c.Intn(24))
			what = "delete " + ns + "/" + name
			delete(rows, ns+"/"+name)
			tbl.Delete(ns, name, rv)
			single = true
		case op < 16:
			if len(wins) == 0 {
				continue
			}
			mw := wins[c.Intn(len(wins))]
			mw.q.Range = randomRange(c, rows, mw.q.Sort)
			what = fmt.Sprintf("move %+v", mw.q.Range)
			ops, _, err := mw.w.Move(mw.q.Range)
			if err != nil {
				t.Fatalf("move: %v", err)
			}
			if err := mw.c.apply(ops); err != nil {
				t.Fatalf("step %d %s: %v", step, what, err)
			}
			moved[mw] = true
		case op < 18:
			if len(wins) < 6 {
				what = "open"
				open()
			}
		case op < 19:
			if len(wins) > 0 {
				i := c.Intn(len(wins))
				what = "close"
				wins[i].w.Close()
				wins = slices.Delete(wins, i, i+1)
			}
		default:
			// A relist: some rows kept, some changed, some gone.
			rv++
			next := map[string]*Row{}
			var list []*Row
			for k, r := range rows {
				switch c.Intn(3) {
				case 0:
				case 1:
					next[k], list = r, append(list, r)
				default:
					nr := randomRow(c, rv)
					nr.Namespace, nr.Name = r.Namespace, r.Name
					next[k], list = nr, append(list, nr)
				}
			}
			what = "replace"
			rows = next
			tbl.Replace(list, rv)
		}
		for i, mw := range wins {
			ops, _ := mw.w.Pop(nil)
			before := slices.Clone(mw.c.rows)
			mw.fresh = false
			if err := mw.c.apply(ops); err != nil {
				t.Fatalf("step %d %s: window %d %+v: %v", step, what, i, mw.q, err)
			}
			// A first Pop or a reset re-sends the window.
			if single && !moved[mw] && !mw.fresh && (len(ops) == 0 || ops[0].Type != OpReset) {
				edits := 0
				for _, op := range ops {
					if op.Type != OpCount {
						edits++
					}
				}
				// The least a consumer can be sent: nothing for rows it
				// holds unchanged, one update for one row's new state.
				least := 0
				if !slices.Equal(before, mw.c.rows) {
					least = 1
					if !slices.Equal(rowKeys(before), mw.c.keys()) {
						least = 2
					}
				}
				if edits > least || edits > 2 {
					t.Fatalf("step %d %s: window %d: %d edits where %d do: %v", step, what, i, edits, least, ops)
				}
			}
			if mw.q.Range.Cursor == nil {
				// An offset window's offset never moves by itself.
				mw.q.Range.Offset = mw.c.offset
			}
			want, count, off := modelWindow(rows, mw.q)
			if got := mw.c.keys(); !slices.Equal(got, want) || mw.c.count != count || mw.c.offset != off {
				t.Fatalf("step %d %s: window %d %v/%+v:\n got %v count %d offset %d\nwant %v count %d offset %d\n ops %v",
					step, what, i, mw.q.Sort, mw.q.Range, got, mw.c.count, mw.c.offset, want, count, off, ops)
			}
			for j, r := range mw.c.rows {
				if rows[r.Key()] != r {
					t.Fatalf("step %d %s: window %d row %d %s is a stale state", step, what, i, j, r.Key())
				}
			}
		}
	}
}

func TestModel(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			runModel(t, randChooser{rand.New(rand.NewPCG(seed, 0x6c71))}, 1500)
		})
	}
}

func FuzzModel(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x11\x02\x03\x00\x05\x06\x07\x08\x09\x0a\x00\x01\x02\x03\x10\x11\x12\x13"))
	for seed := range uint64(4) {
		b := make([]byte, 256)
		r := rand.New(rand.NewPCG(seed, 1))
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &bytesChooser{b: data}
		runModel(t, c, len(data)/4+1)
	})
}
