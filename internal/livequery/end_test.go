package livequery

import (
	"context"
	"errors"
	"slices"
	"testing"
)

func TestEndWakesWindowsAfterWhatTheyHold(t *testing.T) {
	tbl := NewTable(Options{Columns: scoreColumns})
	tbl.Replace(tenRows(), 10)
	wakes := 0
	w, c := openAndDrain(t, tbl, Query{Sort: SortSpec{Key: "score"}, Range: Range{Limit: 3}, Wake: func() { wakes++ }})

	tbl.Upsert(scored("a", "first", Int(-1)), 11)
	if wakes != 1 {
		t.Fatalf("wakes after a change = %d, want 1", wakes)
	}
	gone := errors.New("configmaps is no longer served")
	tbl.End(gone)
	if wakes != 2 {
		t.Fatalf("wakes after End = %d, want 2: End wakes every window, pending or not", wakes)
	}
	// What the window held before the end is still popped, at the
	// version it reached.
	ops, rv := w.Pop(nil)
	if err := c.apply(ops); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a/first", "a/r0", "a/r1"}; !slices.Equal(c.keys(), want) || rv != 11 {
		t.Fatalf("after End: %v at %d, want %v at 11", c.keys(), rv, want)
	}
	if err := w.Err(); !errors.Is(err, gone) {
		t.Fatalf("Window.Err = %v, want %v", err, gone)
	}
	if err := tbl.Err(); !errors.Is(err, gone) {
		t.Fatalf("Table.Err = %v, want %v", err, gone)
	}

	// Nothing changes after the end, and a second End keeps the first
	// error.
	tbl.Upsert(scored("a", "late", Int(-2)), 12)
	tbl.Delete("a", "r0", 13)
	tbl.Replace(nil, 14)
	tbl.End(errors.New("another"))
	if ops, rv := w.Pop(nil); len(ops) != 0 || rv != 11 {
		t.Fatalf("Pop after changes past End = %v at %d, want nothing at 11", opStrings(ops), rv)
	}
	if tbl.Len() != 11 || !errors.Is(tbl.Err(), gone) {
		t.Fatalf("after End: %d rows, err %v; want 11 rows, %v", tbl.Len(), tbl.Err(), gone)
	}
	if _, err := tbl.Open(context.Background(), Query{Range: Range{Limit: 1}}); !errors.Is(err, gone) {
		t.Fatalf("Open after End: %v, want %v", err, gone)
	}
}

func TestSetVersionAdvancesPopWithoutWaking(t *testing.T) {
	tbl := NewTable(Options{})
	tbl.Replace([]*Row{{Namespace: "a", Name: "x", RV: 3}}, 5)
	wakes := 0
	w, _ := openAndDrain(t, tbl, Query{Sort: SortSpec{Key: "metadata.name"}, Range: Range{Limit: 5}, Wake: func() { wakes++ }})

	tbl.SetVersion(9)
	tbl.SetVersion(7) // versions only move forward
	if ops, rv := w.Pop(nil); len(ops) != 0 || rv != 9 || wakes != 0 {
		t.Fatalf("Pop after SetVersion = %v at %d (wakes %d), want nothing at 9, no wake", opStrings(ops), rv, wakes)
	}
	if v := tbl.Version(); v != 9 {
		t.Fatalf("Version = %d, want 9", v)
	}
}
