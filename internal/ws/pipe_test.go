package ws

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kubegate/internal/auth"
	"kubegate/internal/informer"
	"kubegate/internal/livequery/wire"
)

// Tests of the socket's own machinery (writer, keepalive) run a Server
// over in-memory connections inside a synctest bubble: no apiserver and
// no network, and time moves only when every goroutine in the bubble is
// blocked, so a test can check exactly what has been sent at each
// instant. Subscriptions are fed by fakeListener instead of the informer.

// pipeServer is a Server behind an http.Server whose connections are
// net.Pipe pairs. Start it inside synctest.Test.
type pipeServer struct {
	*Server
	l      *pipeListener
	reg    *prometheus.Registry
	handed map[*socket]bool // sockets dial has returned
	stop   func()           // shuts the server down (Start returns); idempotent
}

func startPipeServer(t *testing.T, mod func(*Options)) *pipeServer {
	t.Helper()
	reg := prometheus.NewRegistry()
	// The writer never calls the Manager; only a subscribe frame would.
	opts := Options{Manager: new(informer.Manager), Tables: wire.NewTables(new(informer.Manager), zap.NewNop(), wire.ViewLimits{}), Logger: zaptest.NewLogger(t).Named("ws"), Registerer: reg}
	if mod != nil {
		mod(&opts)
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ps := &pipeServer{Server: s, l: newPipeListener(), reg: reg, handed: map[*socket]bool{}}
	hs := &http.Server{Handler: s}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ps.l) }()
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan error, 1)
	go func() { started <- s.Start(ctx) }()
	var once sync.Once
	ps.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-started; err != nil {
				t.Errorf("Server.Start: %v", err)
			}
			_ = hs.Close()
			if err := <-served; !errors.Is(err, http.ErrServerClosed) {
				t.Errorf("http.Server.Serve: %v", err)
			}
		})
	}
	t.Cleanup(ps.stop)
	return ps
}

// dial opens a socket and returns the client's end and the server's
// socket. The client answers pings.
func (ps *pipeServer) dial(t *testing.T) (*pipeClient, *socket) {
	t.Helper()
	return ps.dialPong(t, true)
}

// dialPong is dial with a client that answers pings only if pong is set:
// one that does not still reads everything, like a peer whose pongs are
// lost on the way.
func (ps *pipeServer) dialPong(t *testing.T, pong bool) (*pipeClient, *socket) {
	t.Helper()
	pc := &pipeClient{done: make(chan struct{})}
	hc := &http.Client{Transport: &http.Transport{DialContext: ps.l.dial}}
	t.Cleanup(hc.CloseIdleConnections)
	c, _, err := websocket.Dial(context.Background(), "ws://kubegate.test/ws", &websocket.DialOptions{
		Subprotocols: []string{Subprotocol},
		HTTPClient:   hc,
		OnPingReceived: func(context.Context, []byte) bool {
			pc.pings.Add(1)
			return pong
		},
	})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	c.SetReadLimit(-1)
	pc.c = c
	go pc.readLoop()
	t.Cleanup(func() {
		_ = c.CloseNow()
		<-pc.done
	})
	// ServeHTTP has registered the socket once it returned.
	synctest.Wait()
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for sock := range ps.sockets {
		if !ps.handed[sock] {
			ps.handed[sock] = true
			return pc, sock
		}
	}
	t.Fatal("no new socket on the server")
	return nil, nil
}

// subscribeFake adds an active subscription to config maps fed by a
// fakeListener, as startSubscription would once the informer's listener
// exists. Re-authorization passes leave it as it is.
func (s *socket) subscribeFake(id string) *fakeListener {
	fl := &fakeListener{wake: s.signal}
	info := &informer.ResourceInfo{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespaced: true}
	s.mu.Lock()
	s.subs[id] = &subscription{
		id:      id,
		qid:     quoteID(id),
		req:     &clientFrame{Type: typeSubscribe, ID: id, Resource: "configmaps"},
		info:    info,
		recheck: auth.NewRecheck(s.opts.RecheckGrace, s.opts.clock),
		l:       fl,
	}
	s.mu.Unlock()
	s.srv.metrics.subscriptions.Inc()
	return fl
}

// fakeListener stands in for an informer.Listener: the test pushes
// notifications, which wake the socket as OnWake does, and the writer
// pops them.
type fakeListener struct {
	wake    func()
	mu      sync.Mutex
	pending []informer.Notification
	err     error // set by end
	stopped bool
}

// end ends the listener as its resource going away does: Ended after
// what it holds and before (queued with it, under one wake, so the writer
// cannot flush them apart), and err from Err.
func (l *fakeListener) end(err error, before ...informer.Notification) {
	l.mu.Lock()
	l.err = err
	l.pending = append(l.pending, before...)
	l.pending = append(l.pending, informer.Notification{Type: informer.Ended})
	l.mu.Unlock()
	l.wake()
}

func (l *fakeListener) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *fakeListener) push(ns ...informer.Notification) {
	l.mu.Lock()
	l.pending = append(l.pending, ns...)
	l.mu.Unlock()
	l.wake()
}

func (l *fakeListener) PopAtMost(buf []informer.Notification, limit int) []informer.Notification {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.pending)
	if limit > 0 {
		n = min(n, limit)
	}
	buf = append(buf, l.pending[:n]...)
	l.pending = append(l.pending[:0], l.pending[n:]...)
	return buf
}

func (l *fakeListener) Stop() {
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
}

func (l *fakeListener) pendingLen() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.pending)
}

// pipeClient is the client's end of a socket. It reads every message as
// it arrives and keeps it with its (bubble) arrival time.
type pipeClient struct {
	c     *websocket.Conn
	done  chan struct{} // closed when the read loop ends
	pings atomic.Int32  // pings received
	mu    sync.Mutex
	msgs  []message
	err   error // what ended the read loop
}

type message struct {
	at   time.Time
	data []byte
}

func (pc *pipeClient) readLoop() {
	defer close(pc.done)
	for {
		_, data, err := pc.c.Read(context.Background())
		pc.mu.Lock()
		if err != nil {
			pc.err = err
			pc.mu.Unlock()
			return
		}
		pc.msgs = append(pc.msgs, message{at: time.Now(), data: data})
		pc.mu.Unlock()
	}
}

// received returns the messages read so far. Call it after synctest.Wait
// so that everything sent by then has been read.
func (pc *pipeClient) received() []message {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return append([]message(nil), pc.msgs...)
}

// closeStatus waits for the read loop to end and returns the close code.
func (pc *pipeClient) closeStatus() websocket.StatusCode {
	<-pc.done
	return websocket.CloseStatus(pc.err)
}

// pipeListener hands the server ends of net.Pipe pairs to http.Server.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }
