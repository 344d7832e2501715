package scenario

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// received is one MODIFIED event a subscriber got: the object's
// resourceVersion and when it arrived (UnixNano).
type received struct {
	rv uint64
	at int64
}

// subscriber is one watcher. Its receive goroutine is the only writer of
// events, lastRV and errs until it has exited (wg), after which the phase
// reads them.
type subscriber struct {
	// namespace is the watcher's scope; "" watches every namespace.
	namespace string
	// slow subscribers never read after they are established.
	slow bool

	events []received
	// count is len(events), readable while the receiver runs.
	count atomic.Int64
	// lastRV is the resume point: the rv of the last event or
	// END_OF_SNAPSHOT processed.
	lastRV uint64
	// resets counts RESET frames (gateway) or ERROR events (apiserver).
	resets int
	err    error
	// failed is set with err, for readers while the receiver runs.
	failed atomic.Bool
}

// fail records why the subscriber stopped receiving.
func (s *subscriber) fail(err error) {
	if s.err == nil {
		s.err = err
	}
	s.failed.Store(true)
}

func (s *subscriber) record(rv uint64) {
	s.events = append(s.events, received{rv: rv, at: time.Now().UnixNano()})
	s.count.Add(1)
	s.lastRV = rv
}

// watchArm opens subscribers on one server.
type watchArm interface {
	Name() string
	// Open establishes every subscriber (a WebSocket subscription is
	// acknowledged, a watch has its response headers) and starts their
	// receivers. Events after rv are delivered; rv 0 means "from now".
	Open(ctx context.Context, subs []*subscriber, rv uint64) error
	// Close stops the receivers and waits for them.
	Close()
}

// openParallel runs open for every subscriber, 32 at a time.
func openParallel(ctx context.Context, subs []*subscriber, open func(context.Context, int, *subscriber) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, 32)
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
	for i, s := range subs {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := open(ctx, i, s); err != nil {
				once.Do(func() { firstErr = err; cancel() })
			}
		})
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return firstErr
}

// wsArm subscribes through the gateway's /ws, one subscription per socket
// (see docs/benchmarks.md for why).
type wsArm struct {
	url string
	// resource to subscribe to; "" is pods.
	resource string
	// resume, when set, subscribes with each subscriber's lastRV.
	resume bool
	// snapshots counts subscribers whose first frame after the ack was a
	// RESET or ADDED (a full snapshot) instead of resumed changes.
	snapshots atomic.Int64

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex // guards conns
	conns  []*websocket.Conn
}

func newWSArm(env *Env) *wsArm {
	u := strings.Replace(env.GatewayURL, "http://", "ws://", 1) + "/ws"
	return &wsArm{url: u}
}

func (a *wsArm) Name() string { return ArmGateway }

// subscribeFrame is the client's subscribe request.
type subscribeFrame struct {
	Type              string `json:"type"`
	ID                string `json:"id"`
	Resource          string `json:"resource"`
	Namespace         string `json:"namespace,omitempty"`
	ResourceVersion   string `json:"resourceVersion,omitempty"`
	SendInitialEvents *bool  `json:"sendInitialEvents,omitempty"`
}

func (a *wsArm) Open(ctx context.Context, subs []*subscriber, rv uint64) error {
	a.ctx, a.cancel = context.WithCancel(context.Background())
	return openParallel(ctx, subs, func(ctx context.Context, i int, s *subscriber) error {
		c, _, err := websocket.Dial(ctx, a.url, &websocket.DialOptions{Subprotocols: []string{"kubegate.v1"}})
		if err != nil {
			return fmt.Errorf("dial %s: %w", a.url, err)
		}
		c.SetReadLimit(-1)
		a.mu.Lock()
		a.conns = append(a.conns, c)
		a.mu.Unlock()
		f := subscribeFrame{Type: "subscribe", ID: wsSubID, Resource: cmp.Or(a.resource, "pods"), Namespace: s.namespace, SendInitialEvents: new(bool)}
		if a.resume {
			f.ResourceVersion = strconv.FormatUint(s.lastRV, 10)
		} else if rv != 0 {
			f.ResourceVersion = strconv.FormatUint(rv, 10)
		}
		b, _ := json.Marshal(f)
		if err := c.Write(ctx, websocket.MessageText, b); err != nil {
			return fmt.Errorf("subscribe: %w", err)
		}
		acked := make(chan error, 1)
		a.wg.Go(func() { a.receive(c, s, acked) })
		select {
		case err := <-acked:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}

// receive reads the socket until it closes. It reports the subscription's
// ack (or error) on acked, then records events; a slow subscriber stops
// reading after the ack.
func (a *wsArm) receive(c *websocket.Conn, s *subscriber, acked chan<- error) {
	defer c.CloseNow()
	var buf bytes.Buffer
	gotAck, first := false, true
	for {
		_, r, err := c.Reader(a.ctx)
		if err != nil {
			if !gotAck {
				acked <- fmt.Errorf("read ack: %w", err)
			} else if a.ctx.Err() == nil {
				s.fail(err)
			}
			return
		}
		buf.Reset()
		if _, err := buf.ReadFrom(r); err != nil {
			if !gotAck {
				acked <- err
			}
			return
		}
		err = scanFrames(buf.Bytes(), func(typ, id, rv []byte) {
			switch string(typ) {
			case "ack":
				gotAck = true
				acked <- nil
				return
			case "error":
				if !gotAck {
					gotAck = true
					acked <- fmt.Errorf("subscribe refused: %s", buf.Bytes())
				} else {
					s.fail(fmt.Errorf("error frame: %.300s", buf.Bytes()))
				}
				return
			case "RESET":
				s.resets++
			case "MODIFIED":
				if n, err := strconv.ParseUint(string(rv), 10, 64); err == nil {
					s.record(n)
				}
			case "ADDED", "DELETED", "END_OF_SNAPSHOT":
				if n, err := strconv.ParseUint(string(rv), 10, 64); err == nil {
					s.lastRV = n
				}
			}
			if first && gotAck && string(typ) != "ack" {
				first = false
				if string(typ) == "RESET" || string(typ) == "ADDED" || string(typ) == "END_OF_SNAPSHOT" {
					a.snapshots.Add(1)
				}
			}
		})
		if err != nil {
			s.fail(fmt.Errorf("bad frame: %w", err))
			return
		}
		if s.slow && gotAck {
			<-a.ctx.Done()
			return
		}
	}
}

func (a *wsArm) Close() {
	if a.cancel == nil {
		return
	}
	a.cancel()
	a.mu.Lock()
	for _, c := range a.conns {
		c.CloseNow()
	}
	a.conns = nil
	a.mu.Unlock()
	a.wg.Wait()
}

// jsonArm watches kube-apiserver over HTTP/1.1 with JSON, one connection
// per watch, as kubectl and most non-Go clients do.
type jsonArm struct {
	host   string
	token  string
	client *http.Client
	resume bool
	// name is the arm's name; "" is ArmJSON.
	name string
	// table asks for each event's object as a one-row meta.k8s.io Table
	// (tableAccept) and reads its version from the row's object.
	table bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newJSONArm(env *Env) (*jsonArm, error) {
	client, err := http1Client(env.APIServer)
	if err != nil {
		return nil, err
	}
	return &jsonArm{host: env.APIServer.Host, token: env.APIServer.BearerToken, client: client}, nil
}

// http1Client is an HTTP/1.1 client trusting cfg's CA, with no limit on
// connections per host. It does not ask for gzip (Go's transport would, and
// kube-apiserver would then compress every list over 128 KiB): compression
// costs CPU and saves nothing on loopback, and the gateway does not
// compress.
func http1Client(cfg *rest.Config) (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cfg.CAData) {
		return nil, errors.New("apiserver CA: no certificates")
	}
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{}, // no HTTP/2
		MaxIdleConnsPerHost: 1000,
		DisableCompression:  true,
	}}, nil
}

// newGatewayWatchArm watches the gateway's REST API (plain HTTP/1.1, one
// connection per watch) as JSON or, with table, as Tables, as kubectl get
// -w asks for them.
func newGatewayWatchArm(env *Env, table bool) *jsonArm {
	return &jsonArm{host: env.GatewayURL, token: env.GatewayToken, name: ArmGateway, table: table,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1000, DisableCompression: true}}}
}

func (a *jsonArm) Name() string { return cmp.Or(a.name, ArmJSON) }

func podsPath(ns string) string {
	if ns == "" {
		return "/api/v1/pods"
	}
	return "/api/v1/namespaces/" + url.PathEscape(ns) + "/pods"
}

func (a *jsonArm) Open(ctx context.Context, subs []*subscriber, rv uint64) error {
	a.ctx, a.cancel = context.WithCancel(context.Background())
	return openParallel(ctx, subs, func(ctx context.Context, i int, s *subscriber) error {
		from := rv
		if a.resume {
			from = s.lastRV
		}
		q := url.Values{"watch": {"1"}, "resourceVersion": {strconv.FormatUint(from, 10)}}
		req, err := http.NewRequestWithContext(a.ctx, http.MethodGet, a.host+podsPath(s.namespace)+"?"+q.Encode(), nil)
		if err != nil {
			return err
		}
		if a.token != "" {
			req.Header.Set("Authorization", "Bearer "+a.token)
		}
		req.Header.Set("Accept", "application/json")
		if a.table {
			req.Header.Set("Accept", tableAccept)
		}
		resp, err := a.client.Do(req)
		if err != nil {
			return fmt.Errorf("watch: %w", err)
		}
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			return fmt.Errorf("watch: %s: %s", resp.Status, b)
		}
		a.wg.Go(func() { a.receive(resp.Body, s) })
		return nil
	})
}

func (a *jsonArm) receive(body io.ReadCloser, s *subscriber) {
	defer body.Close()
	if s.slow {
		<-a.ctx.Done()
		return
	}
	br := bufio.NewReaderSize(body, 16<<10)
	for {
		head, err := readLine(br)
		if err != nil {
			if a.ctx.Err() == nil {
				s.fail(err)
			}
			return
		}
		scan := scanWatchEvent
		if a.table {
			scan = scanTableWatchEvent
		}
		typ, rv, ok := scan(head)
		switch {
		case !ok:
			s.fail(fmt.Errorf("bad watch event: %.200s", head))
			return
		case string(typ) == "MODIFIED":
			s.record(rv)
		case string(typ) == "ERROR":
			s.resets++
			s.fail(fmt.Errorf("watch error: %.300s", head))
			return
		case string(typ) == "BOOKMARK" || string(typ) == "ADDED" || string(typ) == "DELETED":
			s.lastRV = rv
		}
	}
}

func (a *jsonArm) Close() {
	if a.cancel != nil {
		a.cancel()
	}
	a.wg.Wait()
	a.client.CloseIdleConnections()
}

// protoArm watches kube-apiserver with protobuf, as client-go programs do
// for built-in types. By default each watch has its own HTTP/1.1
// connection, like the JSON arm, so encoding is the only difference; with
// http2 (-proto-http2) every watch shares one HTTP/2 connection,
// client-go's default. Events are scanned for their type and resourceVersion
// (protowatch.go) rather than decoded into Pods: client-go's typed
// decoding made the benchmark's own process the bottleneck.
type protoArm struct {
	host   string
	token  string
	client *http.Client
	resume bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newProtoArm(env *Env, http2 bool) (*protoArm, error) {
	client, err := http1Client(env.APIServer)
	if err != nil {
		return nil, err
	}
	if http2 {
		t := client.Transport.(*http.Transport)
		t.TLSNextProto = nil
		t.ForceAttemptHTTP2 = true
	}
	return &protoArm{host: env.APIServer.Host, token: env.APIServer.BearerToken, client: client}, nil
}

func (a *protoArm) Name() string { return ArmProto }

func (a *protoArm) Open(ctx context.Context, subs []*subscriber, rv uint64) error {
	a.ctx, a.cancel = context.WithCancel(context.Background())
	return openParallel(ctx, subs, func(ctx context.Context, i int, s *subscriber) error {
		from := rv
		if a.resume {
			from = s.lastRV
		}
		q := url.Values{"watch": {"1"}, "resourceVersion": {strconv.FormatUint(from, 10)}}
		req, err := http.NewRequestWithContext(a.ctx, http.MethodGet, a.host+podsPath(s.namespace)+"?"+q.Encode(), nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+a.token)
		req.Header.Set("Accept", "application/vnd.kubernetes.protobuf;stream=watch")
		resp, err := a.client.Do(req)
		if err != nil {
			return fmt.Errorf("watch: %w", err)
		}
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			return fmt.Errorf("watch: %s: %q", resp.Status, b)
		}
		a.wg.Go(func() { a.receive(resp.Body, s) })
		return nil
	})
}

func (a *protoArm) receive(body io.ReadCloser, s *subscriber) {
	defer body.Close()
	if s.slow {
		<-a.ctx.Done()
		return
	}
	br := bufio.NewReaderSize(body, 16<<10)
	var buf []byte
	for {
		var err error
		buf, err = readProtoFrame(br, buf)
		if err != nil {
			if a.ctx.Err() == nil {
				s.fail(err)
			}
			return
		}
		typ, rv, err := scanProtoEvent(buf)
		switch {
		case string(typ) == "ERROR":
			s.resets++
			s.fail(errors.New("watch error event"))
			return
		case err != nil:
			s.fail(fmt.Errorf("bad protobuf watch event: %w", err))
			return
		case string(typ) == "MODIFIED":
			s.record(rv)
		default:
			s.lastRV = rv
		}
	}
}

func (a *protoArm) Close() {
	if a.cancel != nil {
		a.cancel()
	}
	a.wg.Wait()
	a.client.CloseIdleConnections()
}

// currentRV is the apiserver's current resourceVersion for Pods (a
// consistent one-item list).
func currentRV(ctx context.Context, c kubernetes.Interface) (uint64, error) {
	l, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(l.ResourceVersion, 10, 64)
}

// waitFor polls cond every 20ms until it holds or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	return waitForEvery(ctx, timeout, 20*time.Millisecond, cond)
}

// waitForEvery polls cond every period until it holds or timeout passes.
func waitForEvery(ctx context.Context, timeout, period time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		select {
		case <-time.After(period):
		case <-ctx.Done():
		}
	}
	return true
}
