package wire

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kubegate/internal/informer"
	"kubegate/internal/livequery"
	"kubegate/internal/rows"
	"kubegate/internal/rows/rowstest"
)

func podInfo(t *testing.T) (*informer.ResourceInfo, []rows.Column) {
	t.Helper()
	info := informer.NewResourceInfo(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, true)
	return info, rows.NewPrinter(info.GVR.GroupResource(), rowstest.MustRead("pods").Columns, nil).Columns()
}

func TestResolve(t *testing.T) {
	info, cols := podInfo(t)
	cases := []struct {
		p       Params
		key     string
		desc    bool
		column  int
		errWant string
	}{
		{p: Params{Limit: 5}, key: SortNamespace, column: -1},
		{p: Params{Sort: "metadata.name", Limit: 5}, key: SortName, column: -1},
		{p: Params{Sort: ".metadata.creationTimestamp", Order: "desc", Limit: 5}, key: SortCreated, desc: true, column: -1},
		{p: Params{Sort: "restarts", Order: "desc", Limit: 5}, key: "Restarts", desc: true, column: 3},
		// An age column sorts by the age it shows: ascending is the
		// newest first, the reverse of the creation time.
		{p: Params{Sort: "AGE", Limit: 5}, key: "Age", desc: true, column: 4},
		{p: Params{Sort: "age", Order: "desc", Limit: 5}, key: "Age", column: 4},
		{p: Params{Sort: "status.phase", Limit: 5}, key: "status.phase", column: -1},
		{p: Params{Sort: "spec.containers", Limit: 5}, errWant: `invalid sort: "spec.containers" is not a sort key of pods; sort by a column (Name, Ready, Status, Restarts, Age, IP, Node, Nominated Node, Readiness Gates), metadata.name, metadata.namespace, metadata.creationTimestamp, or a selectable field (spec.nodeName`},
		{p: Params{Order: "ascending", Limit: 5}, errWant: `invalid order: "ascending" is neither "asc" nor "desc"`},
		{p: Params{Offset: 3, Cursor: "x", Limit: 5}, errWant: `invalid cursor: a cursor and an offset (3) exclude each other`},
		{p: Params{Cursor: "%%%", Limit: 5}, errWant: `invalid cursor: not a cursor this gateway issued`},
	}
	for _, tc := range cases {
		w, err := tc.p.Resolve(info, cols)
		if tc.errWant != "" {
			var qe *livequery.InvalidQueryError
			if !errors.As(err, &qe) || !strings.HasPrefix(err.Error(), tc.errWant) || qe.Status().Code != 400 {
				t.Errorf("%+v: err %v, want a 400 starting %q", tc.p, err, tc.errWant)
			}
			continue
		}
		// Only the age column's direction is the reverse of the client's.
		if err != nil || w.Sort.Key != tc.key || w.Sort.Desc != tc.desc || w.Column != tc.column || w.Sort.Reversed != (tc.key == "Age") {
			t.Errorf("%+v: got %+v, %v; want key %q desc %v column %d", tc.p, w, err, tc.key, tc.desc, tc.column)
		}
	}
}

func TestTokenRoundTrip(t *testing.T) {
	s := livequery.SortSpec{Key: "Restarts", Desc: true}
	values := []livequery.Value{
		{},
		livequery.Int(-42),
		livequery.Quantity(resource.MustParse("1500m")),
		livequery.Time(time.Date(2026, 11, 25, 1, 2, 3, 456, time.UTC)),
		livequery.String(`a "quoted" ☃ value`),
		// Numbers read from text, as a cell holds them, as written.
		livequery.Parse("1.5"),
		livequery.Parse("100Mi"),
		livequery.Parse("007"),
		livequery.Parse("-" + strings.Repeat("9", 40) + "." + strings.Repeat("9", 40) + "e-308"),
	}
	for _, v := range values {
		c := livequery.Cursor{Value: v, Namespace: "ns", Name: "web-1"}
		tok := Token(s, c)
		got, err := ParseToken(tok, s)
		if err != nil || livequery.Compare(got.Value, v) != 0 || got.Value.Kind() != v.Kind() || got.Namespace != "ns" || got.Name != "web-1" {
			t.Errorf("%v: round trip gave %+v, %v", v, got, err)
		}
		if got, ok := TokenSort(tok); !ok || got != s {
			t.Errorf("%v: TokenSort gave %+v, %v; want %+v", v, got, ok, s)
		}
		if _, err := ParseToken(tok, livequery.SortSpec{Key: "Restarts"}); err == nil ||
			!strings.Contains(err.Error(), "belongs to another sort (Restarts descending)") {
			t.Errorf("%v: a token of another order: %v", v, err)
		}
	}
	if _, err := ParseToken(strings.Repeat("a", MaxCursorLen+1), s); err == nil {
		t.Error("an over-long token was accepted")
	}
	for _, tok := range []string{"", "%%%", "e30", strings.Repeat("a", MaxCursorLen+1)} { // "e30" is {}
		if got, ok := TokenSort(tok); ok {
			t.Errorf("TokenSort(%q) = %+v, want no token", tok, got)
		}
	}
}

// FuzzParseToken: any string either fails with a 400 or decodes to a
// cursor whose token decodes to the same cursor again.
func FuzzParseToken(f *testing.F) {
	s := livequery.SortSpec{Key: "k"}
	f.Add(Token(s, livequery.Cursor{Value: livequery.Int(3), Name: "a"}))
	f.Add(Token(s, livequery.Cursor{Value: livequery.Quantity(resource.MustParse("2Gi")), Namespace: "n", Name: "a"}))
	f.Add(Token(s, livequery.Cursor{Value: livequery.Time(time.Unix(5, 0)), Name: "a"}))
	f.Add(Token(s, livequery.Cursor{Value: livequery.String("x"), Name: "a"}))
	f.Add("eyJrIjoiayIsInQiOiJxIiwidiI6IjFlOTk5OTk5OTk5IiwibiI6ImEifQ")
	f.Add("")
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := ParseToken(tok, s)
		if err != nil {
			var qe *livequery.InvalidQueryError
			if !errors.As(err, &qe) || qe.Field != "cursor" {
				t.Fatalf("error %v is not an invalid cursor", err)
			}
			return
		}
		// Comparing the value costs what a cell's would: it holds no
		// more digits than a float64 (see TestTokenRefusesCostlyQuantities).
		_ = livequery.Compare(c.Value, livequery.Int(0))
		again, err := ParseToken(Token(s, c), s)
		if err != nil || livequery.Compare(again.Value, c.Value) != 0 || again.Namespace != c.Namespace || again.Name != c.Name {
			t.Fatalf("%q: %+v re-encoded gave %+v, %v", tok, c, again, err)
		}
	})
}

// TestTokenRefusesCostlyQuantities: a quantity with a huge exponent
// parses at once but costs a number of that many digits per comparison,
// under the table's lock; tokens carry only what a cell can hold.
func TestTokenRefusesCostlyQuantities(t *testing.T) {
	s := livequery.SortSpec{Key: "k"}
	for _, v := range []string{"1e2000000000", "1e-1000000", "1e1000", "1" + strings.Repeat("0", 41), "1Ki2", "0x10", "1.5.5"} {
		tok := base64.RawURLEncoding.EncodeToString([]byte(`{"k":"k","t":"q","v":"` + v + `","n":"x"}`))
		if c, err := ParseToken(tok, s); err == nil {
			t.Errorf("quantity %q accepted as %v", v, c.Value)
		}
	}
	for _, v := range []string{"1500m", "2Gi", "1u", "-1.25e308", "4.9e-324", "12345"} {
		tok := base64.RawURLEncoding.EncodeToString([]byte(`{"k":"k","t":"q","v":"` + v + `","n":"x"}`))
		if _, err := ParseToken(tok, s); err != nil {
			t.Errorf("quantity %q refused: %v", v, err)
		}
	}
}
