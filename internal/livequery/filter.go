package livequery

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Row is one object as a Table sees it: what filters and sort keys read,
// the cells a table view shows, and an opaque payload handed back in
// window operations. The wiring builds a Row once per change.
//
// A Row is shared by the table and every window; once passed to Upsert
// it must not be modified, nor anything reachable from it.
type Row struct {
	Namespace, Name string
	Labels          map[string]string
	// Fields answers field selectors beyond metadata.name and
	// metadata.namespace (an *informer.Object does); nil: none. As a field
	// selector reads it, a field the object lacks is "".
	Fields fields.Fields
	// Created is metadata.creationTimestamp.
	Created time.Time
	// Cells are the row's values for the table's Options.Columns, in
	// order. A text filter searches their String forms.
	Cells []Value
	// RV is the object's resourceVersion. An Upsert with the RV the table
	// holds (both non-zero) is a repeat and changes nothing.
	RV uint64
	// Object is the caller's payload (for example the *informer.Object),
	// returned with the row.
	Object any
}

// Key returns the row's table key, "namespace/name" or "name", as
// client-go's MetaNamespaceKeyFunc.
func (r *Row) Key() string {
	if r.Namespace == "" {
		return r.Name
	}
	return r.Namespace + "/" + r.Name
}

// rowKey is a row's key in the table: its namespace and name joined by
// a byte no name holds, so that keys order as (namespace, name) pairs,
// the order that breaks ties between equal sort values
// (compareEntries). A view build relies on it: the rows it scans in key
// order are already in their tie order (sortEntries).
func rowKey(namespace, name string) string { return namespace + "\x00" + name }

// row is a Row as the table holds it, with what filters need
// precomputed.
type row struct {
	*Row
	key string
	// text is what a text filter searches: the name and every cell,
	// lower-cased, separated by a byte no search string holds.
	text string
}

func newRow(r *Row) *row {
	var b strings.Builder
	b.WriteString(strings.ToLower(r.Name))
	for _, c := range r.Cells {
		b.WriteByte(0)
		b.WriteString(strings.ToLower(c.String()))
	}
	return &row{Row: r, key: rowKey(r.Namespace, r.Name), text: b.String()}
}

// Has implements fields.Fields.
func (r *row) Has(field string) bool {
	switch field {
	case "metadata.name", "metadata.namespace":
		return true
	}
	return r.Fields != nil && r.Fields.Has(field)
}

// Get implements fields.Fields.
func (r *row) Get(field string) string {
	switch field {
	case "metadata.name":
		return r.Name
	case "metadata.namespace":
		return r.Namespace
	}
	if r.Fields == nil {
		return ""
	}
	return r.Fields.Get(field)
}

// Filter selects the rows a window sees. The zero Filter selects every
// row. Windows with equal filters (by Filter.key) on the same sort share
// one derived index.
type Filter struct {
	// Namespaces, when non-nil, restricts to the namespaces in the set:
	// the intersection of a requested namespace and those the caller may
	// read. Cluster-scoped rows (namespace "") never match a non-nil set;
	// an empty non-nil set matches nothing.
	Namespaces sets.Set[string]
	// Label selects by labels; nil selects everything.
	Label labels.Selector
	// Field selects by metadata.name, metadata.namespace and Row.Fields;
	// nil selects everything.
	Field fields.Selector
	// Text selects the rows whose name or a cell contains it, ignoring
	// case; "" selects everything.
	Text string
}

// key returns a canonical form of f: equal keys select the same rows.
// Selectors are keyed by their String, which labels.Parse makes canonical
// (requirements sorted); two spellings of one field selector only cost a
// second index.
func (f *Filter) key() string {
	var b strings.Builder
	if f.Namespaces != nil {
		b.WriteString("ns=")
		b.WriteString(strings.Join(sets.List(f.Namespaces), ","))
	}
	b.WriteByte(0)
	if f.Label != nil && !f.Label.Empty() {
		b.WriteString(f.Label.String())
	}
	b.WriteByte(0)
	if f.Field != nil && !f.Field.Empty() {
		b.WriteString(f.Field.String())
	}
	b.WriteByte(0)
	b.WriteString(strings.ToLower(f.Text))
	return b.String()
}

// matcher is a Filter prepared for matching many rows.
type matcher struct {
	f    Filter
	text string // lower-cased
	all  bool   // selects every row
}

func newMatcher(f Filter) *matcher {
	m := &matcher{f: f, text: strings.ToLower(f.Text)}
	if f.Label != nil && f.Label.Empty() {
		m.f.Label = nil
	}
	if f.Field != nil && f.Field.Empty() {
		m.f.Field = nil
	}
	m.all = m.f.Namespaces == nil && m.f.Label == nil && m.f.Field == nil && m.text == ""
	return m
}

// load reads what matches will read of each row in rows that lies
// beyond the row itself (its Row, its labels map, its text), one link
// per pass, and returns a sum of what it read so that the reads are
// kept. Followed row by row, as matches follows it, each link is a
// likely cache miss that waits for the one before; a pass's reads do not
// depend on each other, so many misses are in flight at once (see
// index.values). rows must not be longer than buildCheck.
func (m *matcher) load(rows []*row) int {
	var rs [buildCheck]*Row
	n := 0
	for i, r := range rows {
		rs[i] = r.Row
		n += len(r.text)
	}
	if m.f.Label != nil {
		for _, r := range rs[:len(rows)] {
			n += len(r.Labels)
		}
	}
	if m.text != "" {
		for _, r := range rows {
			if r.text != "" {
				n += int(r.text[0])
			}
		}
	}
	return n
}

func (m *matcher) matches(r *row) bool {
	if m.all {
		return true
	}
	if m.f.Namespaces != nil && !m.f.Namespaces.Has(r.Namespace) {
		return false
	}
	if m.f.Label != nil && !m.f.Label.Matches(labels.Set(r.Labels)) {
		return false
	}
	if m.f.Field != nil && !m.f.Field.Matches(r) {
		return false
	}
	return m.text == "" || strings.Contains(r.text, m.text)
}
