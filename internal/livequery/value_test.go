package livequery

import (
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
