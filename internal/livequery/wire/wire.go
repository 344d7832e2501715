// Package wire is live windows as clients spell them: the sort, order,
// text filter and range parameters that WebSocket window subscriptions
// and REST's sorted lists share, the cursor tokens that keep a place in
// a sort order, and the table schema of a resource, built from the
// printer that serves its rows.
package wire

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"

	"kubegate/internal/informer"
	"kubegate/internal/livequery"
	"kubegate/internal/livequery/feed"
	"kubegate/internal/rows"
)

// Metadata sort keys every resource supports.
const (
	SortName      = "metadata.name"
	SortNamespace = "metadata.namespace"
	SortCreated   = "metadata.creationTimestamp"
)

// DefaultSort is the sort of a window that names none: namespace, then
// name (the tiebreak), the order kube-apiserver lists in.
const DefaultSort = SortNamespace

// Bounds of a window's parameters, as docs/protocol.md and docs/rest.md
// state them: the live table's default bounds (livequery.Options), and
// a sort key as long as a field path may be.
const (
	MaxLimit     = 1000 // livequery's default Options.MaxLimit
	MaxText      = 256  // livequery's default Options.MaxTextLen
	MaxSortLen   = 253
	MaxCursorLen = 1024 // a cursor token
)

// Filter returns the table filter of a window or sorted list: f's
// namespace (a one-namespace set), or else f's namespaces (those
// authorization allows, nil for all), its selectors, and text.
func Filter(f informer.Filter, text string) livequery.Filter {
	lf := livequery.Filter{Namespaces: f.Namespaces, Label: f.Label, Field: f.Field, Text: text}
	if f.Namespace != "" {
		lf.Namespaces = sets.New(f.Namespace)
	}
	return lf
}

// Schema returns the live table schema of a resource whose rows p
// prints: one column per printer column, holding each cell's typed
// value; the resource's selectable fields as further sort keys; and p as
// the table's data, so that windows encode rows with the printer that
// computed their cells.
func Schema(info *informer.ResourceInfo, p *rows.Printer) feed.Schema {
	cols := p.Columns()
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	fieldsOK := info.SelectableFields()
	return feed.Schema{
		Table: livequery.Options{
			Columns: names,
			SortKey: func(key string) (func(*livequery.Row) livequery.Value, error) {
				if !slices.Contains(fieldsOK, key) {
					return nil, fmt.Errorf("unknown sort key %q", key)
				}
				return func(r *livequery.Row) livequery.Value { return fieldValue(r, key) }, nil
			},
		},
		Row: func(o *informer.Object) (*livequery.Row, error) {
			// The printer's row, computed once per object version with
			// its encoding, so that windows showing this version send
			// the cached bytes, and its typed cells.
			pr := p.Row(o)
			return &livequery.Row{Namespace: o.Namespace, Name: o.Name, Labels: o.Labels, Fields: o,
				Created: o.CreationTimestamp.Time, Cells: pr.Typed, RV: o.RV, Object: o}, nil
		},
		Data: p,
	}
}

// fieldValue reads a selectable field as a sort key: missing when the
// object lacks it, a number when it is one (status.replicas, or a
// quantity such as "500m"), else its text as a field selector compares
// it.
func fieldValue(r *livequery.Row, key string) livequery.Value {
	if r.Fields == nil || !r.Fields.Has(key) {
		return livequery.Value{}
	}
	return livequery.Parse(r.Fields.Get(key))
}

// issuedQuantity matches the quantities a cursor may hold: at most 40
// digits and a decimal exponent of at most 3 digits (a float64 cell's
// range) or a suffix, as resource.Quantity.String writes them.
var issuedQuantity = regexp.MustCompile(`^-?[0-9]{1,40}(\.[0-9]{1,40})?([eE][+-]?[0-9]{1,3}|[numkMGTPE]|[KMGTPE]i|u)?$`)

// Params are a window's parameters as a client sends them.
type Params struct {
	// Sort is a metadata key (metadata.name, metadata.namespace,
	// metadata.creationTimestamp), a column name (any case), or a
	// selectable field of the resource; a leading "." is allowed, as
	// kubectl's --sort-by writes it. "" is DefaultSort.
	Sort string
	// Order is "asc" (or "") or "desc".
	Order string
	// Filter is the text filter: a case-insensitive substring of the
	// name or of a cell.
	Filter string
	// Limit, and Offset or Cursor (a token from Token).
	Limit  int
	Offset int
	Cursor string
}

// Window is Params resolved against a resource's columns.
type Window struct {
	Sort   livequery.SortSpec
	Text   string
	Range  livequery.Range
	Column int // the sorted column's index, or -1 for another key
}

// Resolve checks p against the columns of the resource's rows and the
// resource's selectable fields, and returns the window it asks for.
// Its errors are *livequery.InvalidQueryError (400), naming the
// parameter.
//
// Sorting by an age column (rows.Column.Age: an age, a time since)
// sorts by the age it shows: ascending is youngest first, the reverse of
// the time it counts from (SortSpec.Reversed), and rows without one come
// last.
func (p Params) Resolve(info *informer.ResourceInfo, cols []rows.Column) (Window, error) {
	w := Window{Text: p.Filter, Column: -1, Range: livequery.Range{Limit: p.Limit, Offset: p.Offset}}
	switch p.Order {
	case "", "asc":
	case "desc":
		w.Sort.Desc = true
	default:
		return w, invalid("order", "%q is neither \"asc\" nor \"desc\"", trunc(p.Order))
	}
	key := strings.TrimPrefix(p.Sort, ".")
	switch {
	case key == "":
		w.Sort.Key = DefaultSort
	case key == SortName, key == SortNamespace, key == SortCreated, slices.Contains(info.SelectableFields(), key):
		w.Sort.Key = key
	default:
		i := slices.IndexFunc(cols, func(c rows.Column) bool { return strings.EqualFold(c.Name, key) })
		if i < 0 {
			return w, invalid("sort", "%q is not a sort key of %s; sort by a column (%s), %s, %s, %s%s",
				trunc(p.Sort), info.GVR.GroupResource(), columnNames(cols), SortName, SortNamespace, SortCreated,
				fieldList(info.SelectableFields()))
		}
		w.Sort.Key, w.Column = cols[i].Name, i
		if cols[i].Age {
			w.Sort.Desc, w.Sort.Reversed = !w.Sort.Desc, true
		}
	}
	if p.Cursor != "" {
		if p.Offset != 0 {
			return w, invalid("cursor", "a cursor and an offset (%d) exclude each other", p.Offset)
		}
		c, err := ParseToken(p.Cursor, w.Sort)
		if err != nil {
			return w, err
		}
		w.Range.Cursor = &c
	}
	return w, nil
}

func columnNames(cols []rows.Column) string {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}

// fieldList lists the selectable fields beyond the metadata keys.
func fieldList(fields []string) string {
	fields = slices.DeleteFunc(slices.Clone(fields), func(f string) bool { return f == SortName || f == SortNamespace })
	if len(fields) == 0 {
		return ""
	}
	return ", or a selectable field (" + strings.Join(fields, ", ") + ")"
}

func invalid(field, format string, args ...any) error {
	return &livequery.InvalidQueryError{Field: field, Err: fmt.Errorf(format, args...)}
}

func trunc(s string) string {
	if len(s) <= 64 {
		return s
	}
	return s[:64] + "…"
}

// token is a cursor token's content: the sort it belongs to and the
// anchor's sort key tuple. Values are written by kind: "n" an integer,
// "q" a quantity, "t" a time (Unix nanoseconds), "s" a string, "" missing.
type token struct {
	Key       string `json:"k"`
	Desc      bool   `json:"d,omitempty"`
	Kind      string `json:"t,omitempty"`
	Value     string `json:"v,omitempty"`
	Namespace string `json:"ns,omitempty"`
	Name      string `json:"n"`
}

// Token returns the cursor token of c in the sort s: opaque to clients,
// valid for windows with the same sort and any filter.
func Token(s livequery.SortSpec, c livequery.Cursor) string {
	t := token{Key: s.Key, Desc: s.Desc, Namespace: c.Namespace, Name: c.Name}
	switch c.Value.Kind() {
	case livequery.KindNumber:
		t.Kind, t.Value = "n", c.Value.String()
		if _, err := strconv.ParseInt(t.Value, 10, 64); err != nil {
			t.Kind = "q"
		}
	case livequery.KindTime:
		t.Kind, t.Value = "t", strconv.FormatInt(c.Value.UnixNano(), 10)
	case livequery.KindString:
		t.Kind, t.Value = "s", c.Value.String()
	}
	b, err := json.Marshal(t)
	if err != nil {
		panic(fmt.Sprintf("wire: encode a cursor: %v", err)) // strings and a bool only
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// ParseToken decodes a cursor token for a window sorted by s. A token
// that does not decode, or that belongs to another sort, is a
// *livequery.InvalidQueryError.
func ParseToken(tok string, s livequery.SortSpec) (livequery.Cursor, error) {
	bad := func(format string, args ...any) (livequery.Cursor, error) {
		return livequery.Cursor{}, invalid("cursor", format, args...)
	}
	if len(tok) > MaxCursorLen {
		return bad("longer than %d bytes", MaxCursorLen)
	}
	t, ok := decodeToken(tok)
	if !ok {
		return bad("not a cursor this gateway issued")
	}
	if t.Key != s.Key || t.Desc != s.Desc {
		return bad("the cursor belongs to another sort (%s); a cursor is valid only for the sort it came from", sortName(t))
	}
	c := livequery.Cursor{Namespace: t.Namespace, Name: t.Name}
	switch t.Kind {
	case "":
		if t.Value != "" {
			return bad("not a cursor this gateway issued")
		}
	case "n":
		i, err := strconv.ParseInt(t.Value, 10, 64)
		if err != nil {
			return bad("not a cursor this gateway issued")
		}
		c.Value = livequery.Int(i)
	case "q":
		// Only quantities the gateway issues: a cell's value, at most a
		// float64's range. A quantity with a huge exponent parses in
		// microseconds, but every comparison with it builds a number of
		// that many digits, under the table's lock.
		if !issuedQuantity.MatchString(t.Value) {
			return bad("not a cursor this gateway issued")
		}
		q, err := resource.ParseQuantity(t.Value)
		if err != nil {
			return bad("not a cursor this gateway issued")
		}
		c.Value = livequery.Quantity(q)
	case "t":
		ns, err := strconv.ParseInt(t.Value, 10, 64)
		if err != nil || ns == 0 {
			return bad("not a cursor this gateway issued")
		}
		c.Value = livequery.Time(time.Unix(0, ns))
	case "s":
		c.Value = livequery.String(t.Value)
	default:
		return bad("not a cursor this gateway issued")
	}
	return c, nil
}

// TokenSort returns the sort a cursor token belongs to, and false for a
// string that is not a cursor token: for telling a client which sort a
// token it sent elsewhere continues.
func TokenSort(tok string) (livequery.SortSpec, bool) {
	t, ok := decodeToken(tok)
	if !ok || len(tok) > MaxCursorLen {
		return livequery.SortSpec{}, false
	}
	return livequery.SortSpec{Key: t.Key, Desc: t.Desc}, true
}

func decodeToken(tok string) (token, bool) {
	var t token
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return t, false
	}
	if err := json.Unmarshal(b, &t); err != nil || t.Name == "" {
		return t, false
	}
	return t, true
}

func sortName(t token) string {
	if t.Desc {
		return t.Key + " descending"
	}
	return t.Key + " ascending"
}

// schemaTimeout bounds the wait for the CRDs' cache when a table's
// columns are read.
const schemaTimeout = 30 * time.Second

// ViewLimits bound the views (distinct sorts and filters) of each live
// table; zero fields take livequery's defaults (livequery.Options).
type ViewLimits struct {
	MaxViews, MaxViewsPerUser, IdleViews int
	// BuildSlots is livequery.Options.BuildSlots: one for every table,
	// so that the view builds of all resources share its slots. Default:
	// each table its own.
	BuildSlots *livequery.BuildSlots
	// BuildHook is livequery.Options.BuildHook (tests).
	BuildHook func()
}

// NewTables returns the live tables of the resources mgr serves, each
// with the columns of the printer that serves its rows (rows.ForResource)
// and the view limits given.
func NewTables(mgr *informer.Manager, log *zap.Logger, limits ViewLimits) *feed.Tables {
	return feed.New(feed.Options{
		Schema: func(ctx context.Context, r *informer.Resource) feed.Schema {
			// The table outlives the request that creates it: a client
			// leaving mid-subscribe must not leave it with generic
			// columns for its whole life.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), schemaTimeout)
			defer cancel()
			p := rows.ForResource(ctx, mgr, r)
			s := Schema(r.Info, p)
			s.Table.MaxViews, s.Table.MaxViewsPerOwner, s.Table.IdleViews = limits.MaxViews, limits.MaxViewsPerUser, limits.IdleViews
			s.Table.BuildSlots, s.Table.BuildHook = limits.BuildSlots, limits.BuildHook
			// A relist with other columns (a CRD's printer columns
			// edited) leaves the table's columns behind.
			s.Stale = func() bool { return !p.Follows(r.Columns()) }
			return s
		},
		Logger: log,
	})
}
