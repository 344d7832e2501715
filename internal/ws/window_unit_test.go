package ws

import "testing"

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
