package ws

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"

	"kubegate/internal/informer"
)

// TestBatchesStayWithinMaxBatchBytes packs frames of mixed sizes, all
// ready in one flush, and checks every message byte for byte: frames go
// in order into batches of at most MaxBatchBytes, a frame that would take
// the open batch over the bound starts the next message, and one that
// alone reaches the bound is sent on its own.
func TestBatchesStayWithinMaxBatchBytes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		max    int   // MaxBatchBytes; 0 for the default
		ctl    []int // sizes of queued control frames, sent first
		events []int // sizes of event frames
		want   []int // frames per message
	}{
		{name: "small frames fill each batch", max: 1000,
			events: []int{200, 200, 200, 200, 200, 200, 200, 200, 200, 200}, want: []int{4, 4, 2}},
		{name: "a large frame does not join an open batch", max: 1000,
			events: []int{200, 200, 900, 200}, want: []int{2, 1, 1}},
		{name: "a frame of the bound's size goes alone", max: 1000,
			events: []int{100, 1000, 100, 100}, want: []int{1, 1, 2}},
		{name: "frames over the bound go alone", max: 1000,
			events: []int{100, 1500, 1500, 100}, want: []int{1, 1, 1, 1}},
		{name: "control frames are packed by the same rule", max: 1000,
			ctl: []int{600, 600}, events: []int{300}, want: []int{1, 2}},
		{name: "a 300 KiB object among smaller ones",
			events: []int{20 << 10, 40 << 10, 300 << 10, 60 << 10, 10 << 10}, want: []int{2, 1, 2}},
		{name: "a 300 KiB object after a nearly full batch",
			events: []int{50 << 10, 50 << 10, 50 << 10, 50 << 10, 50 << 10, 300 << 10}, want: []int{5, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ps := startPipeServer(t, func(o *Options) { o.MaxBatchBytes = tc.max })
				max := ps.opts.MaxBatchBytes
				c, sock := ps.dial(t)
				fl := sock.subscribeFake("s")

				var frames [][]byte
				sock.mu.Lock()
				for i, n := range tc.ctl {
					f := controlFrameOfSize(n, i)
					frames = append(frames, f)
					sock.enqueueLocked(f)
				}
				for i, n := range tc.events {
					ev := eventOfSize(t, quoteID("s"), uint64(i+1), n)
					frames = append(frames, appendEvent(nil, quoteID("s"), &ev))
					fl.pending = append(fl.pending, ev)
				}
				sock.mu.Unlock()
				sock.signal() // one flush finds them all
				synctest.Wait()

				var want [][]byte
				next := frames
				for _, n := range tc.want {
					want = append(want, messageOf(next[:n]))
					next = next[n:]
				}
				got := c.received()
				for i, m := range got {
					count := 1
					if bytes.HasPrefix(m.data, []byte(batchPrefix)) {
						count = bytes.Count(m.data, []byte(`{"type":`)) - 1
						if len(m.data) > max {
							t.Errorf("message %d: a batch of %d frames and %d bytes, over MaxBatchBytes (%d)", i, count, len(m.data), max)
						}
					}
					if i < len(want) && !bytes.Equal(m.data, want[i]) {
						t.Errorf("message %d: %d frames in %d bytes, want %d frames in %d bytes",
							i, count, len(m.data), tc.want[i], len(want[i]))
					}
				}
				if len(got) != len(want) {
					t.Errorf("%d messages, want %d", len(got), len(want))
				}
			})
		})
	}
}

// eventOfSize returns a MODIFIED notification whose frame is n bytes.
func eventOfSize(t *testing.T, qid []byte, rv uint64, n int) informer.Notification {
	t.Helper()
	ev := informer.Notification{Type: informer.Modified, RV: rv, Object: &informer.Object{Raw: []byte(`{"x":""}`)}}
	pad := n - len(appendEvent(nil, qid, &ev))
	if pad < 0 {
		t.Fatalf("no event frame is as small as %d bytes", n)
	}
	ev.Object.Raw = []byte(`{"x":"` + strings.Repeat("x", pad) + `"}`)
	if got := len(appendEvent(nil, qid, &ev)); got != n {
		t.Fatalf("event frame of %d bytes, want %d", got, n)
	}
	return ev
}

// controlFrameOfSize returns a JSON control frame of n bytes.
func controlFrameOfSize(n, i int) []byte {
	f := fmt.Sprintf(`{"type":"error","id":"c%d","pad":""}`, i)
	return []byte(f[:len(f)-2] + strings.Repeat("p", n-len(f)) + `"}`)
}

// messageOf is the message that carries frames: the lone frame, or a
// batch of them.
func messageOf(frames [][]byte) []byte {
	if len(frames) == 1 {
		return frames[0]
	}
	return append(append([]byte(batchPrefix), bytes.Join(frames, []byte(","))...), ']', '}')
}
