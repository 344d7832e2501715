package livequery_test

import (
	"context"
	"fmt"

	"kubegate/internal/livequery"
)

// A window of the two pods with the most restarts, kept live.
func Example() {
	tbl := livequery.NewTable(livequery.Options{Columns: []string{"restarts"}})
	pod := func(name string, restarts int64) *livequery.Row {
		return &livequery.Row{Namespace: "demo", Name: name, Cells: []livequery.Value{livequery.Int(restarts)}}
	}
	tbl.Replace([]*livequery.Row{pod("web-0", 3), pod("web-1", 0), pod("db-0", 1)}, 100)

	w, err := tbl.Open(context.Background(), livequery.Query{
		Sort:  livequery.SortSpec{Key: "restarts", Desc: true},
		Range: livequery.Range{Limit: 2},
	})
	if err != nil {
		panic(err)
	}
	defer w.Close()
	ops, rv := w.Pop(nil)
	fmt.Println(rv, ops)

	tbl.Upsert(pod("web-1", 5), 101) // web-1 climbs to the top
	ops, rv = w.Pop(nil)
	fmt.Println(rv, ops)

	ops, rv, _ = w.Move(livequery.Range{Offset: 1, Limit: 2}) // scroll one row
	fmt.Println(rv, ops)
	// Output:
	// 100 [insert(0,demo/web-0) insert(1,demo/db-0) count(3,@0)]
	// 101 [remove(1) insert(0,demo/web-1)]
	// 101 [remove(0) insert(1,demo/db-0) count(3,@1)]
}
