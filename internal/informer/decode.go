package informer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// objectDecoder turns one resource's JSON, as the apiserver serves it, into
// *Object in one streaming pass: the metadata and the selectable fields are
// read as tokens, everything else is skipped, and Raw is the input's own
// bytes with metadata.managedFields cut out. Nothing is decoded into maps,
// so an update costs one scan of its bytes and one copy of them.
//
// It produces what the old Unstructured transform produced, except that
// numbers in Raw keep the apiserver's digits where the transform rounded
// integers beyond int64 through float64.
//
// An objectDecoder is immutable and safe for concurrent use; the scratch
// state of each decode comes from parserPool.
type objectDecoder struct {
	gvk               schema.GroupVersionKind
	keepManagedFields bool
	selectableFields  []string // names of specs

	// specs are the selectable fields beyond metadata.name/namespace.
	specs []selectableField
	// paths are the distinct JSON paths specs read, dotted; specPaths
	// lists, per spec, the indexes of its paths.
	paths     []string
	specPaths [][]int

	// fields holds the paths as a tree, one node per segment; its root
	// has no name.
	fields fieldNode
	// typeMembers is `"apiVersion":"<group/version>","kind":"<Kind>"`, the
	// members inserted into objects served without a kind (list items of
	// built-in types).
	typeMembers []byte
	// typeFields are the paths under apiVersion or kind, whose values
	// the inserted members replace.
	typeFields []int
}

// fieldNode is one segment of the selectable fields' paths.
type fieldNode struct {
	name     string
	leaves   []int // indexes into paths of the paths ending here
	children []*fieldNode
}

// child returns the node for member name under n, or nil.
func (n *fieldNode) child(name []byte) *fieldNode {
	if n == nil {
		return nil
	}
	for _, c := range n.children {
		if c.name == string(name) {
			return c
		}
	}
	return nil
}

// newObjectDecoder returns a decoder for objects of kind gvk. It extracts
// the values at paths (dotted, beyond metadata.name and
// metadata.namespace, such as "spec.nodeName"), each as the selectable
// field of that name, into Object.extra.
func newObjectDecoder(gvk schema.GroupVersionKind, keepManagedFields bool, paths []string) *objectDecoder {
	specs := make([]selectableField, len(paths))
	for i, p := range paths {
		specs[i] = field(p)
	}
	return newFieldDecoder(gvk, keepManagedFields, specs)
}

// newFieldDecoder returns a decoder for objects of kind gvk that extracts
// the selectable fields specs into Object.extra.
func newFieldDecoder(gvk schema.GroupVersionKind, keepManagedFields bool, specs []selectableField) *objectDecoder {
	d := &objectDecoder{gvk: gvk, keepManagedFields: keepManagedFields, specs: slices.Clone(specs)}
	for _, f := range d.specs {
		d.selectableFields = append(d.selectableFields, f.name)
		var idx []int
		for _, path := range f.paths {
			dotted := strings.Join(path, ".")
			i := slices.Index(d.paths, dotted)
			if i < 0 {
				i = len(d.paths)
				d.paths = append(d.paths, dotted)
				d.addPath(path, i)
			}
			idx = append(idx, i)
		}
		d.specPaths = append(d.specPaths, idx)
	}
	// AppendQuote fails only on invalid UTF-8, which it replaces; a kind
	// or group version with invalid UTF-8 is not served by any apiserver.
	b := append([]byte(nil), `"apiVersion":`...)
	b, _ = jsontext.AppendQuote(b, gvk.GroupVersion().String())
	b = append(b, `,"kind":`...)
	b, _ = jsontext.AppendQuote(b, gvk.Kind)
	d.typeMembers = b
	return d
}

// addPath files path, the i-th of d.paths, in d.fields.
func (d *objectDecoder) addPath(path []string, i int) {
	n := &d.fields
	for _, seg := range path {
		c := n.child([]byte(seg))
		if c == nil {
			c = &fieldNode{name: seg}
			n.children = append(n.children, c)
		}
		n = c
	}
	n.leaves = append(n.leaves, i)
	if path[0] == "apiVersion" || path[0] == "kind" {
		d.typeFields = append(d.typeFields, i)
	}
}

func (d *objectDecoder) wrap(err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF // no object at all
	}
	return fmt.Errorf("decode %s: %w", d.gvk.Kind, err)
}

// parserPool holds the scratch state of decode calls.
var parserPool = sync.Pool{New: func() any { return new(objectParser) }}

// maxPooledScratch bounds the buffers a pooled parser keeps, so that one
// huge object does not pin its scratch memory for good.
const maxPooledScratch = 64 << 10

// decode builds an Object from one object's JSON. b may be reused by the
// caller after it returns: nothing in the Object refers to it.
func (d *objectDecoder) decode(b []byte) (*Object, error) {
	p := parserPool.Get().(*objectParser)
	defer p.release()
	// A bytes.Buffer lets jsontext parse b in place instead of copying it.
	p.in = *bytes.NewBuffer(b)
	p.own.Reset(&p.in)
	p.dec, p.d, p.annotations = &p.own, d, false
	if err := p.parseObject(); err != nil {
		return nil, d.wrap(err)
	}
	if _, err := p.dec.ReadToken(); err != io.EOF {
		if err == nil {
			err = errors.New("data after the object")
		}
		return nil, d.wrap(err)
	}
	o, err := p.object(b, 0, nil)
	if err != nil {
		return nil, d.wrap(err)
	}
	return o, nil
}

// objectParser is the scratch state of decoding one object; its buffers
// are reused from one object to the next.
type objectParser struct {
	d   *objectDecoder
	dec *jsontext.Decoder
	// annotations says whether to read metadata.annotations too (for
	// watch bookmarks, whose annotations the reflector reads).
	annotations bool

	// in and own serve decode: own parses in, which holds the caller's
	// bytes. Streams bring their own decoder.
	in  bytes.Buffer
	own jsontext.Decoder

	// What parseObject found. Offsets are the decoder's input offsets.
	start, end int64    // the object, from '{' to past '}'
	kindSet    bool     // the object has a non-empty string kind
	kind       span     // its kind, when it is a string
	top, meta  []member // members of the object and of its metadata

	// arena holds every string the Object keeps, unescaped; object turns
	// it into a single string and slices that.
	arena     []byte
	name      span
	namespace span
	uid       span
	rv        span
	created   span
	deleted   span
	labels    stringMap
	annots    stringMap
	values    []span // per path of the decoder's; start < 0 when absent

	key  []byte // unescaped member name, when it had escapes
	cuts []cut
}

// span is a string in the parser's arena.
type span struct{ start, end int }

// member is where one object member lies in the input: pre is just past
// the previous member (or the '{'), so [pre, keyStart) holds the comma
// before this member, if any.
type member struct {
	pre, keyStart, end int64
	role               memberRole
	cut                bool
}

type memberRole uint8

const (
	roleOther memberRole = iota
	roleAPIVersion
	roleKind
)

// cut is a range of input bytes left out of Raw.
type cut struct{ start, end int64 }

// stringMap collects labels or annotations as arena spans, key then value.
type stringMap struct {
	pairs   []span
	invalid bool // a value was neither a string nor null
}

func (p *objectParser) release() {
	p.in = bytes.Buffer{}
	p.own.Reset(&p.in) // drop the reference to the caller's bytes
	p.d, p.dec = nil, nil
	if cap(p.arena) > maxPooledScratch || cap(p.key) > maxPooledScratch ||
		cap(p.labels.pairs)+cap(p.annots.pairs)+cap(p.top)+cap(p.meta) > maxPooledScratch/16 {
		return
	}
	parserPool.Put(p)
}

func (p *objectParser) reset() {
	p.start, p.end, p.kindSet, p.kind = 0, 0, false, span{}
	p.top, p.meta, p.cuts = p.top[:0], p.meta[:0], p.cuts[:0]
	p.arena = p.arena[:0]
	p.name, p.namespace, p.uid, p.rv, p.created, p.deleted = span{}, span{}, span{}, span{}, span{}, span{}
	p.labels = stringMap{pairs: p.labels.pairs[:0]}
	p.annots = stringMap{pairs: p.annots.pairs[:0]}
	p.values = slices.Grow(p.values[:0], len(p.d.paths))[:len(p.d.paths)]
	for i := range p.values {
		p.values[i] = span{-1, -1}
	}
}

// parseObject reads one JSON object from p.dec, recording what object
// needs to build the Object.
func (p *objectParser) parseObject() error {
	p.reset()
	dec := p.dec
	if k := dec.PeekKind(); k != '{' {
		if _, err := dec.ReadToken(); err != nil {
			return err
		}
		return fmt.Errorf("got JSON %v, want an object", k)
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	p.start = dec.InputOffset() - 1
	for dec.PeekKind() != '}' {
		pre := dec.InputOffset()
		name, keyStart, err := p.readName()
		if err != nil {
			return err
		}
		m := member{pre: pre, keyStart: keyStart}
		n := p.d.fields.child(name)
		switch string(name) {
		case "apiVersion":
			m.role = roleAPIVersion
			err = p.walkValue(n)
		case "kind":
			m.role = roleKind
			if dec.PeekKind() == '"' {
				var raw jsontext.Value
				raw, err = dec.ReadValue()
				if err == nil {
					p.kindSet = len(raw) > len(`""`)
					p.kind = p.appendString(raw)
					p.setLeaves(n, p.kind)
				}
			} else {
				err = p.walkValue(n)
			}
		case "metadata":
			err = p.parseMetadata(n)
		default:
			err = p.walkValue(n)
		}
		if err != nil {
			return err
		}
		m.end = dec.InputOffset()
		p.top = append(p.top, m)
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	p.end = dec.InputOffset()
	return nil
}

// parseMetadata reads the value of the metadata member.
func (p *objectParser) parseMetadata(n *fieldNode) error {
	dec := p.dec
	if dec.PeekKind() != '{' {
		return p.walkValue(n)
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	for dec.PeekKind() != '}' {
		pre := dec.InputOffset()
		name, keyStart, err := p.readName()
		if err != nil {
			return err
		}
		m := member{pre: pre, keyStart: keyStart}
		c := n.child(name)
		switch string(name) {
		case "name":
			err = p.metaString(&p.name, c)
		case "namespace":
			err = p.metaString(&p.namespace, c)
		case "uid":
			err = p.metaString(&p.uid, c)
		case "resourceVersion":
			err = p.metaString(&p.rv, c)
		case "creationTimestamp":
			err = p.metaString(&p.created, c)
		case "deletionTimestamp":
			err = p.metaString(&p.deleted, c)
		case "labels":
			err = p.readStringMap(&p.labels, c)
		case "annotations":
			if p.annotations {
				err = p.readStringMap(&p.annots, c)
			} else {
				err = p.walkValue(c)
			}
		case "managedFields":
			if p.d.keepManagedFields {
				err = p.walkValue(c)
			} else {
				// The old transform removed managedFields before reading
				// selectable fields, so paths into it find nothing.
				m.cut = true
				err = p.skip()
			}
		default:
			err = p.walkValue(c)
		}
		if err != nil {
			return err
		}
		m.end = dec.InputOffset()
		p.meta = append(p.meta, m)
	}
	_, err := dec.ReadToken()
	return err
}

// readName reads an object member's name. It returns the name unescaped,
// valid until the next read, and the offset of its opening quote.
func (p *objectParser) readName() ([]byte, int64, error) {
	raw, err := p.dec.ReadValue()
	if err != nil {
		return nil, 0, err
	}
	start := p.dec.InputOffset() - int64(len(raw))
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw[1 : len(raw)-1], start, nil
	}
	p.key, err = jsontext.AppendUnquote(p.key[:0], raw)
	return p.key, start, err
}

// metaString reads a metadata string into dst; like Unstructured's
// getters, it leaves dst empty for any other JSON value.
func (p *objectParser) metaString(dst *span, n *fieldNode) error {
	if p.dec.PeekKind() != '"' {
		return p.walkValue(n)
	}
	raw, err := p.dec.ReadValue()
	if err != nil {
		return err
	}
	*dst = p.appendString(raw)
	p.setLeaves(n, *dst)
	return nil
}

// readStringMap reads labels or annotations as Unstructured's
// NestedNullCoercingStringMap does: null values become "", and any other
// non-string value invalidates the whole map.
func (p *objectParser) readStringMap(m *stringMap, n *fieldNode) error {
	dec := p.dec
	switch dec.PeekKind() {
	case '{':
	case 'n':
		return p.skip()
	default:
		m.invalid = true
		return p.walkValue(n)
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	for dec.PeekKind() != '}' {
		name, _, err := p.readName()
		if err != nil {
			return err
		}
		c := n.child(name)
		k := p.appendBytes(name)
		switch dec.PeekKind() {
		case '"':
			raw, err := dec.ReadValue()
			if err != nil {
				return err
			}
			v := p.appendString(raw)
			m.pairs = append(m.pairs, k, v)
			p.setLeaves(c, v)
		case 'n':
			if _, err := dec.ReadToken(); err != nil {
				return err
			}
			m.pairs = append(m.pairs, k, span{})
		default:
			m.invalid = true
			if err := p.walkValue(c); err != nil {
				return err
			}
		}
	}
	_, err := dec.ReadToken()
	return err
}

// walkValue reads the next value, recording it for the selectable fields
// ending at n and descending into objects for those below n. Values no
// field asks for are skipped.
func (p *objectParser) walkValue(n *fieldNode) error {
	if n == nil {
		return p.skip()
	}
	switch p.dec.PeekKind() {
	case '{':
		if len(n.children) == 0 {
			return p.skip()
		}
		return p.walkObject(n)
	case '"', '0', 't', 'f':
		raw, err := p.dec.ReadValue()
		if err != nil || len(n.leaves) == 0 {
			return err
		}
		if s, ok := p.appendScalar(raw); ok {
			p.setLeaves(n, s)
		}
		return nil
	default: // arrays and null are no field's value; errors surface here
		return p.skip()
	}
}

func (p *objectParser) walkObject(n *fieldNode) error {
	if _, err := p.dec.ReadToken(); err != nil {
		return err
	}
	for p.dec.PeekKind() != '}' {
		name, _, err := p.readName()
		if err != nil {
			return err
		}
		if err := p.walkValue(n.child(name)); err != nil {
			return err
		}
	}
	_, err := p.dec.ReadToken()
	return err
}

// skip reads past the next value. ReadValue rather than SkipValue: it
// scans an object or array in one loop instead of one token per call,
// which is measurably faster, and it validates just the same. It needs the
// whole value in the decoder's buffer: with decode's input that is free;
// in a stream it is at most one member of one object.
func (p *objectParser) skip() error {
	_, err := p.dec.ReadValue()
	return err
}

func (p *objectParser) setLeaves(n *fieldNode, s span) {
	if n == nil {
		return
	}
	for _, i := range n.leaves {
		p.values[i] = s
	}
}

func (p *objectParser) appendBytes(b []byte) span {
	start := len(p.arena)
	p.arena = append(p.arena, b...)
	return span{start, len(p.arena)}
}

// appendString adds a JSON string, already validated by the decoder, to
// the arena unescaped.
func (p *objectParser) appendString(raw []byte) span {
	start := len(p.arena)
	if bytes.IndexByte(raw, '\\') < 0 {
		p.arena = append(p.arena, raw[1:len(raw)-1]...)
	} else {
		// Cannot fail: the decoder has validated raw.
		p.arena, _ = jsontext.AppendUnquote(p.arena, raw)
	}
	return span{start, len(p.arena)}
}

// appendScalar adds a scalar rendered as the old transform rendered
// selectable fields, as field selectors compare them: strings as they are, booleans
// as true/false, numbers that fit int64 in base 10, other numbers as the
// shortest decimal of their float64. A number beyond float64's range, which
// the old transform could not decode at all, yields no value.
func (p *objectParser) appendScalar(raw []byte) (span, bool) {
	start := len(p.arena)
	switch raw[0] {
	case '"':
		return p.appendString(raw), true
	case 't':
		p.arena = append(p.arena, "true"...)
	case 'f':
		p.arena = append(p.arena, "false"...)
	default:
		if i, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
			p.arena = strconv.AppendInt(p.arena, i, 10)
		} else if f, err := strconv.ParseFloat(string(raw), 64); err == nil {
			p.arena = strconv.AppendFloat(p.arena, f, 'f', -1, 64)
		} else {
			return span{}, false
		}
	}
	return span{start, len(p.arena)}, true
}

// kindIs reports whether the object parseObject read has kind k.
func (p *objectParser) kindIs(k string) bool {
	return string(p.arena[p.kind.start:p.kind.end]) == k
}

// object builds the Object parseObject read. src holds the input from
// offset base on, including the whole object. cells, when not nil, are
// the object's Table cells, compact: they become Object.Cells, in the
// allocation that holds Raw.
func (p *objectParser) object(src []byte, base int64, cells []byte) (*Object, error) {
	raw, cells, err := p.raw(src[p.start-base:p.end-base], p.start, cells)
	if err != nil {
		return nil, err
	}
	d := p.d
	if !p.kindSet {
		// The inserted apiVersion and kind are what paths there find now.
		for _, i := range d.typeFields {
			switch d.paths[i] {
			case "apiVersion":
				p.values[i] = p.appendText(d.gvk.GroupVersion().String())
			case "kind":
				p.values[i] = p.appendText(d.gvk.Kind)
			default:
				p.values[i] = span{-1, -1}
			}
		}
	}
	arena := string(p.arena)
	str := func(s span) string { return arena[s.start:s.end] }

	o := &Object{Raw: raw, Cells: cells}
	o.Namespace = str(p.namespace)
	o.Name = str(p.name)
	o.UID = types.UID(str(p.uid))
	o.ResourceVersion = str(p.rv)
	o.RV, _ = strconv.ParseUint(o.ResourceVersion, 10, 64)
	o.Labels = p.labels.build(arena)
	if p.annotations {
		o.Annotations = p.annots.build(arena)
	}
	// As Unstructured's getters do: an unparsable time reads as zero, and
	// a zero deletionTimestamp as none.
	_ = o.CreationTimestamp.UnmarshalQueryParameter(str(p.created))
	if s := str(p.deleted); s != "" {
		var deleted metav1.Time
		if _ = deleted.UnmarshalQueryParameter(s); !deleted.IsZero() {
			o.DeletionTimestamp = &deleted
		}
	}
	n := 0
	for i := range d.specs {
		if _, ok := p.fieldValue(i); ok {
			n++
		}
	}
	if n > 0 {
		o.extra = make([]string, 0, 2*n)
		for i, f := range d.specs {
			if v, ok := p.fieldValue(i); ok {
				if v.start < 0 {
					o.extra = append(o.extra, f.name, f.unset)
				} else {
					o.extra = append(o.extra, f.name, str(v))
				}
			}
		}
	}
	return o, nil
}

// fieldValue returns the value of the decoder's i-th selectable field:
// the first of its paths that holds a non-empty value, else one that
// holds an empty one, else (span start < 0) the field's unset value.
// ok is false when there is no value at all to keep.
func (p *objectParser) fieldValue(i int) (v span, ok bool) {
	v = span{-1, -1}
	for _, j := range p.d.specPaths[i] {
		if s := p.values[j]; s.start >= 0 {
			if s.end > s.start {
				return s, true
			}
			if v.start < 0 {
				v = s
			}
		}
	}
	return v, v.start >= 0 || p.d.specs[i].unset != ""
}

func (p *objectParser) appendText(s string) span {
	start := len(p.arena)
	p.arena = append(p.arena, s...)
	return span{start, len(p.arena)}
}

// build returns the map, nil when it is absent, empty or invalid.
func (m *stringMap) build(arena string) map[string]string {
	if m.invalid || len(m.pairs) == 0 {
		return nil
	}
	out := make(map[string]string, len(m.pairs)/2)
	for i := 0; i < len(m.pairs); i += 2 {
		k, v := m.pairs[i], m.pairs[i+1]
		out[arena[k.start:k.end]] = arena[v.start:v.end]
	}
	return out
}

// raw returns a fresh copy of obj, the object's bytes starting at input
// offset start, with the members parseObject marked cut left out and, for
// an object without a kind, apiVersion and kind inserted first. Whitespace
// that holds a line break or tab is removed, so Raw fits on one line.
// A non-nil tail is copied right after Raw, in the same allocation (one
// allocation per object rather than two), and returned as the second
// result; Raw's capacity ends where the tail starts.
func (p *objectParser) raw(obj []byte, start int64, tail []byte) ([]byte, []byte, error) {
	insert := !p.kindSet
	if insert {
		// Replace apiVersion and kind as the old transform's
		// SetAPIVersion and SetKind did.
		for i := range p.top {
			p.top[i].cut = p.top[i].role != roleOther
		}
	}
	p.cuts = appendCuts(p.cuts[:0], p.top)
	p.cuts = appendCuts(p.cuts, p.meta)
	slices.SortFunc(p.cuts, func(a, b cut) int { return int(a.start - b.start) })

	size := len(obj)
	for _, c := range p.cuts {
		size -= int(c.end - c.start)
	}
	comma := false
	if insert {
		size += len(p.d.typeMembers)
		for _, m := range p.top {
			if !m.cut {
				comma = true
				size++
				break
			}
		}
	}
	out := make([]byte, 0, size+len(tail))
	out = append(out, '{')
	if insert {
		out = append(out, p.d.typeMembers...)
		if comma {
			out = append(out, ',')
		}
	}
	pos := int64(1)
	for _, c := range p.cuts {
		out = append(out, obj[pos:c.start-start]...)
		pos = c.end - start
	}
	out = append(out, obj[pos:]...)
	if len(out) != size {
		return nil, nil, fmt.Errorf("internal error: built %d bytes, want %d", len(out), size)
	}
	if !oneLine(out) {
		v := jsontext.Value(out)
		if err := v.Compact(); err != nil {
			return nil, nil, err
		}
		out = append(make([]byte, 0, len(v)+len(tail)), v...)
	}
	if tail == nil {
		return out, nil, nil
	}
	n := len(out)
	out = append(out, tail...)
	return out[:n:n], out[n:], nil
}

// oneLine reports whether JSON b holds no line break or tab: JSON strings
// cannot hold these bytes raw, so any is whitespace.
func oneLine(b []byte) bool {
	return bytes.IndexByte(b, '\n') < 0 && bytes.IndexByte(b, '\r') < 0 && bytes.IndexByte(b, '\t') < 0
}

// appendCuts appends the byte ranges that remove the members marked cut
// from one object while keeping its commas right: a member after a kept
// one goes with the comma before it, and a member with no kept one
// before it goes with the comma after it (up to the next member's name).
func appendCuts(cuts []cut, ms []member) []cut {
	kept := false
	for i, m := range ms {
		switch {
		case !m.cut:
			kept = true
		case kept:
			cuts = append(cuts, cut{m.pre, m.end})
		case i+1 < len(ms):
			cuts = append(cuts, cut{m.keyStart, ms[i+1].keyStart})
		default:
			cuts = append(cuts, cut{m.keyStart, m.end})
		}
	}
	return cuts
}

// recorder keeps the bytes a jsontext.Decoder reads from a stream, from a
// point the caller moves forward (discard) on. The decoder's own buffer
// holds only a few KiB and drops what it has parsed; the recorder keeps an
// object's bytes until the decoder has validated all of them and Raw is
// copied out, so a list body is never held whole.
type recorder struct {
	r    io.Reader
	buf  []byte
	base int64 // stream offset of buf[0]
	err  error // the first error r returned other than io.EOF
}

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.buf = append(r.buf, p[:n]...)
	if err != nil && err != io.EOF && r.err == nil {
		r.err = err
	}
	return n, err
}

// discard drops the bytes before stream offset off.
func (r *recorder) discard(off int64) {
	rest := r.buf[off-r.base:]
	if cap(r.buf) > 1<<20 && len(rest) < cap(r.buf)/4 {
		// Do not keep a huge object's buffer for the rest of the stream.
		r.buf = append(make([]byte, 0, max(len(rest), 4<<10)), rest...)
	} else {
		r.buf = r.buf[:copy(r.buf, rest)]
	}
	r.base = off
}

// stream decodes objects from a list body or watch stream.
type stream struct {
	d   *objectDecoder
	rec recorder
	dec *jsontext.Decoder
	p   objectParser
	// table says the stream answers a request for Tables (see
	// tableEventObject); lists tell by their members.
	table bool
	// cells holds the cells of the Table row being read; conds its
	// conditions, when it has any.
	cells, conds []byte
}

func newStream(r io.Reader, d *objectDecoder) *stream {
	s := &stream{d: d}
	s.rec.r = r
	s.dec = jsontext.NewDecoder(&s.rec)
	s.p.d, s.p.dec = d, s.dec
	return s
}

// object decodes the object at the decoder's position.
func (s *stream) object(annotations bool) (*Object, error) {
	s.rec.discard(s.dec.InputOffset())
	s.p.annotations = annotations
	if err := s.p.parseObject(); err != nil {
		return nil, err
	}
	return s.p.object(s.rec.buf, s.rec.base, nil)
}

// readString reads a string value; null reads as "".
func (s *stream) readString() (string, error) {
	switch s.dec.PeekKind() {
	case 'n':
		return "", s.p.skip()
	case '"':
	default:
		if err := s.p.skip(); err != nil {
			return "", err
		}
		return "", fmt.Errorf("%s: want a string", s.dec.StackPointer())
	}
	raw, err := s.dec.ReadValue()
	if err != nil {
		return "", err
	}
	b, err := jsontext.AppendUnquote(nil, raw)
	return string(b), err
}

// objectList is a list response decoded by decodeList. *objectList works
// with meta.ListAccessor, meta.ExtractList(WithAlloc) and
// meta.EachListItem(WithAlloc), as client-go's pager and reflector use
// them.
type objectList struct {
	metav1.ListMeta
	Items []*Object
	// table is set when the response was a Table (rows rather than items).
	table *tableAnswer
}

// tableAnswer is what a Table list response says beyond its rows.
type tableAnswer struct {
	// columns is its columnDefinitions value, copied ("null" when absent).
	columns []byte
	// partial is set when a row carried no object of the resource's kind:
	// the upstream ignored includeObject=Object (or sent metadata only).
	// Such rows are left out of Items.
	partial bool
}

var _ runtime.Object = (*objectList)(nil)

// GetObjectKind implements runtime.Object.
func (l *objectList) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object. Objects are immutable, so the
// copy shares them.
func (l *objectList) DeepCopyObject() runtime.Object {
	c := &objectList{Items: slices.Clone(l.Items), table: l.table}
	l.ListMeta.DeepCopyInto(&c.ListMeta)
	return c
}

// decodeList reads a list response body, such as
// {"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"12"},"items":[...]},
// or a Table of the resource with its objects embedded,
// {"kind":"Table",...,"columnDefinitions":[...],"rows":[{"cells":[...],"object":{...}}]},
// decoding its items (or rows) one at a time as they arrive. A row's
// object becomes an Object whose Cells are the row's cells; Columns are
// left to the caller.
func (d *objectDecoder) decodeList(r io.Reader) (*objectList, error) {
	s := newStream(r, d)
	l, err := s.list()
	if err != nil {
		if s.rec.err != nil {
			err = s.rec.err
		}
		return nil, fmt.Errorf("decode %s list: %w", d.gvk.Kind, err)
	}
	return l, nil
}

func (s *stream) list() (*objectList, error) {
	dec := s.dec
	tok, err := dec.ReadToken()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // an empty body is no list
		}
		return nil, err
	}
	if tok.Kind() != '{' {
		return nil, fmt.Errorf("got JSON %v, want an object", tok.Kind())
	}
	l := &objectList{}
	var items, rows bool
	table := func() *tableAnswer {
		if l.table == nil {
			l.table = &tableAnswer{columns: []byte("null")}
		}
		return l.table
	}
	for dec.PeekKind() != '}' {
		name, _, err := s.p.readName()
		if err != nil {
			return nil, err
		}
		switch string(name) {
		case "metadata":
			err = s.listMeta(&l.ListMeta)
		case "items":
			items = true
			l.Items, err = s.items()
		case "columnDefinitions":
			var raw jsontext.Value
			if raw, err = dec.ReadValue(); err == nil {
				table().columns = bytes.Clone(raw)
			}
		case "rows":
			rows = true
			t := table()
			l.Items, t.partial, err = s.rows()
		default:
			err = s.p.skip()
		}
		if err != nil {
			return nil, err
		}
	}
	if items && l.table != nil {
		return nil, errors.New("both items and a Table's rows or columns")
	}
	if l.table != nil && !rows {
		return nil, errors.New("a Table without rows")
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		if err == nil {
			err = errors.New("data after the list")
		}
		return nil, err
	}
	return l, nil
}

func (s *stream) items() ([]*Object, error) {
	dec := s.dec
	switch dec.PeekKind() {
	case 'n':
		return nil, s.p.skip()
	case '[':
	default:
		if err := s.p.skip(); err != nil {
			return nil, err
		}
		return nil, errors.New("items: want an array")
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	items := []*Object{}
	for dec.PeekKind() != ']' {
		o, err := s.object(false)
		if err != nil {
			return nil, fmt.Errorf("items[%d]: %w", len(items), err)
		}
		items = append(items, o)
	}
	_, err := dec.ReadToken()
	return items, err
}

// rows reads a list Table's rows. partial reports rows without an object
// of the resource's kind, which are left out.
func (s *stream) rows() (items []*Object, partial bool, err error) {
	dec := s.dec
	switch dec.PeekKind() {
	case 'n':
		return nil, false, s.p.skip()
	case '[':
	default:
		if err := s.p.skip(); err != nil {
			return nil, false, err
		}
		return nil, false, errors.New("rows: want an array")
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, false, err
	}
	items = []*Object{}
	for i := 0; dec.PeekKind() != ']'; i++ {
		o, err := s.row(false)
		if err != nil {
			return nil, false, fmt.Errorf("rows[%d]: %w", i, err)
		}
		if o == nil {
			partial = true
			continue
		}
		items = append(items, o)
	}
	_, err = dec.ReadToken()
	return items, partial, err
}

// row reads one Table row, {"cells":[...],"object":{...}}, in any member
// order, into the row's object with the row's cells as Object.Cells. It
// returns nil for a row whose object is missing, null, or of another kind
// than the resource's (PartialObjectMetadata, say). A bookmark's row
// prints an empty object: its cells are not kept, and its object is read
// with its annotations, whatever its kind.
func (s *stream) row(bookmark bool) (*Object, error) {
	dec := s.dec
	if dec.PeekKind() != '{' {
		if err := s.p.skip(); err != nil {
			return nil, err
		}
		return nil, errors.New("want an object")
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	var parsed, cells bool
	s.conds = s.conds[:0]
	for dec.PeekKind() != '}' {
		name, _, err := s.p.readName()
		if err != nil {
			return nil, err
		}
		switch string(name) {
		case "cells":
			if dec.PeekKind() != '[' {
				if err := s.p.skip(); err != nil {
					return nil, err
				}
				return nil, errors.New("cells: want an array")
			}
			raw, err := dec.ReadValue()
			if err != nil {
				return nil, err
			}
			s.cells, cells = append(s.cells[:0], raw...), true
		case "conditions":
			// kube-apiserver gives completed and failed pods a row
			// condition; rows without one leave it out.
			if dec.PeekKind() != '[' {
				err = s.p.skip()
				break
			}
			raw, err := dec.ReadValue()
			if err != nil {
				return nil, err
			}
			s.conds = append(s.conds[:0], raw...)
		case "object":
			if dec.PeekKind() == 'n' {
				err = s.p.skip()
				break
			}
			// The object's bytes stay in the recorder until the row has
			// been read: its cells may come after it.
			s.rec.discard(dec.InputOffset())
			s.p.annotations = bookmark
			err, parsed = s.p.parseObject(), true
		default:
			err = s.p.skip()
		}
		if err != nil {
			return nil, err
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	switch {
	case !parsed:
		return nil, nil
	case bookmark:
		return s.p.object(s.rec.buf, s.rec.base, nil)
	case s.p.kindSet && !s.p.kindIs(s.d.gvk.Kind):
		return nil, nil
	case !cells:
		return nil, errors.New("a row without cells")
	}
	if !oneLine(s.cells) {
		v := jsontext.Value(s.cells)
		if err := v.Compact(); err != nil {
			return nil, err
		}
		s.cells = v
	}
	o, err := s.p.object(s.rec.buf, s.rec.base, s.cells)
	if err == nil && len(s.conds) > 0 {
		v := jsontext.Value(bytes.Clone(s.conds))
		if err := v.Compact(); err != nil {
			return nil, err
		}
		o.RowConditions = v
	}
	return o, err
}

func (s *stream) listMeta(m *metav1.ListMeta) error {
	dec := s.dec
	switch dec.PeekKind() {
	case 'n':
		return s.p.skip()
	case '{':
	default:
		if err := s.p.skip(); err != nil {
			return err
		}
		return errors.New("metadata: want an object")
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	for dec.PeekKind() != '}' {
		name, _, err := s.p.readName()
		if err != nil {
			return err
		}
		switch string(name) {
		case "resourceVersion":
			m.ResourceVersion, err = s.readString()
		case "continue":
			m.Continue, err = s.readString()
		case "selfLink":
			m.SelfLink, err = s.readString()
		case "remainingItemCount":
			m.RemainingItemCount, err = s.readInt()
		default:
			err = s.p.skip()
		}
		if err != nil {
			return err
		}
	}
	_, err := dec.ReadToken()
	return err
}

// readInt reads an integer value; null reads as nil.
func (s *stream) readInt() (*int64, error) {
	if s.dec.PeekKind() == 'n' {
		return nil, s.p.skip()
	}
	raw, err := s.dec.ReadValue()
	if err != nil {
		return nil, err
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%s: want an integer, got %s", s.dec.StackPointer(), raw)
	}
	return &n, nil
}

// watchDecoder reads the apiserver's JSON watch stream: one
// {"type":...,"object":{...}} value after another. Decode is called from
// one goroutine (watch.StreamWatcher's); Close may be called from any.
type watchDecoder struct {
	rc io.ReadCloser
	s  *stream
	// tw is the state of a Table watch; nil for a plain one.
	tw *tableWatch
	// ended is set once Decode has returned an ERROR of its own (see
	// tableWatch.check): the stream is not read any further.
	ended bool
}

// newWatchDecoder returns a watch.Decoder for the watch stream rc of d's
// resource. ADDED, MODIFIED and DELETED events carry an *Object; BOOKMARK
// events an *Object that also has its annotations (the reflector looks for
// k8s.io/initial-events-end); ERROR events a *metav1.Status.
//
// Decode returns io.EOF when the stream ends between events,
// io.ErrUnexpectedEOF when it ends inside one, and the stream's own error
// when reading fails, as watch.StreamWatcher expects.
func newWatchDecoder(rc io.ReadCloser, d *objectDecoder) watch.Decoder {
	return &watchDecoder{rc: rc, s: newStream(rc, d)}
}

// tableWatch is the state of one watch that asked for Tables.
type tableWatch struct {
	// listed are the columns of the list the watch follows: every object
	// it decodes gets them.
	listed *Columns
	// plain is called when the upstream sends an object as is, not as a
	// Table (it does not serve Table watches, or ignores includeObject).
	plain func(reason string)
}

// newTableWatchDecoder returns a watch.Decoder for a watch that asked for
// Tables with their objects (see listWatch): each ADDED, MODIFIED or
// DELETED event's object is a Table of one row, whose object becomes the
// event's *Object, with the row's cells as its Cells and listed as its
// Columns. The first event of a connection carries the Table's column
// definitions; when they differ from listed (a CRD's printer columns were
// edited, and kube-apiserver rebuilt its storage, which ended the
// previous watch), Decode returns an ERROR event of its own, 410 Expired,
// instead of the event, so that the reflector lists again and every
// object follows the new columns. So it does, after calling plain, for
// an object not sent as a Table. BOOKMARK events may come either way
// (kube-apiserver sends a Table whose row prints an empty object; another
// kubegate sends the bare object), and ERROR events are a Status either
// way.
func newTableWatchDecoder(rc io.ReadCloser, d *objectDecoder, listed *Columns, plain func(reason string)) watch.Decoder {
	s := newStream(rc, d)
	s.table = true
	return &watchDecoder{rc: rc, s: s, tw: &tableWatch{listed: listed, plain: plain}}
}

// Close closes the stream, which ends a Decode in progress.
func (w *watchDecoder) Close() { w.rc.Close() }

// Decode reads the next event.
func (w *watchDecoder) Decode() (watch.EventType, runtime.Object, error) {
	if w.ended {
		return "", nil, io.EOF
	}
	typ, obj, tbl, err := w.s.event()
	switch {
	case err == nil:
		if w.tw != nil && typ != watch.Error {
			if st := w.tw.check(typ, obj, tbl); st != nil {
				w.ended = true
				return watch.Error, st, nil
			}
		}
		return typ, obj, nil
	case err == io.EOF:
		return "", nil, io.EOF
	case w.s.rec.err != nil:
		return "", nil, w.s.rec.err
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "", nil, io.ErrUnexpectedEOF
	}
	return "", nil, fmt.Errorf("decode %s watch event: %w", w.s.d.gvk.Kind, err)
}

// check applies what a Table watch event's object said about its Table
// to o: it gives o the columns listed, or returns the Status that ends
// the watch so that the reflector lists again.
func (t *tableWatch) check(typ watch.EventType, obj runtime.Object, tbl eventTable) *metav1.Status {
	o, _ := obj.(*Object)
	switch {
	case !tbl.table && typ == watch.Bookmark:
		return nil
	case !tbl.table, o == nil:
		reason := fmt.Sprintf("a %s event's object came as is, not as a Table with its object", typ)
		if o == nil {
			reason = fmt.Sprintf("a %s event's Table row has no object of the resource's kind", typ)
		}
		t.plain(reason)
		return expiredStatus(reason + "; listing again as plain JSON")
	}
	if tbl.columns != nil {
		c, err := columnsOf(t.listed, tbl.columns)
		if err != nil {
			return expiredStatus(fmt.Sprintf("the watch's Table columns cannot be read (%v); listing again", err))
		}
		if c != t.listed {
			return expiredStatus("the resource's Table columns changed; listing again so that every object follows them")
		}
	}
	if typ != watch.Bookmark {
		o.Columns = t.listed
	}
	return nil
}

// expiredStatus is the 410 Expired that makes client-go's reflector list
// again after a watch, as kube-apiserver's own does for a watch it cannot
// continue.
func expiredStatus(msg string) *metav1.Status {
	return &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired, Message: msg}
}

// eventTable is what a Table watch event's object said of its Table.
type eventTable struct {
	// table: the object was a Table; false for an object sent as is.
	table bool
	// columns is the Table's columnDefinitions, copied; nil when null or
	// absent, as on every event after a connection's first.
	columns []byte
}

func (s *stream) event() (watch.EventType, runtime.Object, eventTable, error) {
	dec := s.dec
	s.rec.discard(dec.InputOffset())
	tok, err := dec.ReadToken()
	if err != nil {
		return "", nil, eventTable{}, err // io.EOF between events
	}
	if tok.Kind() != '{' {
		return "", nil, eventTable{}, fmt.Errorf("got JSON %v, want an event object", tok.Kind())
	}
	var (
		typ    watch.EventType
		obj    runtime.Object
		tbl    eventTable
		early  []byte // the object, when it came before the type
		object bool
	)
	for dec.PeekKind() != '}' {
		name, _, err := s.p.readName()
		if err != nil {
			return "", nil, eventTable{}, err
		}
		switch string(name) {
		case "type":
			typ, err = s.eventType()
		case "object":
			object = true
			if typ != "" {
				obj, tbl, err = s.eventObject(typ)
				break
			}
			var raw jsontext.Value
			if raw, err = dec.ReadValue(); err == nil {
				early = bytes.Clone(raw)
			}
		default:
			err = s.p.skip()
		}
		if err != nil {
			return "", nil, eventTable{}, err
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return "", nil, eventTable{}, err
	}
	switch {
	case typ == "":
		return "", nil, eventTable{}, errors.New("watch event without a type")
	case !object:
		return "", nil, eventTable{}, fmt.Errorf("%s watch event without an object", typ)
	case early != nil:
		obj, tbl, err = s.d.eventObject(typ, early, s.table)
	}
	return typ, obj, tbl, err
}

func (s *stream) eventType() (watch.EventType, error) {
	if s.dec.PeekKind() != '"' {
		if err := s.p.skip(); err != nil {
			return "", err
		}
		return "", errors.New("watch event type is not a string")
	}
	raw, err := s.dec.ReadValue()
	if err != nil {
		return "", err
	}
	name := raw[1 : len(raw)-1]
	if bytes.IndexByte(raw, '\\') >= 0 {
		if name, err = jsontext.AppendUnquote(nil, raw); err != nil {
			return "", err
		}
	}
	for _, t := range []watch.EventType{watch.Added, watch.Modified, watch.Deleted, watch.Bookmark, watch.Error} {
		if string(name) == string(t) {
			return t, nil
		}
	}
	return "", fmt.Errorf("got invalid watch event type: %q", name)
}

// eventObject decodes the object of an event of type typ from the stream.
func (s *stream) eventObject(typ watch.EventType) (runtime.Object, eventTable, error) {
	if typ == watch.Error {
		raw, err := s.dec.ReadValue()
		if err != nil {
			return nil, eventTable{}, err
		}
		st, err := decodeStatus(raw)
		return st, eventTable{}, err
	}
	if s.table {
		return s.tableEventObject(typ, false)
	}
	o, err := s.object(typ == watch.Bookmark)
	return o, eventTable{}, err
}

// tableEventObject reads the object of a Table watch's event of type typ
// (not ERROR): a Table of one row, such as
// {"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{...},"columnDefinitions":null,"rows":[{"cells":[...],"object":{...}}]},
// whose row's object it returns with the row's cells. An object that is
// not a Table (no "kind":"Table") is decoded as the event's object itself,
// without cells.
//
// The row is decoded as it streams when "kind":"Table" comes before
// "rows", as every encoder of Tables writes it; else (or when isTable says
// the object is a Table whatever its member order) the object's bytes,
// which the recorder holds until then, are read again once its kind is
// known.
func (s *stream) tableEventObject(typ watch.EventType, isTable bool) (runtime.Object, eventTable, error) {
	dec := s.dec
	if dec.PeekKind() != '{' {
		o, err := s.object(false) // fails as a non-object does
		return o, eventTable{}, err
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, eventTable{}, err
	}
	start := dec.InputOffset() - 1
	var (
		tbl      eventTable
		kind     bool // the kind is known: Table when isTable
		deferred bool // rows were skipped before the kind was known
		o        *Object
		rows     int
	)
	if isTable {
		kind = true
	}
	for dec.PeekKind() != '}' {
		name, _, err := s.p.readName()
		if err != nil {
			return nil, eventTable{}, err
		}
		switch string(name) {
		case "kind":
			var k string
			if k, err = s.readString(); err == nil && !kind {
				kind, isTable = true, k == "Table"
			}
		case "columnDefinitions":
			var raw jsontext.Value
			if raw, err = dec.ReadValue(); err == nil && string(raw) != "null" {
				tbl.columns = bytes.Clone(raw)
			}
		case "rows":
			if !kind || !isTable {
				deferred = true
				err = s.p.skip()
				break
			}
			o, rows, err = s.tableRow(typ)
		default:
			err = s.p.skip()
		}
		if err != nil {
			return nil, eventTable{}, err
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, eventTable{}, err
	}
	if !isTable || deferred {
		// The recorder holds the whole object: nothing was decoded from
		// it that discards.
		b := bytes.Clone(s.rec.buf[start-s.rec.base : dec.InputOffset()-s.rec.base])
		if !isTable {
			return s.d.eventObject(typ, b, false)
		}
		return s.d.tableEventObject(typ, b)
	}
	tbl.table = true
	switch {
	case rows != 1:
		return nil, eventTable{}, fmt.Errorf("a %s event's Table has %d rows, want 1", typ, rows)
	case o == nil && typ == watch.Bookmark:
		return nil, eventTable{}, errors.New("a BOOKMARK event's Table row has no object")
	case o == nil:
		// A row without an object of the resource's kind: not a Table
		// with its objects (see tableWatch.check).
		return nil, tbl, nil
	}
	return o, tbl, nil
}

// tableRow reads the rows of a Table watch event: it returns the first
// row's object and the number of rows.
func (s *stream) tableRow(typ watch.EventType) (*Object, int, error) {
	dec := s.dec
	if dec.PeekKind() != '[' {
		if err := s.p.skip(); err != nil {
			return nil, 0, err
		}
		return nil, 0, errors.New("rows: want an array")
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, 0, err
	}
	var o *Object
	n := 0
	for ; dec.PeekKind() != ']'; n++ {
		if n > 0 {
			if err := s.p.skip(); err != nil {
				return nil, 0, err
			}
			continue
		}
		var err error
		if o, err = s.row(typ == watch.Bookmark); err != nil {
			return nil, 0, fmt.Errorf("rows[0]: %w", err)
		}
	}
	_, err := dec.ReadToken()
	return o, n, err
}

// eventObject decodes the object of an event of type typ from b; table
// says the watch asked for Tables.
func (d *objectDecoder) eventObject(typ watch.EventType, b []byte, table bool) (runtime.Object, eventTable, error) {
	switch {
	case typ == watch.Error:
		st, err := decodeStatus(b)
		return st, eventTable{}, err
	case table:
		s := newStream(bytes.NewReader(b), d)
		s.table = true
		return s.tableEventObject(typ, false)
	case typ == watch.Bookmark:
		p := parserPool.Get().(*objectParser)
		defer p.release()
		p.in = *bytes.NewBuffer(b)
		p.own.Reset(&p.in)
		p.dec, p.d, p.annotations = &p.own, d, true
		if err := p.parseObject(); err != nil {
			return nil, eventTable{}, err
		}
		o, err := p.object(b, 0, nil)
		return o, eventTable{}, err
	}
	o, err := d.decode(b)
	return o, eventTable{}, err
}

// tableEventObject decodes b, a Table watch event's object known to be a
// Table, whatever its members' order.
func (d *objectDecoder) tableEventObject(typ watch.EventType, b []byte) (runtime.Object, eventTable, error) {
	s := newStream(bytes.NewReader(b), d)
	s.table = true
	return s.tableEventObject(typ, true)
}

// decodeStatus decodes the object of an ERROR event. They are rare and
// small, so encoding/json is fine here.
func decodeStatus(b []byte) (*metav1.Status, error) {
	st := &metav1.Status{}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("decode ERROR watch event: %w", err)
	}
	return st, nil
}
