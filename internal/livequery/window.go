package livequery

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubegate/internal/apistatus"
)

// OpType says what an Op does to a consumer's copy of a window: an array
// of rows, edited like JavaScript's splice.
type OpType uint8

const (
	// OpInsert inserts Row at Pos; the rows from Pos on move down one.
	OpInsert OpType = iota + 1
	// OpRemove removes the row at Pos; the rows after it move up one.
	OpRemove
	// OpMove removes the row at Pos and inserts Row, its new state, at
	// To (a position in the array without it).
	OpMove
	// OpUpdate replaces the row at Pos by Row, its new state.
	OpUpdate
	// OpCount reports the number of rows that match the window's filter
	// (Count) and the rank of the window's first row among them (Offset).
	// It is sent when either changes.
	OpCount
	// OpReset drops every row held for the window; inserts of the whole
	// window and an OpCount follow.
	OpReset
)

var opNames = [...]string{"", "insert", "remove", "move", "update", "count", "reset"}

func (t OpType) String() string {
	if int(t) < len(opNames) {
		return opNames[t]
	}
	return "unknown"
}

// Op is one edit of a window. Row is set for OpInsert, OpMove and
// OpUpdate; it is shared and read-only.
type Op struct {
	Type   OpType
	Pos    int
	To     int
	Row    *Row
	Count  int
	Offset int
}

func (o Op) String() string {
	switch o.Type {
	case OpInsert, OpUpdate:
		return fmt.Sprintf("%s(%d,%s)", o.Type, o.Pos, o.Row.Key())
	case OpRemove:
		return fmt.Sprintf("remove(%d)", o.Pos)
	case OpMove:
		return fmt.Sprintf("move(%d,%d,%s)", o.Pos, o.To, o.Row.Key())
	case OpCount:
		return fmt.Sprintf("count(%d,@%d)", o.Count, o.Offset)
	}
	return o.Type.String()
}

// Cursor is a position in a sort order: the sort key tuple of an anchor
// row. A window at a cursor starts at the first row at or after it,
// wherever that row is ranked; the anchor row need not exist any more.
type Cursor struct {
	Value           Value
	Namespace, Name string
}

// Range places a window in its view.
type Range struct {
	// Offset is the rank of the window's first row, when Cursor is nil.
	// Rows inserted or removed above the window shift its content (the
	// consumer stays equal to "filter, sort, slice [Offset, Offset+Limit)").
	Offset int
	// Cursor, when set, anchors the window instead: its content moves
	// only when rows at or after the cursor change, and its Offset follows
	// the rows above. Offset must then be 0.
	Cursor *Cursor
	// Limit is the number of rows shown, 1 to Options.MaxLimit.
	Limit int
}

// Query opens a window.
type Query struct {
	Sort   SortSpec
	Filter Filter
	Range  Range
	// Wake, if set, is called when the window has operations to pop and
	// had none, and when the window ends (see Window.Err). It is called
	// after the table's lock is released, from the goroutine that changed
	// the table; it must not block.
	Wake func()
	// Owner names who the window is for (a user), whose share of the
	// table's views it counts against (Options.MaxViewsPerOwner). ""
	// counts against no share.
	Owner string
}

// InvalidQueryError reports a query the table cannot serve.
type InvalidQueryError struct {
	Field string // "sort", "filter", "offset", "cursor" or "limit"
	Err   error
}

func (e *InvalidQueryError) Error() string { return fmt.Sprintf("invalid %s: %v", e.Field, e.Err) }
func (e *InvalidQueryError) Unwrap() error { return e.Err }

// Status implements apierrors.APIStatus: 400, as the apiserver answers a
// bad list parameter.
func (e *InvalidQueryError) Status() metav1.Status {
	return *apistatus.New(http.StatusBadRequest, metav1.StatusReasonBadRequest, e.Error())
}

var _ apierrors.APIStatus = (*InvalidQueryError)(nil)

// TooManyViewsError refuses a window that needs a view (a sort and
// filter no open window uses) when the table holds Options.MaxViews, or
// its owner holds Options.MaxViewsPerOwner.
type TooManyViewsError struct {
	Max int
	// PerOwner: the owner's share is full, not the table.
	PerOwner bool
}

func (e *TooManyViewsError) Error() string {
	if e.PerOwner {
		return fmt.Sprintf("you hold too many distinct sorts and filters on this resource (%d); "+
			"close windows, or sort and filter as your other windows do", e.Max)
	}
	return fmt.Sprintf("too many distinct sorts and filters are open on this resource (%d); "+
		"close windows, or sort and filter as other windows do", e.Max)
}

// Status implements apierrors.APIStatus: 429, as a limit that frees up.
func (e *TooManyViewsError) Status() metav1.Status {
	st := *apistatus.New(http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, e.Error())
	st.Details = &metav1.StatusDetails{RetryAfterSeconds: 1}
	return st
}

var _ apierrors.APIStatus = (*TooManyViewsError)(nil)

// ViewEvictedError ends a window whose view was closed to make room for
// another owner's: the table held Options.MaxViews, and the window's
// owner held the most.
type ViewEvictedError struct{ Max int }

func (e *ViewEvictedError) Error() string {
	return fmt.Sprintf("this window's sort and filter were closed to make room for other users' (this resource holds at most %d, "+
		"and you held the most); sort and filter as other windows do, or hold fewer", e.Max)
}

// Status implements apierrors.APIStatus: 429, as a limit that frees up.
func (e *ViewEvictedError) Status() metav1.Status {
	st := *apistatus.New(http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, e.Error())
	st.Details = &metav1.StatusDetails{RetryAfterSeconds: 1}
	return st
}

var _ apierrors.APIStatus = (*ViewEvictedError)(nil)

// Window is one consumer's live slice of a sorted, filtered view of a
// table. Its consumer holds a copy of the slice and keeps it equal to
// the view by applying, in order, the operations Pop and Move return.
//
// A Window has no goroutine and no lock of its own: the table's lock
// guards it. Table changes append operations to it (never blocking); its
// consumer pops them.
type Window struct {
	t     *Table
	v     *view
	wake  func()
	owner string

	// Guarded by t.mu.
	offset int    // rank of the first row; kept up to date for a cursor
	limit  int    // rows shown at most
	cursor *entry // anchor for a cursor window, nil for an offset one
	size   int    // rows the consumer holds once it has applied pending
	count  int    // Count last queued
	sentAt int    // Offset last queued
	// scratch holds the operations of the change being applied, with the
	// entries they concern, until end settles them.
	scratch []scratchOp
	// above records, for the change being applied, that its removal or
	// insertion fell above the window.
	above   [2]bool
	pending []Op
	// reset: the backlog outgrew its bound and was dropped; the next Pop
	// re-sends the window whole.
	reset  bool
	closed bool
	// err ends the window alone (its view was evicted); the table's err
	// ends every window.
	err error
}

type scratchOp struct {
	op Op
	e  *entry // the row inserted, or removed when known
}

// Open returns a window on the rows that match q.Filter, in q.Sort
// order, at q.Range, or the table's error once it has ended (see
// Table.End). The view it needs (its sort through its filter) is shared
// with the windows that sort and filter alike; a view nobody has is
// built first, without the table's lock (see build.go), and Open waits
// for it, or for ctx: a build whose every Open has given up stops. Its
// first Pop returns its rows (as inserts) and an OpCount; no wake
// announces them, so the caller pops once after Open.
func (t *Table) Open(ctx context.Context, q Query) (*Window, error) {
	if err := t.validate(q.Filter, q.Range); err != nil {
		return nil, err
	}
	t.mu.Lock()
	if t.err != nil {
		defer t.mu.Unlock()
		return nil, t.err
	}
	key := viewKey{spec: q.Sort, filter: q.Filter.key()}
	if x := t.indexes[q.Sort]; x != nil && x.views[key.filter] != nil {
		defer t.mu.Unlock()
		return t.openLocked(x.views[key.filter], q), nil
	}
	b := t.builds[key]
	if b == nil {
		x := t.indexes[q.Sort]
		if x == nil {
			var err error
			if x, err = t.newIndex(q.Sort); err != nil {
				t.mu.Unlock()
				return nil, &InvalidQueryError{Field: "sort", Err: err}
			}
		}
		if err := t.admitLocked(q.Owner); err != nil {
			t.unlockAndWake() // an eviction wakes its windows
			return nil, err
		}
		b = t.startBuildLocked(key, x, q)
	} else if q.Owner != "" && b.owners[q.Owner] == 0 && t.owned[q.Owner] >= t.opts.MaxViewsPerOwner {
		t.mu.Unlock()
		return nil, &TooManyViewsError{Max: t.opts.MaxViewsPerOwner, PerOwner: true}
	}
	wt := t.joinLocked(b, q)
	t.mu.Unlock()
	return t.await(ctx, b, wt)
}

// admitLocked makes room for one more view for owner, or says why there
// is none: owner's share is full; or the table holds MaxViews with none
// idle, and no other owner holds more than owner would. An owner
// holding more gives way: its least recently opened view ends. Caller
// must hold t.mu, and wake what it queued.
func (t *Table) admitLocked(owner string) error {
	if owner != "" && t.owned[owner] >= t.opts.MaxViewsPerOwner {
		return &TooManyViewsError{Max: t.opts.MaxViewsPerOwner, PerOwner: true}
	}
	for t.views+len(t.builds) >= t.opts.MaxViews {
		if len(t.idle) > 0 {
			t.dropIdleLocked() // the least recently used view without windows
			continue
		}
		top, most := "", 0
		for o, n := range t.owned {
			if n > most || n == most && o < top {
				top, most = o, n
			}
		}
		v := t.evictableLocked(top)
		if owner == "" || top == owner || most <= t.owned[owner]+1 || v == nil {
			return &TooManyViewsError{Max: t.opts.MaxViews}
		}
		t.evictLocked(v)
	}
	return nil
}

// evictableLocked returns the view owner gives way with: its least
// recently opened view that it alone holds windows on, else its least
// recently opened. Caller must hold t.mu.
func (t *Table) evictableLocked(owner string) *view {
	var alone, any *view
	for _, x := range t.indexes {
		for _, v := range x.views {
			if v.owners[owner] == 0 {
				continue
			}
			if any == nil || v.opened < any.opened {
				any = v
			}
			if len(v.owners) == 1 && (alone == nil || v.opened < alone.opened) {
				alone = v
			}
		}
	}
	if alone != nil {
		return alone
	}
	return any
}

// evictLocked ends every window of v with a ViewEvictedError, and drops
// v. Caller must hold t.mu.
func (t *Table) evictLocked(v *view) {
	for _, w := range v.windows {
		w.err = &ViewEvictedError{Max: t.opts.MaxViews}
		w.closed = true
		w.pending = nil
		t.wakes = append(t.wakes, w)
	}
	v.windows = nil
	for o := range v.owners {
		t.disownLocked(o)
	}
	v.owners = map[string]int{}
	v.x.drop(v)
}

// openLocked opens a window of q on v. Caller must hold t.mu.
func (t *Table) openLocked(v *view, q Query) *Window {
	if i := slices.Index(t.idle, v); i >= 0 {
		t.idle = slices.Delete(t.idle, i, i+1)
	}
	w := &Window{t: t, v: v, wake: q.Wake, owner: q.Owner, count: -1, sentAt: -1}
	v.windows = append(v.windows, w)
	if q.Owner != "" {
		if v.owners[q.Owner] == 0 {
			t.owned[q.Owner]++
		}
		v.owners[q.Owner]++
	}
	w.placeLocked(q.Range)
	w.size = w.clamp(v.tree.Len())
	w.pending = w.fillLocked(w.pending)
	return w
}

func (t *Table) validate(f Filter, r Range) error {
	switch {
	case r.Limit < 1 || r.Limit > t.opts.MaxLimit:
		return &InvalidQueryError{Field: "limit", Err: fmt.Errorf("%d is not between 1 and %d", r.Limit, t.opts.MaxLimit)}
	case r.Offset < 0:
		return &InvalidQueryError{Field: "offset", Err: fmt.Errorf("%d is negative", r.Offset)}
	case r.Cursor != nil && r.Offset != 0:
		return &InvalidQueryError{Field: "cursor", Err: fmt.Errorf("a cursor and an offset (%d) exclude each other", r.Offset)}
	case len(f.Text) > t.opts.MaxTextLen:
		return &InvalidQueryError{Field: "filter", Err: fmt.Errorf("text longer than %d bytes", t.opts.MaxTextLen)}
	case strings.ContainsRune(f.Text, 0):
		return &InvalidQueryError{Field: "filter", Err: fmt.Errorf("text contains a NUL byte")}
	}
	return nil
}

// placeLocked sets the window's range. Caller must hold t.mu.
func (w *Window) placeLocked(r Range) {
	w.limit = r.Limit
	if r.Cursor == nil {
		w.cursor, w.offset = nil, r.Offset
		return
	}
	w.cursor = w.v.x.cursorEntry(r.Cursor)
	w.offset = w.v.tree.rank(w.cursor)
}

// clamp returns the number of rows the window shows when its view holds
// n rows.
func (w *Window) clamp(n int) int {
	return min(max(n-w.offset, 0), w.limit)
}

// fillLocked appends the window's rows as inserts, then its count.
// Caller must hold t.mu.
func (w *Window) fillLocked(buf []Op) []Op {
	pos := 0
	w.v.tree.each(w.offset, w.offset+w.limit, func(e *entry) {
		buf = append(buf, Op{Type: OpInsert, Pos: pos, Row: e.r.Row})
		pos++
	})
	w.count, w.sentAt = w.v.tree.Len(), w.offset
	return append(buf, Op{Type: OpCount, Count: w.count, Offset: w.offset})
}

// begin starts the operations of one change of the view.
func (w *Window) begin() {
	w.scratch = w.scratch[:0]
	w.above = [2]bool{}
}

// emit adds an operation of the change being applied. An insert followed
// by a removal at the same position cancels out: that is the row pulled
// into the window when another left it, pushed out again by the one that
// took its place.
func (w *Window) emit(op Op, e *entry) {
	if n := len(w.scratch); op.Type == OpRemove && n > 0 {
		if last := w.scratch[n-1].op; last.Type == OpInsert && last.Pos == op.Pos {
			w.scratch = w.scratch[:n-1]
			return
		}
	}
	w.scratch = append(w.scratch, scratchOp{op, e})
}

// deleted turns the removal of e, which was at rank r among n rows, into
// operations.
func (w *Window) deleted(r, n int, e *entry) {
	if w.cursor != nil && w.v.x.compare(e, w.cursor) < 0 {
		w.offset-- // above the anchor: the content stays
		return
	}
	o := w.offset
	if r >= o+w.limit {
		return // below the window
	}
	c, after := w.clamp(n), w.clamp(n-1)
	switch {
	case r >= o:
		w.emit(Op{Type: OpRemove, Pos: r - o}, e)
	case c == 0:
		return // above a window past the end, which stays empty
	default:
		w.above[0] = true
		// Above: every row moves up one, the first leaves.
		w.emit(Op{Type: OpRemove, Pos: 0}, nil)
	}
	if after == c {
		// The row below the window moves up into its last place.
		below := w.v.tree.at(o + c - 1)
		w.emit(Op{Type: OpInsert, Pos: c - 1, Row: below.r.Row}, below)
	}
}

// inserted turns the insertion of e, now at rank r among n rows, into
// operations.
func (w *Window) inserted(r, n int, e *entry) {
	if w.cursor != nil && w.v.x.compare(e, w.cursor) < 0 {
		w.offset++
		return
	}
	o := w.offset
	if r >= o+w.limit {
		return
	}
	c, after := w.clamp(n-1), w.clamp(n)
	if after == c && c > 0 {
		// The window was full: its last row is pushed out.
		w.emit(Op{Type: OpRemove, Pos: c - 1}, nil)
	}
	switch {
	case r >= o:
		w.emit(Op{Type: OpInsert, Pos: r - o, Row: e.r.Row}, e)
	case after > 0:
		w.above[1] = true
		// Above: every row moves down one; the row before the window
		// enters at the top.
		top := w.v.tree.at(o)
		w.emit(Op{Type: OpInsert, Pos: 0, Row: top.r.Row}, top)
	}
}

// end settles the operations of one change: a row removed and inserted
// again becomes a move or an update, and the count follows. The result
// is queued for the consumer.
func (w *Window) end() {
	ops := w.scratch
	if w.above == [2]bool{true, true} {
		// A row moved within the rows above: the window's rows shifted
		// up and back down.
		ops = nil
	}
	if len(ops) == 2 && ops[0].op.Type == OpRemove && ops[1].op.Type == OpInsert &&
		ops[0].e != nil && ops[0].e.r.key == ops[1].e.r.key {
		from, to, r := ops[0].op.Pos, ops[1].op.Pos, ops[1].op.Row
		if from == to {
			ops[0].op = Op{Type: OpUpdate, Pos: from, Row: r}
		} else {
			ops[0].op = Op{Type: OpMove, Pos: from, To: to, Row: r}
		}
		ops = ops[:1]
	}
	w.size = w.clamp(w.v.tree.Len())
	if w.closed || w.reset {
		return // a reset re-sends the window whole anyway
	}
	idle := len(w.pending) == 0
	for _, s := range ops {
		w.pending = append(w.pending, s.op)
	}
	w.pending = w.countLocked(w.pending)
	if len(w.pending) > 4*w.limit+w.t.opts.MaxPending {
		w.pending, w.reset = w.pending[:0], true
	}
	if idle && (len(w.pending) > 0 || w.reset) {
		w.t.wakes = append(w.t.wakes, w)
	}
}

// countLocked appends an OpCount if the count or offset changed since the
// last one, replacing a last OpCount in buf rather than adding another.
// Caller must hold t.mu.
func (w *Window) countLocked(buf []Op) []Op {
	n := w.v.tree.Len()
	if n == w.count && w.offset == w.sentAt {
		return buf
	}
	w.count, w.sentAt = n, w.offset
	op := Op{Type: OpCount, Count: n, Offset: w.offset}
	if k := len(buf); k > 0 && buf[k-1].Type == OpCount {
		buf[k-1] = op
		return buf
	}
	return append(buf, op)
}

// Pop appends the operations pending for the window to buf and returns
// it, with the table's version: once the consumer has applied them, its
// copy is the window as of that version. It never blocks on the table's
// writer for longer than one change.
func (w *Window) Pop(buf []Op) ([]Op, uint64) {
	w.t.mu.Lock()
	defer w.t.mu.Unlock()
	return w.popLocked(buf), w.t.rv
}

func (w *Window) popLocked(buf []Op) []Op {
	if w.closed {
		return buf
	}
	if w.reset {
		w.reset = false
		w.pending = w.pending[:0]
		return w.fillLocked(append(buf, Op{Type: OpReset}))
	}
	buf = append(buf, w.pending...)
	clear(w.pending)
	w.pending = w.pending[:0]
	return buf
}

// Move places the window at r (scrolling, resizing, or switching between
// offset and cursor) and returns what the consumer must apply: first the
// operations pending, then those that take its copy to the new range,
// which carry only the rows that enter it. Rows that stay are not sent
// again. A move to a range that shares no row with the old one is an
// OpReset and the new rows.
func (w *Window) Move(r Range) ([]Op, uint64, error) {
	if err := w.t.validate(Filter{}, r); err != nil {
		return nil, 0, err
	}
	w.t.mu.Lock()
	defer w.t.mu.Unlock()
	if w.closed {
		return nil, w.t.rv, nil
	}
	buf := w.popLocked(nil)
	oldFrom, oldTo := w.offset, w.offset+w.size
	w.placeLocked(r)
	n := w.v.tree.Len()
	w.size = w.clamp(n)
	from, to := w.offset, w.offset+w.size
	keepFrom, keepTo := max(oldFrom, from), min(oldTo, to)
	at := func(pos, rank int) {
		buf = append(buf, Op{Type: OpInsert, Pos: pos, Row: w.v.tree.at(rank).r.Row})
	}
	if keepFrom >= keepTo {
		if oldTo > oldFrom {
			buf = append(buf, Op{Type: OpReset})
		}
		pos := 0
		w.v.tree.each(from, to, func(e *entry) {
			buf = append(buf, Op{Type: OpInsert, Pos: pos, Row: e.r.Row})
			pos++
		})
		w.count = -1 // a move's answer always ends with a count
		return w.countLocked(buf), w.t.rv, nil
	}
	for range keepFrom - oldFrom {
		buf = append(buf, Op{Type: OpRemove, Pos: 0})
	}
	held := keepTo - keepFrom
	for i := range oldTo - keepTo {
		buf = append(buf, Op{Type: OpRemove, Pos: held + oldTo - keepTo - 1 - i})
	}
	for rank := from; rank < keepFrom; rank++ {
		at(rank-from, rank)
	}
	for rank := keepTo; rank < to; rank++ {
		at(rank-from, rank)
	}
	w.count = -1 // a move's answer always ends with a count
	return w.countLocked(buf), w.t.rv, nil
}

// Err returns, once the table has ended (see Table.End), why: the
// window receives nothing after what Pop has returned so far. A
// consumer woken checks it after popping. Nil while the table is live.
func (w *Window) Err() error {
	w.t.mu.Lock()
	defer w.t.mu.Unlock()
	return w.errLocked()
}

// errLocked is Err. Caller must hold t.mu.
func (w *Window) errLocked() error {
	if w.err != nil {
		return w.err
	}
	return w.t.err
}

// errWindowClosed is what Snapshot returns for a window its consumer
// closed.
var errWindowClosed = errors.New("livequery: the window is closed")

// Rows returns the window's rows as of now, in O(log n + limit): none
// once it is closed.
func (w *Window) Rows() []*Row {
	w.t.mu.Lock()
	defer w.t.mu.Unlock()
	if w.closed {
		return nil
	}
	out := make([]*Row, 0, w.limit)
	w.v.tree.each(w.offset, w.offset+w.limit, func(e *entry) { out = append(out, e.r.Row) })
	return out
}

// CursorAt returns the cursor of the row at position pos of the window
// as of now: where a cursor window starting at that row is anchored.
// A closed window has no row.
func (w *Window) CursorAt(pos int) (Cursor, bool) {
	w.t.mu.Lock()
	defer w.t.mu.Unlock()
	if w.closed || pos < 0 || pos >= w.clamp(w.v.tree.Len()) {
		return Cursor{}, false
	}
	e := w.v.tree.at(w.offset + pos)
	return Cursor{Value: w.v.x.valueOf(e), Namespace: e.r.Namespace, Name: e.r.Name}, true
}

// Snapshot is a window read once rather than followed.
type Snapshot struct {
	// Rows are the window's rows.
	Rows []*Row
	// Count and Offset are what an OpCount carries: the rows that match
	// the window's filter, and the rank of its first row among them.
	Count, Offset int
	// Version is the table's version: the rows are the window as of it.
	Version uint64
}

// Snapshot returns the window's rows, count and offset as of now, all at
// one version, in O(log n + limit): what a consumer that reads a window
// once (a REST page) needs, without applying operations. It fails as Err
// does once the window has ended: its view may have been evicted since
// Open returned it.
func (w *Window) Snapshot() (Snapshot, error) {
	w.t.mu.Lock()
	defer w.t.mu.Unlock()
	if w.closed {
		if err := w.errLocked(); err != nil {
			return Snapshot{}, err
		}
		return Snapshot{}, errWindowClosed
	}
	s := Snapshot{Rows: make([]*Row, 0, w.clamp(w.v.tree.Len())), Count: w.v.tree.Len(), Offset: w.offset, Version: w.t.rv}
	w.v.tree.each(w.offset, w.offset+w.limit, func(e *entry) { s.Rows = append(s.Rows, e.r.Row) })
	return s, nil
}

// CursorAfter returns the cursor just past row r in the window's sort
// order: a cursor window there starts at the first row sorted after r,
// whichever row that is when it opens, and whether or not r still
// exists. The cursor's name is r's followed by a NUL byte, the least
// name after r's; no object name holds one, so no row sits at the
// cursor itself. r's sort value is computed as the window's index does,
// so r may be a row the window showed at any time.
func (w *Window) CursorAfter(r *Row) Cursor {
	// w.v and its index's value function never change after Open.
	return Cursor{Value: w.v.x.value(r), Namespace: r.Namespace, Name: r.Name + "\x00"}
}

// Close detaches the window. The view it used is dropped with its last
// window, and the index with its last view. Safe to call more than once.
func (w *Window) Close() {
	w.t.mu.Lock()
	defer w.t.mu.Unlock()
	if w.closed {
		return
	}
	w.closed = true
	w.pending = nil
	v := w.v
	for i, o := range v.windows {
		if o == w {
			v.windows = append(v.windows[:i], v.windows[i+1:]...)
			break
		}
	}
	if w.owner != "" {
		if v.owners[w.owner]--; v.owners[w.owner] <= 0 {
			delete(v.owners, w.owner)
			w.t.disownLocked(w.owner)
		}
	}
	if len(v.windows) == 0 {
		w.t.idleLocked(v)
	}
}
