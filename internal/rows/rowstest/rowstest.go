// Package rowstest gives tests Table columns and rows as kube-apiserver
// v1.37 printed them (testdata: Tables it answered with
// includeObject=Object), so that the rows of cached objects can be tested
// without a control plane.
package rowstest

import (
	"embed"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubegate/internal/informer"
)

//go:embed testdata/*.json
var testdata embed.FS

// Table is a Table kube-apiserver answered, as the informer caches it:
// the columns, and each row's object with its cells.
type Table struct {
	Columns *informer.Columns
	Objects []*informer.Object
}

// Read returns the Table of testdata/<name>.json: "pods" (three pending
// pods) or "widgets" (a CRD's objects, with integer, string, date,
// number and boolean columns, some unset). Each call returns new objects
// and columns.
func Read(name string) (Table, error) {
	b, err := testdata.ReadFile("testdata/" + name + ".json")
	if err != nil {
		return Table{}, err
	}
	var tbl struct {
		Defs json.RawMessage `json:"columnDefinitions"`
		Rows []struct {
			Cells      json.RawMessage `json:"cells"`
			Conditions json.RawMessage `json:"conditions"`
			Object     json.RawMessage `json:"object"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(b, &tbl); err != nil {
		return Table{}, fmt.Errorf("%s: %w", name, err)
	}
	cols := &informer.Columns{Raw: tbl.Defs}
	if err := json.Unmarshal(tbl.Defs, &cols.Definitions); err != nil {
		return Table{}, fmt.Errorf("%s: %w", name, err)
	}
	t := Table{Columns: cols}
	for _, r := range tbl.Rows {
		var m struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if err := json.Unmarshal(r.Object, &m); err != nil {
			return Table{}, fmt.Errorf("%s: %w", name, err)
		}
		t.Objects = append(t.Objects, &informer.Object{ObjectMeta: m.Metadata, Raw: r.Object, Cells: r.Cells,
			Columns: cols, RowConditions: r.Conditions})
	}
	return t, nil
}

// MustRead is Read that panics on an error (testdata is embedded).
func MustRead(name string) Table {
	t, err := Read(name)
	if err != nil {
		panic(err)
	}
	return t
}

// PodCells returns the cells kube-apiserver prints for a pod (name,
// ready, status, restarts, age, IP, node, nominated node, readiness
// gates) as a Table row's JSON array.
func PodCells(name, ready, status, restarts, age, ip, node string) []byte {
	b, _ := json.Marshal([]string{name, ready, status, restarts, age, ip, node, "<none>", "<none>"})
	return b
}
