package livequery

import (
	"encoding/binary"
	"hash/maphash"
	"strings"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
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
// (index.compare). A view build relies on it: the rows it scans in key
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
	// labels are the Row's, as a label selector reads them.
	labels flatLabels
	// bloom answers most label requirements without labels (see
	// labelBloom).
	bloom labelBloom
	// cells are the Row's Cells: a view build reads its sort values a
	// load nearer (index.values).
	cells []Value
}

func newRow(r *Row) *row {
	// The labels and the text share one allocation, a load away from
	// the row: what a filtered view build reads of every row. They are
	// written to a scratch buffer first, so that the allocation is
	// exactly their size: it lives as long as the row.
	var sb [512]byte
	b := sb[:0]
	for k, v := range r.Labels {
		b = appendString(appendString(b, k), v)
	}
	n := len(b)
	b = appendLower(b, r.Name)
	for _, c := range r.Cells {
		b = append(b, 0)
		b = appendLower(b, c.String())
	}
	s := string(b)
	return &row{Row: r, key: rowKey(r.Namespace, r.Name), labels: flatLabels(s[:n]), text: s[n:], bloom: newLabelBloom(r.Labels), cells: r.Cells}
}

// appendLower appends s lower-cased to b, as strings.ToLower returns it.
func appendLower(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return append(b, strings.ToLower(s[i:])...)
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return b
}

// flatLabels are labels in one string: each key and then its value, in
// no particular order, each preceded by its length as a uvarint. A label selector
// reads them a load away from the row, where labels.Set is three (the
// Row, the map, its slots) and more when keys share a length.
type flatLabels string

// appendString appends s to b, preceded by its length as a uvarint.
func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// next returns the string at the start of l, as appendString wrote it,
// and the rest of l.
func (l flatLabels) next() (string, flatLabels) {
	var n uint64
	for i, shift := 0, 0; i < len(l); i, shift = i+1, shift+7 {
		c := l[i]
		n |= uint64(c&0x7f) << shift
		if c < 0x80 {
			l = l[i+1:]
			return string(l[:n]), l[n:]
		}
	}
	panic("livequery: malformed flatLabels")
}

// Lookup implements labels.Labels.
func (l *flatLabels) Lookup(key string) (string, bool) {
	for rest := *l; len(rest) > 0; {
		var k, v string
		k, rest = rest.next()
		v, rest = rest.next()
		if k == key {
			return v, true
		}
	}
	return "", false
}

// Has implements labels.Labels.
func (l *flatLabels) Has(key string) bool {
	_, ok := l.Lookup(key)
	return ok
}

// Get implements labels.Labels.
func (l *flatLabels) Get(key string) string {
	v, _ := l.Lookup(key)
	return v
}

// labelBloom is a row's labels as two Bloom filters of 64 bits, kept in
// the row itself: of its keys, and of its key and value pairs. A filtered
// view build matches every row of the table, and a row's labels are a
// load away from it, often over more than one cache line; the filters
// answer most requirements without that load. A requirement whose key
// the keys' filter shows absent, or none of whose values (for =, in, !=
// and notin) the pairs' filter shows present, has the answer it has for
// a row without that key (labelReq.decide); only the others read the
// labels. With two bits of 64 for each key, a row of 8 labels shows an
// absent key present about one time in 20 on average; a key that shares
// a bit with a label every row carries (app, say), about one time in 5,
// which depends on the process's seed: it is correct either way, and
// only costs a load.
type labelBloom struct{ keys, pairs uint64 }

// bloomSeed seeds the filters' hashes: each process has its own.
var bloomSeed = maphash.MakeSeed()

// bloomBits returns the two bits of 64 that hash h sets: two distinct
// ones, so that no key sets one only (and shows present three times as
// often).
func bloomBits(h uint64) uint64 {
	i := h & 63
	return 1<<i | 1<<((i+1+(h>>6)%63)&63)
}

// keyBits returns the bits label key k sets in a labelBloom's keys.
func keyBits(k string) uint64 { return bloomBits(maphash.String(bloomSeed, k)) }

// pairBits returns the bits label k=v sets in a labelBloom's pairs.
func pairBits(k, v string) uint64 {
	var h maphash.Hash
	h.SetSeed(bloomSeed)
	h.WriteString(k)
	h.WriteByte(0) // no key holds it: (k, v) pairs hash apart
	h.WriteString(v)
	return bloomBits(h.Sum64())
}

func newLabelBloom(ls map[string]string) labelBloom {
	var b labelBloom
	for k, v := range ls {
		b.keys |= keyBits(k)
		b.pairs |= pairBits(k, v)
	}
	return b
}

// labelReq is a label selector's requirement, prepared for matching many
// rows: what a row's labelBloom tells of it.
type labelReq struct {
	req *labels.Requirement
	key uint64 // keyBits of its key
	// byValue is set for the operators that compare values for equality
	// (=, ==, in, !=, notin), and pairs are then the pairBits of each of
	// its values.
	byValue bool
	pairs   []uint64
	// absent is the requirement's answer for a row without its key. It
	// is also the answer for one whose value for the key is none of its
	// values: false for =, == and in; true for != and notin.
	absent bool
}

func newLabelReq(req *labels.Requirement) labelReq {
	q := labelReq{req: req, key: keyBits(req.Key()), absent: req.Matches(labels.Set(nil))}
	switch req.Operator() {
	case selection.Equals, selection.DoubleEquals, selection.In, selection.NotEquals, selection.NotIn:
		q.byValue = true
		for _, v := range req.ValuesUnsorted() {
			q.pairs = append(q.pairs, pairBits(req.Key(), v))
		}
	}
	return q
}

// decide returns q's answer for a row of labelBloom b, when b tells it
// (decided); when it does not, the row's labels do.
func (q *labelReq) decide(b labelBloom) (match, decided bool) {
	if b.keys&q.key != q.key {
		return q.absent, true // the key is absent
	}
	if !q.byValue {
		return false, false
	}
	for _, p := range q.pairs {
		if b.pairs&p == p {
			return false, false // the row may hold this value
		}
	}
	return q.absent, true // the row holds none of q's values
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
	// reqs are f.Label's requirements, when it is made of them (as
	// labels.Parse's selectors are): a row matches if it meets every
	// one. Otherwise (reqs nil), f.Label.Matches decides.
	reqs []labelReq
}

func newMatcher(f Filter) *matcher {
	m := &matcher{f: f, text: strings.ToLower(f.Text)}
	if f.Label != nil && f.Label.Empty() {
		m.f.Label = nil
	}
	if f.Field != nil && f.Field.Empty() {
		m.f.Field = nil
	}
	if m.f.Label != nil {
		if reqs, ok := m.f.Label.Requirements(); ok {
			m.reqs = make([]labelReq, len(reqs))
			for i := range reqs {
				m.reqs[i] = newLabelReq(&reqs[i])
			}
		}
	}
	m.all = m.f.Namespaces == nil && m.f.Label == nil && m.f.Field == nil && m.text == ""
	return m
}

// matchesLabels reports whether r's labels match f.Label, which must be
// set.
func (m *matcher) matchesLabels(r *row) bool {
	if m.reqs == nil {
		return m.f.Label.Matches(&r.labels)
	}
	for i := range m.reqs {
		q := &m.reqs[i]
		ok, decided := q.decide(r.bloom)
		if !decided {
			ok = q.req.Matches(&r.labels)
		}
		if !ok {
			return false
		}
	}
	return true
}

// readsLabels reports whether matchesLabels reads r's labels.
func (m *matcher) readsLabels(r *row) bool {
	if m.reqs == nil {
		return true
	}
	for i := range m.reqs {
		ok, decided := m.reqs[i].decide(r.bloom)
		if !decided {
			return true
		}
		if !ok {
			return false
		}
	}
	return false
}

// load reads what matches will read of each row in rows, one link per
// pass (the rows; their Rows, for namespaces and fields; the allocation
// holding their labels and text), and returns a sum of what it read so
// that the reads are kept. Followed row by row, as matches follows it,
// each link is a likely cache miss that waits for the one before; a
// pass's reads do not depend on each other, so many misses are in
// flight at once (see index.values).
func (m *matcher) load(rows []*row) int {
	n := 0
	for _, r := range rows {
		n += len(r.text)
	}
	if m.f.Namespaces != nil || m.f.Field != nil {
		for _, r := range rows {
			n += len(r.Namespace)
		}
	}
	if m.text != "" {
		for _, r := range rows {
			if r.text != "" {
				n += int(r.text[0])
			}
		}
	}
	if m.f.Label != nil {
		// The labels are read whole, often more than a cache line, where
		// the row's labelBloom does not answer.
		for _, r := range rows {
			if !m.readsLabels(r) {
				continue
			}
			for i := 0; i < len(r.labels); i += 64 {
				n += int(r.labels[i])
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
	if m.f.Label != nil && !m.matchesLabels(r) {
		return false
	}
	if m.f.Field != nil && !m.f.Field.Matches(r) {
		return false
	}
	return m.text == "" || strings.Contains(r.text, m.text)
}
