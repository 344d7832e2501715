// Package cell holds the typed value of a table cell or sort key:
// numbers (integers and quantities, compared together), times and text,
// with the order rows sort in. Rows (internal/rows) compute them from
// the cells kube-apiserver prints; the live tables (internal/livequery)
// sort, filter and search by them.
package cell

import (
	"cmp"
	"encoding/binary"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/inf.v0"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Kind is the type of a Value. Values of different kinds order by kind:
// numbers, then times, then strings, then missing values.
type Kind uint8

const (
	// KindMissing is the zero Value: the object has no value for the key.
	// It sorts after every other value (so last ascending, first
	// descending).
	KindMissing Kind = iota
	// KindNumber is an integer or a resource.Quantity; the two compare
	// numerically with each other.
	KindNumber
	// KindTime is a timestamp, compared to the nanosecond.
	KindTime
	// KindString is compared byte by byte, as the apiserver orders keys.
	KindString
)

// kindOrder places the kinds in their sort order: missing goes last.
var kindOrder = [...]int{KindMissing: 3, KindNumber: 0, KindTime: 1, KindString: 2}

// Value is one typed cell or sort key of a row. The zero Value is
// missing. Values are small and immutable; copy them freely.
type Value struct {
	kind Kind
	// head holds a string's bytes 8 to 14, and i its first 8, big-endian
	// (zeros past its end): its Prefix, computed once, so that a sort
	// does not read the string's bytes, a load further. They fill the
	// space kind leaves before i: a Value is 40 bytes either way.
	head [7]byte
	i    int64              // an integer, a time as Unix nanoseconds, or a string's first 8 bytes
	q    *resource.Quantity // a quantity; nil for an integer
	s    string             // a string; a number's text when read from text (Parse)
}

// String returns a string value.
func String(s string) Value {
	var b [15]byte
	copy(b[:], s)
	v := Value{kind: KindString, i: int64(binary.BigEndian.Uint64(b[:8])), s: s}
	copy(v.head[:], b[8:])
	return v
}

// Int returns an integer value.
func Int(i int64) Value { return Value{kind: KindNumber, i: i} }

// Count returns the number n shown as text ("1/2" ready containers, "3
// (5m ago)" restarts): it sorts as n, and a text filter searches text.
func Count(n int64, text string) Value { return Value{kind: KindNumber, i: n, s: text} }

// Quantity returns a quantity value ("500m", "2Gi"). It compares
// numerically with other quantities and integers.
func Quantity(q resource.Quantity) Value {
	q = q.DeepCopy()
	return Value{kind: KindNumber, q: &q}
}

// numberText matches the text Parse reads as a number: an integer or a
// decimal of at most 40 digits, with a decimal exponent of at most 3
// digits or a quantity's suffix ("3", "-1.5", "1e3", "500m", "2Gi"). The
// bound keeps comparisons cheap: "1e999999" parses in microseconds, but
// every comparison with it builds a number of that many digits, under a
// table's lock. Cursor tokens accept the same (wire).
var numberText = regexp.MustCompile(`^-?[0-9]{1,40}(\.[0-9]{1,40})?([eE][+-]?[0-9]{1,3}|[numkMGTPE]|[KMGTPE]i)?$`)

// Parse returns the value of a cell shown as text s: a number when s is
// an integer or a quantity ("500m", "2Gi", "1.5"), which compares
// numerically and whose String is s as written (what a text filter
// searches, and the cell shows), and the string s otherwise.
func Parse(s string) Value {
	if s == "" || s[0] != '-' && (s[0] < '0' || s[0] > '9') || !numberText.MatchString(s) {
		return String(s)
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return Value{kind: KindNumber, i: i, s: s}
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return String(s)
	}
	return Value{kind: KindNumber, q: &q, s: s}
}

// Time returns a time value; the zero time is missing, as an unset
// metav1.Time is.
func Time(t time.Time) Value {
	if t.IsZero() {
		return Value{}
	}
	return Value{kind: KindTime, i: t.UnixNano()}
}

// UnixNano returns a time value as Unix nanoseconds, and 0 for a value
// of another kind.
func (v Value) UnixNano() int64 {
	if v.kind != KindTime {
		return 0
	}
	return v.i
}

// Kind returns v's kind.
func (v Value) Kind() Kind { return v.kind }

// String returns v as text: what a text filter searches. A number read
// from text (Parse) is that text; a time is RFC 3339 in UTC; a missing
// value is "".
func (v Value) String() string {
	switch v.kind {
	case KindString:
		return v.s
	case KindNumber:
		if v.s != "" {
			return v.s
		}
		if v.q != nil {
			return v.q.String()
		}
		return strconv.FormatInt(v.i, 10)
	case KindTime:
		return time.Unix(0, v.i).UTC().Format(time.RFC3339)
	}
	return ""
}

// Compare orders a before b (-1), with b (0) or after it (+1). Missing
// values come after all others; values of different kinds order by kind.
func Compare(a, b Value) int {
	if a.kind != b.kind {
		return cmp.Compare(kindOrder[a.kind], kindOrder[b.kind])
	}
	switch a.kind {
	case KindString:
		return strings.Compare(a.s, b.s)
	case KindTime:
		return cmp.Compare(a.i, b.i)
	case KindNumber:
		switch {
		case a.q == nil && b.q == nil:
			return cmp.Compare(a.i, b.i)
		case a.q == nil:
			return -b.q.CmpInt64(a.i)
		case b.q == nil:
			return a.q.CmpInt64(b.i)
		}
		return a.q.Cmp(*b.q)
	}
	return 0
}

// Prefix returns two numbers, hi then lo, whose order agrees with
// Compare between two values of v's kind: Compare(a, b) < 0 implies that
// a's prefix is at most b's. Sorts compare prefixes first, and the values
// only when the prefixes are equal and one of them is not exact: an exact
// prefix is equal to another exact one only if the values compare equal.
// Integers and times are their own exact prefix; a string's is its first
// 15 bytes and its length up to 16 (exact for strings of at most 15
// bytes: names, addresses, phases); a quantity's is its floor, bounded to
// int64 (exact for an integer within it). A missing value's is 0.
func (v Value) Prefix() (hi, lo uint64, exact bool) {
	switch v.kind {
	case KindString:
		for _, b := range v.head {
			lo = lo<<8 | uint64(b)
		}
		return uint64(v.i), lo<<8 | uint64(min(len(v.s), 16)), len(v.s) < 16
	case KindTime:
		return signedPrefix(v.i), 0, true
	case KindNumber:
		if v.q == nil {
			return signedPrefix(v.i), 0, true
		}
		i, exact := quantityFloor(v.q)
		return signedPrefix(i), 0, exact
	}
	return 0, 0, true
}

// signedPrefix maps int64 order onto uint64 order.
func signedPrefix(i int64) uint64 { return uint64(i) ^ 1<<63 }

// quantityFloor returns q's floor, bounded to int64, and whether that is
// q itself. Floor and bounds are both monotonic, so prefixes made of
// them keep quantities' order.
func quantityFloor(q *resource.Quantity) (int64, bool) {
	if i, ok := q.AsInt64(); ok {
		return i, true
	}
	c := q.DeepCopy() // AsDec converts the quantity it is called on
	f := new(inf.Dec).Round(c.AsDec(), 0, inf.RoundFloor).UnscaledBig()
	switch {
	case f.IsInt64():
		return f.Int64(), false
	case f.Sign() < 0:
		return math.MinInt64, false
	}
	return math.MaxInt64, false
}
