package livequery

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

// A row's flattened labels answer every label selector as the labels map
// does: keys and values of every length (uvarint lengths of one and two
// bytes), empty values, keys that prefix each other.
func TestFlatLabelsMatchAsTheMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	keys := []string{"a", "ab", "app", "app.kubernetes.io/name", strings.Repeat("k", 60) + "." + strings.Repeat("k", 60) + ".io/" + strings.Repeat("n", 63), "tier", "n"}
	values := []string{"", "1", "7", "10", "web", strings.Repeat("v", 130)}
	var selectors []labels.Selector
	for _, k := range keys {
		for _, s := range []string{"%s", "!%s", "%s=web", "%s!=web", "%s in (1,web)", "%s notin (,7)", "%s>5", "%s<8", "%s=", "%s=web,tier"} {
			sel, err := labels.Parse(fmt.Sprintf(s, k))
			if err != nil {
				t.Fatal(err)
			}
			selectors = append(selectors, sel)
		}
	}
	for i := range 500 {
		m := map[string]string{}
		for range rng.IntN(len(keys) + 1) {
			m[keys[rng.IntN(len(keys))]] = values[rng.IntN(len(values))]
		}
		if i == 0 {
			m = nil
		}
		r := newRow(&Row{Name: "n", Labels: m, Cells: []Value{String("Running")}})
		if r.text != "n\x00running" {
			t.Fatalf("labels %v: text %q, want %q", m, r.text, "n\x00running")
		}
		for k := range m {
			if v, ok := r.labels.Lookup(k); !ok || v != m[k] {
				t.Fatalf("labels %v: Lookup(%q) = %q, %v", m, k, v, ok)
			}
		}
		for _, sel := range selectors {
			if got, want := sel.Matches(&r.labels), sel.Matches(labels.Set(m)); got != want {
				t.Fatalf("labels %v: %q matches the flattened labels: %v, the map: %v", m, sel, got, want)
			}
		}
	}
}

// A matcher answers every label selector as the labels map does, whether
// a row's labelBloom decides a requirement (the key absent, or none of
// its values present) or its labels do: with the row's own filters, with
// filters that show every key and pair present (so the labels decide
// each requirement), and with the labels removed where the matcher says
// it does not read them. The filters must decide most rows of a selector
// on a key or value the rows lack, or they would not spare the loads
// they exist for.
func TestMatcherAnswersAsTheLabelsMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	keys := []string{"a", "ab", "app", "app.kubernetes.io/name", "tier", "n", "pod-template-hash"}
	values := []string{"", "1", "7", "10", "web", "db"}
	var selectors []labels.Selector
	for _, k := range keys {
		for _, s := range []string{"%s", "!%s", "%s=web", "%s==7", "%s!=web", "%s in (1,web)", "%s notin (,7)", "%s>5", "%s<8", "%s=", "%s=web,tier", "!%s,tier!=db", "%s in (db),!a"} {
			sel, err := labels.Parse(fmt.Sprintf(s, k))
			if err != nil {
				t.Fatal(err)
			}
			selectors = append(selectors, sel)
		}
	}
	matchers := make([]*matcher, len(selectors))
	for i, sel := range selectors {
		matchers[i] = newMatcher(Filter{Label: sel})
		if matchers[i].reqs == nil {
			t.Fatalf("%q: no requirements prepared", sel)
		}
	}
	decided := map[string]int{}
	const rows = 2000
	for i := range rows {
		m := map[string]string{}
		for range rng.IntN(len(keys) + 1) {
			m[keys[rng.IntN(len(keys))]] = values[rng.IntN(len(values))]
		}
		if i == 0 {
			m = nil
		}
		r := newRow(&Row{Name: "n", Labels: m})
		full := *r
		full.bloom = labelBloom{^uint64(0), ^uint64(0)}
		bare := *r
		bare.labels = ""
		for j, sel := range selectors {
			want := sel.Matches(labels.Set(m))
			mt := matchers[j]
			if got := mt.matches(r); got != want {
				t.Fatalf("labels %v: %q matches the row: %v, the map: %v", m, sel, got, want)
			}
			if got := mt.matches(&full); got != want {
				t.Fatalf("labels %v, filters full: %q matches the row: %v, the map: %v", m, sel, got, want)
			}
			if mt.readsLabels(r) {
				continue
			}
			decided[sel.String()]++
			if got := mt.matches(&bare); got != want {
				t.Fatalf("labels %v: %q is decided by the filters, but matches the row without labels: %v, the map: %v", m, sel, got, want)
			}
		}
	}
	for _, s := range []string{"!absent", "absent", "absent=web", "tier!=absent", "tier in (absent)"} {
		sel, err := labels.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		mt := newMatcher(Filter{Label: sel})
		n := 0
		for range rows {
			// Each row's own 7 labels, from many: whether a row's
			// filters show a key or pair present depends on its labels
			// and the process's hash seed, so rows of the same labels
			// would all show it, or none (a key every row has shows
			// another present in about one row of 5 for one seed in 15).
			// tier, with a value of its own, for the pairs' filter to
			// decide tier!=absent and tier in (absent).
			m := map[string]string{}
			if strings.HasPrefix(s, "tier") {
				m["tier"] = fmt.Sprintf("v-%d", rng.IntN(1000))
			}
			for len(m) < 7 {
				m[fmt.Sprintf("key-%d", rng.IntN(1000))] = values[rng.IntN(len(values))]
			}
			if !mt.readsLabels(newRow(&Row{Name: "n", Labels: m})) {
				n++
			}
		}
		// With 7 labels, an absent key or pair shows present about one
		// time in 25: 90% leaves a wide margin.
		if n < rows*9/10 {
			t.Errorf("%q: the filters decide %d of %d rows with 7 labels, want at least 90%%", sel, n, rows)
		}
	}
	if len(decided) == 0 {
		t.Fatal("the filters decided no requirement")
	}
}
