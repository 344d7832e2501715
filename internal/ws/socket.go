// socket.go holds the socket type with its concurrency design, its
// lifetime (run, keepalive) and its reader.

package ws

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
//     to write, owns all writes of data frames: each flush takes the
//     queued control frames, pops every subscription's listener and
//     writes, each write under WriteTimeout. Its first flush is at once;
//     after a flush that wrote, it waits CoalesceDelay on the clock and
//     flushes again what arrived meanwhile, so that a busy socket writes
//     once per delay rather than once per event, from one goroutine. It exits after a flush that wrote nothing or a wait in
//     which nothing arrived. It also sends the close frame at shutdown.
//     At most one runs at a time (see writerIdle).
//   - short-lived workers: one per pending subscribe (resolving,
//     authorizing and waiting for a cache may take seconds), and the
//     keepalive and re-authorization passes, started by their timers
//     (pingTimer, recheckTimer), which each pass re-arms when done, so at
//     most one of each runs. A ping due while the writer is flushing
//     waits for the flush (pingDue), as a ticker in the writer's loop
//     would.
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
	// evicted is set, under the server's mu, when the socket is given up
	// to make room for another client's (see Server.evictLocked).
	evicted bool
	// evictReason, once set, makes the writer close the socket with 1013
	// and this reason.
	evictReason atomic.Pointer[string]

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
	// writer is the writer's state: writerIdle, writerRunning,
	// writerRerun or writerWaiting.
	writer atomic.Int32
	// pingDue: the ping timer fired while the writer was flushing; the
	// writer starts the ping when the flush is done.
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
	// resetStreak counts overflow RESETs, each within SlowResetWindow of
	// the one before (lastReset).
	sc          *scratch // set during a flush
	resetStreak int
	lastReset   time.Time
	wrote       bool // the current flush has written a message
	more        bool // the current flush left notifications in a listener
}

func newSocket(reqCtx context.Context, srv *Server, c *websocket.Conn, nc *netConn, u *auth.User, client string) *socket {
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
	// user, client address and rate limit of the request (for the
	// authorizer, its review queues and its charges) but none of the
	// request's other values, which net/http and the router recycle.
	s.ctx, s.cancel = context.WithCancel(auth.WithUser(auth.Detached(reqCtx), u))
	return s
}

// idle reports whether the socket has no subscription.
func (s *socket) idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subs) == 0
}

// evict closes the socket with 1013 and reason, from its writer.
func (s *socket) evict(reason string) {
	s.evictReason.CompareAndSwap(nil, &reason)
	s.signal()
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
		sub.stop()
	}
	s.srv.metrics.subscriptions.Sub(float64(len(subs)))
	reason := closePeer
	if r := s.closeReason.Load(); r != nil {
		reason = *r
	}
	s.srv.metrics.closes.WithLabelValues(reason).Inc()
	s.log(zapcore.DebugLevel, "socket closed", zap.String("reason", reason))
}

func ptr[T any](v T) *T { return &v }

// keepalive is the ping worker: it sends a ping and waits for the pong
// (which the reader processes), drops the connection if none arrives
// within PongTimeout, and otherwise arms the next ping.
func (s *socket) keepalive() {
	if s.flushing() {
		// A ping waits for the writer's flush, so that it does not queue
		// behind (or ahead of) a write that is stuck: that write's
		// deadline drops the peer, as a write timeout.
		s.pingDue.Store(true)
		if s.flushing() || !s.pingDue.CompareAndSwap(true, false) {
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
	case typeWindow:
		s.moveWindow(f)
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
