package rows

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

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
	// Value is the cell as a Table shows it: a string, int64, float64,
	// bool or nil. Unused for a relative cell.
	Value any
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

// Display returns the cell as a Table shows it at now.
func (c *Cell) Display(now time.Time) any {
	if !c.relative {
		return c.Value
	}
	return c.Prefix + duration.HumanDuration(now.Sub(c.Since)) + c.Suffix
}

// MarshalJSON encodes a cell as rows are sent over WebSocket: Value as
// it is, and a relative cell as {"since": RFC 3339 time, "prefix": …,
// "suffix": …} (the last two when not empty), which a client renders
// against its own clock.
func (c Cell) MarshalJSON() ([]byte, error) {
	if !c.relative {
		return marshal(c.Value)
	}
	return marshal(relativeCell{Since: c.Since.UTC().Format(time.RFC3339Nano), Prefix: c.Prefix, Suffix: c.Suffix})
}

// marshal is json.Marshal without HTML escaping: rows go to WebSocket
// clients, not into HTML, and "<none>" stays 6 bytes.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

type relativeCell struct {
	Prefix string `json:"prefix,omitempty"`
	Since  string `json:"since"`
	Suffix string `json:"suffix,omitempty"`
}

// Cell constructors. Each sets Typed from the value.

func text(s string) Cell { return Cell{Value: s, Typed: cell.String(s)} }

func integer(i int64) Cell { return Cell{Value: i, Typed: cell.Int(i)} }

// count is a cell shown as text ("2/3") that sorts as the number n.
func count(s string, n int64) Cell { return Cell{Value: s, Typed: cell.Int(n)} }

// nothing is an empty cell (JSON null).
func nothing() Cell { return Cell{} }

// since is the apiserver's translateTimestampSince: the time since t,
// or "<unknown>" for the zero time.
func since(t time.Time) Cell {
	if t.IsZero() {
		return text("<unknown>")
	}
	return Cell{Since: t, relative: true, Typed: cell.Time(t)}
}

// Row is the row of one object version. Rows are shared: do not modify.
type Row struct {
	Cells      []Cell
	Conditions []metav1.TableRowCondition
}

// Display returns the row's cells as a Table shows them at now.
func (r *Row) Display(now time.Time) []any {
	out := make([]any, len(r.Cells))
	for i := range r.Cells {
		out[i] = r.Cells[i].Display(now)
	}
	return out
}

// Printer computes the rows of one resource: its columns, and each
// object's cells. A Printer is immutable and safe for concurrent use.
type Printer struct {
	columns []Column
	row     func(o *informer.Object) *Row
	// generic: the columns are Name, the CRD's, Age (not a built-in
	// printer's), so WithNamespace may add a Namespace column.
	generic   bool
	namespace bool
	// encodes counts the rows Encoded computed.
	encodes atomic.Uint64
}

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

// Row computes o's row, one cell per column. An object that does not
// decode (the stored objects come from the apiserver and do) still gets
// a row, empty but for its name.
func (p *Printer) Row(o *informer.Object) *Row {
	r := p.row(o)
	if p.namespace {
		cells := make([]Cell, 0, len(r.Cells)+1)
		cells = append(cells, r.Cells[0], text(o.Namespace))
		r.Cells = append(cells, r.Cells[1:]...)
	}
	return r
}

// WithNamespace returns a printer whose generic rows (those of a
// resource without a built-in printer) have a Namespace column (priority
// 1) after Name, as REST answers for one namespace show it. A built-in
// printer is returned as it is.
func (p *Printer) WithNamespace() *Printer {
	if !p.generic || p.namespace {
		return p
	}
	cols := make([]Column, 0, len(p.columns)+1)
	cols = append(cols, p.columns[0], Column{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Namespace",
		Type: "string", Priority: 1, Description: "The object's namespace."}})
	cols = append(cols, p.columns[1:]...)
	return &Printer{columns: cols, row: p.row, generic: true, namespace: true}
}

// Encoded returns o's row encoded as JSON for WebSocket row frames:
//
//	{"name":…,"namespace":…,"resourceVersion":…,"uid":…,"cells":[…],"conditions":[…]}
//
// with namespace and conditions left out when empty and relative cells as
// Cell.MarshalJSON writes them. It is computed once per object version
// and printer (Object.Derive) and shared by every caller: do not modify.
func (p *Printer) Encoded(o *informer.Object) []byte {
	return o.Derive(p, p.encode).([]byte)
}

// Encodes returns how many rows Encoded has computed.
func (p *Printer) Encodes() uint64 { return p.encodes.Load() }

type encodedRow struct {
	Name            string                     `json:"name"`
	Namespace       string                     `json:"namespace,omitempty"`
	ResourceVersion string                     `json:"resourceVersion"`
	UID             string                     `json:"uid"`
	Cells           []Cell                     `json:"cells"`
	Conditions      []metav1.TableRowCondition `json:"conditions,omitempty"`
}

// RowEncoded returns o's row and its encoding (Encoded), computing the
// row once when the encoding is not cached yet: the caller that sees an
// object version first (a live table's feeder) pays for one decode of
// the object, and later readers of the encoding none. When the encoding
// was cached already, the row is computed again.
func (p *Printer) RowEncoded(o *informer.Object) (*Row, []byte) {
	var r *Row
	b := o.Derive(p, func(o *informer.Object) any {
		r = p.Row(o)
		return p.encodeRow(o, r)
	}).([]byte)
	if r == nil {
		r = p.Row(o)
	}
	return r, b
}

func (p *Printer) encode(o *informer.Object) any {
	return p.encodeRow(o, p.Row(o))
}

func (p *Printer) encodeRow(o *informer.Object, r *Row) []byte {
	p.encodes.Add(1)
	b, err := marshal(encodedRow{Name: o.Name, Namespace: o.Namespace, ResourceVersion: o.ResourceVersion,
		UID: string(o.UID), Cells: r.Cells, Conditions: r.Conditions})
	if err != nil {
		// Cells hold strings, numbers, booleans and times only.
		panic(fmt.Sprintf("rows: encode the row of %s: %v", o.Key(), err))
	}
	return b
}
