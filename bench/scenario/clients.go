package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The viewchurn and tenants scenarios drive several clients that must be
// told apart, by the gateway and by the figures: victims and attackers.
// Each is an identity, a bearer token and the loopback address its
// connections come from. Linux routes all of 127.0.0.0/8 to the loopback
// interface, so a client bound to 127.0.0.7 reaches a gateway listening on
// 127.0.0.1 and is, to the gateway, another host: budgets the gateway
// keeps per client address (failed credentials, anonymous callers) then
// see the attacker and its victim apart, as they would be in a cluster.

// identity is one client of the gateway.
type identity struct {
	// name is the client's name in the figures and logs.
	name string
	// token is its bearer token; "" sends none.
	token string
	// src is the loopback address its connections come from; nil leaves
	// it to the kernel (127.0.0.1).
	src net.IP
}

// loopback is the address 127.0.0.n.
func loopback(n byte) net.IP { return net.IPv4(127, 0, 0, n) }

// transport is an HTTP/1.1 transport whose connections come from id.src,
// keeping up to conns idle connections and never asking for gzip (see
// http1Client).
func (id identity) transport(conns int) *http.Transport {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	if id.src != nil {
		d.LocalAddr = &net.TCPAddr{IP: id.src}
	}
	return &http.Transport{
		DialContext:         d.DialContext,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		DisableCompression:  true,
		IdleConnTimeout:     90 * time.Second,
	}
}

// client is an HTTP client of id with up to conns idle connections.
func (id identity) client(conns int) *http.Client {
	return &http.Client{Transport: id.transport(conns)}
}

// get sends GET base+path as id with Accept accept ("" for JSON) and
// reads the whole answer.
func (id identity) get(ctx context.Context, c *http.Client, u, accept string) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, err
	}
	if accept == "" {
		accept = "application/json"
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("Accept-Encoding", "identity")
	if id.token != "" {
		req.Header.Set("Authorization", "Bearer "+id.token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// dialWS opens a /ws socket as id on its own connection (from id.src),
// with the token in the Authorization header. The caller closes it.
func (id identity) dialWS(ctx context.Context, wsURL string) (*websocket.Conn, *http.Response, error) {
	t := id.transport(0)
	h := http.Header{}
	if id.token != "" {
		h.Set("Authorization", "Bearer "+id.token)
	}
	c, resp, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{
		Subprotocols: []string{"kubegate.v1"},
		HTTPHeader:   h,
		HTTPClient:   &http.Client{Transport: t},
	})
	if err != nil {
		t.CloseIdleConnections()
		return nil, resp, err
	}
	c.SetReadLimit(-1)
	return c, resp, nil
}

// wsURLOf is the /ws URL of a gateway at base (http://host:port).
func wsURLOf(base string) string { return strings.Replace(base, "http://", "ws://", 1) + "/ws" }

// paced calls fn at rate a second, with at most workers calls at once,
// until ctx ends, and waits for the calls in flight. Each call gets the
// sequence number of its tick. A tick that finds every worker busy waits
// for one: the rate reached is then less than asked, and the caller
// reports what it counted.
func paced(ctx context.Context, perSecond float64, workers int, fn func(ctx context.Context, seq int)) {
	burst := max(1, int(perSecond/20))
	lim := rate.NewLimiter(rate.Limit(perSecond), burst)
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() {
			for seq := range jobs {
				fn(ctx, seq)
			}
		})
	}
	for seq := 0; lim.Wait(ctx) == nil; seq++ {
		select {
		case jobs <- seq:
		case <-ctx.Done():
		}
	}
	close(jobs)
	wg.Wait()
}

// refusals tallies an attacker's answers: how many of each HTTP status
// (or WebSocket error code, or close code), and how many of its 429s
// lacked Retry-After (HTTP) or a complete metav1.Status.
type refusals struct {
	mu sync.Mutex // guards codes and examples
	// codes counts answers by status code; 0 is a transport error.
	codes map[int]int
	// examples keeps the first answer of each code other than 200, for
	// the log.
	examples map[int]string
	// bad429 counts 429s without Retry-After or without a complete
	// Status.
	bad429 atomic.Int64
}

func newRefusals() *refusals {
	return &refusals{codes: map[int]int{}, examples: map[int]string{}}
}

// add counts one answer with code, its body (a Status for errors) and,
// for HTTP, whether it had Retry-After (http false: a WebSocket error
// frame, which has no headers).
func (r *refusals) add(code int, body []byte, http, retryAfter bool) {
	if code == 429 {
		if (http && !retryAfter) || !completeStatus(body, 429) {
			r.bad429.Add(1)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.codes[code]++
	if _, ok := r.examples[code]; !ok && code != 200 && code != 101 {
		r.examples[code] = string(bytes.TrimSpace(body[:min(len(body), 300)]))
	}
}

// count is the number of answers with code.
func (r *refusals) count(code int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.codes[code]
}

// total is the number of answers counted.
func (r *refusals) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.codes {
		n += c
	}
	return n
}

// String lists the counts by code, with an example of each refusal.
func (r *refusals) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, code := range slices.Sorted(maps.Keys(r.codes)) {
		name := fmt.Sprint(code)
		if code == 0 {
			name = "transport error"
		}
		fmt.Fprintf(&b, " %s: %d", name, r.codes[code])
		if ex := r.examples[code]; ex != "" {
			fmt.Fprintf(&b, " (%.160s)", ex)
		}
		b.WriteByte(';')
	}
	return strings.TrimSuffix(b.String(), ";")
}

// completeStatus reports whether body is a metav1.Status as kube-apiserver
// sends it for code: kind, apiVersion, status Failure, code, reason and
// message all set.
func completeStatus(body []byte, code int) bool {
	var s metav1.Status
	if json.Unmarshal(body, &s) != nil {
		return false
	}
	return s.Kind == "Status" && s.APIVersion == "v1" && s.Status == metav1.StatusFailure &&
		int(s.Code) == code && s.Reason != "" && s.Message != ""
}
