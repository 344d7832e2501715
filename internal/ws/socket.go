package ws

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"

	"kubegate/internal/apistatus"
	"kubegate/internal/auth"
	"kubegate/internal/informer"
)

// socket is one WebSocket connection and its subscriptions.
//
// Goroutines (an idle socket has only the reader):
//   - the reader (started by ServeHTTP, in run) reads client frames so
//     that control frames (pong, close) are always processed, and handles
//     unsubscribe inline. It owns the socket's lifetime: when its read
//     fails (the peer left, or anyone closed the connection) it ends the
//     socket, waits for every other goroutine and frees the rest.
//   - the writer (write), started by signal only while there is something
//     to write, owns all writes of data frames: it takes the queued
//     control frames, pops every subscription's listener and writes, each
//     write under WriteTimeout, until a flush finds nothing new; then it
//     exits. It also sends the close frame at shutdown. At most one runs
//     at a time (see writerIdle).
//   - short-lived workers: one per pending subscribe (resolving,
//     authorizing and waiting for a cache may take seconds), and the
//     keepalive and re-authorization passes, started by their timers
//     (pingTimer, recheckTimer), which each pass re-arms when done, so at
//     most one of each runs. A ping due while the writer is busy waits
//     for it (pingDue), as a ticker in the writer's loop would.
//
// The writer and workers are started by startWorker, counted in wg and
// bound to ctx. Workers and the reader never write to the connection:
// they queue encoded control frames under mu and call signal, as
// listeners do (OnWake).
type socket struct {
	srv    *Server
	opts   *Options
	conn   *websocket.Conn
	nc     *netConn // the connection under conn
	user   *auth.User
	client string
	// budget is the resync budget of the socket's client, shared by its
	// sockets; set by Server.register.
	budget *informer.ResyncBudget

	// ctx ends when the socket ends for any reason; cancel is called by
	// whoever first decides so (reader on a read error, writer, ping
	// worker).
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	limiter *rate.Limiter // subscribe rate; used by the reader only
	// closeMu is held around a close handshake, which reads the peer's
	// reply from nc's buffers outside the reader, and by the reader while
	// it looks at those buffers between reads.
	closeMu sync.Mutex
	// writer is writerIdle, writerRunning or writerRerun.
	writer atomic.Int32
	// pingDue: the ping timer fired while the writer was busy; the writer
	// starts the ping when it goes idle.
	pingDue atomic.Bool
	// closeReason is the metrics label for why the socket closed; the
	// first reason stored wins.
	closeReason atomic.Pointer[string]

	// mu guards subs, ctl and ended, and the timers' creation.
	mu sync.Mutex
	// subs holds active and pending subscriptions by id. A pending one has
	// no listener yet.
	subs map[string]*subscription
	// ctl holds encoded control frames (ack, error, RESET) in the order
	// they must reach the client, ahead of any event popped after them.
	ctl [][]byte
	// ended is set by the reader when the socket ends; no goroutine
	// starts after it.
	ended bool
	// pingTimer and recheckTimer start the keepalive and
	// re-authorization workers. Set by run before they can fire.
	pingTimer, recheckTimer clock.Timer

	// Writer-owned (one writer at a time; writerIdle orders them).
	// resetStreak counts flushes carrying an overflow RESET since the last
	// one that delivered changes without one.
	sc          *scratch // set during a flush
	resetStreak int
}

// Writer states (socket.writer). signal moves idle to running (starting
// a writer) and running to rerun; the writer sets running before each
// flush and moves running back to idle when it exits, so a signal is
// never lost: either the running writer flushes again, or a new one
// starts.
const (
	writerIdle    int32 = iota // no writer goroutine
	writerRunning              // a writer is flushing
	writerRerun                // signalled since the writer started its flush
)

// scratch is the writer's working memory for one flush. It is pooled
// across sockets, so an idle socket holds none of it (a snapshot can grow
// it to hundreds of KiB).
type scratch struct {
	batch  batch
	notes  []informer.Notification
	active []*subscription
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// Larger scratch buffers (a huge object or snapshot passed) are left to
// the garbage collector rather than pooled.
const (
	maxPooledBatch = 1 << 20
	maxPooledNotes = 1 << 14
)

// release drops the references a flush left and returns sc to the pool.
func (sc *scratch) release() {
	clear(sc.notes) // each pop's notes are cleared after use; these are the last
	clear(sc.active)
	sc.notes, sc.active = sc.notes[:0], sc.active[:0]
	if cap(sc.batch.buf) > maxPooledBatch {
		sc.batch.buf = nil
	}
	if cap(sc.notes) > maxPooledNotes {
		sc.notes = nil
	}
	scratchPool.Put(sc)
}

// subscription is one subscribe request. Fields are set before it is
// visible to the writer and never change after (but cancel); a
// re-authorization that changes the namespace set replaces the
// subscription with a new value.
type subscription struct {
	id       string
	qid      []byte // id as a JSON string
	req      *clientFrame
	info     *informer.ResourceInfo
	res      *informer.Resource
	filter   informer.Filter // as requested, before authorization narrows it
	decision auth.Decision
	recheck  *auth.Recheck      // set when active; used by the re-check worker only
	l        *informer.Listener // nil while pending
	// cancel ends a pending subscribe; nil once active. Guarded by
	// socket.mu.
	cancel context.CancelFunc
}

func newSocket(srv *Server, c *websocket.Conn, nc *netConn, u *auth.User, client string) *socket {
	s := &socket{
		srv:     srv,
		opts:    &srv.opts,
		conn:    c,
		nc:      nc,
		user:    u,
		client:  client,
		limiter: rate.NewLimiter(rate.Limit(srv.opts.SubscribeRate), srv.opts.SubscribeBurst),
		subs:    map[string]*subscription{},
	}
	// The socket's lifetime is its own: after the upgrade only the
	// server's shutdown ends it from outside. Its context carries the
	// user (as the request's did for the authorizer) but none of the
	// request's other values, which net/http and the router recycle.
	s.ctx, s.cancel = context.WithCancel(auth.WithUser(context.Background(), u))
	return s
}

// signal makes sure the writer flushes after this call: it starts one,
// or tells the running one to flush again. It never blocks: listeners
// call it (OnWake) with their resource's lock held. Callers must not hold
// s.mu.
func (s *socket) signal() {
	for {
		switch s.writer.Load() {
		case writerIdle:
			if s.writer.CompareAndSwap(writerIdle, writerRunning) {
				// If the socket has ended, no writer starts and the state
				// stays running: nothing is written any more.
				s.startWorker(s.write)
				return
			}
		case writerRunning:
			if s.writer.CompareAndSwap(writerRunning, writerRerun) {
				return
			}
		default:
			return
		}
	}
}

// startWorker runs f in a goroutine counted in wg, unless the socket has
// ended. Callers must not hold s.mu.
func (s *socket) startWorker(f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
	return true
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

// fail ends the socket, recording why. closePeer is the default reason
// and never overrides a specific one recorded later: when the writer's
// deadline closes the connection, the reader may notice first.
func (s *socket) fail(reason string) {
	if reason != closePeer {
		s.closeReason.CompareAndSwap(nil, &reason)
	}
	s.cancel()
}

// log logs at lvl with the socket's user and client. Loggers scoped with
// With are not kept per socket: each holds an encoder buffer (about
// 1 KiB with zap's JSON encoder) that an idle socket would carry for its
// whole life.
func (s *socket) log(lvl zapcore.Level, msg string, fields ...zap.Field) {
	if ce := s.srv.log.Check(lvl, msg); ce != nil {
		ce.Write(append([]zap.Field{zap.String("user", s.user.Name), zap.String("client", s.client)}, fields...)...)
	}
}

// run serves the socket until it ends; it runs in the reader goroutine.
func (s *socket) run() {
	s.log(zapcore.DebugLevel, "socket open")
	// Timers rather than tickers in a parked goroutine: an idle socket
	// keeps no goroutine but its reader. mu orders the fields' assignment
	// before the workers the timers start.
	s.mu.Lock()
	s.pingTimer = s.opts.clock.AfterFunc(s.opts.PingInterval, func() { s.startWorker(s.keepalive) })
	s.recheckTimer = s.opts.clock.AfterFunc(s.opts.RecheckInterval, func() { s.startWorker(s.recheckPass) })
	s.mu.Unlock()

	s.readLoop()

	s.cancel()
	// Unblocks the writer's close handshake if the peer left in the middle
	// of it; nothing is lost otherwise, as the reader has stopped.
	_ = s.conn.CloseNow()
	s.mu.Lock()
	s.ended = true
	subs := s.subs
	s.subs = nil
	s.mu.Unlock()
	s.wg.Wait()
	// No worker runs any more, so neither timer is re-armed after this.
	s.pingTimer.Stop()
	s.recheckTimer.Stop()
	for _, sub := range subs {
		if sub.l != nil {
			sub.l.Stop()
		}
	}
	s.srv.metrics.subscriptions.Sub(float64(len(subs)))
	reason := closePeer
	if r := s.closeReason.Load(); r != nil {
		reason = *r
	}
	s.srv.metrics.closes.WithLabelValues(reason).Inc()
	s.log(zapcore.DebugLevel, "socket closed", zap.String("reason", reason))
}

// write is the writer goroutine: it flushes until a flush ends without a
// signal having arrived since it began, then exits. When it ends the
// socket (shutdown, a failed write, a slow consumer) it leaves the state
// at running, so no writer starts again.
func (s *socket) write() {
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
		if err := s.flush(); err != nil {
			s.cancel()
			_ = s.conn.CloseNow() // ends the reader, which frees the socket
			return
		}
		if s.writer.CompareAndSwap(writerRunning, writerIdle) {
			if s.pingDue.CompareAndSwap(true, false) {
				s.startWorker(s.keepalive)
			}
			return
		}
	}
}

func (s *socket) goAway() {
	s.closeReason.CompareAndSwap(nil, ptr(closeShutdown))
	s.close(websocket.StatusGoingAway, "server shutting down")
}

func ptr[T any](v T) *T { return &v }

// flush writes the queued control frames, then everything each
// subscription's listener holds, packed into batches.
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
		if sub.l != nil {
			s.sc.active = append(s.sc.active, sub)
		}
	}
	s.mu.Unlock()

	s.sc.batch.reset()
	for _, f := range ctl {
		if err := s.add(f); err != nil {
			return err
		}
	}
	overflowed, popped := false, 0
	for _, sub := range s.sc.active {
		s.sc.notes = sub.l.Pop(s.sc.notes[:0])
		popped += len(s.sc.notes)
		for i := range s.sc.notes {
			n := &s.sc.notes[i]
			if n.Type == informer.Reset {
				overflowed = true
				s.srv.metrics.resets.WithLabelValues(resetOverflow).Inc()
			}
			s.sc.batch.begin()
			s.sc.batch.buf = appendEvent(s.sc.batch.buf, sub.qid, n)
			if err := s.maybeWrite(); err != nil {
				return err
			}
		}
		clear(s.sc.notes) // drop object references before the next pop
	}
	if err := s.writeBatch(); err != nil {
		return err
	}
	if !overflowed {
		if popped > 0 {
			s.resetStreak = 0 // delivered changes without overflowing: caught up
		}
		return nil
	}
	if s.resetStreak++; s.resetStreak >= s.opts.MaxSlowResets {
		s.closeReason.CompareAndSwap(nil, ptr(closeSlowConsumer))
		s.log(zapcore.InfoLevel, "closing slow consumer", zap.Int("resets", s.resetStreak))
		s.close(4001, "slow consumer: fell behind "+strconv.Itoa(s.resetStreak)+" times in a row")
		return errors.New("slow consumer")
	}
	return nil
}

func (s *socket) add(frame []byte) error {
	s.sc.batch.add(frame)
	return s.maybeWrite()
}

// maybeWrite writes the batch once it has reached MaxBatchBytes.
func (s *socket) maybeWrite() error {
	if s.sc.batch.size() < s.opts.MaxBatchBytes {
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
	err := s.conn.Write(context.Background(), websocket.MessageText, msg)
	_ = s.nc.SetWriteDeadline(time.Time{}) // control frames have their own bounds
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) || s.opts.clock.Since(start) >= s.opts.WriteTimeout {
			s.closeReason.CompareAndSwap(nil, ptr(closeWriteTimeout))
			s.log(zapcore.InfoLevel, "write timed out; dropping connection", zap.Duration("timeout", s.opts.WriteTimeout))
		}
		s.fail(closePeer)
		return err
	}
	m := s.srv.metrics
	m.frames.Inc()
	m.events.Add(float64(s.sc.batch.count))
	m.bytes.Add(float64(len(msg)))
	s.sc.batch.reset()
	return nil
}

// keepalive is the ping worker: it sends a ping and waits for the pong
// (which the reader processes), drops the connection if none arrives
// within PongTimeout, and otherwise arms the next ping.
func (s *socket) keepalive() {
	if s.writer.Load() != writerIdle {
		// A ping waits for the writer to go idle, so that it does not
		// queue behind (or ahead of) a write that is stuck: that write's
		// deadline drops the peer, as a write timeout.
		s.pingDue.Store(true)
		if s.writer.Load() != writerIdle || !s.pingDue.CompareAndSwap(true, false) {
			return // the writer starts it
		}
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.PongTimeout)
	defer cancel()
	if err := s.conn.Ping(ctx); err != nil {
		if s.ctx.Err() == nil {
			s.closeReason.CompareAndSwap(nil, ptr(closePongTimeout))
			s.log(zapcore.InfoLevel, "no pong; dropping connection", zap.Duration("timeout", s.opts.PongTimeout))
			s.fail(closePongTimeout)
			_ = s.conn.CloseNow()
		}
		return
	}
	s.pingTimer.Reset(s.opts.PingInterval)
}

// readLoop is the reader goroutine's loop. Between messages it waits in
// awaitReadable, whose stack is short: the runtime shrinks a parked
// goroutine's stack only while it uses under a quarter of it, and a read
// parked inside websocket.Conn.Read is too deep for a 4 KiB stack to
// shrink from 8 KiB (see "Cost of an idle socket" in docs/protocol.md).
func (s *socket) readLoop() {
	for {
		s.awaitReadable()
		if !s.readMessage() {
			return
		}
	}
}

// awaitReadable returns once a read would not wait: bytes are buffered,
// or the connection has data, EOF or an error.
func (s *socket) awaitReadable() {
	s.closeMu.Lock()
	buffered := s.nc.buffered()
	s.closeMu.Unlock()
	if !buffered {
		s.nc.waitReadable()
	}
}

// close closes the connection with a close handshake, which reads the
// peer's reply (see closeMu).
func (s *socket) close(code websocket.StatusCode, reason string) {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	_ = s.conn.Close(code, reason)
}

// readMessage reads and handles one client message, processing the
// control frames before it. It reports false once the socket is done
// reading. It reads with a context that never ends: the connection's
// closing unblocks it, so a close handshake started by the writer can
// still read the peer's reply.
func (s *socket) readMessage() bool {
	typ, data, err := s.conn.Read(context.Background())
	if err != nil {
		switch {
		case errors.Is(err, websocket.ErrMessageTooBig):
			s.closeReason.CompareAndSwap(nil, ptr(closeTooBig))
			s.log(zapcore.InfoLevel, "client message too big", zap.Int64("limit", s.opts.MaxMessageBytes))
		case websocket.CloseStatus(err) == -1 && s.ctx.Err() == nil:
			s.log(zapcore.DebugLevel, "read failed", zap.Error(err))
		}
		s.fail(closePeer)
		return false
	}
	if s.backlogged() {
		// The client sends requests but does not read the answers:
		// stop reading rather than queue answers without bound.
		s.log(zapcore.InfoLevel, "client does not read its answers; dropping connection", zap.Int("unanswered", maxUnanswered))
		s.fail(closeFlood)
		_ = s.conn.CloseNow()
		return false
	}
	if typ != websocket.MessageText {
		s.sendError(&requestError{Status: apistatus.New(http.StatusBadRequest, metav1.StatusReasonBadRequest,
			"binary frames are not supported; send JSON text frames")})
		return true
	}
	f, err := parseClientFrame(data)
	if err != nil {
		s.sendError(err.(*requestError))
		return true
	}
	switch f.Type {
	case typeSubscribe:
		s.subscribe(f)
	case typeUnsubscribe:
		s.unsubscribe(f)
	}
	return true
}

// maxUnanswered bounds the control frames queued for a client that is not
// reading them (the writer is blocked), about 1 MiB of error frames;
// beyond it the socket is dropped.
const maxUnanswered = 4096

func (s *socket) backlogged() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ctl) >= maxUnanswered
}

func (s *socket) sendError(e *requestError) {
	s.srv.metrics.clientErrors.WithLabelValues(strconv.Itoa(int(e.Status.Code))).Inc()
	s.enqueue(encodeError(e.ID, e.Request, false, e.Status))
}

func (s *socket) refuse(f *clientFrame, code int, reason metav1.StatusReason, msg string) {
	s.sendError(&requestError{ID: f.ID, Request: f.Type, Status: apistatus.New(code, reason, msg)})
}

// subscribe admits a subscribe request and hands it to a worker.
func (s *socket) subscribe(f *clientFrame) {
	s.mu.Lock()
	switch {
	case s.subs[f.ID] != nil:
		s.mu.Unlock()
		s.refuse(f, http.StatusConflict, metav1.StatusReasonAlreadyExists,
			fmt.Sprintf("subscription %q already exists on this socket; unsubscribe it first or choose another id", f.ID))
		return
	case len(s.subs) >= s.opts.MaxSubscriptionsPerSocket:
		s.mu.Unlock()
		s.refuse(f, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests,
			fmt.Sprintf("too many subscriptions on this socket (limit %d)", s.opts.MaxSubscriptionsPerSocket))
		return
	case !s.limiter.Allow():
		s.mu.Unlock()
		s.refuse(f, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests,
			fmt.Sprintf("subscribing too fast (limit %g per second)", s.opts.SubscribeRate))
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	sub := &subscription{id: f.ID, qid: quoteID(f.ID), req: f, cancel: cancel}
	s.subs[f.ID] = sub
	s.wg.Add(1)
	s.mu.Unlock()
	s.srv.metrics.subscriptions.Inc()

	go func() {
		defer s.wg.Done()
		defer cancel()
		s.startSubscription(ctx, sub)
	}()
}

// startSubscription resolves, authorizes and starts a pending
// subscription, then activates it with its ack, or removes it with an
// error frame. Runs in a worker.
func (s *socket) startSubscription(ctx context.Context, sub *subscription) {
	p, err := s.prepare(ctx, sub.req)
	s.mu.Lock()
	if s.subs[sub.id] != sub {
		// Unsubscribed (and acknowledged) meanwhile, or the socket ended.
		s.mu.Unlock()
		if p.l != nil {
			p.l.Stop()
		}
		return
	}
	if err != nil {
		delete(s.subs, sub.id)
		s.mu.Unlock()
		s.srv.metrics.subscriptions.Dec()
		var re *requestError
		st := apistatus.FromError(err)
		if errors.As(err, &re) {
			st = re.Status
		} else if apistatus.Internal(st) && !errors.Is(err, context.Canceled) {
			// A cancelled subscribe is the client leaving mid-subscribe,
			// not a failure worth an error log.
			s.log(zapcore.ErrorLevel, "subscribe failed", zap.String("id", sub.id), zap.String("resource", sub.req.Resource), zap.Error(err))
		}
		s.sendError(&requestError{ID: sub.id, Request: typeSubscribe, Status: st})
		return
	}
	// The resource's own info rather than the one Resolve built for this
	// request, and no context any more: an idle subscription keeps only
	// what it needs.
	sub.info, sub.res, sub.filter, sub.decision, sub.l = p.res.Info, p.res, p.filter, p.decision, p.l
	sub.recheck = auth.NewRecheck(s.opts.RecheckGrace, s.opts.clock)
	sub.cancel = nil // the worker cancels the context when it returns
	s.enqueueLocked(encodeAck(sub.id, typeSubscribe, sub.info, sortedNamespaces(sub.decision)))
	if p.expired {
		s.enqueueLocked(encodeReset(sub.id, resetExpired))
		s.srv.metrics.resets.WithLabelValues(resetExpired).Inc()
	}
	s.mu.Unlock()
	s.signal()
}

// prepared is what a subscribe resolved to.
type prepared struct {
	info     *informer.ResourceInfo
	res      *informer.Resource
	filter   informer.Filter
	decision auth.Decision
	l        *informer.Listener
	// expired: the resume point was older than the history, so the
	// listener starts with a snapshot behind a RESET instead.
	expired bool
}

// prepare resolves, validates and authorizes a subscribe request, waits
// for the resource's cache and adds the listener.
func (s *socket) prepare(ctx context.Context, f *clientFrame) (p prepared, err error) {
	mgr := s.opts.Manager
	if p.info, err = mgr.Resolve(ctx, f.Resource); err != nil {
		return p, err
	}
	if !p.info.Namespaced && f.Namespace != "" {
		return p, &requestError{Status: apistatus.New(http.StatusBadRequest, metav1.StatusReasonBadRequest,
			fmt.Sprintf("%s is cluster-scoped; namespace must be empty", p.info.GVR.GroupResource()))}
	}
	if p.filter, err = informer.ParseFilter(p.info, f.Namespace, f.LabelSelector, f.FieldSelector); err != nil {
		return p, err
	}
	if p.decision, err = s.authorize(ctx, p.info, f.Namespace); err != nil {
		return p, err
	}
	if p.res, err = mgr.ResourceFor(ctx, p.info); err != nil {
		return p, err
	}
	syncCtx, cancel := context.WithTimeout(ctx, s.opts.SyncTimeout)
	err = p.res.WaitForSync(syncCtx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return p, ctx.Err()
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return p, &requestError{Status: apistatus.New(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable,
				fmt.Sprintf("the cache of %s did not fill within %s; try again", p.info.GVR.GroupResource(), s.opts.SyncTimeout))}
		}
		return p, err
	}
	p.l, err = s.listen(p.res, p.filter, p.decision, f, f.ResourceVersion, f.initialEvents())
	if errors.Is(err, informer.ErrExpired) {
		p.expired = true
		p.l, err = s.listen(p.res, p.filter, p.decision, f, "", true)
	}
	return p, err
}

func (s *socket) authorize(ctx context.Context, info *informer.ResourceInfo, namespace string) (auth.Decision, error) {
	return s.opts.Authorizer.Authorize(ctx, s.user, auth.Request{
		Verb: "watch", Resource: info.GVR, Namespaced: info.Namespaced, Namespace: namespace,
	})
}

// listen adds a listener with filter narrowed by the decision.
func (s *socket) listen(res *informer.Resource, filter informer.Filter, dec auth.Decision, f *clientFrame, rv string, initial bool) (*informer.Listener, error) {
	filter.Namespaces = dec.Namespaces
	return res.AddListener(informer.ListenerOptions{
		Filter:            filter,
		ResyncPeriod:      f.resync,
		ResyncBudget:      s.budget,
		SendInitialEvents: initial,
		ResourceVersion:   rv,
		Overflow:          informer.OverflowReset,
		MaxEvents:         s.opts.ListenerMaxEvents,
		MaxBytes:          s.opts.ListenerMaxBytes,
		OnWake:            s.signal,
	})
}

func sortedNamespaces(d auth.Decision) []string {
	if d.Namespaces == nil {
		return nil
	}
	return sets.List(d.Namespaces)
}

// unsubscribe ends a subscription (pending or active) and acknowledges it.
// Events the writer already popped may precede the ack; none follow it.
func (s *socket) unsubscribe(f *clientFrame) {
	s.mu.Lock()
	sub := s.subs[f.ID]
	if sub == nil {
		s.mu.Unlock()
		s.refuse(f, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("no subscription %q on this socket", f.ID))
		return
	}
	delete(s.subs, f.ID)
	s.enqueueLocked(encodeAck(f.ID, typeUnsubscribe, nil, nil))
	cancel, l := sub.cancel, sub.l
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if l != nil {
		l.Stop()
	}
	s.srv.metrics.subscriptions.Dec()
	s.signal()
}

// recheckTimeout bounds one re-authorization of one subscription.
const recheckTimeout = 30 * time.Second

// recheckPass is the re-authorization worker: one pass, then it arms
// the next.
func (s *socket) recheckPass() {
	s.recheck()
	if s.ctx.Err() == nil {
		s.recheckTimer.Reset(s.opts.RecheckInterval)
	}
}

// recheck asks the Authorizer again for every active subscription. A
// denied subscription ends with a 403 error frame; one whose namespace set
// changed restarts under the new set behind a RESET. One whose re-check
// could not be made (the apiserver is unreachable) goes on for
// RecheckGrace since it was last authorized, then ends with 503.
func (s *socket) recheck() {
	s.mu.Lock()
	subs := make([]*subscription, 0, len(s.subs))
	for _, sub := range s.subs {
		if sub.l != nil {
			subs = append(subs, sub)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(subs, func(a, b *subscription) int { return cmpString(a.id, b.id) })

	for _, sub := range subs {
		if s.ctx.Err() != nil {
			return
		}
		// A bound well above the authorizer's own review timeout: a slow
		// answer delays the next pass (one runs at a time) rather than
		// ending the subscription early.
		ctx, cancel := context.WithTimeout(s.ctx, recheckTimeout)
		dec, err := s.authorize(ctx, sub.info, sub.req.Namespace)
		cancel()
		if s.ctx.Err() != nil {
			return
		}
		ends := sub.recheck.Ends(err)
		switch {
		case err != nil && !ends:
			if sub.recheck.FirstDeferred() {
				s.log(zapcore.WarnLevel, "re-authorization could not be made; the subscription goes on for the grace",
					zap.String("id", sub.id), zap.Duration("grace", sub.recheck.Grace()), zap.Error(err))
			}
		case err != nil:
			st := apistatus.FromError(err)
			if apistatus.Internal(st) {
				s.log(zapcore.WarnLevel, "re-authorization failed; ending subscription", zap.String("id", sub.id), zap.Error(err))
			}
			s.end(sub, st)
		case !dec.Equal(sub.decision):
			s.restart(sub, dec)
		}
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// end removes an active subscription with an error frame marked ended.
func (s *socket) end(sub *subscription, st *metav1.Status) {
	s.mu.Lock()
	if s.subs[sub.id] != sub {
		s.mu.Unlock()
		return
	}
	delete(s.subs, sub.id)
	s.enqueueLocked(encodeError(sub.id, "", true, st))
	s.mu.Unlock()
	sub.l.Stop()
	s.srv.metrics.subscriptions.Dec()
	s.srv.metrics.clientErrors.WithLabelValues(strconv.Itoa(int(st.Code))).Inc()
	s.signal()
}

// restart replaces sub by a subscription under a new decision: RESET, then
// a fresh snapshot.
func (s *socket) restart(sub *subscription, dec auth.Decision) {
	next := *sub
	next.decision = dec
	l, err := s.listen(sub.res, sub.filter, dec, sub.req, "", true)
	if err != nil {
		s.end(sub, apistatus.FromError(err))
		return
	}
	next.l = l
	s.mu.Lock()
	if s.subs[sub.id] != sub {
		s.mu.Unlock()
		l.Stop()
		return
	}
	s.subs[sub.id] = &next
	s.enqueueLocked(encodeReset(sub.id, resetReauthorized))
	s.mu.Unlock()
	sub.l.Stop()
	s.srv.metrics.resets.WithLabelValues(resetReauthorized).Inc()
	s.log(zapcore.InfoLevel, "authorization changed; restarting subscription", zap.String("id", sub.id))
	s.signal()
}
