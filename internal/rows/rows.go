package rows

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"kubegate/internal/cell"
	"kubegate/internal/informer"
)

// Column is one column of a resource's rows: the Table column definition
// kube-apiserver gives it, and whether its cells may be relative to the
// time they are shown at.
type Column struct {
	metav1.TableColumnDefinition
	// Relative marks a column whose cells may be relative (see Cell):
	// ages, times since, running durations. The JSON form is the
	// WebSocket ack's column: the definition's fields, and "relative".
	Relative bool `json:"relative,omitempty"`
	// Age marks a column whose cells show the time since their typed
	// value (ages, times since, running durations): sorted ascending, it
	// shows the youngest first, the reverse of its typed values.
	Age bool `json:"-"`
}

// Cell is one cell of a row, computed from an object version alone: a
// relative cell keeps the time it counts from, not the duration, so that
// a row computed once stays true.
type Cell struct {
	// Raw is the cell's JSON value as kube-apiserver printed it (a
	// string, number, boolean or null). Unused for a relative cell.
	Raw []byte
	// Since is the time a relative cell counts from. It shows as Prefix,
	// the time from Since to now as kubectl writes durations (duration.
	// HumanDuration: "5s", "3m2s", "4h", "2d3h", "5y"), then Suffix.
	Since          time.Time
	Prefix, Suffix string
	// Typed is the cell's value for sorting and searching: a number for
	// counts, the time for ages and times since, the text for the rest.
	Typed cell.Value

	relative bool
}

// Relative reports whether the cell counts from Since.
func (c *Cell) Relative() bool { return c.relative }

// AppendDisplay appends the cell's JSON value as a Table shows it at
// now: Raw, or a relative cell's text.
func (c *Cell) AppendDisplay(buf []byte, now time.Time) []byte {
	return c.kept().appendDisplay(buf, now)
}

// kept is a cell as a Row keeps it: its bytes, and what a relative cell
// shows behind a pointer, so that a static cell, most of them, costs 32
// bytes; its typed value is in Row.Typed.
type kept struct {
	raw []byte
	rel *relative // nil for a static cell
}

// relative is what a relative cell shows (see Cell).
type relative struct {
	since          time.Time
	prefix, suffix string
}

// kept returns c as a Row keeps it.
func (c *Cell) kept() kept {
	if !c.relative {
		return kept{raw: c.Raw}
	}
	return kept{raw: c.Raw, rel: &relative{since: c.Since, prefix: c.Prefix, suffix: c.Suffix}}
}

// cell returns k as a Cell, typed.
func (k kept) cell(typed cell.Value) Cell {
	c := Cell{Raw: k.raw, Typed: typed}
	if k.rel != nil {
		c.Since, c.Prefix, c.Suffix, c.relative = k.rel.since, k.rel.prefix, k.rel.suffix, true
	}
	return c
}

// appendDisplay is Cell.AppendDisplay.
func (k kept) appendDisplay(buf []byte, now time.Time) []byte {
	if k.rel == nil {
		if len(k.raw) == 0 {
			return append(buf, "null"...)
		}
		return append(buf, k.raw...)
	}
	return appendQuote(buf, k.rel.prefix+duration.HumanDuration(now.Sub(k.rel.since))+k.rel.suffix)
}

// appendQuote appends s as a JSON string escaped as kube-apiserver's
// encoder (encoding/json) escapes it: HTML characters too ("<none>" is
// "\u003cnone\u003e"), so that a cell the gateway writes is
// byte for byte one kube-apiserver would.
func appendQuote(buf []byte, s string) []byte {
	if !strings.ContainsAny(s, "<>&\u2028\u2029") {
		b, _ := jsontext.AppendQuote(buf, s)
		return b
	}
	q, _ := json.Marshal(s)
	return append(buf, q...)
}

// Display returns the cell as a Table shows it at now, decoded: a
// string, float64, bool or nil.
func (c *Cell) Display(now time.Time) any {
	var out any
	_ = unmarshal(c.AppendDisplay(nil, now), &out)
	return out
}

// appendJSON appends the cell as rows are sent over WebSocket: Raw as
// it is, and a relative cell as {"since": RFC 3339 time, "prefix": …,
// "suffix": …} (the last two when not empty), which a client renders
// against its own clock.
func (c *Cell) appendJSON(buf []byte) []byte { return c.kept().appendJSON(buf) }

// appendJSON is Cell.appendJSON.
func (k kept) appendJSON(buf []byte) []byte {
	if k.rel == nil {
		if len(k.raw) == 0 {
			return append(buf, "null"...)
		}
		return append(buf, k.raw...)
	}
	buf = append(buf, '{')
	if k.rel.prefix != "" {
		buf = append(buf, `"prefix":`...)
		buf, _ = jsontext.AppendQuote(buf, k.rel.prefix)
		buf = append(buf, ',')
	}
	buf = append(buf, `"since":"`...)
	buf = k.rel.since.UTC().AppendFormat(buf, time.RFC3339Nano)
	buf = append(buf, '"')
	if k.rel.suffix != "" {
		buf = append(buf, `,"suffix":`...)
		buf, _ = jsontext.AppendQuote(buf, k.rel.suffix)
	}
	return append(buf, '}')
}

// MarshalJSON encodes a cell as rows are sent over WebSocket (see
// appendJSON).
func (c Cell) MarshalJSON() ([]byte, error) { return c.appendJSON(nil), nil }

// static is a cell shown as kube-apiserver printed it, raw.
func static(raw []byte, typed cell.Value) Cell { return Cell{Raw: raw, Typed: typed} }

// text is a static string cell.
func text(s string) Cell { return Cell{Raw: appendQuote(nil, s), Typed: cell.String(s)} }

// since is the apiserver's translateTimestampSince: the time since t,
// or "<unknown>" for the zero time.
func since(t time.Time) Cell {
	if t.IsZero() {
		return text("<unknown>")
	}
	return Cell{Since: t, relative: true, Typed: cell.Time(t)}
}

// Row is the row of one object version: its cells, and its encoding for
// WebSocket row frames. Rows are shared: do not modify.
type Row struct {
	// cells are the row's cells as it keeps them (kept): every object
	// of a resource with a live table has a row.
	cells []kept
	// Typed are the cells' typed values (Cell.Typed), in one slice that
	// live tables share.
	Typed []cell.Value
	// encoded is the row as WebSocket row frames carry it (Encoded),
	// computed by the first caller of Encoded (once): most rows of a
	// large table are never shown in a window.
	encodeOnce sync.Once
	encoded    []byte
}

// Cell returns the row's cell i.
func (r *Row) Cell(i int) Cell { return r.cells[i].cell(r.Typed[i]) }

// AppendCells appends the row's cells as a Table's JSON array, shown at
// now: kube-apiserver's bytes for static cells, relative ones rendered.
func (r *Row) AppendCells(buf []byte, now time.Time) []byte {
	buf = append(buf, '[')
	for i := range r.cells {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = r.cells[i].appendDisplay(buf, now)
	}
	return append(buf, ']')
}

// Printer serves the rows of one resource: kube-apiserver's own Table
// columns and cells, as the informer received them with each object
// (informer.Object.Cells), the cells that count time since a moment kept
// live (see live.go). A resource the apiserver does not serve as a Table
// gets the generic columns kube-apiserver's default table convertor
// prints: Name and Created At. A Printer is immutable and safe for
// concurrent use.
type Printer struct {
	// cols are the columns the printer serves objects printed with;
	// nil for the generic printer.
	cols    *informer.Columns
	columns []Column
	// live computes, per column, a relative cell from the object and the
	// cell kube-apiserver printed; nil for a static column.
	live []liveCell
	// defs is the columnDefinitions JSON array a Table carries.
	defs []byte
	// encodes counts the rows Encoded encoded.
	encodes atomic.Uint64
}

// liveCell computes the cell of a live column: relative when it is, the
// printed cell (raw, with its typed value) otherwise.
type liveCell func(o *informer.Object, printed Cell) Cell

// Columns returns the printer's columns. Do not modify.
func (p *Printer) Columns() []Column { return p.columns }

// Definitions returns the columns as a Table's column definitions.
func (p *Printer) Definitions() []metav1.TableColumnDefinition {
	defs := make([]metav1.TableColumnDefinition, len(p.columns))
	for i, c := range p.columns {
		defs[i] = c.TableColumnDefinition
	}
	return defs
}

// RawDefinitions returns the columns as a Table's columnDefinitions JSON
// array, as kube-apiserver sent it. Do not modify.
func (p *Printer) RawDefinitions() []byte { return p.defs }

// Row returns o's row, one cell per column: computed once per object
// version and printer (Object.Derive) and shared by every caller.
func (p *Printer) Row(o *informer.Object) *Row {
	return o.Derive(p, p.compute).(*Row)
}

// Encoded returns o's row encoded as JSON for WebSocket row frames:
//
//	{"name":…,"namespace":…,"resourceVersion":…,"uid":…,"cells":[…]}
//
// with namespace left out when empty and relative cells as
// Cell.MarshalJSON writes them. It is computed once per object version
// and printer, by its first caller, and kept with the row: do not
// modify.
func (p *Printer) Encoded(o *informer.Object) []byte {
	_, b := p.RowEncoded(o)
	return b
}

// RowEncoded returns o's row and its encoding (Encoded).
func (p *Printer) RowEncoded(o *informer.Object) (*Row, []byte) {
	r := p.Row(o)
	r.encodeOnce.Do(func() {
		r.encoded = p.encode(o, r)
		p.encodes.Add(1)
	})
	return r, r.encoded
}

// Follows reports whether the printer serves the columns cols: a
// resource's printer is stale once its cache holds objects printed with
// other columns (informer.Resource.Columns).
func (p *Printer) Follows(cols *informer.Columns) bool { return p.cols == cols }

// Encodes returns how many rows the printer has encoded (Encoded).
func (p *Printer) Encodes() uint64 { return p.encodes.Load() }

func (p *Printer) compute(o *informer.Object) any {
	cells := p.cells(o)
	r := &Row{cells: make([]kept, len(cells)), Typed: make([]cell.Value, len(cells))}
	for i := range cells {
		r.cells[i], r.Typed[i] = cells[i].kept(), cells[i].Typed
	}
	return r
}

// cells computes o's cells: kube-apiserver's, when o was printed with the
// printer's columns; the generic ones for the generic printer; else (the
// columns changed and o is from before) the name alone, until the
// informer's relist brings o printed with the new columns.
func (p *Printer) cells(o *informer.Object) []Cell {
	if p.cols == nil {
		return []Cell{text(o.Name), createdAt(o)}
	}
	cells := make([]Cell, len(p.columns))
	if o.Columns != p.cols || len(o.Cells) == 0 {
		for i, c := range p.columns {
			if c.Format == "name" {
				cells[i] = text(o.Name)
			}
		}
		return cells
	}
	cd := cellDecoders.Get().(*cellDecoder)
	defer cd.release()
	cd.src = *bytes.NewBuffer(o.Cells)
	dec := &cd.dec
	dec.Reset(&cd.src) // reads o.Cells in place
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '[' {
		return cells
	}
	for i := 0; i < len(cells) && dec.PeekKind() != ']'; i++ {
		v, err := dec.ReadValue()
		if err != nil {
			break
		}
		off := dec.InputOffset()
		raw := o.Cells[off-int64(len(v)) : off : off] // kube-apiserver's bytes, shared
		cells[i] = static(raw, p.typed(i, v, &cd.scratch))
		if p.live[i] != nil {
			cells[i] = p.live[i](o, cells[i])
		}
	}
	return cells
}

// cellDecoder reads one object's cells; cells takes one from
// cellDecoders for each row it computes, as a first table computes a row
// per object.
type cellDecoder struct {
	src     bytes.Buffer
	dec     jsontext.Decoder
	scratch []byte // unquoted text
}

var cellDecoders = sync.Pool{New: func() any { return new(cellDecoder) }}

// release puts cd back, holding no object's bytes.
func (cd *cellDecoder) release() {
	cd.src = bytes.Buffer{}
	cd.dec.Reset(&cd.src)
	if cap(cd.scratch) > 4096 {
		cd.scratch = nil
	}
	cellDecoders.Put(cd)
}

// countOf reads a count shown with its total ("1/2" ready containers):
// two numbers of at most 18 digits around a slash.
func countOf(s string) (int64, bool) {
	n, total, ok := strings.Cut(s, "/")
	if !ok || !digits(n) || !digits(total) {
		return 0, false
	}
	v, err := strconv.ParseInt(n, 10, 64)
	return v, err == nil
}

func digits(s string) bool {
	if s == "" || len(s) > 18 {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// typed returns the typed value of the printed cell v of column i:
// numbers as numbers (integers truncated in an integer column, as
// kube-apiserver shows them), text that is a number or a quantity as a
// number, a count with its total ("1/2") as the count, other text as
// text, booleans as "true" and "false", null as missing.
func (p *Printer) typed(i int, v jsontext.Value, scratch *[]byte) cell.Value {
	switch v.Kind() {
	case '"':
		b, err := jsontext.AppendUnquote((*scratch)[:0], v)
		*scratch = b
		if err != nil {
			return cell.Value{}
		}
		s := string(b)
		if s == "" || !startsNumber(s[0]) {
			return cell.String(s) // most cells: no number to look for
		}
		if n, ok := countOf(s); ok {
			return cell.Count(n, s)
		}
		return cell.Parse(s)
	case '0':
		s := string(v)
		if p.columns[i].Type == "integer" {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil {
				return cell.Count(n, s)
			}
			if f, err := strconv.ParseFloat(s, 64); err == nil {
				return cell.Count(int64(f), s)
			}
		}
		return cell.Parse(s)
	case 't', 'f':
		return cell.String(string(v))
	}
	return cell.Value{}
}

// startsNumber reports whether a text starting with c may be a number or
// a count ("3", "-1", "1/2").
func startsNumber(c byte) bool { return c >= '0' && c <= '9' || c == '-' || c == '.' }

// encode encodes o's row r for WebSocket row frames (Encoded).
func (p *Printer) encode(o *informer.Object, r *Row) []byte {
	b := append(make([]byte, 0, 128), `{"name":`...)
	b, _ = jsontext.AppendQuote(b, o.Name)
	if o.Namespace != "" {
		b = append(b, `,"namespace":`...)
		b, _ = jsontext.AppendQuote(b, o.Namespace)
	}
	b = append(b, `,"resourceVersion":`...)
	b, _ = jsontext.AppendQuote(b, o.ResourceVersion)
	b = append(b, `,"uid":`...)
	b, _ = jsontext.AppendQuote(b, string(o.UID))
	b = append(b, `,"cells":[`...)
	for i := range r.cells {
		if i > 0 {
			b = append(b, ',')
		}
		b = r.cells[i].appendJSON(b)
	}
	return append(b, "]}"...)
}

// unmarshal decodes a JSON value into a string or any.
func unmarshal(v jsontext.Value, out any) error {
	dec := jsontext.NewDecoder(bytes.NewReader(v))
	tok, err := dec.ReadToken()
	if err != nil {
		return err
	}
	switch p := out.(type) {
	case *string:
		if tok.Kind() != '"' {
			return fmt.Errorf("not a string: %s", v)
		}
		*p = tok.String()
	case *any:
		switch tok.Kind() {
		case '"':
			*p = tok.String()
		case '0':
			*p = tok.Float()
		case 't', 'f':
			*p = tok.Bool()
		default:
			*p = nil
		}
	}
	return nil
}
