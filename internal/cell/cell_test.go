package cell

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

func TestCompare(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// In ascending order.
	ordered := []Value{
		Int(-3),
		Int(0), // equal to the next one
		Quantity(resource.MustParse("0")),
		Quantity(resource.MustParse("100m")),
		Quantity(resource.MustParse("500m")),
		Int(1),
		Quantity(resource.MustParse("1Ki")),
		Int(1025),
		Time(t0),
		Time(t0.Add(time.Nanosecond)),
		String(""),
		String("Pending"),
		String("Running"),
		String("pending"),
		Time(time.Time{}), // missing
		{},
	}
	equal := map[[2]int]bool{{1, 2}: true, {14, 15}: true}
	for i, a := range ordered {
		for j, b := range ordered {
			want := 0
			switch {
			case equal[[2]int{min(i, j), max(i, j)}] || i == j:
			case i < j:
				want = -1
			default:
				want = 1
			}
			if got := Compare(a, b); got != want {
				t.Errorf("Compare(%d:%v, %d:%v) = %d, want %d", i, a, j, b, got, want)
			}
		}
	}
}

func TestValueString(t *testing.T) {
	for _, tt := range []struct {
		v    Value
		want string
	}{
		{String("Running"), "Running"},
		{Int(-12), "-12"},
		{Quantity(resource.MustParse("1500m")), "1500m"},
		{Time(time.Date(2026, 2, 3, 4, 5, 6, 7, time.FixedZone("x", 3600))), "2026-02-03T03:05:06Z"},
		{Value{}, ""},
	} {
		if got := tt.v.String(); got != tt.want {
			t.Errorf("%#v.String() = %q, want %q", tt.v, got, tt.want)
		}
	}
	if k := Time(time.Time{}).Kind(); k != KindMissing {
		t.Errorf("zero time is %v, want missing", k)
	}
}

// TestParse: text that is a number or a quantity is a number, compared
// numerically and searched as it is written; other text, and quantities
// too large to compare cheaply, stay text.
func TestParse(t *testing.T) {
	shown := []string{"1", "1.5", "100Mi", "2Gi", "3k", "500m"}
	var vals []Value
	for _, s := range shown {
		v := Parse(s)
		if v.Kind() != KindNumber || v.String() != s {
			t.Errorf("Parse(%q) = %v %q, want a number shown as %q", s, v.Kind(), v.String(), s)
		}
		vals = append(vals, v)
	}
	slices.SortStableFunc(vals, Compare)
	var got []string
	for _, v := range vals {
		got = append(got, v.String())
	}
	if want := []string{"500m", "1", "1.5", "3k", "100Mi", "2Gi"}; !slices.Equal(got, want) {
		t.Errorf("sorted %v, want %v", got, want)
	}
	if c := Compare(Parse("1.5"), Quantity(resource.MustParse("1500m"))); c != 0 {
		t.Errorf("1.5 compares %d with 1500m", c)
	}
	if c := Compare(Parse("2"), Int(2)); c != 0 {
		t.Errorf("2 compares %d with the integer 2", c)
	}
	for _, s := range []string{"", "Running", "v1.37", "80/TCP", "10.0.0.1", "1/1", "+5", " 5", "1e9999", "5d",
		strings.Repeat("9", 41), "1.5Gi "} {
		if v := Parse(s); v.Kind() != KindString || v.String() != s {
			t.Errorf("Parse(%q) = %v %q, want the string", s, v.Kind(), v.String())
		}
	}
}

// TestPrefix checks Prefix against Compare for every pair of values of
// one kind: a value that sorts before another has a prefix no greater,
// and equal exact prefixes mean equal values. The values are edge cases
// (bounds, shared 7-byte heads, zero bytes, quantities past int64) and
// random ones.
func TestPrefix(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	vs := []Value{
		Int(math.MinInt64), Int(-1), Int(0), Int(1), Int(math.MaxInt64), Count(3, "3 (5m ago)"),
		Quantity(resource.MustParse("-1.5")), Quantity(resource.MustParse("-1")), Quantity(resource.MustParse("500m")),
		Quantity(resource.MustParse("1")), Quantity(resource.MustParse("1500m")), Quantity(resource.MustParse("2Gi")),
		Quantity(resource.MustParse("1e30")), Quantity(resource.MustParse("-1e30")), Quantity(resource.MustParse("1e30")),
		Parse("9223372036854775807"), Parse("9223372036854775808"), Parse("-9223372036854775809"), Parse("100Mi"), Parse("1.25"),
		Time(t0), Time(t0.Add(time.Nanosecond)), Time(time.Unix(-5, 0)),
		String(""), String("\x00"), String("a"), String("a\x00"), String("abcdefg"), String("abcdefg\x00"), String("abcdefgh"),
		String("abcdefgi"), String("abcdefgh-longer"), String("abcdefg\xff"), String("\xff\xff\xff\xff\xff\xff\xff\xff"),
		String("abcdefghijklmno"), String("abcdefghijklmno\x00"), String("abcdefghijklmnop"), String("abcdefghijklmnoq"),
		String("abcdefghijklmn\xff"), String("10.244.1.2"), String("10.244.10.2"),
		{},
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 300 {
		b := make([]byte, rng.IntN(20))
		for i := range b {
			b[i] = "a\x00\xffz"[rng.IntN(4)]
		}
		vs = append(vs, String(string(b)), Int(rng.Int64()-math.MaxInt64/2), Time(t0.Add(time.Duration(rng.Int64N(1e15)))),
			Parse(strconv.Itoa(rng.IntN(2000)-1000)+[]string{"", "m", "Ki", "e3", ".5"}[rng.IntN(5)]))
	}
	for _, a := range vs {
		ha, la, ea := a.Prefix()
		for _, b := range vs {
			if a.Kind() != b.Kind() {
				continue
			}
			hb, lb, eb := b.Prefix()
			pa, pb := [2]uint64{ha, la}, [2]uint64{hb, lb}
			c := Compare(a, b)
			if c < 0 && (ha > hb || ha == hb && la > lb) {
				t.Errorf("%q sorts before %q, but its prefix %#x is greater than %#x", a, b, pa, pb)
			}
			if ea && eb && pa == pb && c != 0 {
				t.Errorf("%q and %q have the exact prefix %#x, but compare %d", a, b, pa, c)
			}
		}
	}
}
