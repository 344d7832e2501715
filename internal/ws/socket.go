package ws

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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

	"kubegate/internal/apistatus"
	"kubegate/internal/auth"
	"kubegate/internal/informer"
)

// socket is one WebSocket connection and its subscriptions.
//
// Goroutines:
//   - the writer (started by ServeHTTP, in run) owns all writes of data
//     frames: it wakes on wake, takes the queued control frames, pops every
//     subscription's listener and writes, each write under WriteTimeout. It
//     also sends the close frame at shutdown and owns the keepalive and
//     re-authorization tickers.
//   - the reader (readLoop) reads client frames so that control frames
//     (pong, close) are always processed, and handles unsubscribe inline.
//   - short-lived workers, all counted in wg and bound to ctx: one per
//     pending subscribe (resolving, authorizing and waiting for a cache may
//     take seconds), at most one ping waiting for its pong, and at most one
//     re-authorization pass.
//
// Workers and the reader never write to the connection: they queue
// encoded control frames under mu and signal wake. Listeners signal wake
// too; wake has capacity 1 and is never closed.
type socket struct {
	srv    *Server
	opts   *Options
	conn   *websocket.Conn
	user   *auth.User
	client string
	wake   chan struct{}

	// ctx ends when the socket ends for any reason; cancel is called by
	// whoever first decides so (reader on a read error, writer, ping
	// worker).
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	limiter    *rate.Limiter // subscribe rate; used by the reader only
	pinging    atomic.Bool   // a ping worker is running
	rechecking atomic.Bool   // a re-authorization worker is running
	// closeReason is the metrics label for why the socket closed; the
	// first reason stored wins.
	closeReason atomic.Pointer[string]

	// mu guards subs and ctl.
	mu sync.Mutex
	// subs holds active and pending subscriptions by id. A pending one has
	// no listener yet.
	subs map[string]*subscription
	// ctl holds encoded control frames (ack, error, RESET) in the order
	// they must reach the client, ahead of any event popped after them.
	ctl [][]byte

	// Writer-owned. resetStreak counts flushes carrying an overflow RESET
	// since the last one that delivered changes without one.
	sc          *scratch // set during a flush
	resetStreak int
}

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
// visible to the writer and never change after; a re-authorization that
// changes the namespace set replaces the subscription with a new value.
type subscription struct {
	id       string
	qid      []byte // id as a JSON string
	req      *clientFrame
	info     *informer.ResourceInfo
	res      *informer.Resource
	filter   informer.Filter // as requested, before authorization narrows it
	decision auth.Decision
	l        *informer.Listener // nil while pending
	cancel   context.CancelFunc // ends a pending subscribe
}

func newSocket(srv *Server, c *websocket.Conn, u *auth.User, client string) *socket {
	return &socket{
		srv:     srv,
		opts:    &srv.opts,
		conn:    c,
		user:    u,
		client:  client,
		wake:    make(chan struct{}, 1),
		limiter: rate.NewLimiter(rate.Limit(srv.opts.SubscribeRate), srv.opts.SubscribeBurst),
		subs:    map[string]*subscription{},
	}
}

func (s *socket) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
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

// run serves the socket until it ends; it runs in the writer goroutine.
func (s *socket) run() {
	// The socket's lifetime is its own: after the upgrade only the
	// server's shutdown ends it from outside. Its context carries the
	// user (as the request's did for the authorizer) but none of the
	// request's other values, which net/http and the router recycle.
	s.ctx, s.cancel = context.WithCancel(auth.WithUser(context.Background(), s.user))
	s.log(zapcore.DebugLevel, "socket open")

	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		s.readLoop()
	}()

	s.writeLoop()

	s.cancel()
	_ = s.conn.CloseNow() // unblocks the reader if the close handshake did not
	<-readerDone
	s.wg.Wait()

	s.mu.Lock()
	subs := s.subs
	s.subs = nil
	s.mu.Unlock()
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

// writeLoop is the writer goroutine's loop.
func (s *socket) writeLoop() {
	ping := s.opts.clock.NewTicker(s.opts.PingInterval)
	defer ping.Stop()
	recheck := s.opts.clock.NewTicker(s.opts.RecheckInterval)
	defer recheck.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.srv.shutdown:
			s.goAway()
			return
		case <-s.wake:
			if err := s.flush(); err != nil {
				return
			}
		case <-ping.C():
			s.startPing()
		case <-recheck.C():
			s.startRecheck()
		}
	}
}

func (s *socket) goAway() {
	s.closeReason.CompareAndSwap(nil, ptr(closeShutdown))
	_ = s.conn.Close(websocket.StatusGoingAway, "server shutting down")
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
		_ = s.conn.Close(4001, "slow consumer: fell behind "+strconv.Itoa(s.resetStreak)+" times in a row")
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
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.WriteTimeout)
	err := s.conn.Write(ctx, websocket.MessageText, msg)
	cancel()
	if err != nil {
		if s.opts.clock.Since(start) >= s.opts.WriteTimeout {
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

// startPing sends a ping from a worker, which waits for the pong and
// drops the connection if none arrives within PongTimeout.
func (s *socket) startPing() {
	if !s.pinging.CompareAndSwap(false, true) {
		return // the previous ping is still waiting; it will time out
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.pinging.Store(false)
		ctx, cancel := context.WithTimeout(s.ctx, s.opts.PongTimeout)
		defer cancel()
		if err := s.conn.Ping(ctx); err != nil && s.ctx.Err() == nil {
			s.closeReason.CompareAndSwap(nil, ptr(closePongTimeout))
			s.log(zapcore.InfoLevel, "no pong; dropping connection", zap.Duration("timeout", s.opts.PongTimeout))
			s.fail(closePongTimeout)
			_ = s.conn.CloseNow()
		}
	}()
}

// readLoop is the reader goroutine. It reads with a context that never
// ends: the connection's closing unblocks it, so a close handshake started
// by the writer can still read the peer's reply.
func (s *socket) readLoop() {
	for {
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
			return
		}
		if s.backlogged() {
			// The client sends requests but does not read the answers:
			// stop reading rather than queue answers without bound.
			s.log(zapcore.InfoLevel, "client does not read its answers; dropping connection", zap.Int("unanswered", maxUnanswered))
			s.fail(closeFlood)
			_ = s.conn.CloseNow()
			return
		}
		if typ != websocket.MessageText {
			s.sendError(&requestError{Status: apistatus.New(http.StatusBadRequest, metav1.StatusReasonBadRequest,
				"binary frames are not supported; send JSON text frames")})
			continue
		}
		f, err := parseClientFrame(data)
		if err != nil {
			s.sendError(err.(*requestError))
			continue
		}
		switch f.Type {
		case typeSubscribe:
			s.subscribe(f)
		case typeUnsubscribe:
			s.unsubscribe(f)
		}
	}
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
		} else if apistatus.Internal(st) {
			s.log(zapcore.ErrorLevel, "subscribe failed", zap.String("id", sub.id), zap.String("resource", sub.req.Resource), zap.Error(err))
		}
		s.sendError(&requestError{ID: sub.id, Request: typeSubscribe, Status: st})
		return
	}
	sub.info, sub.res, sub.filter, sub.decision, sub.l = p.info, p.res, p.filter, p.decision, p.l
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
		SendInitialEvents: initial,
		ResourceVersion:   rv,
		Overflow:          informer.OverflowReset,
		MaxEvents:         s.opts.ListenerMaxEvents,
		MaxBytes:          s.opts.ListenerMaxBytes,
		Wake:              s.wake,
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
	s.mu.Unlock()
	sub.cancel()
	if sub.l != nil {
		sub.l.Stop()
	}
	s.srv.metrics.subscriptions.Dec()
	s.signal()
}

// recheckTimeout bounds one re-authorization of one subscription.
const recheckTimeout = 30 * time.Second

// startRecheck re-authorizes the active subscriptions in a worker.
func (s *socket) startRecheck() {
	if !s.rechecking.CompareAndSwap(false, true) {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.rechecking.Store(false)
		s.recheck()
	}()
}

// recheck asks the Authorizer again for every active subscription. A
// denied subscription ends with a 403 error frame; one whose namespace set
// changed restarts under the new set behind a RESET.
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
		switch {
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
