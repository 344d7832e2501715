package ws

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kubegate/internal/apistatus"
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
					frames = append(frames, appendObjectEvent(nil, quoteID("s"), &ev))
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
	pad := n - len(appendObjectEvent(nil, qid, &ev))
	if pad < 0 {
		t.Fatalf("no event frame is as small as %d bytes", n)
	}
	ev.Object.Raw = []byte(`{"x":"` + strings.Repeat("x", pad) + `"}`)
	if got := len(appendObjectEvent(nil, qid, &ev)); got != n {
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

// TestCoalescing: an idle socket sends at once; a socket that has just
// written gathers what arrives within CoalesceDelay into one message,
// sent when the delay since its last write has passed; and the writer
// exits once a delay passes with nothing to send.
func TestCoalescing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ps := startPipeServer(t, nil) // the default delay
		d := defaultCoalesceDelay
		c, sock := ps.dial(t)
		fl := sock.subscribeFake("s")
		ev := func(rv uint64) informer.Notification { return smallEvent(rv) }
		start := time.Now()

		fl.push(ev(1))
		synctest.Wait()
		expectMessages(t, c, message{start, frameBytes(ev(1))})
		if w := sock.writer.Load(); w != writerWaiting {
			t.Fatalf("writer state %d after a write, want waiting (%d)", w, writerWaiting)
		}

		// Within the delay: held back, then sent together when it ends.
		time.Sleep(d / 4)
		fl.push(ev(2))
		time.Sleep(d / 2)
		fl.push(ev(3))
		synctest.Wait()
		expectMessages(t, c, message{start, frameBytes(ev(1))})
		time.Sleep(d / 4) // the delay since the first write has passed
		synctest.Wait()
		expectMessages(t, c,
			message{start, frameBytes(ev(1))},
			message{start.Add(d), messageOf([][]byte{frameBytes(ev(2)), frameBytes(ev(3))})})

		// A steady trickle keeps the one writer: one message per delay.
		for i := range 6 {
			time.Sleep(d / 2)
			fl.push(ev(uint64(4 + i)))
			synctest.Wait()
			if sock.writer.Load() == writerIdle {
				t.Fatalf("writer exited while events kept arriving within the delay")
			}
		}
		synctest.Wait()
		got := c.received()
		if len(got) != 5 {
			t.Fatalf("%d messages after six events at half the delay, want 5 (one per delay)", len(got))
		}
		for i, m := range got[2:] {
			if want := start.Add(time.Duration(i+2) * d); !m.at.Equal(want) {
				t.Errorf("message %d sent at %v, want %v", i+2, m.at.Sub(start), want.Sub(start))
			}
		}

		// Nothing for a whole delay: the writer exits, and the next event
		// goes out at once.
		time.Sleep(2 * d)
		synctest.Wait()
		if w := sock.writer.Load(); w != writerIdle {
			t.Fatalf("writer state %d after an idle delay, want idle", w)
		}
		n := len(c.received())
		at := time.Now()
		fl.push(ev(20))
		synctest.Wait()
		got = c.received()
		if len(got) != n+1 || !got[n].at.Equal(at) || !bytes.Equal(got[n].data, frameBytes(ev(20))) {
			t.Fatalf("an event for an idle socket was not sent at once: %d messages, want %d", len(got), n+1)
		}
	})
}

// TestCoalescingOff: with CoalesceDelay zero or negative every flush is
// at once and the writer exits after it.
func TestCoalescingOff(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Millisecond} {
		t.Run(fmt.Sprint("delay=", d), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ps := startPipeServer(t, func(o *Options) { o.CoalesceDelay = &d })
				c, sock := ps.dial(t)
				fl := sock.subscribeFake("s")
				var want []message
				for rv := range uint64(3) {
					fl.push(smallEvent(rv + 1))
					want = append(want, message{time.Now(), frameBytes(smallEvent(rv + 1))})
					synctest.Wait()
					if w := sock.writer.Load(); w != writerIdle {
						t.Fatalf("writer state %d after a flush, want idle", w)
					}
					time.Sleep(time.Microsecond)
				}
				expectMessages(t, c, want...)
			})
		})
	}
}

// TestCoalescingRunsOnTheClock: the delay is the socket's clock's, and
// the wait gives way to shutdown. A ping that falls due during the wait
// goes out at once if nothing is to be written, else after the flush.
func TestCoalescingRunsOnTheClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := newFakeClock()
		delay := time.Hour // longer than the ping interval
		ps := startPipeServer(t, func(o *Options) {
			o.clock = clk
			o.CoalesceDelay = &delay
			o.PingInterval = time.Minute
		})
		c, sock := ps.dial(t)
		fl := sock.subscribeFake("s")
		fl.push(smallEvent(1))
		synctest.Wait()
		first := message{time.Now(), frameBytes(smallEvent(1))}
		expectMessages(t, c, first)

		clk.Step(time.Minute) // a ping while the writer waits with nothing to send
		synctest.Wait()
		if n := c.pings.Load(); n != 1 {
			t.Fatalf("%d pings while the writer waits, want 1", n)
		}

		fl.push(smallEvent(2))
		time.Sleep(2 * delay) // the bubble's time, not the socket's clock
		synctest.Wait()
		expectMessages(t, c, first)

		clk.Step(time.Minute) // the next ping, with a flush to come
		synctest.Wait()
		if n := c.pings.Load(); n != 1 {
			t.Fatalf("%d pings, want the second to wait for the flush", n)
		}

		clk.Step(delay - 2*time.Minute) // the delay since the first write
		synctest.Wait()
		expectMessages(t, c, first, message{time.Now(), frameBytes(smallEvent(2))})
		if n := c.pings.Load(); n != 2 {
			t.Fatalf("%d pings after the flush, want 2", n)
		}

		// Shutdown ends the wait at once, with 1001.
		fl.push(smallEvent(3))
		synctest.Wait()
		ps.stop()
		if code := c.closeStatus(); code != websocket.StatusGoingAway {
			t.Fatalf("close %d during the wait, want 1001", code)
		}
	})
}

func smallEvent(rv uint64) informer.Notification {
	return informer.Notification{Type: informer.Modified, RV: rv,
		Object: &informer.Object{Raw: []byte(`{"metadata":{"name":"o` + strconv.FormatUint(rv, 10) + `"}}`)}}
}

func frameBytes(n informer.Notification) []byte { return appendObjectEvent(nil, quoteID("s"), &n) }

// expectMessages checks every message the client has read: its bytes and
// when it arrived.
func expectMessages(t *testing.T, c *pipeClient, want ...message) {
	t.Helper()
	got := c.received()
	for i := range max(len(got), len(want)) {
		switch {
		case i >= len(got):
			t.Errorf("message %d missing: %s", i, want[i].data)
		case i >= len(want):
			t.Errorf("unexpected message %d: %s", i, got[i].data)
		case !bytes.Equal(got[i].data, want[i].data):
			t.Errorf("message %d: %s, want %s", i, got[i].data, want[i].data)
		case !got[i].at.Equal(want[i].at):
			t.Errorf("message %d sent at %v, want %v", i, got[i].at, want[i].at)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// TestFlushTakesABacklogInChunks: a backlog larger than one flush takes
// (a large snapshot) is popped a chunk at a time and all of it is sent,
// in order, without another wake.
func TestFlushTakesABacklogInChunks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		off := time.Duration(0)
		ps := startPipeServer(t, func(o *Options) { o.CoalesceDelay = &off })
		c, sock := ps.dial(t)
		fl := sock.subscribeFake("s")
		const n = 3*popChunk + 10
		var ns []informer.Notification
		for rv := range uint64(n) {
			ns = append(ns, smallEvent(rv+1))
		}
		fl.push(ns...)
		synctest.Wait()
		var got []string
		for _, m := range c.received() {
			var f struct {
				Type   string
				Events []struct{ RV string }
				RV     string
			}
			if err := json.Unmarshal(m.data, &f); err != nil {
				t.Fatal(err)
			}
			if f.Type != "batch" {
				got = append(got, f.RV)
				continue
			}
			for _, e := range f.Events {
				got = append(got, e.RV)
			}
		}
		if len(got) != n {
			t.Fatalf("%d events sent, want %d", len(got), n)
		}
		for i, rv := range got {
			if rv != strconv.Itoa(i+1) {
				t.Fatalf("event %d has rv %s, want %d", i, rv, i+1)
			}
		}
		if fl.pendingLen() != 0 {
			t.Fatalf("%d left in the listener", fl.pendingLen())
		}
	})
}

// TestEndedListenerEndsItsSubscription: a listener whose resource went
// away hands out Ended after its last events. The writer sends those
// events, then an error frame marked ended with the listener's Status,
// and forgets the subscription; the socket's other subscriptions go on.
func TestEndedListenerEndsItsSubscription(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		off := time.Duration(0)
		ps := startPipeServer(t, func(o *Options) { o.CoalesceDelay = &off })
		c, sock := ps.dial(t)
		fl := sock.subscribeFake("s")
		other := sock.subscribeFake("other")
		gvr := schema.GroupVersionResource{Group: "test.kubegate.io", Version: "v1", Resource: "gizmos"}
		fl.end(&informer.ResourceGoneError{GVR: gvr}, smallEvent(1))
		synctest.Wait()

		st := apistatus.New(404, metav1.StatusReasonNotFound, "gizmos.test.kubegate.io is no longer served by the apiserver (test.kubegate.io/v1)")
		st.Details = &metav1.StatusDetails{Group: "test.kubegate.io", Kind: "gizmos"}
		expectMessages(t, c, message{at: time.Now(), data: messageOf([][]byte{frameBytes(smallEvent(1)), encodeError("s", "", true, st)})})
		sock.mu.Lock()
		_, active := sock.subs["s"]
		sock.mu.Unlock()
		if active || !fl.stopped {
			t.Fatalf("after Ended: subscription active %v, listener stopped %v; want gone and stopped", active, fl.stopped)
		}
		if n := counterValue(ps.metrics.subscriptions); n != 1 {
			t.Fatalf("kubegate_ws_subscriptions = %v, want 1", n)
		}
		other.push(smallEvent(2))
		synctest.Wait()
		want := appendObjectEvent(nil, quoteID("other"), ptr(smallEvent(2)))
		if got := c.received(); len(got) != 2 || !bytes.Equal(got[1].data, want) {
			t.Fatalf("the other subscription after the end: %d messages, last %s; want %s", len(got), got[len(got)-1].data, want)
		}
	})
}
