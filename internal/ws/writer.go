// writer.go holds the socket's writer: signal, the writer goroutine and
// the packing of frames into messages.

package ws

import (
	"errors"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/utils/clock"

	"kubegate/internal/apistatus"
	"kubegate/internal/informer"
	"kubegate/internal/livequery"
	"kubegate/internal/sink"
)

// Writer states (socket.writer). signal moves idle to running (starting
// a writer), and running or waiting to rerun; the writer sets running
// before each flush, and after it moves running to idle (exiting) or to
// waiting (for CoalesceDelay), and waiting to idle when the delay has
// passed with nothing signalled. So a signal is never lost: either the
// writer flushes again, or a new one starts.
const (
	writerIdle    int32 = iota // no writer goroutine
	writerRunning              // a writer is flushing
	writerRerun                // signalled since the writer started its flush or its wait
	writerWaiting              // a writer waits out CoalesceDelay after writing, nothing signalled yet
)

// scratch is the writer's working memory for one flush. It is pooled
// across sockets, so an idle socket holds none of it (a snapshot can grow
// it to hundreds of KiB).
type scratch struct {
	batch   batch
	pop     sink.Popper[*subscription] // holds no object between flushes
	active  []*subscription
	windows []*subscription // active window subscriptions
	ops     []livequery.Op  // a window's operations
	frame   []byte          // a WINDOW frame
}

var scratchPool = sync.Pool{New: func() any {
	return &scratch{pop: sink.Popper[*subscription]{Chunk: popChunk, MaxChunks: 1}}
}}

// A larger batch buffer (a huge object passed) is left to the garbage
// collector rather than pooled.
const maxPooledBatch = 1 << 20

// release drops the references a flush left and returns sc to the pool.
func (sc *scratch) release() {
	clear(sc.active)
	sc.active = sc.active[:0]
	clear(sc.windows)
	sc.windows = sc.windows[:0]
	if cap(sc.frame) > maxPooledBatch {
		sc.frame = nil
	}
	if cap(sc.batch.buf) > maxPooledBatch {
		sc.batch.buf = nil
	}
	scratchPool.Put(sc)
}

// signal makes sure the writer flushes after this call: it starts one,
// or tells the running or waiting one to flush again. It never blocks
// and may be called from any number of goroutines at once: listeners
// call it (OnWake) as changes are handed to them. Callers must not hold
// s.mu.
func (s *socket) signal() {
	for {
		switch w := s.writer.Load(); w {
		case writerIdle:
			if s.writer.CompareAndSwap(writerIdle, writerRunning) {
				// If the socket has ended, no writer starts and the state
				// stays running: nothing is written any more.
				s.startWorker(s.write)
				return
			}
		case writerRunning, writerWaiting:
			if s.writer.CompareAndSwap(w, writerRerun) {
				return
			}
		default:
			return
		}
	}
}

// flushing reports whether the writer may be writing: it is flushing, or
// has been signalled and will flush as soon as its wait ends.
func (s *socket) flushing() bool {
	w := s.writer.Load()
	return w == writerRunning || w == writerRerun
}

// startDuePing starts the ping that waited for a flush (see keepalive).
func (s *socket) startDuePing() {
	if s.pingDue.CompareAndSwap(true, false) {
		s.startWorker(s.keepalive)
	}
}

// enqueueLocked queues a control frame. Caller must hold s.mu.
func (s *socket) enqueueLocked(frame []byte) {
	s.ctl = append(s.ctl, frame)
}

func (s *socket) enqueue(frame []byte) {
	s.mu.Lock()
	s.enqueueLocked(frame)
	s.mu.Unlock()
	s.signal()
}

// write is the writer goroutine. Its first flush is at once. While the
// socket is busy, that is after every flush that wrote a message, it
// waits CoalesceDelay and then flushes what arrived meanwhile in one go:
// under load the socket writes once per delay instead of once per event,
// and a burst costs one goroutine start instead of one per event.
// It exits after a flush that wrote nothing, or a wait in which nothing
// arrived. When it ends the socket (shutdown, a failed write, a slow
// consumer) it leaves the state at running, so no writer starts again.
func (s *socket) write() {
	var wait clock.Timer // the coalescing delay, made at the first wait
	defer func() {
		if wait != nil {
			wait.Stop()
		}
	}()
	for {
		s.writer.Store(writerRunning) // what was signalled so far, this flush takes
		select {
		case <-s.ctx.Done():
			return
		case <-s.srv.shutdown:
			s.goAway()
			return
		default:
		}
		if reason := s.evictReason.Load(); reason != nil {
			s.closeReason.CompareAndSwap(nil, ptr(closeEvicted))
			s.close(websocket.StatusTryAgainLater, *reason)
			return
		}
		s.wrote, s.more = false, false
		if err := s.flush(); err != nil {
			s.cancel()
			_ = s.conn.CloseNow() // ends the reader, which frees the socket
			return
		}
		if s.more {
			continue // a listener holds more than one flush takes
		}
		if !s.wrote || s.opts.coalesce <= 0 {
			if s.writer.CompareAndSwap(writerRunning, writerIdle) {
				s.startDuePing()
				return
			}
			continue // signalled during the flush
		}
		// Busy: what arrives from now on waits for the delay. If a
		// signal came during the flush, the state stays rerun and the
		// wait ends in a flush.
		if s.writer.CompareAndSwap(writerRunning, writerWaiting) {
			s.startDuePing() // nothing is written during the wait
		}
		if wait == nil {
			wait = s.opts.clock.NewTimer(s.opts.coalesce)
		} else {
			wait.Reset(s.opts.coalesce)
		}
		select {
		case <-wait.C():
		case <-s.ctx.Done():
			s.writer.Store(writerRunning)
			return
		case <-s.srv.shutdown:
			s.writer.Store(writerRunning)
			s.goAway()
			return
		}
		if s.writer.CompareAndSwap(writerWaiting, writerIdle) {
			return // nothing arrived
		}
	}
}

func (s *socket) goAway() {
	s.closeReason.CompareAndSwap(nil, ptr(closeShutdown))
	s.close(websocket.StatusGoingAway, "server shutting down")
}

// flush writes the queued control frames, then everything each
// subscription's listener holds, packed in order into messages: a batch
// takes frames while its message stays within MaxBatchBytes, and a frame
// that would take it over starts the next message. So a batch never
// exceeds MaxBatchBytes, and a frame of MaxBatchBytes or more is sent on
// its own.
func (s *socket) flush() error {
	s.sc = scratchPool.Get().(*scratch)
	defer func() {
		s.sc.release()
		s.sc = nil
	}()
	s.mu.Lock()
	ctl := s.ctl
	s.ctl = nil
	s.sc.active = s.sc.active[:0]
	for _, sub := range s.subs {
		switch {
		case sub.l != nil:
			s.sc.active = append(s.sc.active, sub)
		case sub.win != nil:
			s.sc.windows = append(s.sc.windows, sub)
		}
	}
	s.mu.Unlock()

	s.sc.batch.reset()
	for _, f := range ctl {
		if err := s.add(f); err != nil {
			return err
		}
	}
	popped, err := s.sc.pop.Pop(s.sc.active, s)
	s.more = popped.More
	if popped.Resets > 0 {
		s.srv.metrics.resets.WithLabelValues(resetOverflow).Add(float64(popped.Resets))
	}
	if err != nil {
		return err
	}
	for _, sub := range s.sc.windows {
		if err := s.flushWindow(sub); err != nil {
			return err
		}
	}
	if err := s.writeBatch(); err != nil {
		return err
	}
	if popped.Resets == 0 {
		return nil
	}
	// A flush may pop a RESET from several listeners, and a listener
	// that fell behind again while the writer wrote pops another at the
	// next flush: each counts. Reading a snapshot to its end between
	// RESETs does not clear the count, since each RESET costs another
	// snapshot; only time does.
	now := s.opts.clock.Now()
	if !s.lastReset.IsZero() && now.Sub(s.lastReset) > s.opts.SlowResetWindow {
		s.resetStreak = 0
	}
	s.lastReset = now
	if s.resetStreak += popped.Resets; s.resetStreak >= s.opts.MaxSlowResets {
		s.closeReason.CompareAndSwap(nil, ptr(closeSlowConsumer))
		s.log(zapcore.InfoLevel, "closing slow consumer", zap.Int("resets", s.resetStreak))
		s.close(4001, "slow consumer: fell behind "+strconv.Itoa(s.resetStreak)+" times in a row")
		return errors.New("slow consumer")
	}
	return nil
}

// popChunk bounds the notifications a flush takes from one listener: a
// flush takes one chunk of each (sink.Popper's MaxChunks), so a snapshot
// of any size passes through the writer's batch a chunk at a time. A
// flush that leaves more behind is followed by another at once, which
// takes the control frames queued meanwhile first.
const popChunk = sink.Chunk

// Encode appends the frame of a notification popped from sub, writing
// the batch first if the frame does not fit (the writer's sink.Encoder;
// called during a flush only).
func (s *socket) Encode(sub *subscription, n *informer.Notification) error {
	if n.Type == informer.Ended {
		return s.resourceGone(sub, sub.l.Err())
	}
	field, body := eventBody(n, sub.rows)
	if err := s.makeRoom(eventLen(sub.qid, n, field, body)); err != nil {
		return err
	}
	s.sc.batch.begin()
	s.sc.batch.buf = appendEvent(s.sc.batch.buf, sub.qid, n, field, body)
	return nil
}

// resourceGone ends sub, whose listener or window ended because of
// cause (its resource is no longer served: informer.Ended, its last
// notification, or its live table ended), as end ends a revoked one,
// but from within the flush: its error frame, marked ended, follows the
// frames already in the batch. A subscription unsubscribed or replaced
// meanwhile gets nothing more.
func (s *socket) resourceGone(sub *subscription, cause error) error {
	s.mu.Lock()
	if s.subs[sub.id] != sub {
		s.mu.Unlock()
		return nil
	}
	delete(s.subs, sub.id)
	s.mu.Unlock()
	st := apistatus.FromError(cause)
	s.countEnded(sub, st)
	s.log(zapcore.InfoLevel, "subscription ended", zap.String("id", sub.id), zap.Int32("code", st.Code), zap.String("message", st.Message))
	return s.add(encodeError(sub.id, "", true, st))
}

// Full is false: the batch is written whenever it fills, and a flush
// takes one chunk per listener (sink.Encoder).
func (s *socket) Full() bool { return false }

// add adds a complete frame to the batch.
func (s *socket) add(frame []byte) error {
	if err := s.makeRoom(len(frame)); err != nil {
		return err
	}
	s.sc.batch.add(frame)
	return nil
}

// makeRoom writes the batch if a frame of n bytes would take it over
// MaxBatchBytes, so that the frame starts the next message. The check
// comes before the frame is appended: checked after, a large frame would
// join (and swell) the batch it does not fit in.
func (s *socket) makeRoom(n int) error {
	if s.sc.batch.fits(n, s.opts.MaxBatchBytes) {
		return nil
	}
	return s.writeBatch()
}

func (s *socket) writeBatch() error {
	if s.sc.batch.count == 0 {
		return nil
	}
	msg := s.sc.batch.message()
	start := s.opts.clock.Now()
	// The deadline is the connection's rather than a context's:
	// websocket.Conn keeps the context of its last write, which would
	// keep a timer context alive per idle socket. Without a deadline in
	// the context the write is still interrupted by CloseNow, which
	// whoever ends the socket calls.
	_ = s.nc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
	err := s.nc.writeMessage(s.conn, msg)
	_ = s.nc.SetWriteDeadline(time.Time{}) // control frames have their own bounds
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) || s.opts.clock.Since(start) >= s.opts.WriteTimeout {
			s.closeReason.CompareAndSwap(nil, ptr(closeWriteTimeout))
			s.log(zapcore.InfoLevel, "write timed out; dropping connection", zap.Duration("timeout", s.opts.WriteTimeout))
		}
		s.fail(closePeer)
		return err
	}
	s.wrote = true
	m := s.srv.metrics
	m.frames.Inc()
	m.events.Add(float64(s.sc.batch.count))
	m.bytes.Add(float64(len(msg)))
	s.sc.batch.reset()
	return nil
}
