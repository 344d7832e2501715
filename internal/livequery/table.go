package livequery

import (
	"cmp"

	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/google/btree"
)

// SortSpec names a sort order: a key and a direction. Rows with equal keys
// are ordered by namespace, then name, ascending in both directions, so
// the order is total and stable.
type SortSpec struct {
	// Key is "metadata.name", "metadata.namespace",
	// "metadata.creationTimestamp", one of the table's Options.Columns, or
	// a key Options.SortKey resolves (a field path).
	Key  string
	Desc bool
	// Reversed says that Desc is the reverse of the direction the
	// sort's clients asked for: an age sorted ascending (youngest first)
	// is its time sorted descending. Rows without a value still go where
	// the clients' direction puts them: last ascending, first descending.
	Reversed bool
}

// Options configures a Table. The zero value is usable: rows have no
// columns and only the metadata keys sort.
type Options struct {
	// Columns names the cells of every row (Row.Cells), for sorting by
	// column. Default: none.
	Columns []string
	// SortKey resolves a sort key that is neither a metadata key nor a
	// column to the function that reads it from a row, or returns the
	// error that tells the client why it cannot sort by it. It is called
	// when a window asks for an index not built yet. Default: no other
	// keys.
	SortKey func(key string) (func(*Row) Value, error)
	// MaxLimit bounds a window's Limit. Default 1000.
	MaxLimit int
	// MaxPending bounds, relative to the window's limit, the operations a
	// window holds for its consumer: past 4×limit+MaxPending, the backlog is
	// dropped and the next Pop re-sends the window whole (OpReset), which
	// then costs no more than the backlog would have. Default 64.
	MaxPending int
	// MaxTextLen bounds Filter.Text. Default 256.
	MaxTextLen int
	// MaxViews bounds the views (distinct sorts and filters) held at
	// once, idle ones included: each holds a tree of the rows it
	// matches, up to one node per row, so they bound the table's memory
	// at about MaxViews×rows nodes. An Open that needs one more drops the
	// least recently used idle view, or fails with TooManyViewsError when
	// every view has windows. Default 64.
	MaxViews int
	// MaxViewsPerOwner bounds the views (and views being built) that one
	// owner (Query.Owner: a user) holds windows on, so that no owner can
	// hold all MaxViews; past it, the owner's Open fails with
	// TooManyViewsError. When MaxViews are held and none is idle, the
	// owner holding the most views gives way: its least recently opened
	// view ends (ViewEvictedError) if it holds more than the one asking
	// would. Default 16, or MaxViews/4 when that is less.
	MaxViewsPerOwner int
	// BuildSlots bounds the view builds that scan at once and shares
	// them between owners (see BuildSlots); a gateway gives all its
	// tables one. Default: the table's own, NewBuildSlots with the defaults.
	BuildSlots *BuildSlots
	// BuildHook, if set, runs on each view build's goroutine, with no
	// lock held, once the build has scanned its rows and released its
	// slot (BuildSlots), before it catches up and installs the view
	// (tests that hold a build: a held build holds no slot).
	BuildHook func()
	// IdleViews is how many views without windows are kept, most
	// recently used first, so that a window reopened alike (a page
	// reloaded, a sort flipped back, the next REST page) finds its view
	// built instead of filtering and sorting every row again. They are
	// kept up to date like any view. Default 8; negative keeps none.
	IdleViews int
}

// Defaults returns the bounds every zero field of Options takes. The
// gateway's configuration (internal/config) starts from them, so they are
// defined once.
func Defaults() Options {
	return Options{MaxLimit: 1000, MaxPending: 64, MaxTextLen: 256, MaxViews: 64, MaxViewsPerOwner: 16, IdleViews: 8}
}

func (o Options) setDefaults() Options {
	d := Defaults()
	if o.MaxLimit <= 0 {
		o.MaxLimit = d.MaxLimit
	}
	if o.MaxPending <= 0 {
		o.MaxPending = d.MaxPending
	}
	if o.MaxTextLen <= 0 {
		o.MaxTextLen = d.MaxTextLen
	}
	if o.MaxViews <= 0 {
		o.MaxViews = d.MaxViews
	}
	if o.MaxViewsPerOwner <= 0 {
		o.MaxViewsPerOwner = max(min(d.MaxViewsPerOwner, o.MaxViews/4), 1)
	}
	switch {
	case o.IdleViews == 0:
		o.IdleViews = d.IdleViews
	case o.IdleViews < 0:
		o.IdleViews = 0
	}
	return o
}

// Table holds the rows of one resource and the sorted indexes and windows
// over them. See the package documentation for the model, its costs and
// its locking.
//
// Goroutines: one per view being built (see build), counted in wg; each
// waits for a slot (Options.BuildSlots), and ends on its own once its
// view is built, or once nobody waits for it.
type Table struct {
	opts    Options
	columns map[string]int

	// mu guards everything below, the indexes, their views, the builds
	// and every window's state.
	mu sync.Mutex
	// rows holds the rows by key. Views are built from a clone of it
	// (btree.Clone is O(1), copy on write), without mu.
	rows *btree.BTreeG[*row]
	// indexes holds one index per sort spec some view uses.
	indexes map[SortSpec]*index
	// builds are the views being built, by spec and filter key.
	builds map[viewKey]*build
	// rv is the resourceVersion of the last change applied.
	rv uint64
	// wakes collects, while mu is held, the windows whose consumers must
	// be woken once it is released.
	wakes []*Window
	// seed varies the trees' priority sequences.
	seed uint64
	// views counts the views of every index, idle ones included; builds
	// are counted apart (len(builds)).
	views int
	// idle holds the views without windows, least recently used first.
	idle []*view
	// owned counts, by owner, the views (built or being built) the
	// owner's windows and Opens hold.
	owned map[string]int
	// err is set by End: the table's data source is gone for good.
	err error
	// wg counts the build goroutines.
	wg sync.WaitGroup

	// slots are the build slots the table shares (Options.BuildSlots).
	slots *BuildSlots

	// Test hooks. buildHook, if set, runs on a build's goroutine, off
	// the lock, once it has scanned its snapshot and released its slot;
	// slotHook, if set, runs there with the slot held, once the build has
	// its snapshot and before it scans; catchUp replaces catchUpLocked.
	buildHook func()
	slotHook  func(*build)
	catchUp   int
}

// viewKey names a view: a sort and a filter (Filter.key).
type viewKey struct {
	spec   SortSpec
	filter string
}

// NewTable returns an empty table.
func NewTable(opts Options) *Table {
	t := &Table{
		opts:    opts.setDefaults(),
		columns: map[string]int{},
		rows:    btree.NewG(32, func(a, b *row) bool { return a.key < b.key }),
		indexes: map[SortSpec]*index{},
		builds:  map[viewKey]*build{},
		owned:   map[string]int{},
		catchUp: catchUpLocked,
	}
	t.buildHook = t.opts.BuildHook
	if t.slots = t.opts.BuildSlots; t.slots == nil {
		t.slots = NewBuildSlots(BuildSlotsOptions{})
	}
	for i, c := range opts.Columns {
		t.columns[c] = i
	}
	return t
}

// Wait returns once no view is being built. After End, builds stop
// soon; a table's owner calls it so that no goroutine outlives it.
func (t *Table) Wait() { t.wg.Wait() }

// Len returns the number of rows.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rows.Len()
}

// Version returns the resourceVersion of the last change applied.
func (t *Table) Version() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rv
}

// Upsert adds r or replaces the row of the same key, as of resourceVersion
// rv, and updates every index and window. It is meant for the one
// goroutine that feeds the table the resource's changes in order.
func (t *Table) Upsert(r *Row, rv uint64) {
	t.mu.Lock()
	if t.err != nil {
		t.mu.Unlock()
		return
	}
	t.setVersionLocked(rv)
	nr := newRow(r)
	old, _ := t.rows.Get(nr)
	if old != nil && old.RV != 0 && old.RV == r.RV {
		t.mu.Unlock()
		return // a repeat of what the table holds
	}
	t.rows.ReplaceOrInsert(nr)
	t.changeLocked(old, nr)
	t.unlockAndWake()
}

// Delete removes the row namespace/name, as of resourceVersion rv.
// Deleting a row the table does not hold changes nothing.
func (t *Table) Delete(namespace, name string, rv uint64) {
	t.mu.Lock()
	if t.err != nil {
		t.mu.Unlock()
		return
	}
	t.setVersionLocked(rv)
	old, ok := t.rows.Delete(&row{key: rowKey(namespace, name)})
	if !ok {
		t.mu.Unlock()
		return
	}
	t.changeLocked(old, nil)
	t.unlockAndWake()
}

// Replace makes rows the table's whole content as of rv, as a relist
// does: rows it no longer holds are deleted, the others upserted, so
// windows receive the net effect.
func (t *Table) Replace(rows []*Row, rv uint64) {
	// The rows are prepared off the lock, on every CPU (a resource's
	// first table prepares every row at once): what filters read, in
	// key order, which a new table's B-tree takes fastest.
	prepared := newRows(rows)
	keep := make(map[string]*row, len(rows))
	sorted := make([]*row, 0, len(rows))
	for _, nr := range prepared {
		if keep[nr.key] == nil {
			sorted = append(sorted, nr)
		}
		keep[nr.key] = nr
	}
	slices.SortFunc(sorted, func(a, b *row) int { return strings.Compare(a.key, b.key) })
	t.mu.Lock()
	if t.err != nil {
		t.mu.Unlock()
		return
	}
	t.setVersionLocked(rv)
	if t.rows.Len() == 0 && len(t.indexes) == 0 && len(t.builds) == 0 {
		// A table's first content: nobody to tell of it.
		for _, nr := range sorted {
			t.rows.ReplaceOrInsert(keep[nr.key])
		}
		t.mu.Unlock()
		return
	}
	var gone []*row
	t.rows.Ascend(func(old *row) bool {
		if keep[old.key] == nil {
			gone = append(gone, old)
		}
		return true
	})
	for _, old := range gone {
		t.rows.Delete(old)
		t.changeLocked(old, nil)
	}
	for _, nr := range sorted {
		nr = keep[nr.key]
		old, _ := t.rows.Get(nr)
		if old != nil && old.RV != 0 && old.RV == nr.RV {
			continue
		}
		t.rows.ReplaceOrInsert(nr)
		t.changeLocked(old, nr)
	}
	t.unlockAndWake()
}

// newRows returns newRow of each of rows, computed on every CPU when
// there are many.
func newRows(rows []*Row) []*row {
	out := make([]*row, len(rows))
	workers := min(runtime.GOMAXPROCS(0), max(len(rows)/1024, 1))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(rows); i += workers {
				out[i] = newRow(rows[i])
			}
		})
	}
	wg.Wait()
	return out
}

// SetVersion records that the table reflects resourceVersion rv, with no
// change of its own (a bookmark, or changes that do not concern the
// table): the next Pop returns it. It wakes nobody, as no window has
// anything new to apply.
func (t *Table) SetVersion(rv uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.setVersionLocked(rv)
}

// End records that the table will receive no more changes, because of
// err (for example, its resource is no longer served), and wakes every
// window's consumer. A window's consumer pops what it still holds and
// then finds Window.Err set: the window is over, and Open fails with
// err from then on. Changes applied after End are ignored. The first
// End wins.
func (t *Table) End(err error) {
	t.mu.Lock()
	if t.err != nil || err == nil {
		t.mu.Unlock()
		return
	}
	t.err = err
	for _, x := range t.indexes {
		for _, v := range x.views {
			t.wakes = append(t.wakes, v.windows...)
		}
	}
	for _, b := range t.builds {
		t.stopLocked(b) // its waiters get err
	}
	t.unlockAndWake()
}

// Err returns the error End recorded, or nil.
func (t *Table) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// setVersionLocked records rv as the version of the state being built.
// Versions only move forward. Caller must hold t.mu.
func (t *Table) setVersionLocked(rv uint64) {
	if t.err == nil {
		t.rv = max(t.rv, rv)
	}
}

// changeLocked applies one row's change (old or nr nil for an insertion
// or a deletion) to every index. Caller must hold t.mu.
func (t *Table) changeLocked(old, nr *row) {
	for _, x := range t.indexes {
		x.change(old, nr)
	}
	for _, b := range t.builds {
		if b.snapped {
			b.pending = append(b.pending, rowChange{old, nr})
		}
	}
}

// unlockAndWake releases t.mu, then wakes the consumers that have
// something new to pop.
func (t *Table) unlockAndWake() {
	wakes := t.wakes
	t.wakes = nil
	t.mu.Unlock()
	for _, w := range wakes {
		if w.wake != nil {
			w.wake()
		}
	}
}

// extractor returns the function reading key's value from a row, the
// index of key's column in Row.Cells (-1 for another key), and whether
// the function parses the value (a key Options.SortKey resolves), rather
// than reading it from the Row.
func (t *Table) extractor(key string) (value func(*Row) Value, col int, parsed bool, err error) {
	switch key {
	case "metadata.name":
		return func(r *Row) Value { return String(r.Name) }, -1, false, nil
	case "metadata.namespace":
		return func(r *Row) Value { return String(r.Namespace) }, -1, false, nil
	case "metadata.creationTimestamp":
		return func(r *Row) Value { return Time(r.Created) }, -1, false, nil
	}
	if i, ok := t.columns[key]; ok {
		return func(r *Row) Value {
			if i < len(r.Cells) {
				return r.Cells[i]
			}
			return Value{}
		}, i, false, nil
	}
	if t.opts.SortKey != nil {
		f, err := t.opts.SortKey(key)
		return f, -1, true, err
	}
	known := append([]string{"metadata.name", "metadata.namespace", "metadata.creationTimestamp"}, t.opts.Columns...)
	return nil, -1, false, fmt.Errorf("unknown sort key %q; known keys: %s", key, strings.Join(known, ", "))
}

// entry is a row's place in one index: the row and its sort value's
// prefix as the index orders it (index.prefix). Views' trees hold their
// entries in their nodes, so that comparing two rows reads no more than
// the nodes, unless their prefixes are equal.
type entry struct {
	r      *row
	hi, lo uint64
	// val is the sort value where the row does not give it at no cost:
	// a cursor's, which has no row of its own, and a field's whose
	// prefix is not exact (parsed from the object otherwise). nil
	// otherwise: read from r (index.valueOf).
	val   *Value
	rank  uint8
	exact bool
}

// idleLocked keeps v, whose last window has closed, among the idle
// views, dropping the least recently used past Options.IdleViews.
// Caller must hold t.mu.
func (t *Table) idleLocked(v *view) {
	t.idle = append(t.idle, v)
	for len(t.idle) > t.opts.IdleViews {
		t.dropIdleLocked()
	}
}

// dropIdleLocked drops the least recently used idle view, and its index
// with its last view. Caller must hold t.mu.
func (t *Table) dropIdleLocked() {
	v := t.idle[0]
	t.idle = slices.Delete(t.idle, 0, 1)
	v.x.drop(v)
}

// index is one sort order of a table, seen through the views its
// windows filter it with. A view's tree holds an entry per matching row:
// the row and its sort value's prefix, computed when the row enters the
// view and computed again, equal, to find it when it leaves.
type index struct {
	t     *Table
	spec  SortSpec
	value func(*Row) Value
	// col is the index of the column spec.Key sorts by in Row.Cells, or
	// -1 for another key: value, read in passes by a build (values).
	col int
	// parsed is set for a key whose value is parsed from the object (a
	// field): entries whose prefix is not exact keep their value.
	parsed bool
	// missing is the rank of a missing value (see prefix).
	missing uint8
	// views by Filter.key.
	views map[string]*view
}

// The order of an index: by value (reversed for a descending sort),
// then by namespace and name. Missing values go last, or first for a
// sort that is descending in its clients' direction (see
// SortSpec.Reversed).
//
// An entry carries its value's prefix (Value.Prefix) as the index
// orders it: a rank (its kind, or where missing values go), then hi and
// lo, inverted for a descending sort. Entries compare by prefix, then by
// value where a prefix is not exact, then by namespace and name: the
// order above, as Value.Prefix agrees with Compare.

// prefix returns v's rank, hi, lo and exactness in x's order.
func (x *index) prefix(v Value) (rank uint8, hi, lo uint64, exact bool) {
	kind := v.Kind()
	if kind == KindMissing {
		return x.missing, 0, 0, true
	}
	// KindNumber < KindTime < KindString, as Compare orders kinds,
	// between the ranks of missing values, 0 and 4.
	rank = uint8(kind)
	hi, lo, exact = v.Prefix()
	if x.spec.Desc {
		rank, hi, lo = 4-rank, ^hi, ^lo
	}
	return rank, hi, lo, exact
}

// compare is x's order of entries.
func (x *index) compare(a, b *entry) int {
	switch {
	case a.rank != b.rank:
		return cmp.Compare(a.rank, b.rank)
	case a.hi != b.hi:
		return cmp.Compare(a.hi, b.hi)
	case a.lo != b.lo:
		return cmp.Compare(a.lo, b.lo)
	}
	if !a.exact || !b.exact {
		c := Compare(x.valueOf(a), x.valueOf(b))
		if x.spec.Desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return compareKeys(a.r, b.r)
}

// compareKeys orders rows by namespace, then name.
func compareKeys(a, b *row) int {
	if c := cmp.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

// valueOf returns e's sort value.
func (x *index) valueOf(e *entry) Value {
	if e.val != nil {
		return *e.val
	}
	return x.value(e.r.Row)
}

// newIndex returns the index for spec, not yet in t.indexes: O(1), as
// entries are made by the views.
func (t *Table) newIndex(spec SortSpec) (*index, error) {
	value, col, parsed, err := t.extractor(spec.Key)
	if err != nil {
		return nil, err
	}
	x := &index{t: t, spec: spec, value: value, col: col, parsed: parsed, missing: 4, views: map[string]*view{}}
	if spec.Desc != spec.Reversed {
		x.missing = 0 // first
	}
	return x, nil
}

// entry returns r's entry in x, or nil for a nil r.
func (x *index) entry(r *row) *entry {
	if r == nil {
		return nil
	}
	v := x.value(r.Row)
	e := &entry{r: r}
	e.rank, e.hi, e.lo, e.exact = x.prefix(v)
	if x.parsed && !e.exact {
		kept := v // allocated here only: &v would put every v on the heap
		e.val = &kept
	}
	return e
}

// cursorEntry returns the entry of a cursor: where a row of c's value,
// namespace and name would be in x.
func (x *index) cursorEntry(c *Cursor) *entry {
	v := c.Value
	e := &entry{r: &row{Row: &Row{Namespace: c.Namespace, Name: c.Name}}, val: &v}
	e.rank, e.hi, e.lo, e.exact = x.prefix(v)
	return e
}

// change applies one row's change to the index's views.
func (x *index) change(old, nr *row) {
	if len(x.views) == 0 {
		return
	}
	oe, ne := x.entry(old), x.entry(nr)
	for _, v := range x.views {
		v.apply(oe, ne)
	}
}

// drop forgets v once its last window has closed, and the index with its
// last view. v's nodes are kept for a later build (see nodes.go), and
// its tree is cleared: no window may read it any more.
func (x *index) drop(v *view) {
	delete(x.views, v.key)
	x.t.views--
	if len(x.views) == 0 {
		delete(x.t.indexes, x.spec)
	}
	freeNodes(v.nodes)
	v.nodes, v.tree = nil, nil
}

// view is an index seen through one filter: the matching rows in the
// index's order, and the windows on them.
type view struct {
	x    *index
	key  string
	m    *matcher
	tree *tree
	// nodes is the array of the tree's first nodes, from its build
	// (newNodes), given back when the view is dropped.
	nodes   []node
	windows []*Window
	// owners counts the windows on the view by their Query.Owner; an
	// owner holds the view while it has one. opened orders the views of
	// an owner that must give way: the least recently opened goes.
	owners map[string]int
	opened uint64
}

// apply turns one row's change, given as its entries in the view's
// index before and after (nil for none), into the view's.
func (v *view) apply(oe, ne *entry) {
	var from, to *entry
	if oe != nil && v.m.matches(oe.r) {
		from = oe
	}
	if ne != nil && v.m.matches(ne.r) {
		to = ne
	}
	v.change(from, to)
}

// change moves the view from holding from to holding to (either nil), and
// has every window turn that into operations for its consumer.
func (v *view) change(from, to *entry) {
	if from == nil && to == nil {
		return
	}
	for _, w := range v.windows {
		w.begin()
	}
	if from != nil {
		n := v.tree.Len()
		r := v.tree.delete(from)
		for _, w := range v.windows {
			w.deleted(r, n, from)
		}
	}
	if to != nil {
		r := v.tree.insert(to)
		n := v.tree.Len()
		for _, w := range v.windows {
			w.inserted(r, n, to)
		}
	}
	for _, w := range v.windows {
		w.end()
	}
}
