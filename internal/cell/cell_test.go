package cell

import (
	"slices"
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
