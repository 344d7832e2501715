package sink

import "kubegate/internal/informer"

// Chunk is the most notifications the sinks take from one listener at a
// time, so that a snapshot of any size passes through a bounded buffer
// rather than being popped whole first.
const Chunk = 256

// Source is a listener as a sink holds it: *informer.Listener, or a
// sink's own record of one (a subscription, a webhook's input) that pops
// it. The encoder is handed the Source each notification came from.
type Source interface {
	PopAtMost(buf []informer.Notification, limit int) []informer.Notification
}

// Encoder is a sink's side of Pop: it turns notifications into its wire
// form. Pop calls it from the caller's goroutine only.
type Encoder[S Source] interface {
	// Encode takes one notification popped from src. The notification
	// and its object are the listener's: Encode must not keep n (it may
	// keep n.Object, which is immutable). An error stops Pop at once;
	// what the chunk held after n is dropped.
	Encode(src S, n *informer.Notification) error
	// Full reports whether the sink has taken enough for now. Pop asks
	// it before taking another chunk from a listener it has already
	// popped this time; while it is true, the rest stays in the
	// listener.
	Full() bool
}

// Result is what one Pop took.
type Result struct {
	// Popped counts the notifications taken, markers included.
	Popped int
	// Resets counts the Reset notifications among them: a listener
	// overflowed (or was reset) since it was last popped.
	Resets int
	// More: a listener may hold more than Pop took (its last chunk was
	// full, and MaxChunks or Full stopped Pop). A listener does not wake
	// its sink again for what it still holds, so the sink must Pop again.
	More bool
}

// Popper pops listeners into an encoder, a chunk at a time. Its buffer
// is reused across calls and holds no object once Pop returns. The zero
// value pops each listener whole, until it is empty. A Popper is not
// safe for concurrent use.
type Popper[S Source] struct {
	// Chunk is the most notifications taken from a listener at a time.
	// Default 0: all it holds at once.
	Chunk int
	// MaxChunks bounds the chunks taken from one listener in one Pop.
	// Default 0: until the listener is empty or the encoder is Full.
	MaxChunks int

	buf []informer.Notification
}

// Pop takes what each of srcs holds, in order, and hands it to enc: a
// listener at a time, each a chunk at a time, every notification in the
// order its listener gave it. It moves on to the next listener when one
// is empty (it returned less than a full chunk), has given MaxChunks
// chunks, or enc is Full; every listener is popped at least once. It
// stops at the first error enc returns.
func (p *Popper[S]) Pop(srcs []S, enc Encoder[S]) (Result, error) {
	var r Result
	for _, src := range srcs {
		for chunks := 1; ; chunks++ {
			p.buf = src.PopAtMost(p.buf[:0], p.Chunk)
			err := p.encode(src, enc, &r)
			clear(p.buf) // drop object references until the next Pop
			if err != nil {
				return r, err
			}
			if p.Chunk <= 0 || len(p.buf) < p.Chunk {
				break // the listener is empty
			}
			if chunks == p.MaxChunks || enc.Full() {
				r.More = true
				break
			}
		}
	}
	return r, nil
}

func (p *Popper[S]) encode(src S, enc Encoder[S], r *Result) error {
	r.Popped += len(p.buf)
	for i := range p.buf {
		n := &p.buf[i]
		if n.Type == informer.Reset {
			r.Resets++
		}
		if err := enc.Encode(src, n); err != nil {
			return err
		}
	}
	return nil
}
