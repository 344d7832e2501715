package informer

import (
	"fmt"
	"testing"
)

// checkOrder checks a listener's notifications against the order it
// promises, event by event: a snapshot (Added objects, then
// EndOfSnapshot) holds objects no newer than the snapshot's version, in
// no particular order; every live change (Added, Modified, Deleted) is
// newer than the change or snapshot before it; Sync re-sends a state no
// newer than what came before; Reset starts a new snapshot. snapshot
// says whether the stream starts with one (SendInitialEvents). Deletes
// found by a relist (tombstones, with an older version) are not allowed
// for: callers do not relist.
func checkOrder(ns []Notification, snapshot bool) error {
	inSnapshot := snapshot
	var last uint64 // the version the stream has reached
	for i, n := range ns {
		switch {
		case n.Type == Reset:
			inSnapshot = true
		case n.Type == EndOfSnapshot:
			if !inSnapshot {
				return fmt.Errorf("at %d: %s without a snapshot", i, n.Type)
			}
			if n.RV < last {
				return fmt.Errorf("at %d: snapshot at %d holds an object at %d", i, n.RV, last)
			}
			inSnapshot, last = false, n.RV
		case inSnapshot && n.Type == Added:
			last = max(last, n.RV) // snapshot objects come in no version order
		case inSnapshot:
			return fmt.Errorf("at %d: %s inside a snapshot", i, n.Type)
		case n.Type == Sync:
			if n.RV > last {
				return fmt.Errorf("at %d: SYNC at %d, ahead of %d", i, n.RV, last)
			}
		case n.RV <= last:
			return fmt.Errorf("at %d: %s at %d does not follow %d", i, n.Type, n.RV, last)
		default:
			last = n.RV
		}
	}
	return nil
}

func TestCheckOrder(t *testing.T) {
	x := func(typ NotificationType, rv uint64) Notification {
		return Notification{Type: typ, Object: obj("ns", "x", rv), RV: rv}
	}
	end := func(rv uint64) Notification { return Notification{Type: EndOfSnapshot, RV: rv} }
	for _, tc := range []struct {
		name     string
		ns       []Notification
		snapshot bool
		ok       bool
	}{
		{"snapshot then changes", []Notification{x(Added, 7), x(Added, 3), end(9), x(Added, 10), x(Modified, 11), x(Deleted, 12)}, true, true},
		{"live only", []Notification{x(Added, 10), x(Modified, 11), x(Sync, 11), x(Deleted, 12)}, false, true},
		{"reset and new snapshot", []Notification{x(Added, 10), {Type: Reset}, x(Added, 12), x(Added, 5), end(12), x(Modified, 13)}, false, true},
		// What the exemption for ADDED let through: a change older than
		// a live ADDED before it.
		{"change older than a live add", []Notification{end(9), x(Added, 20), x(Modified, 15)}, true, false},
		{"live add older than a change", []Notification{x(Modified, 20), x(Added, 15)}, false, false},
		{"repeated version", []Notification{x(Added, 10), x(Modified, 10)}, false, false},
		{"change not after the snapshot", []Notification{x(Added, 3), end(9), x(Modified, 9)}, true, false},
		{"snapshot object newer than the snapshot", []Notification{x(Added, 10), end(9)}, true, false},
		{"modify inside a snapshot", []Notification{x(Added, 3), x(Modified, 4), end(9)}, true, false},
		{"end without a snapshot", []Notification{x(Added, 3), end(9)}, false, false},
		{"sync ahead", []Notification{x(Added, 3), x(Sync, 4)}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := checkOrder(tc.ns, tc.snapshot); (err == nil) != tc.ok {
				t.Fatalf("checkOrder(%v) = %v, want ok %v", seen(tc.ns), err, tc.ok)
			}
		})
	}
}
