package sink_test

import (
	"fmt"

	"kubegate/internal/informer"
	"kubegate/internal/sink"
)

// queue stands in for an *informer.Listener.
type queue struct {
	name  string
	notes []informer.Notification
}

func (q *queue) PopAtMost(buf []informer.Notification, limit int) []informer.Notification {
	n := min(len(q.notes), limit)
	buf = append(buf, q.notes[:n]...)
	q.notes = q.notes[n:]
	return buf
}

// printer is a sink's encoder: it writes each notification out.
type printer struct{}

func (printer) Encode(q *queue, n *informer.Notification) error {
	fmt.Println(q.name, n.Type, n.RV)
	return nil
}

func (printer) Full() bool { return false }

// A sink woken by its listeners pops one chunk of each per step, as the
// WebSocket writer does, and steps again while More is reported.
func ExamplePopper() {
	a := &queue{name: "a", notes: []informer.Notification{{Type: informer.Added, RV: 1}, {Type: informer.Added, RV: 2}, {Type: informer.EndOfSnapshot, RV: 2}}}
	b := &queue{name: "b", notes: []informer.Notification{{Type: informer.Reset}}}
	p := sink.Popper[*queue]{Chunk: 2, MaxChunks: 1}
	for {
		r, err := p.Pop([]*queue{a, b}, printer{})
		if err != nil {
			panic(err)
		}
		fmt.Printf("popped %d, resets %d, more %v\n", r.Popped, r.Resets, r.More)
		if !r.More {
			break
		}
	}
	// Output:
	// a ADDED 1
	// a ADDED 2
	// b RESET 0
	// popped 3, resets 1, more true
	// a END_OF_SNAPSHOT 2
	// popped 1, resets 0, more false
}
