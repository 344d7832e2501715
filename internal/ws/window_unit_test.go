package ws

import (
	"fmt"
	"testing"

	"kubegate/internal/livequery"
)

// TestMergedMovesKeepTheLimitAskedFor: moves the writer has not applied
// yet are merged, the latest winning; a move without "limit" keeps the
// limit an earlier merged move asked for, not the window's old one.
func TestMergedMovesKeepTheLimitAskedFor(t *testing.T) {
	lim := 5
	sub := &subscription{id: "w", req: &clientFrame{Limit: &lim}}
	s := &socket{subs: map[string]*subscription{"w": sub}}
	s.writer.Store(writerRerun) // a flush is due: signal starts nothing
	off0, off50, lim100 := 0, 50, 100
	s.moveWindow(&clientFrame{Type: typeWindow, ID: "w", Offset: &off0, Limit: &lim100})
	s.moveWindow(&clientFrame{Type: typeWindow, ID: "w", Offset: &off50})
	if m := sub.move; m.offset != 50 || m.limit != 100 {
		t.Fatalf("merged move: offset %d, limit %d; want offset 50, limit 100", m.offset, m.limit)
	}
}

// TestFirstRowMayChange: the edits that may change a window's first row,
// or its sort value, and so its cursor, are the ones at position 0:
// an update there included, since the updated row may sort elsewhere
// within its place (a ConfigMap from 2 keys to 5 at the top of a window
// sorted by them, descending).
func TestFirstRowMayChange(t *testing.T) {
	for _, tc := range []struct {
		ops  []livequery.Op
		want bool
	}{
		{nil, false},
		{[]livequery.Op{{Type: livequery.OpCount, Count: 3}}, false},
		{[]livequery.Op{{Type: livequery.OpUpdate, Pos: 1}}, false},
		{[]livequery.Op{{Type: livequery.OpInsert, Pos: 2}, {Type: livequery.OpRemove, Pos: 1}}, false},
		{[]livequery.Op{{Type: livequery.OpMove, Pos: 1, To: 2}}, false},
		{[]livequery.Op{{Type: livequery.OpUpdate, Pos: 0}}, true},
		{[]livequery.Op{{Type: livequery.OpInsert, Pos: 0}}, true},
		{[]livequery.Op{{Type: livequery.OpRemove, Pos: 0}}, true},
		{[]livequery.Op{{Type: livequery.OpMove, Pos: 0, To: 1}}, true},
		{[]livequery.Op{{Type: livequery.OpMove, Pos: 2, To: 0}}, true},
		{[]livequery.Op{{Type: livequery.OpReset}}, true},
	} {
		var types []string
		for _, op := range tc.ops {
			types = append(types, fmt.Sprintf("%s@%d→%d", op.Type, op.Pos, op.To))
		}
		if got := firstRowMayChange(tc.ops); got != tc.want {
			t.Errorf("firstRowMayChange(%v) = %v, want %v", types, got, tc.want)
		}
	}
}
