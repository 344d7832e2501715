// sorted.go serves sorted lists: a list with sort, order or filter is
// read from the resource's live table (internal/livequery) instead of
// the cache, sorted and filtered by text, and paged with cursor tokens.

package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"kubegate/internal/auth"
	"kubegate/internal/informer"
	"kubegate/internal/livequery"
	"kubegate/internal/livequery/feed"
	"kubegate/internal/livequery/wire"
	"kubegate/internal/rows"
)

// sortedListParams are the query parameters whose presence makes a list
// a sorted list.
var sortedListParams = []string{"sort", "order", "filter"}

// isSortedList reports whether q asks for a sorted list.
func isSortedList(q url.Values) bool {
	for _, k := range sortedListParams {
		if q.Has(k) {
			return true
		}
	}
	return false
}

// sortedWatch is the answer to a watch that asks to sort or filter by
// text.
func sortedWatch() error {
	return badRequestError("sort, order and filter apply to lists only: a watch streams changes in the order they happen. " +
		"For a sorted, filtered page kept live, subscribe to a window over the WebSocket /ws (docs/protocol.md, Windows)")
}

// serveSortedList answers a list with sort, order or filter from the
// resource's live table. A page is one window opened at the cursor that
// continue names (or at the top), with limit rows; its continue token is
// the cursor just past its last row, so the next page starts at whatever
// sorts after that row when it is read. Without limit, the whole list is
// read in windows of wire.MaxLimit rows the same way.
func (s *Server) serveSortedList(w http.ResponseWriter, r *http.Request, rq apiRequest, res *informer.Resource, p listParams) {
	q := r.URL.Query()
	switch {
	case p.limit > wire.MaxLimit:
		s.writeError(w, r, badRequestError("invalid limit %d: a sorted list (sort, order or filter) pages at most %d items; "+
			"leave limit out for the whole list", p.limit, wire.MaxLimit))
		return
	case p.rvMatch == string(metav1.ResourceVersionMatchExact):
		s.writeError(w, r, badRequestError("resourceVersionMatch=Exact cannot be combined with sort, order or filter: "+
			"a sorted list is read from the live table at its latest version"))
		return
	case len(q.Get("filter")) > wire.MaxText:
		s.writeError(w, r, badRequestError("invalid filter: longer than %d bytes", wire.MaxText))
		return
	case len(q.Get("sort")) > wire.MaxSortLen:
		s.writeError(w, r, badRequestError("invalid sort: longer than %d bytes", wire.MaxSortLen))
		return
	}
	ctx := r.Context()
	params := wire.Params{Sort: q.Get("sort"), Order: q.Get("order"), Filter: q.Get("filter")}
	cols := s.printer(ctx, res).Columns()
	spec, err := params.Resolve(res.Info, cols)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// The views a list builds count against its user's share.
	query := livequery.Query{Sort: spec.Sort, Filter: wire.Filter(p.filter, spec.Text),
		Owner: auth.ClientKey(auth.UserFrom(ctx), r)}
	if p.cont != "" {
		c, err := parseSortedContinue(p.cont, spec.Sort, cols)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		query.Range.Cursor = &c
	}
	var pg sortedPage
	if p.limit > 0 {
		pg, err = s.readSortedPage(ctx, res, query, p.limit, p)
	} else {
		pg, err = s.readSortedList(ctx, res, query, p)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	next := ""
	if pg.next != nil {
		next = wire.Token(spec.Sort, *pg.next)
	}
	s.writeListAnswer(w, r, res, p, pg.printer, pg.objs, pg.rv, next, pg.remaining)
}

// sortedPage is what a sorted list answers.
type sortedPage struct {
	objs []*informer.Object
	// rv is the version the (first) window was read at.
	rv uint64
	// next is where the next page starts, when there are more rows.
	next      *livequery.Cursor
	remaining int
	// printer computed the rows' cells: the one to show them with (nil:
	// the resource's printer now).
	printer *rows.Printer
}

// readSortedPage reads one page of limit rows at q's cursor.
func (s *Server) readSortedPage(ctx context.Context, res *informer.Resource, q livequery.Query, limit int, p listParams) (sortedPage, error) {
	q.Range.Limit = limit
	fw, err := s.opts.Tables.Open(ctx, res, q)
	if err != nil {
		return sortedPage{}, err
	}
	defer fw.Close()
	snap, err := fw.Snapshot()
	if err != nil {
		return sortedPage{}, err // evicted since it opened
	}
	if st := checkListRV(p, snap.Version); st != nil {
		return sortedPage{}, statusErr(st)
	}
	pg := sortedPage{objs: objects(snap.Rows, nil, nil), rv: snap.Version}
	pg.printer, _ = fw.Data().(*rows.Printer)
	if more := snap.Count - snap.Offset - len(snap.Rows); more > 0 {
		c := fw.CursorAfter(snap.Rows[len(snap.Rows)-1])
		pg.next, pg.remaining = &c, more
	}
	return pg, nil
}

// readSortedList reads every row from q's cursor on, in windows of
// wire.MaxLimit rows (Options.wholeSortedWindow), each opened just past
// the last row of the one before. Each window is closed only once the next is open, so that
// they share one sorted view instead of building it again. An object
// whose sort key changed while the list was read may be met twice: it
// is listed once, where it was met first. The list's version is the
// first window's: a watch from it sees every change that the windows
// read after it already hold, as well as those they missed.
func (s *Server) readSortedList(ctx context.Context, res *informer.Resource, q livequery.Query, p listParams) (sortedPage, error) {
	q.Range.Limit = s.opts.wholeSortedWindow
	var (
		pg   sortedPage
		prev *feed.Window
		seen = sets.New[string]()
	)
	defer func() {
		if prev != nil {
			prev.Close()
		}
	}()
	for n := 0; ; n++ {
		fw, err := s.opts.Tables.Open(ctx, res, q)
		if err != nil {
			return sortedPage{}, err
		}
		if prev != nil {
			prev.Close()
		}
		prev = fw
		snap, err := fw.Snapshot()
		if err != nil {
			return sortedPage{}, err // evicted since it opened
		}
		if n == 0 {
			if st := checkListRV(p, snap.Version); st != nil {
				return sortedPage{}, statusErr(st)
			}
			pg.rv = snap.Version
			pg.printer, _ = fw.Data().(*rows.Printer)
		}
		pg.objs = objects(snap.Rows, pg.objs, seen)
		if s.opts.wholeSortedRead != nil {
			s.opts.wholeSortedRead(n)
		}
		if snap.Count-snap.Offset <= len(snap.Rows) {
			return pg, nil
		}
		c := fw.CursorAfter(snap.Rows[len(snap.Rows)-1])
		q.Range.Cursor = &c
	}
}

// objects appends the cached objects of rows to objs, skipping those
// whose key is in seen (when seen is not nil) and adding the others.
func objects(rows []*livequery.Row, objs []*informer.Object, seen sets.Set[string]) []*informer.Object {
	for _, r := range rows {
		if seen != nil {
			k := r.Key()
			if seen.Has(k) {
				continue
			}
			seen.Insert(k)
		}
		objs = append(objs, r.Object.(*informer.Object))
	}
	return objs
}

// parseSortedContinue decodes a sorted list's continue token for the
// sort spec, telling a plain list's token, and another sort's, apart.
func parseSortedContinue(tok string, spec livequery.SortSpec, cols []rows.Column) (livequery.Cursor, error) {
	c, err := wire.ParseToken(tok, spec)
	if err == nil {
		return c, nil
	}
	if isPagerToken(tok) {
		return c, badRequestError("invalid continue token: it continues a list without sort, order and filter; " +
			"continue it without them, or start the sorted list again without continue")
	}
	if other, ok := wire.TokenSort(tok); ok && (other.Key != spec.Key || other.Desc != spec.Desc) {
		key, order := userSort(other, cols)
		return c, badRequestError("invalid continue token: it continues a list sorted with sort=%s and order=%s; "+
			"a continue token is valid only with the sort and order it was returned for", key, order)
	}
	var qe *livequery.InvalidQueryError
	if errors.As(err, &qe) {
		return c, badRequestError("invalid continue token: %v; pass the metadata.continue of the previous page "+
			"unchanged, or list again without continue", qe.Err)
	}
	return c, err
}

// sortedContinueError explains a sorted list's continue token sent to a
// list without sort, order and filter, or returns nil for any other
// token.
func sortedContinueError(tok string, cols []rows.Column) error {
	spec, ok := wire.TokenSort(tok)
	if !ok {
		return nil
	}
	key, order := userSort(spec, cols)
	return badRequestError("invalid continue token: it continues a sorted list (sort=%s, order=%s); "+
		"continue it with the sort, order and filter it was returned for", key, order)
}

// userSort spells a sort as a client asks for it: an age column's
// order is the reverse of the table's (see wire.Params.Resolve).
func userSort(spec livequery.SortSpec, cols []rows.Column) (key, order string) {
	desc := spec.Desc
	for _, c := range cols {
		if c.Name == spec.Key && c.Age {
			desc = !desc
		}
	}
	if desc {
		return spec.Key, "desc"
	}
	return spec.Key, "asc"
}
