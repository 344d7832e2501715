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
