package livequery

import (
	"context"
	"slices"
	"testing"
)

// A window read once: its rows, count and offset at one version, and a
// cursor past its last row that the next window starts after, whatever
// changed in between.
func TestSnapshotAndCursorAfter(t *testing.T) {
	tbl := NewTable(Options{Columns: scoreColumns})
	rows := tenRows()
	// r3b ties r3's score and sorts after it by name.
	rows = append(rows, scored("a", "r3b", Int(30)))
	tbl.Replace(rows, 7)
	desc := SortSpec{Key: "score", Desc: true}
	page := func(c *Cursor, limit int) (Snapshot, *Window) {
		t.Helper()
		w, err := tbl.Open(context.Background(), Query{Sort: desc, Range: Range{Cursor: c, Limit: limit}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Close)
		s, err := w.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		return s, w
	}
	keys := func(s Snapshot) []string { return rowKeys(s.Rows) }

	s, w := page(nil, 4)
	if want := []string{"a/r9", "a/r8", "a/r7", "a/r6"}; !slices.Equal(keys(s), want) || s.Count != 11 || s.Offset != 0 || s.Version != 7 {
		t.Fatalf("first page %v count %d offset %d version %d, want %v 11 0 7", keys(s), s.Count, s.Offset, s.Version, want)
	}
	next := w.CursorAfter(s.Rows[3])

	// Between pages: r6 (already seen) leaves, r55 enters right after
	// it, r9 (seen) moves below the cursor.
	tbl.Delete("a", "r6", 8)
	tbl.Upsert(scored("a", "r55", Int(55)), 9)
	tbl.Upsert(scored("a", "r9", Int(35)), 10)
	s, w = page(&next, 4)
	if want := []string{"a/r55", "a/r5", "a/r4", "a/r9"}; !slices.Equal(keys(s), want) || s.Count != 11 || s.Offset != 2 || s.Version != 10 {
		t.Fatalf("second page %v count %d offset %d version %d, want %v 11 2 10", keys(s), s.Count, s.Offset, s.Version, want)
	}
	// Ties: the cursor past r3 (score 30) starts at r3b (score 30).
	tbl.Upsert(scored("a", "r3", Int(30)), 11)
	s, w = page(&next, 6)
	r3 := s.Rows[slices.IndexFunc(s.Rows, func(r *Row) bool { return r.Name == "r3" })]
	c := w.CursorAfter(r3)
	s, _ = page(&c, 2)
	if want := []string{"a/r3b", "a/r2"}; !slices.Equal(keys(s), want) {
		t.Errorf("page after r3: %v, want %v", keys(s), want)
	}
	// Past the last row: empty, offset at the end.
	last := s.Rows[len(s.Rows)-1]
	for range 3 {
		c = w.CursorAfter(last)
		s, w = page(&c, 5)
		if len(s.Rows) == 0 {
			break
		}
		last = s.Rows[len(s.Rows)-1]
	}
	if len(s.Rows) != 0 || s.Offset != s.Count {
		t.Errorf("page past the end: %v offset %d count %d", keys(s), s.Offset, s.Count)
	}
}
