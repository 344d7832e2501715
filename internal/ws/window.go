// window.go holds window subscriptions: a sorted, filtered page of rows
// kept live from the resource's live table (internal/livequery), its
// WINDOW frames and the window moves that scroll it.

package ws

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubegate/internal/apistatus"
	"kubegate/internal/auth"
	"kubegate/internal/informer"
	"kubegate/internal/livequery"
	"kubegate/internal/livequery/feed"
	"kubegate/internal/livequery/wire"
	"kubegate/internal/rows"
)

// window is an active window subscription's live window.
type window struct {
	w    *feed.Window
	spec wire.Window   // sort and text as resolved at subscribe
	rows *rows.Printer // the table's printer: its cells, and the ack's columns
	// woken is set by the table (Query.Wake) when the window has
	// operations to pop, and when the table ends.
	woken atomic.Bool
	// first, when set, is the reason of a reset the window's first frame
	// starts with (a window reopened under a new authorization).
	first string
	// rng is the window's range as last placed; read by a restart,
	// which reopens the window where it is. Guarded by socket.mu.
	rng livequery.Range
}

// windowMove is a window frame not yet applied: the latest one wins.
type windowMove struct {
	offset int
	cursor string
	limit  int // 0: keep the window's limit
}

// validWindow checks the window fields of a subscribe frame: they make
// a window subscription when "limit" is set, and are refused otherwise.
func validWindow(f *clientFrame) error {
	if f.Limit == nil {
		fields := []struct {
			name string
			set  bool
		}{{"sort", f.Sort != ""}, {"order", f.Order != ""}, {"filter", f.Filter != ""}, {"offset", f.Offset != nil}, {"cursor", f.Cursor != ""}}
		for _, fl := range fields {
			if fl.set { // the first in this order, so the answer does not vary
				return badRequest(f, `invalid subscribe frame: %q applies to windows only; set "limit" to subscribe to a window`, fl.name)
			}
		}
		return nil
	}
	switch {
	case f.ResyncPeriod != "":
		return badRequest(f, `invalid subscribe frame: "resyncPeriod" does not apply to a window`)
	case f.ResourceVersion != "":
		return badRequest(f, `invalid subscribe frame: "resourceVersion" does not apply to a window: a window does not resume; subscribe again with its last "cursor"`)
	case f.SendInitialEvents != nil:
		return badRequest(f, `invalid subscribe frame: "sendInitialEvents" does not apply to a window: its rows are always sent first`)
	}
	switch f.Order {
	case "", "asc", "desc":
	default:
		return badRequest(f, `invalid subscribe frame: "order" %q is neither "asc" nor "desc"`, truncate(f.Order, 64))
	}
	if len(f.Filter) > wire.MaxText {
		return badRequest(f, `invalid subscribe frame: "filter" is longer than %d bytes`, wire.MaxText)
	}
	if len(f.Sort) > wire.MaxSortLen {
		return badRequest(f, `invalid subscribe frame: "sort" is longer than %d bytes`, wire.MaxSortLen)
	}
	return validRange(f)
}

// validRange checks a window's range fields, of a subscribe or a window
// frame.
func validRange(f *clientFrame) error {
	switch {
	case f.Limit != nil && (*f.Limit < 1 || *f.Limit > wire.MaxLimit):
		return badRequest(f, `invalid %s frame: "limit" %d is not between 1 and %d`, f.Type, *f.Limit, wire.MaxLimit)
	case f.Offset != nil && *f.Offset < 0:
		return badRequest(f, `invalid %s frame: "offset" %d is negative`, f.Type, *f.Offset)
	case f.Offset != nil && f.Cursor != "":
		return badRequest(f, `invalid %s frame: "offset" and "cursor" exclude each other`, f.Type)
	case len(f.Cursor) > wire.MaxCursorLen:
		return badRequest(f, `invalid %s frame: "cursor" is longer than %d bytes`, f.Type, wire.MaxCursorLen)
	}
	return nil
}

// openWindow resolves a window subscription's parameters against the
// resource's columns and opens its window, narrowed to what dec allows.
// Its first frame is due at once (woken).
func (s *socket) openWindow(ctx context.Context, res *informer.Resource, filter informer.Filter, dec auth.Decision,
	f *clientFrame, rng *livequery.Range) (*window, error) {
	p := wire.Params{Sort: f.Sort, Order: f.Order, Filter: f.Filter, Limit: *f.Limit, Cursor: f.Cursor}
	if f.Offset != nil {
		p.Offset = *f.Offset
	}
	spec, err := p.Resolve(res.Info, rows.ForResource(ctx, s.opts.Manager, res).Columns())
	if err != nil {
		return nil, err
	}
	if rng != nil {
		spec.Range = *rng
	}
	filter.Namespaces = dec.Namespaces
	lf := wire.Filter(filter, spec.Text)
	win := &window{spec: spec, rng: spec.Range}
	win.woken.Store(true)
	fw, err := s.opts.Tables.Open(ctx, res, livequery.Query{Sort: spec.Sort, Filter: lf, Range: spec.Range, Owner: s.client,
		Wake: func() {
			win.woken.Store(true)
			s.signal()
		}})
	if err != nil {
		return nil, err
	}
	win.w = fw
	win.rows = fw.Data().(*rows.Printer)
	return win, nil
}

// moveWindow records a window frame for the writer, which applies it at
// its next flush: moves sent faster than the socket writes are merged.
func (s *socket) moveWindow(f *clientFrame) {
	s.mu.Lock()
	sub := s.subs[f.ID]
	switch {
	case sub == nil:
		s.mu.Unlock()
		s.refuse(f, http.StatusNotFound, metav1.StatusReasonNotFound, "no subscription "+strconv.Quote(f.ID)+" on this socket")
		return
	case sub.req.Limit == nil:
		s.mu.Unlock()
		s.refuse(f, http.StatusBadRequest, metav1.StatusReasonBadRequest, "subscription "+strconv.Quote(f.ID)+` is not a window; subscribe with "limit" to move it`)
		return
	}
	m := &windowMove{cursor: f.Cursor}
	if f.Offset != nil {
		m.offset = *f.Offset
	}
	if f.Limit != nil {
		m.limit = *f.Limit
	} else if sub.move != nil {
		m.limit = sub.move.limit // the limit a merged move asked for
	}
	sub.move = m
	s.mu.Unlock()
	s.signal()
}

// flushWindow adds sub's WINDOW frame to the batch, if it has one: the
// operations its window holds, then those of a move the client asked
// for, which is always answered. A window whose table has ended ends the
// subscription as a resource that is no longer served.
func (s *socket) flushWindow(sub *subscription) error {
	win := sub.win
	s.mu.Lock()
	mv := sub.move
	sub.move = nil
	s.mu.Unlock()
	woken := win.woken.Swap(false)
	if mv == nil && !woken {
		return nil
	}
	sc := s.sc
	ops, rv := win.w.Pop(sc.ops[:0])
	var moved []livequery.Op
	var moveErr error
	if mv != nil {
		var rng livequery.Range
		if rng, moveErr = s.windowRange(win, mv); moveErr == nil {
			var mrv uint64
			moved, mrv, moveErr = win.w.Move(rng)
			if moveErr == nil {
				rv = max(rv, mrv)
				s.mu.Lock()
				win.rng = rng
				// A re-authorization replaced the subscription after the
				// move was taken from it: the new window, opened where
				// this one was, gets the move too, unless a later one
				// waits.
				if cur := s.subs[sub.id]; cur != nil && cur != sub && cur.win != nil && cur.move == nil {
					cur.move = mv
					defer s.signal()
				}
				s.mu.Unlock()
			}
		}
	}
	defer func() {
		clear(ops)
		sc.ops = ops[:0]
	}()
	if len(ops) > 0 || len(moved) > 0 || (mv != nil && moveErr == nil) {
		var reason string
		if win.first != "" {
			reason, win.first = win.first, ""
		}
		sc.frame = s.appendWindow(sc.frame[:0], sub, win, rv, reason, ops, moved)
		if err := s.add(sc.frame); err != nil {
			return err
		}
	}
	if moveErr != nil {
		st := apistatus.FromError(moveErr)
		if err := s.add(encodeError(sub.id, typeWindow, false, st)); err != nil {
			return err
		}
	}
	if !woken {
		return nil
	}
	if err := win.w.Err(); err != nil {
		return s.resourceGone(sub, err)
	}
	return nil
}

// windowRange resolves a move to a range of win.
func (s *socket) windowRange(win *window, mv *windowMove) (livequery.Range, error) {
	s.mu.Lock()
	rng := livequery.Range{Offset: mv.offset, Limit: win.rng.Limit}
	s.mu.Unlock()
	if mv.limit > 0 {
		rng.Limit = mv.limit
	}
	if mv.cursor != "" {
		c, err := wire.ParseToken(mv.cursor, win.spec.Sort)
		if err != nil {
			return rng, err
		}
		rng.Cursor = &c
	}
	return rng, nil
}

// Pieces of WINDOW frames.
const (
	windowHead  = `{"type":"WINDOW","id":`
	cursorField = `","cursor":"`
	opsField    = `","ops":[` // closes the rv's or the cursor's string
)

// appendWindow appends the WINDOW frame of ops (popped) then moved (a
// move's answer). Rows are the printer's encoded rows, computed once per
// object version and shared. A reset in ops is an overflow, unless
// reason names the reset the frame starts with; one in moved is a
// move's, with no reason.
func (s *socket) appendWindow(buf []byte, sub *subscription, win *window, rv uint64, reason string,
	ops, moved []livequery.Op) []byte {
	buf = append(buf, windowHead...)
	buf = append(buf, sub.qid...)
	buf = append(buf, rvField...)
	buf = strconv.AppendUint(buf, rv, 10)
	if firstRowMayChange(ops) || firstRowMayChange(moved) || reason != "" {
		if c, ok := win.w.CursorAt(0); ok {
			buf = append(buf, cursorField...)
			buf = append(buf, wire.Token(win.spec.Sort, c)...)
		}
	}
	buf = append(buf, opsField...)
	n := 0
	if reason != "" {
		buf = appendOp(buf, win, livequery.Op{Type: livequery.OpReset}, reason)
		s.srv.metrics.resets.WithLabelValues(reason).Inc()
		n++
	}
	for _, op := range ops {
		if n > 0 {
			buf = append(buf, ',')
		}
		r := ""
		if op.Type == livequery.OpReset {
			r = resetOverflow
			s.srv.metrics.resets.WithLabelValues(r).Inc()
		}
		buf = appendOp(buf, win, op, r)
		n++
	}
	for _, op := range moved {
		if n > 0 {
			buf = append(buf, ',')
		}
		buf = appendOp(buf, win, op, "")
		n++
	}
	return append(buf, "]}"...)
}

// firstRowMayChange reports whether ops may change the window's first
// row or its sort value, and so its cursor: only an edit at position 0
// can, an update included (the row stays first with another sort value).
// A count alone, the commonest frame of a window that many changes
// touch, cannot, so the cursor is computed only then.
func firstRowMayChange(ops []livequery.Op) bool {
	for _, op := range ops {
		switch op.Type {
		case livequery.OpReset:
			return true
		case livequery.OpInsert, livequery.OpRemove, livequery.OpUpdate:
			if op.Pos == 0 {
				return true
			}
		case livequery.OpMove:
			if op.Pos == 0 || op.To == 0 {
				return true
			}
		}
	}
	return false
}

func appendOp(buf []byte, win *window, op livequery.Op, reason string) []byte {
	buf = append(buf, `{"op":"`...)
	buf = append(buf, op.Type.String()...)
	buf = append(buf, '"')
	switch op.Type {
	case livequery.OpInsert, livequery.OpUpdate, livequery.OpRemove, livequery.OpMove:
		buf = append(buf, `,"pos":`...)
		buf = strconv.AppendInt(buf, int64(op.Pos), 10)
	}
	switch op.Type {
	case livequery.OpMove:
		buf = append(buf, `,"to":`...)
		buf = strconv.AppendInt(buf, int64(op.To), 10)
	case livequery.OpCount:
		buf = append(buf, `,"count":`...)
		buf = strconv.AppendInt(buf, int64(op.Count), 10)
		buf = append(buf, `,"offset":`...)
		buf = strconv.AppendInt(buf, int64(op.Offset), 10)
	case livequery.OpReset:
		if reason != "" {
			buf = append(buf, `,"reason":"`...)
			buf = append(buf, reason...)
			buf = append(buf, '"')
		}
	}
	switch op.Type {
	case livequery.OpInsert, livequery.OpUpdate, livequery.OpMove:
		buf = append(buf, `,"row":`...)
		buf = append(buf, win.rows.Encoded(op.Row.Object.(*informer.Object))...)
	}
	return append(buf, '}')
}

// windowAck is the ack of a window subscription.
func windowAck(sub *subscription) []byte {
	f := newAck(sub.id, typeSubscribe, sub.info, sortedNamespaces(sub.decision), sub.win.rows.Columns())
	f.Sort, f.Order = sub.win.spec.Sort.Key, "asc"
	if sub.req.Order == "desc" {
		f.Order = "desc"
	}
	return mustJSON(f)
}
