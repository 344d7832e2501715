package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/coder/websocket"
	"golang.org/x/time/rate"
)

// kind is a subscriber's behaviour.
type kind string

const (
	kindAll       kind = "all"        // admin, all namespaces
	kindNamespace kind = "namespace"  // admin, one namespace
	kindSelector  kind = "selector"   // admin, all namespaces, tier=a
	kindResume    kind = "resume"     // admin, all namespaces; leaves and resumes with its resourceVersion
	kindViewerAll kind = "viewer-all" // the viewer user, all namespaces (narrowed by RBAC)
	kindViewerNS  kind = "viewer-ns"  // the viewer user, the namespace whose grant flips
	kindSlow      kind = "slow"       // admin, all namespaces, reads at SlowReadBytes per second
	kindStuck     kind = "stuck"      // admin, all namespaces, never reads
)

// subscriber is one WebSocket client with one subscription (id "s") and the
// view it builds from its frames: namespace/name → resourceVersion.
//
// For each connection, connect starts one reader goroutine (read) that
// owns the connection's reads, applies frames under mu and exits when the
// connection fails or is closed; the population's WaitGroup tracks it.
// Other goroutines (the churn loop, the final check) call connect,
// resubscribe, leave and view.
type subscriber struct {
	name      string
	kind      kind
	token     string
	namespace string
	selector  string
	counters  *counters
	limiter   *rate.Limiter // reads of a slow subscriber; nil otherwise

	mu      sync.Mutex // guards the fields below
	conn    *websocket.Conn
	cancel  context.CancelFunc // ends the connection's reader
	active  bool               // subscription acked and not ended
	pending bool               // subscribe sent, no answer yet
	state   map[string]string  // the view, valid when !snap
	snap    bool               // a snapshot is being received into next
	next    map[string]string
	lastRV  string // resume point: rv of the last live event or END_OF_SNAPSHOT
}

// counters are the clients' totals, shared by all subscribers.
type counters struct {
	joins, leaves, dialErrors, reconnects             atomic.Int64
	events, syncs                                     atomic.Int64
	resetOverflow, resetExpired, resetReauth          atomic.Int64
	ended401, ended403, ended503, endedOther, refused atomic.Int64
	serverCloses, slowCloses                          atomic.Int64
	webhookOK, webhookFailed, webhookBadSig           atomic.Int64
	ops, opErrors, restarts, rbacFlips                atomic.Int64
	protocolErrors                                    atomic.Int64

	mu         sync.Mutex    // guards otherCodes
	otherCodes map[int]int64 // status code → subscriptions ended with it (not 401/403/503)
}

// noteOther records the status code of a subscription ended for another
// reason than 401, 403 or 503.
func (c *counters) noteOther(code int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.otherCodes == nil {
		c.otherCodes = map[int]int64{}
	}
	c.otherCodes[code]++
}

func newSubscriber(name string, k kind, token, namespace, selector string, c *counters) *subscriber {
	return &subscriber{name: name, kind: k, token: token, namespace: namespace, selector: selector,
		counters: c, state: map[string]string{}}
}

// throttledConn reads at most as fast as its limiter allows.
type throttledConn struct {
	net.Conn
	lim *rate.Limiter
}

func (c throttledConn) Read(p []byte) (int, error) {
	if len(p) > 1024 {
		p = p[:1024]
	}
	if err := c.lim.WaitN(context.Background(), len(p)); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

// connected reports whether the subscriber has a connection.
func (s *subscriber) connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conn != nil
}

// connect dials url and subscribes; wg tracks the reader goroutine.
func (s *subscriber) connect(ctx context.Context, url string, wg *sync.WaitGroup) error {
	opts := &websocket.DialOptions{
		Subprotocols: []string{"kubegate.v1"},
		HTTPHeader:   http.Header{"Authorization": {"Bearer " + s.token}},
	}
	if s.limiter != nil {
		d := &net.Dialer{Control: slowSocket}
		opts.HTTPClient = &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := d.DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return throttledConn{Conn: c, lim: s.limiter}, nil
			},
		}}
	}
	c, resp, err := websocket.Dial(ctx, url, opts)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		s.counters.dialErrors.Add(1)
		return fmt.Errorf("%s: dial: %w", s.name, err)
	}
	c.SetReadLimit(64 << 20)
	rctx, cancel := context.WithCancel(context.Background())
	s.mu.Lock()
	s.conn, s.cancel = c, cancel
	s.mu.Unlock()
	if s.kind != kindStuck {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.read(rctx, c)
		}()
	}
	return s.resubscribe(ctx)
}

// resubscribe sends a subscribe on the current connection: resuming from
// lastRV when the view is complete, a fresh snapshot otherwise.
func (s *subscriber) resubscribe(ctx context.Context) error {
	s.mu.Lock()
	c := s.conn
	if c == nil || s.active || s.pending {
		s.mu.Unlock()
		return nil
	}
	f := map[string]any{"type": "subscribe", "id": "s", "resource": "configmaps", "labelSelector": s.selector}
	if s.namespace != "" {
		f["namespace"] = s.namespace
	}
	if s.lastRV != "" && !s.snap {
		f["resourceVersion"] = s.lastRV
	} else {
		s.snap, s.next = true, map[string]string{}
	}
	s.pending = true
	s.mu.Unlock()
	b, _ := json.Marshal(f)
	if err := c.Write(ctx, websocket.MessageText, b); err != nil {
		return fmt.Errorf("%s: subscribe: %w", s.name, err)
	}
	return nil
}

// leave closes the connection. The view stays for a later resume.
func (s *subscriber) leave() {
	s.mu.Lock()
	c, cancel := s.conn, s.cancel
	s.conn, s.cancel, s.active, s.pending = nil, nil, false, false
	s.mu.Unlock()
	if c != nil {
		c.CloseNow()
		cancel()
	}
}

// frame is the part of a server frame a subscriber reads.
type frame struct {
	Type    string            `json:"type"`
	ID      string            `json:"id"`
	Request string            `json:"request"`
	Ended   bool              `json:"ended"`
	Reason  string            `json:"reason"`
	RV      string            `json:"rv"`
	Events  []json.RawMessage `json:"events"`
	Status  *struct {
		Code int `json:"code"`
	} `json:"status"`
	Object *struct {
		Metadata struct {
			Name            string `json:"name"`
			Namespace       string `json:"namespace"`
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	} `json:"object"`
}

func (s *subscriber) read(ctx context.Context, c *websocket.Conn) {
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			s.mu.Lock()
			mine := s.conn == c
			if mine {
				s.conn, s.active, s.pending = nil, false, false
				s.cancel()
			}
			s.mu.Unlock()
			if mine {
				// The server (or the network) ended it, not leave.
				s.counters.serverCloses.Add(1)
				if websocket.CloseStatus(err) == 4001 {
					s.counters.slowCloses.Add(1)
				}
			}
			return
		}
		var f frame
		if err := json.Unmarshal(data, &f); err != nil {
			s.counters.protocolErrors.Add(1)
			continue
		}
		if f.Type != "batch" {
			s.apply(&f)
			continue
		}
		for _, raw := range f.Events {
			var e frame
			if err := json.Unmarshal(raw, &e); err != nil {
				s.counters.protocolErrors.Add(1)
				continue
			}
			s.apply(&e)
		}
	}
}

func key(ns, name string) string { return ns + "/" + name }

func (s *subscriber) apply(f *frame) {
	s.mu.Lock()
	defer s.mu.Unlock()
	target := s.state
	if s.snap {
		target = s.next
	}
	switch f.Type {
	case "ack":
		if f.Request == "subscribe" {
			s.pending, s.active = false, true
		}
	case "error":
		code := 0
		if f.Status != nil {
			code = f.Status.Code
		}
		switch {
		case f.Ended:
			s.active = false
			switch code {
			case 401:
				s.counters.ended401.Add(1)
			case 403:
				s.counters.ended403.Add(1)
			case 503:
				s.counters.ended503.Add(1)
			default:
				s.counters.endedOther.Add(1)
				s.counters.noteOther(code)
			}
		case f.Request == "subscribe":
			s.pending = false
			s.counters.refused.Add(1)
		default:
			s.counters.protocolErrors.Add(1)
		}
	case "RESET":
		switch f.Reason {
		case "Overflow":
			s.counters.resetOverflow.Add(1)
		case "Expired":
			s.counters.resetExpired.Add(1)
		case "Reauthorized":
			s.counters.resetReauth.Add(1)
		}
		s.snap, s.next = true, map[string]string{}
	case "END_OF_SNAPSHOT":
		if s.snap {
			s.state, s.snap, s.next = s.next, false, nil
		}
		s.lastRV = f.RV
	case "ADDED", "MODIFIED", "SYNC":
		if f.Object == nil {
			s.counters.protocolErrors.Add(1)
			return
		}
		m := f.Object.Metadata
		target[key(m.Namespace, m.Name)] = m.ResourceVersion
		if f.Type == "SYNC" {
			s.counters.syncs.Add(1)
			return
		}
		s.counters.events.Add(1)
		if !s.snap {
			s.lastRV = f.RV
		}
	case "DELETED":
		if f.Object == nil {
			s.counters.protocolErrors.Add(1)
			return
		}
		m := f.Object.Metadata
		delete(target, key(m.Namespace, m.Name))
		s.counters.events.Add(1)
		if !s.snap {
			s.lastRV = f.RV
		}
	}
}

// view returns a copy of the subscriber's view and whether it is complete
// (subscribed and not in the middle of a snapshot).
func (s *subscriber) view() (map[string]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.state), s.active && !s.snap
}

// status describes the subscriber for failure messages.
func (s *subscriber) status() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("%s (%s ns=%q sel=%q): connected=%v active=%v pending=%v snapshot=%v lastRV=%s objects=%d",
		s.name, s.kind, s.namespace, s.selector, s.conn != nil, s.active, s.pending, s.snap, s.lastRV, len(s.state))
}

// resumable reports whether the subscriber has a resume point.
func (s *subscriber) resumable() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastRV != "" && !s.snap
}
