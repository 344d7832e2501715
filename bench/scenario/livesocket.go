package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"kubegate/bench/workload"

	"github.com/coder/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// liveSocket is a victim's socket as a dashboard holds one: windows
// (sorted, filtered live pages) and object subscriptions on one /ws
// connection. Its receive goroutine applies every WINDOW frame to the
// window's copy (trackedWindow.apply, which notes when each row version
// arrived) and notes when each object event arrived; the phases read
// those under mu. It is the only writer of the fields under mu.
type liveSocket struct {
	id   identity
	c    *websocket.Conn
	done chan struct{}

	mu sync.Mutex // guards the fields below
	// windows and subs by subscription id.
	windows map[string]*trackedWindow
	subs    map[string]*objectSub
	// waiting are subscribe requests not yet answered: a window's by its
	// first WINDOW frame, an object subscription's by its ack; either by
	// an error frame.
	waiting map[string]chan error
	// failures are what went wrong once the socket was open: error frames
	// that ended a subscription or answered nothing asked, and why the
	// socket ended if it was not closed by close.
	failures []string
	closing  bool
}

// frameError is an error frame's refusal of a request.
type frameError struct {
	id     string
	status *metav1.Status // nil if the frame had none
	err    error
}

func (e *frameError) Error() string { return e.id + ": " + e.err.Error() }

// code is the refusal's status code, 0 without a Status.
func (e *frameError) code() int {
	if e.status == nil {
		return 0
	}
	return int(e.status.Code)
}

// statusJSON is the refusal's Status as JSON.
func (e *frameError) statusJSON() []byte {
	b, _ := json.Marshal(e.status)
	return b
}

// objectSub is an object subscription of a liveSocket.
type objectSub struct {
	namespace string
	// received maps each object version seen (MODIFIED, ADDED, DELETED)
	// to when its frame arrived.
	received map[uint64]time.Time
	resets   int
}

// openLiveSocket dials /ws as id.
func openLiveSocket(ctx context.Context, id identity, wsURL string) (*liveSocket, error) {
	c, _, err := id.dialWS(ctx, wsURL)
	if err != nil {
		return nil, fmt.Errorf("%s: dial: %w", id.name, err)
	}
	s := &liveSocket{id: id, c: c, done: make(chan struct{}),
		windows: map[string]*trackedWindow{}, subs: map[string]*objectSub{}, waiting: map[string]chan error{}}
	go s.receive()
	return s, nil
}

func (s *liveSocket) receive() {
	defer close(s.done)
	for {
		_, msg, err := s.c.Read(context.Background())
		at := time.Now()
		if err != nil {
			s.mu.Lock()
			if !s.closing {
				s.failures = append(s.failures, fmt.Sprintf("socket ended: %v", err))
			}
			for id, ch := range s.waiting {
				ch <- fmt.Errorf("socket ended: %w", err)
				delete(s.waiting, id)
			}
			s.mu.Unlock()
			return
		}
		fs, err := parseFrames(msg)
		s.mu.Lock()
		if err != nil {
			s.failures = append(s.failures, err.Error())
		}
		for _, f := range fs {
			s.frameLocked(f, at)
		}
		s.mu.Unlock()
	}
}

// frameLocked handles one frame. Caller must hold mu.
func (s *liveSocket) frameLocked(f serverFrame, at time.Time) {
	answer := func(err error) bool {
		ch, ok := s.waiting[f.ID]
		if ok {
			ch <- err
			delete(s.waiting, f.ID)
		}
		return ok
	}
	switch f.Type {
	case "ack":
		if _, ok := s.subs[f.ID]; ok && f.Request == "subscribe" {
			answer(nil)
		}
	case "WINDOW":
		w, ok := s.windows[f.ID]
		if !ok {
			return
		}
		if err := w.apply(f.Ops, at); err != nil {
			s.failures = append(s.failures, fmt.Sprintf("window %s: %v", f.ID, err))
		}
		answer(nil)
	case "MODIFIED", "ADDED", "DELETED":
		o, ok := s.subs[f.ID]
		if !ok {
			return
		}
		if rv, err := strconv.ParseUint(f.RV, 10, 64); err == nil {
			if _, dup := o.received[rv]; !dup {
				o.received[rv] = at
			}
		}
	case "RESET":
		if o, ok := s.subs[f.ID]; ok {
			o.resets++
		}
	case "error":
		err := &frameError{id: f.ID, status: f.Status, err: f.err()}
		if f.Request == "subscribe" && answer(err) {
			delete(s.windows, f.ID)
			delete(s.subs, f.ID)
			return
		}
		if f.Request == "unsubscribe" {
			return
		}
		s.failures = append(s.failures, err.Error())
	}
}

// request sends a subscribe for id, registered with register under mu,
// and waits for its answer.
func (s *liveSocket) request(ctx context.Context, id string, frame any, register func()) error {
	ch := make(chan error, 1)
	s.mu.Lock()
	register()
	s.waiting[id] = ch
	s.mu.Unlock()
	b, _ := json.Marshal(frame)
	if err := s.c.Write(ctx, websocket.MessageText, b); err != nil {
		return fmt.Errorf("%s: subscribe %s: %w", s.id.name, id, err)
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%s: subscribe %s: %w", s.id.name, id, ctx.Err())
	}
}

// window opens the window w (its Type and Resource are filled in) and
// waits for its first WINDOW frame. Row versions above since count as
// updates.
func (s *liveSocket) window(ctx context.Context, w windowSubscribe, since uint64) error {
	w.Type, w.Resource = "subscribe", "pods"
	if w.Limit == 0 {
		w.Limit = windowLimit
	}
	tw := &trackedWindow{offset: w.Offset, received: map[uint64]time.Time{}}
	tw.since.Store(since)
	return s.request(ctx, w.ID, w, func() { s.windows[w.ID] = tw })
}

// objects subscribes id to the Pods of namespace, live changes only, and
// waits for the ack.
func (s *liveSocket) objects(ctx context.Context, id, namespace string) error {
	f := subscribeFrame{Type: "subscribe", ID: id, Resource: "pods", Namespace: namespace, SendInitialEvents: new(bool)}
	return s.request(ctx, id, f, func() {
		s.subs[id] = &objectSub{namespace: namespace, received: map[uint64]time.Time{}}
	})
}

// unsubscribe ends the window or subscription id; frames still on their
// way for it are ignored.
func (s *liveSocket) unsubscribe(ctx context.Context, id string) error {
	s.mu.Lock()
	delete(s.windows, id)
	delete(s.subs, id)
	s.mu.Unlock()
	b, _ := json.Marshal(map[string]string{"type": "unsubscribe", "id": id})
	return s.c.Write(ctx, websocket.MessageText, b)
}

// failureCount is how many failures the socket has seen.
func (s *liveSocket) failureCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.failures)
}

// failuresSince returns the failures after the first n.
func (s *liveSocket) failuresSince(n int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.failures[min(n, len(s.failures)):])
}

// ended reports whether the receiver has stopped.
func (s *liveSocket) ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// close closes the socket and waits for the receiver.
func (s *liveSocket) close() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.c.CloseNow()
	<-s.done
}

// podKeyString is how a window's row names a Pod.
func podKeyString(ns, name string) string { return ns + "/" + name }

// liveTargets is what a phase's writes should reach on a set of sockets:
// the Pods each window shows when the phase starts (a window's rows do not
// move: the updates change an annotation, not a sort key), and each
// object subscription's namespace.
type liveTargets struct {
	sockets []*liveSocket
	shown   []map[string]map[string]bool // [socket][window id] set of ns/name
}

// snapshotTargets reads the windows' rows of every socket.
func snapshotTargets(sockets []*liveSocket) liveTargets {
	t := liveTargets{sockets: sockets}
	for _, s := range sockets {
		m := map[string]map[string]bool{}
		s.mu.Lock()
		for id, w := range s.windows {
			set := map[string]bool{}
			for _, r := range w.rows {
				set[podKeyString(r.Namespace, r.Name)] = true
			}
			m[id] = set
		}
		s.mu.Unlock()
		t.shown = append(t.shown, m)
	}
	return t
}

// pods is every Pod some window shows, in a stable order.
func (t liveTargets) pods() []workload.PodKey {
	seen := map[string]bool{}
	var out []workload.PodKey
	for _, m := range t.shown {
		for _, id := range slices.Sorted(maps.Keys(m)) {
			for _, k := range slices.Sorted(maps.Keys(m[id])) {
				if !seen[k] {
					seen[k] = true
					ns, name, _ := strings.Cut(k, "/")
					out = append(out, workload.PodKey{Namespace: ns, Name: name})
				}
			}
		}
	}
	return out
}

// liveResult is what one phase's writes did on the sockets: the latency
// of each window update and object event (arrival - the write's
// acknowledgement), and how many were missed.
type liveResult struct {
	windowLat, eventLat       []time.Duration
	windowMissed, eventMissed int
	// expected counts the deliveries the writes should have made.
	expected int
}

// received counts the writes' deliveries that have arrived so far, and
// how many are expected.
func (t liveTargets) received(writes []workload.Write, keys []workload.PodKey) (got, want int) {
	r := t.result(writes, keys)
	return len(r.windowLat) + len(r.eventLat), r.expected
}

// result matches writes (their Pod an index into keys) with what arrived.
func (t liveTargets) result(writes []workload.Write, keys []workload.PodKey) liveResult {
	var r liveResult
	for i, s := range t.sockets {
		s.mu.Lock()
		for _, w := range writes {
			k := keys[w.Pod]
			ks := podKeyString(k.Namespace, k.Name)
			for id, set := range t.shown[i] {
				if !set[ks] {
					continue
				}
				r.expected++
				tw := s.windows[id]
				if tw == nil {
					r.windowMissed++
					continue
				}
				if at, ok := tw.received[w.RV]; ok {
					r.windowLat = append(r.windowLat, at.Sub(w.Ack))
				} else {
					r.windowMissed++
				}
			}
			for _, o := range s.subs {
				if o.namespace != "" && o.namespace != k.Namespace {
					continue
				}
				r.expected++
				if at, ok := o.received[w.RV]; ok {
					r.eventLat = append(r.eventLat, at.Sub(w.Ack))
				} else {
					r.eventMissed++
				}
			}
		}
		s.mu.Unlock()
	}
	return r
}

// resets counts the windows' reset operations and the subscriptions'
// RESET frames so far.
func (t liveTargets) resets() int {
	n := 0
	for _, s := range t.sockets {
		s.mu.Lock()
		for _, w := range s.windows {
			n += w.resets
		}
		for _, o := range s.subs {
			n += o.resets
		}
		s.mu.Unlock()
	}
	return n
}

// runLivePhase writes plan's updates round-robin over keys and waits,
// up to drain after the last write, until every window showing an
// updated Pod and every subscription of its namespace has the update.
func runLivePhase(ctx context.Context, env *Env, sockets []*liveSocket, keys []workload.PodKey, plan workload.UpdatePlan, drain time.Duration) (liveResult, error) {
	t := snapshotTargets(sockets)
	writes, _, err := workload.Update(ctx, env.Client(), keys, plan)
	if err != nil {
		return liveResult{}, err
	}
	waitForEvery(ctx, drain, 100*time.Millisecond, func() bool {
		got, want := t.received(writes, keys)
		return got >= want || allEnded(sockets)
	})
	return t.result(writes, keys), ctx.Err()
}

func allEnded(sockets []*liveSocket) bool {
	for _, s := range sockets {
		if !s.ended() {
			return false
		}
	}
	return true
}

// latencyFigures are p50 and p99 of ds in ms, as Figures named
// "<what> p50<suffix>" and "<what> p99<suffix>"; none without samples.
func latencyFigures(scenario, arm, what, suffix string, ds []time.Duration) []Figure {
	if len(ds) == 0 {
		return nil
	}
	return []Figure{
		{scenario, arm, what + " p50" + suffix, "ms", Milliseconds(Percentile(ds, 0.5))},
		{scenario, arm, what + " p99" + suffix, "ms", Milliseconds(Percentile(ds, 0.99))},
	}
}
