package informer

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

// uobj is obj with a UID, so a re-created object differs from the old one.
func uobj(name, uid string, rv uint64, lbls ...string) *Object {
	o := obj("a", name, rv, lbls...)
	o.UID = types.UID(uid)
	return o
}

// seenUID renders notifications with their object's UID:
// "DELETED a/x(u1)@12".
func seenUID(ns []Notification) []string {
	out := make([]string, 0, len(ns))
	for _, n := range ns {
		out = append(out, fmt.Sprintf("%s %s(%s)@%d", n.Type, n.Object.Key(), n.Object.UID, n.RV))
	}
	return out
}

// TestCollapse feeds changes to a collapsing listener, collapses its
// backlog and checks what a consumer that saw none of the changes is
// handed. Receivers key objects by UID, so a collapse must never merge
// two objects that shared a name one after the other.
func TestCollapse(t *testing.T) {
	for _, tc := range []struct {
		name     string
		initial  []*Object
		selector string // label selector of the listener
		changes  func(t *testing.T, p *processor)
		want     []string
	}{{
		name:    "modified, deleted and re-created",
		initial: []*Object{uobj("x", "u1", 1)},
		changes: func(t *testing.T, p *processor) {
			update(t, p, uobj("x", "u1", 11))
			del(t, p, uobj("x", "u1", 12))
			add(t, p, uobj("x", "u2", 13))
		},
		want: []string{"DELETED a/x(u1)@12", "ADDED a/x(u2)@13"},
	}, {
		name:    "deleted, re-created and deleted again",
		initial: []*Object{uobj("x", "u1", 1)},
		changes: func(t *testing.T, p *processor) {
			del(t, p, uobj("x", "u1", 11))
			add(t, p, uobj("x", "u2", 12))
			del(t, p, uobj("x", "u2", 13))
		},
		want: []string{"DELETED a/x(u1)@11"},
	}, {
		name:    "re-created twice",
		initial: []*Object{uobj("x", "u1", 1)},
		changes: func(t *testing.T, p *processor) {
			del(t, p, uobj("x", "u1", 11))
			add(t, p, uobj("x", "u2", 12))
			update(t, p, uobj("x", "u2", 13))
			del(t, p, uobj("x", "u2", 14))
			add(t, p, uobj("x", "u3", 15))
			update(t, p, uobj("x", "u3", 16))
		},
		want: []string{"DELETED a/x(u1)@11", "ADDED a/x(u3)@16"},
	}, {
		name: "created, modified and deleted: never known",
		changes: func(t *testing.T, p *processor) {
			add(t, p, uobj("y", "u9", 11))
			update(t, p, uobj("y", "u9", 12))
			del(t, p, uobj("y", "u9", 13))
		},
		want: []string{},
	}, {
		name: "created and modified",
		changes: func(t *testing.T, p *processor) {
			add(t, p, uobj("y", "u9", 11))
			update(t, p, uobj("y", "u9", 12))
		},
		want: []string{"ADDED a/y(u9)@12"},
	}, {
		name:    "ordered by each object's last change",
		initial: []*Object{uobj("x", "u1", 1), uobj("y", "u2", 2)},
		changes: func(t *testing.T, p *processor) {
			update(t, p, uobj("x", "u1", 11))
			update(t, p, uobj("y", "u2", 12))
			update(t, p, uobj("x", "u1", 13))
		},
		want: []string{"MODIFIED a/y(u2)@12", "MODIFIED a/x(u1)@13"},
	}, {
		// The old object's delete keeps its place: before changes to
		// other objects that came after it, as does the new object's add.
		name:    "re-created around another object's change",
		initial: []*Object{uobj("x", "u1", 1), uobj("y", "u2", 2)},
		changes: func(t *testing.T, p *processor) {
			del(t, p, uobj("x", "u1", 11))
			update(t, p, uobj("y", "u2", 12))
			add(t, p, uobj("x", "u3", 13))
		},
		want: []string{"DELETED a/x(u1)@11", "MODIFIED a/y(u2)@12", "ADDED a/x(u3)@13"},
	}, {
		name:     "leaves the selector",
		initial:  []*Object{uobj("x", "u1", 1, "app", "web")},
		selector: "app=web",
		changes: func(t *testing.T, p *processor) {
			update(t, p, uobj("x", "u1", 11, "app", "web"))
			update(t, p, uobj("x", "u1", 12, "app", "db"))
		},
		want: []string{"DELETED a/x(u1)@12"},
	}, {
		name:     "leaves the selector and comes back",
		initial:  []*Object{uobj("x", "u1", 1, "app", "web")},
		selector: "app=web",
		changes: func(t *testing.T, p *processor) {
			update(t, p, uobj("x", "u1", 11, "app", "db"))
			update(t, p, uobj("x", "u1", 12, "app", "web"))
			update(t, p, uobj("x", "u1", 13, "app", "web"))
		},
		want: []string{"DELETED a/x(u1)@11", "ADDED a/x(u1)@13"},
	}, {
		name:     "enters the selector and leaves: never known",
		initial:  []*Object{uobj("x", "u1", 1, "app", "db")},
		selector: "app=web",
		changes: func(t *testing.T, p *processor) {
			update(t, p, uobj("x", "u1", 11, "app", "web"))
			update(t, p, uobj("x", "u1", 12, "app", "db"))
		},
		want: []string{},
	}, {
		name:     "enters the selector and is modified",
		initial:  []*Object{uobj("x", "u1", 1, "app", "db")},
		selector: "app=web",
		changes: func(t *testing.T, p *processor) {
			update(t, p, uobj("x", "u1", 11, "app", "web"))
			update(t, p, uobj("x", "u1", 12, "app", "web"))
		},
		want: []string{"ADDED a/x(u1)@12"},
	}, {
		name:     "leaves the selector and is re-created inside it",
		initial:  []*Object{uobj("x", "u1", 1, "app", "web")},
		selector: "app=web",
		changes: func(t *testing.T, p *processor) {
			update(t, p, uobj("x", "u1", 11, "app", "db"))
			del(t, p, uobj("x", "u1", 12, "app", "db")) // not selected: not offered
			add(t, p, uobj("x", "u2", 13, "app", "web"))
		},
		want: []string{"DELETED a/x(u1)@11", "ADDED a/x(u2)@13"},
	}, {
		// A relist finds the object gone: a tombstone with its last
		// known version.
		name:    "tombstone after a change",
		initial: []*Object{uobj("x", "u1", 1), uobj("y", "u2", 2)},
		changes: func(t *testing.T, p *processor) {
			update(t, p, uobj("x", "u1", 11))
			relist(t, p, 20, uobj("y", "u2", 2))
		},
		want: []string{"DELETED a/x(u1)@11"},
	}, {
		// A relist finds another object under the name: the tombstone
		// of the old one, then the new one.
		name:    "tombstone of a re-created object",
		initial: []*Object{uobj("x", "u1", 1)},
		changes: func(t *testing.T, p *processor) {
			update(t, p, uobj("x", "u1", 11))
			relist(t, p, 20, uobj("x", "u2", 15))
		},
		want: []string{"DELETED a/x(u1)@11", "ADDED a/x(u2)@15"},
	}, {
		name: "created, then gone at a relist: never known",
		changes: func(t *testing.T, p *processor) {
			add(t, p, uobj("z", "u3", 11))
			relist(t, p, 20)
		},
		want: []string{},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := syncedProc(t, tc.initial...)
			f, err := ParseFilter(&ResourceInfo{GVR: podsGVR}, "", tc.selector, "")
			if err != nil {
				t.Fatal(err)
			}
			l, _ := mustListener(t, p, ListenerOptions{Filter: f, Overflow: OverflowCollapse})
			tc.changes(t, p)
			l.mu.Lock()
			l.collapseLocked()
			var bytes int64
			for range l.ring.Len() {
				n, _ := l.ring.ReadOne()
				bytes += int64(len(n.Object.Raw))
				l.ring.WriteOne(n) // back at the end: the order is kept
			}
			if bytes != l.bytes {
				t.Errorf("collapsed backlog holds %d bytes, counted %d", bytes, l.bytes)
			}
			l.mu.Unlock()
			if diff := cmp.Diff(tc.want, seenUID(l.Pop(nil))); diff != "" {
				t.Fatalf("collapsed backlog (-want +got):\n%s", diff)
			}
		})
	}
}

// TestListenerReset: a consumer that discarded what it popped asks for a
// reset; the backlog goes, and it gets RESET, the current state and the
// end marker, then live changes again.
func TestListenerReset(t *testing.T) {
	p, _ := syncedProc(t, uobj("x", "u1", 1), uobj("y", "u2", 2))
	l, wake := mustListener(t, p, ListenerOptions{Overflow: OverflowCollapse})
	update(t, p, uobj("x", "u1", 11))
	del(t, p, uobj("y", "u2", 12))
	<-wake
	l.Reset()
	select {
	case <-wake:
	default:
		t.Fatal("Reset did not wake the consumer")
	}
	if s := l.Stats(); s.Resets != 1 || s.Buffered != 0 || s.Bytes != 0 {
		t.Fatalf("stats after Reset: %+v", s)
	}
	if diff := cmp.Diff([]string{"RESET", "ADDED a/x@11", "END@12"}, seen(l.Pop(nil))); diff != "" {
		t.Fatalf("after Reset (-want +got):\n%s", diff)
	}
	update(t, p, uobj("x", "u1", 13))
	if diff := cmp.Diff([]string{"MODIFIED a/x@13"}, seen(l.Pop(nil))); diff != "" {
		t.Fatalf("after the snapshot (-want +got):\n%s", diff)
	}

	l.Stop()
	l.Reset()
	if got := seen(l.Pop(nil)); len(got) != 0 || l.Stats().Resets != 1 {
		t.Fatalf("a stopped listener was reset: %v, %+v", got, l.Stats())
	}
}
