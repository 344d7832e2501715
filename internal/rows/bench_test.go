package rows

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"kubegate/internal/rows/rowstest"
)

// BenchmarkRow measures one row computed from a pod's printed cells
// (Pending, no restart), as a first table computes one per object:
// cells parsed, typed and encoded.
func BenchmarkRow(b *testing.B) {
	tbl := rowstest.MustRead("pods")
	p := NewPrinter(schema.GroupResource{Resource: "pods"}, tbl.Columns, nil)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p.compute(tbl.Objects[i%len(tbl.Objects)])
		i++
	}
}
