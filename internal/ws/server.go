package ws

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"

	"kubegate/internal/apistatus"
	"kubegate/internal/auth"
	"kubegate/internal/informer"
	"kubegate/internal/livequery/feed"
)

// Options configures New. Zero fields take the defaults given.
type Options struct {
	// Manager serves every subscription. Required.
	Manager *informer.Manager
	// Tables serves live windows (sorted, filtered pages): built by
	// wire.NewTables, started by the caller (Tables.Start), which stops
	// it after Start has returned, and shared with the REST server.
	// Required.
	Tables *feed.Tables
	// Authorizer decides what each subscription may read (verb watch).
	// Default: auth.AlwaysAllow{}.
	Authorizer auth.Authorizer
	// Logger. Default: no logging.
	Logger *zap.Logger
	// Registerer receives the server's metrics. Default: none.
	Registerer prometheus.Registerer
	// AllowedOrigins are host patterns (path.Match syntax, such as
	// "*.example.com" or "localhost:3000") browsers may connect from, in
	// addition to the request's own host. Default: none.
	AllowedOrigins []string
	// MaxSockets bounds open sockets. When they are all taken, a client
	// holding fewer sockets than the client holding the most is still
	// admitted: that client gives one of its sockets up (its newest idle
	// one, else its newest), closed with 1013. Default 10000.
	MaxSockets int
	// MaxSocketsPerClient bounds sockets per user name, or per client
	// address (auth.SourceKey) for anonymous callers: each client's share
	// of MaxSockets. Default 100.
	MaxSocketsPerClient int
	// MaxSubscriptionsPerSocket bounds active and pending subscriptions
	// on one socket. Default 100.
	MaxSubscriptionsPerSocket int
	// SubscribeRate is the sustained rate of subscribe requests per socket
	// (per second), with bursts up to SubscribeBurst. Defaults 10 and 20.
	SubscribeRate  float64
	SubscribeBurst int
	// PingInterval is the keepalive period. Default 30s.
	PingInterval time.Duration
	// PongTimeout is how long a ping may go unanswered before the peer is
	// disconnected. Default 15s.
	PongTimeout time.Duration
	// WriteTimeout bounds every write; a write blocked longer drops the
	// connection. Default 10s.
	WriteTimeout time.Duration
	// MaxMessageBytes bounds one client message; larger ones close the
	// socket with 1009. Default 64 KiB.
	MaxMessageBytes int64
	// ListenerMaxEvents and ListenerMaxBytes bound each subscription's
	// backlog. Default: the informer's defaults (4096 events, 16 MiB).
	ListenerMaxEvents int
	ListenerMaxBytes  int64
	// RecheckInterval is how often each subscription is re-authorized.
	// Default 5s.
	RecheckInterval time.Duration
	// RecheckGrace is how long a subscription goes on while its
	// re-authorizations cannot be made (see auth.Recheck). Default
	// auth.DefaultRecheckGrace; negative ends it at the first failure.
	RecheckGrace time.Duration
	// SyncTimeout bounds how long a subscribe waits for a resource's cache
	// to fill on first use before answering 503. Default 60s.
	SyncTimeout time.Duration
	// MaxBatchBytes bounds a batch message: frames are packed into it
	// while it stays within the bound, and a frame that would take it
	// over starts the next message, so a frame of MaxBatchBytes or more
	// is sent on its own. Default 256 KiB.
	MaxBatchBytes int
	// ShutdownGrace bounds how long Start waits for sockets to finish
	// their close handshake before dropping them. Default 5s.
	ShutdownGrace time.Duration
	// MaxSlowResets is how many overflow RESETs close a socket with 4001
	// when each comes within SlowResetWindow of the one before. Each
	// costs the gateway a snapshot; a client that keeps costing one is
	// told to go away. Default 3.
	MaxSlowResets int
	// SlowResetWindow: an overflow RESET more than this after the one
	// before starts the count of MaxSlowResets afresh. Default 1m.
	SlowResetWindow time.Duration
	// ResyncBudget is the objects per second the resyncs of one client's
	// subscriptions may send, across all its sockets (the client of
	// MaxSocketsPerClient), with a burst of ten seconds' worth. A resync
	// due while the budget is spent is postponed (see
	// informer.ResyncBudget). Default 2000.
	ResyncBudget float64
	// CoalesceDelay is how long a busy socket gathers frames into one
	// message. A socket is busy while it writes and for CoalesceDelay
	// after the end of each write: frames that become ready then wait
	// until CoalesceDelay has passed since its last write, and go out
	// together. Frames for a socket that is not busy go out at once.
	// nil: the default, 2ms (see defaultCoalesceDelay); zero or negative:
	// no coalescing, every flush is at once.
	CoalesceDelay *time.Duration

	// clock drives keepalive, re-authorization and the coalescing delay
	// (tests).
	clock clock.WithDelayedExecution
	// coalesce is CoalesceDelay resolved: 0 when coalescing is off.
	coalesce time.Duration
}

// defaultCoalesceDelay is CoalesceDelay's default. It adds at most 2ms
// to an event, and only on a socket that wrote within the last 2ms; far
// below a browser's frame (16.7ms at 60 Hz) or a client's network round
// trip. In exchange a busy socket writes at most once per 2ms (500 times
// a second) whatever its event rate, everything that accumulated at
// once. A trickle of events more than 2ms apart is not coalesced: each
// goes out alone, as soon as it is ready.
const defaultCoalesceDelay = 2 * time.Millisecond

// Defaults returns the options every zero field of Options takes in New.
// The gateway's configuration (internal/config) starts from them, so they
// are defined once.
func Defaults() Options {
	return Options{
		MaxSockets:                10000,
		MaxSocketsPerClient:       100,
		MaxSubscriptionsPerSocket: 100,
		SubscribeRate:             10,
		SubscribeBurst:            20,
		PingInterval:              30 * time.Second,
		PongTimeout:               15 * time.Second,
		WriteTimeout:              10 * time.Second,
		MaxMessageBytes:           64 << 10,
		RecheckInterval:           5 * time.Second,
		SyncTimeout:               60 * time.Second,
		MaxBatchBytes:             256 << 10,
		MaxSlowResets:             3,
		SlowResetWindow:           time.Minute,
		ResyncBudget:              2000,
		ShutdownGrace:             5 * time.Second,
	}
}

func (o Options) withDefaults() (Options, error) {
	if o.Manager == nil {
		return o, errors.New("ws: Options.Manager is required")
	}
	if o.Tables == nil {
		return o, errors.New("ws: Options.Tables is required")
	}
	if o.Authorizer == nil {
		o.Authorizer = auth.AlwaysAllow{}
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	d := Defaults()
	setDefault(&o.MaxSockets, d.MaxSockets)
	setDefault(&o.MaxSocketsPerClient, d.MaxSocketsPerClient)
	setDefault(&o.MaxSubscriptionsPerSocket, d.MaxSubscriptionsPerSocket)
	setDefault(&o.SubscribeRate, d.SubscribeRate)
	setDefault(&o.SubscribeBurst, d.SubscribeBurst)
	setDefault(&o.PingInterval, d.PingInterval)
	setDefault(&o.PongTimeout, d.PongTimeout)
	setDefault(&o.WriteTimeout, d.WriteTimeout)
	setDefault(&o.MaxMessageBytes, d.MaxMessageBytes)
	setDefault(&o.RecheckInterval, d.RecheckInterval)
	setDefault(&o.SyncTimeout, d.SyncTimeout)
	setDefault(&o.MaxBatchBytes, d.MaxBatchBytes)
	setDefault(&o.MaxSlowResets, d.MaxSlowResets)
	setDefault(&o.SlowResetWindow, d.SlowResetWindow)
	setDefault(&o.ResyncBudget, d.ResyncBudget)
	setDefault(&o.ShutdownGrace, d.ShutdownGrace)
	if o.clock == nil {
		o.clock = clock.RealClock{}
	}
	o.coalesce = defaultCoalesceDelay
	if o.CoalesceDelay != nil {
		o.coalesce = max(*o.CoalesceDelay, 0)
	}
	for _, p := range o.AllowedOrigins {
		if _, err := matchOrigin(p, "example.com"); err != nil {
			return o, fmt.Errorf("ws: allowed origin %q: %w", p, err)
		}
	}
	return o, nil
}

func setDefault[T int | int64 | float64 | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// Server is the /ws handler. ServeHTTP accepts a socket, starts its
// goroutines (see socket) and returns; the sockets are counted in wg.
// Start waits for shutdown, then closes every socket with 1001 and returns
// once all of them are gone, so a Server must run Start for its sockets
// to end at shutdown.
type Server struct {
	opts     Options
	log      *zap.Logger
	metrics  *metrics
	accept   *websocket.AcceptOptions
	shutdown chan struct{} // closed when Start's context ends

	// mu guards sockets, counted, perClient and closing, and each
	// socket's evicted; wg counts sockets and is only added to under mu
	// while !closing. mu is taken before a socket's own mu, never after.
	mu      sync.Mutex
	sockets map[*socket]struct{}
	// counted is the number of sockets counted against MaxSockets: those
	// in sockets but the ones given up to make room, which are closing.
	counted   int
	perClient map[string]*clientShare
	closing   bool
	wg        sync.WaitGroup
}

// New builds a Server. It serves as soon as it is mounted; Start only
// handles shutdown.
func New(opts Options) (*Server, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Server{
		opts:    o,
		log:     o.Logger,
		metrics: newMetrics(o.Registerer),
		accept: &websocket.AcceptOptions{
			Subprotocols:   []string{Subprotocol},
			OriginPatterns: o.AllowedOrigins,
		},
		shutdown:  make(chan struct{}),
		sockets:   map[*socket]struct{}{},
		perClient: map[string]*clientShare{},
	}, nil
}

// clientShare is what the sockets of one client share.
type clientShare struct {
	// socks are the client's counted sockets, oldest first.
	socks  []*socket
	budget *informer.ResyncBudget
}

// Start blocks until ctx ends, then closes every socket with 1001
// (going away) and returns once their goroutines have exited. New sockets
// are refused from then on. Sockets whose close handshake has not finished
// within ShutdownGrace (a peer that does not read) are dropped.
func (s *Server) Start(ctx context.Context) error {
	<-ctx.Done()
	s.mu.Lock()
	s.closing = true
	close(s.shutdown)
	open := make([]*socket, 0, len(s.sockets))
	for sock := range s.sockets {
		open = append(open, sock)
	}
	s.mu.Unlock()
	if len(open) > 0 {
		s.log.Info("closing sockets", zap.Int("sockets", len(open)))
	}
	for _, sock := range open {
		sock.signal() // its writer sees shutdown and closes with 1001
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	grace := s.opts.clock.NewTimer(s.opts.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-done:
		return nil
	case <-grace.C():
	}
	s.mu.Lock()
	stuck := make([]*socket, 0, len(s.sockets))
	for sock := range s.sockets {
		stuck = append(stuck, sock)
	}
	s.mu.Unlock()
	s.log.Info("dropping sockets that did not close in time", zap.Int("sockets", len(stuck)), zap.Duration("grace", s.opts.ShutdownGrace))
	for _, sock := range stuck {
		_ = sock.conn.CloseNow()
	}
	<-done
	return nil
}

// Sockets returns the number of open sockets.
func (s *Server) Sockets() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sockets)
}

// ServeHTTP upgrades the request and serves the socket until it closes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !offersSubprotocol(r) {
		s.metrics.rejected.WithLabelValues("subprotocol").Inc()
		apistatus.Write(w, apistatus.New(http.StatusBadRequest, metav1.StatusReasonBadRequest,
			"a WebSocket handshake offering the subprotocol "+Subprotocol+" is required (Sec-WebSocket-Protocol: "+Subprotocol+"); see docs/protocol.md"))
		return
	}
	select {
	case <-s.shutdown:
		s.metrics.rejected.WithLabelValues("shutting_down").Inc()
		apistatus.Write(w, apistatus.New(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "the gateway is shutting down"))
		return
	default:
	}
	user := auth.UserFrom(r.Context())
	if user == nil {
		user = auth.AnonymousUser
	}
	client := clientKey(user, r)

	hj := &hijacker{ResponseWriter: w}
	c, err := websocket.Accept(hj, r, s.accept)
	if err != nil {
		// Accept refused the handshake (400 bad handshake, 403 foreign
		// Origin, 426 not an upgrade) and left its answer to hj.
		s.metrics.rejected.WithLabelValues("handshake").Inc()
		s.log.Debug("websocket handshake refused", zap.Error(err), zap.String("client", client))
		if hj.refused != 0 {
			writeRefusal(w, hj.refused, strings.TrimSpace(hj.refusal.String()))
		}
		return
	}
	c.SetReadLimit(s.opts.MaxMessageBytes)

	sock := newSocket(r.Context(), s, c, hj.conn, user, client)
	if code, reason := s.register(sock); code != 0 {
		sock.cancel()
		_ = c.Close(code, reason)
		return
	}
	// The socket outlives this call: ServeHTTP returns so that net/http
	// drops what it holds for the request (the handler goroutine and its
	// stack, the request, its buffers). See "Cost of an idle socket" in
	// docs/protocol.md.
	go func() {
		defer s.unregister(sock)
		sock.run()
	}()
}

// writeRefusal answers a handshake websocket.Accept refused with a Status
// of the same code. A foreign Origin's message says which setting admits
// it.
func writeRefusal(w http.ResponseWriter, code int, msg string) {
	if code == http.StatusForbidden {
		msg += "; a browser page on another origin must be listed in websocket.allowedOrigins (see docs/protocol.md)"
	}
	// NewGenericServerResponse gives the reason kube-apiserver uses for
	// each code.
	st := apierrors.NewGenericServerResponse(code, "", schema.GroupResource{}, "", msg, 0, false).ErrStatus
	st.Message = msg
	st.Details = nil
	if st.Reason == metav1.StatusReasonUnknown {
		st.Reason = metav1.StatusReasonBadRequest // 426: not an upgrade
	}
	apistatus.Write(w, &st)
}

// register admits sock within the limits. It returns a close code and
// reason when refused. At MaxSockets, a client holding fewer sockets than
// another makes that other give one up (see evictLocked).
func (s *Server) register(sock *socket) (websocket.StatusCode, string) {
	s.mu.Lock()
	c := s.perClient[sock.client]
	var evicted *socket
	switch {
	case s.closing:
		s.mu.Unlock()
		s.metrics.rejected.WithLabelValues("shutting_down").Inc()
		return websocket.StatusGoingAway, "server shutting down"
	case c != nil && len(c.socks) >= s.opts.MaxSocketsPerClient:
		s.mu.Unlock()
		s.metrics.rejected.WithLabelValues("max_sockets_per_client").Inc()
		return websocket.StatusPolicyViolation, fmt.Sprintf("too many sockets for this client (limit %d)", s.opts.MaxSocketsPerClient)
	case s.counted >= s.opts.MaxSockets:
		held := 0
		if c != nil {
			held = len(c.socks)
		}
		if evicted = s.evictLocked(held); evicted == nil {
			s.mu.Unlock()
			s.metrics.rejected.WithLabelValues("max_sockets").Inc()
			return websocket.StatusTryAgainLater, fmt.Sprintf("too many sockets on this gateway (limit %d); try again later", s.opts.MaxSockets)
		}
	}
	if c == nil {
		c = &clientShare{budget: informer.NewResyncBudget(s.opts.ResyncBudget, int(10*s.opts.ResyncBudget))}
		s.perClient[sock.client] = c
	}
	c.socks = append(c.socks, sock)
	sock.budget = c.budget
	s.sockets[sock] = struct{}{}
	s.counted++
	s.wg.Add(1)
	s.mu.Unlock()
	s.metrics.sockets.Inc()
	if evicted != nil {
		s.metrics.evicted.Inc()
		// A close reason holds at most 123 bytes.
		evicted.evict(fmt.Sprintf("closed to make room for another client: at the limit of %d sockets, this client held the most", s.opts.MaxSockets))
	}
	return 0, ""
}

// evictLocked makes room for a socket of a client holding held sockets,
// when some client holds at least two more: the client holding the most
// gives one up, its newest socket without subscriptions, else its
// newest. The socket is no longer counted (the caller closes it). It
// returns nil when no client holds that many: every client has its fair
// part of the sockets, and the newcomer waits. Caller must hold s.mu.
func (s *Server) evictLocked(held int) *socket {
	var top *clientShare
	for _, c := range s.perClient {
		if top == nil || len(c.socks) > len(top.socks) {
			top = c
		}
	}
	if top == nil || len(top.socks) < held+2 {
		return nil
	}
	i := len(top.socks) - 1
	for j := i; j >= 0; j-- {
		if top.socks[j].idle() {
			i = j
			break
		}
	}
	victim := top.socks[i]
	top.socks = slices.Delete(top.socks, i, i+1)
	victim.evicted = true
	s.counted--
	return victim
}

func (s *Server) unregister(sock *socket) {
	s.mu.Lock()
	delete(s.sockets, sock)
	if !sock.evicted {
		s.counted--
		if c := s.perClient[sock.client]; c != nil {
			c.socks = slices.DeleteFunc(c.socks, func(o *socket) bool { return o == sock })
		}
	}
	if c := s.perClient[sock.client]; c != nil && len(c.socks) == 0 {
		delete(s.perClient, sock.client)
	}
	s.mu.Unlock()
	s.metrics.sockets.Dec()
	s.wg.Done()
}

// clientKey names the client that per-client limits apply to (see
// auth.ClientKey).
func clientKey(u *auth.User, r *http.Request) string { return auth.ClientKey(u, r) }

// offersSubprotocol reports whether the handshake offers kubegate.v1.
// Tokens are compared exactly: subprotocol names are case-sensitive.
func offersSubprotocol(r *http.Request) bool {
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(h, ",") {
			if strings.TrimSpace(p) == Subprotocol {
				return true
			}
		}
	}
	return false
}

// matchOrigin matches an origin host against a pattern the way
// websocket.Accept does, so bad patterns fail at New instead of at the
// first browser request.
func matchOrigin(pattern, host string) (bool, error) {
	return path.Match(strings.ToLower(pattern), strings.ToLower(host))
}
