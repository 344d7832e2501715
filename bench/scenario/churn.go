package scenario

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"kubegate/bench/harness"
	"kubegate/bench/workload"
)

// A churner is a client that opens new sorts and filters continuously,
// each a view the gateway has not built (issues 29 and 30): REST sorted
// lists and WebSocket windows, each read to its first rows and then let
// go. Its clock for a view runs from the request to the answer's last
// byte (REST, a page of at most 50 rows) or to the window's first WINDOW
// frame.

// churnSpec says what a churner sends and how fast.
type churnSpec struct {
	// restRate: REST lists a second, each GET /api/v1/pods?<restQuery>.
	restRate  float64
	restQuery func(seq int) string
	// longRate: REST lists a second with longQuery (issue 30's 4 KiB
	// selectors), timed apart.
	longRate  float64
	longQuery func(seq int) string
	// wsRate: windows a second, over wsSockets sockets, each wsWindow
	// (its Type, ID and Resource are filled in), unsubscribed once its
	// first WINDOW frame has arrived.
	wsRate    float64
	wsSockets int
	wsWindow  func(seq int) windowSubscribe
}

// Kinds of views a churner times.
const (
	churnREST = "REST"
	churnLong = "REST, 4 KiB selector"
	churnWS   = "WebSocket"
)

// churner runs a churnSpec until stop.
type churner struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	start  time.Time
	end    time.Time // set by stop

	mu sync.Mutex // guards times
	// times are the times to first rows of the views served, by kind.
	times map[string][]time.Duration
	// answers tallies the answers by kind.
	answers map[string]*refusals
}

// startChurn starts id churning views on the gateway at base.
func startChurn(ctx context.Context, id identity, base string, spec churnSpec) *churner {
	ctx, cancel := context.WithCancel(ctx)
	ch := &churner{cancel: cancel, start: time.Now(), times: map[string][]time.Duration{},
		answers: map[string]*refusals{churnREST: newRefusals(), churnLong: newRefusals(), churnWS: newRefusals()}}
	c := id.client(64)
	rest := func(kind string, rate float64, query func(int) string) {
		if rate <= 0 {
			return
		}
		ch.wg.Go(func() {
			defer c.CloseIdleConnections()
			paced(ctx, rate, 64, func(ctx context.Context, seq int) {
				t0 := time.Now()
				resp, body, err := id.get(ctx, c, base+"/api/v1/pods?"+query(seq), "")
				d := time.Since(t0)
				ch.answered(ctx, kind, resp, body, err, d)
			})
		})
	}
	rest(churnREST, spec.restRate, spec.restQuery)
	rest(churnLong, spec.longRate, spec.longQuery)
	if spec.wsRate > 0 {
		ch.wg.Go(func() { ch.windows(ctx, id, wsURLOf(base), spec) })
	}
	return ch
}

// answered counts one REST answer and, for a page served, its time.
func (ch *churner) answered(ctx context.Context, kind string, resp *http.Response, body []byte, err error, d time.Duration) {
	if err != nil {
		if ctx.Err() == nil {
			ch.answers[kind].add(0, []byte(err.Error()), true, false)
		}
		return
	}
	ch.answers[kind].add(resp.StatusCode, body, true, resp.Header.Get("Retry-After") != "")
	if resp.StatusCode == http.StatusOK {
		ch.mu.Lock()
		ch.times[kind] = append(ch.times[kind], d)
		ch.mu.Unlock()
	}
}

// windows opens spec's windows on a pool of sockets, one at a time on
// each, redialling a socket that fails.
func (ch *churner) windows(ctx context.Context, id identity, wsURL string, spec churnSpec) {
	n := max(spec.wsSockets, 1)
	pool := make(chan *timingConn, n)
	ans := ch.answers[churnWS]
	dial := func() *timingConn {
		c, _, err := id.dialWS(ctx, wsURL)
		if err != nil {
			if ctx.Err() == nil {
				ans.add(0, []byte(err.Error()), false, false)
			}
			return nil
		}
		return newTimingConn(c)
	}
	for range n {
		pool <- dial()
	}
	paced(ctx, spec.wsRate, n, func(ctx context.Context, seq int) {
		tc := <-pool
		defer func() { pool <- tc }()
		if tc == nil {
			if tc = dial(); tc == nil {
				return
			}
		}
		w := spec.wsWindow(seq)
		w.Type, w.ID, w.Resource = "subscribe", fmt.Sprintf("churn-%d", seq), "pods"
		if w.Limit == 0 {
			w.Limit = windowLimit
		}
		octx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		d, f, err := tc.open(octx, w)
		switch {
		case err == nil:
			ans.add(200, nil, false, false)
			ch.mu.Lock()
			ch.times[churnWS] = append(ch.times[churnWS], d)
			ch.mu.Unlock()
			if tc.close(octx, w.ID) == nil {
				return
			}
		case f.Type == "error" && f.Status != nil:
			b, _ := json.Marshal(f.Status)
			ans.add(int(f.Status.Code), b, false, false)
			return
		case ctx.Err() != nil:
		default:
			ans.add(0, []byte(err.Error()), false, false)
		}
		tc.Close()
		tc = nil
	})
	close(pool)
	for tc := range pool {
		if tc != nil {
			tc.Close()
		}
	}
}

// stop ends the churn and waits for the requests in flight.
func (ch *churner) stop() {
	ch.cancel()
	ch.wg.Wait()
	ch.end = time.Now()
}

// figures are the churner's times to first rows (p50, p99), views
// served a second and answers by code, for each kind it sent, named
// "<who>: ..." with suffix.
func (ch *churner) figures(scenario, who, suffix string, log io.Writer) []Figure {
	var figs []Figure
	secs := ch.end.Sub(ch.start).Seconds()
	for _, kind := range []string{churnREST, churnLong, churnWS} {
		ans := ch.answers[kind]
		if ans.total() == 0 {
			continue
		}
		ch.mu.Lock()
		ts := ch.times[kind]
		ch.mu.Unlock()
		fmt.Fprintf(log, "  %s, new views over %s: %d served in %.1fs (%.1f/s), p50 %v, p99 %v; answers:%s\n", who, kind, len(ts), secs,
			float64(len(ts))/secs, Percentile(ts, 0.5).Round(10*time.Microsecond), Percentile(ts, 0.99).Round(10*time.Microsecond), ans)
		what := fmt.Sprintf("%s: new view over %s, time to first rows", who, kind)
		figs = append(figs, latencyFigures(scenario, ArmGateway, what, suffix, ts)...)
		figs = append(figs, Figure{scenario, ArmGateway, fmt.Sprintf("%s: new views over %s served/s%s", who, kind, suffix), "1/s", float64(len(ts)) / secs})
		figs = append(figs, answerFigures(scenario, fmt.Sprintf("%s: new views over %s", who, kind), suffix, ans)...)
	}
	return figs
}

// answerFigures are an attacker's answers: how many were refused with 429,
// failed otherwise, and how many 429s lacked Retry-After or a complete
// Status.
func answerFigures(scenario, what, suffix string, ans *refusals) []Figure {
	other := ans.total() - ans.count(200) - ans.count(101) - ans.count(429)
	return []Figure{
		{scenario, ArmGateway, what + " refused (429)" + suffix, "count", float64(ans.count(429))},
		{scenario, ArmGateway, what + " failed otherwise" + suffix, "count", float64(other)},
		{scenario, ArmGateway, what + ": 429s without Retry-After or a complete Status" + suffix, "count", float64(ans.bad429.Load())},
	}
}

// randomToken is a fresh random bearer token.
func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// growPods creates Pods up to n when there are fewer, and returns how
// many there are.
func growPods(ctx context.Context, env *Env, n int, log io.Writer) (int, error) {
	have, err := podCount(ctx, env)
	if err != nil || have >= n {
		return have, err
	}
	t0 := time.Now()
	if err := workload.CreatePods(ctx, env.Client(), len(env.Namespaces), have, n); err != nil {
		return have, err
	}
	fmt.Fprintf(log, "  created %d more pods in %v\n", n-have, time.Since(t0).Round(time.Millisecond))
	return n, nil
}

// podsOfNamespace are up to m of the benchmark's n Pods in namespace i
// (workload.PodAt).
func podsOfNamespace(env *Env, i, n, m int) []workload.PodKey {
	k := len(env.Namespaces)
	var out []workload.PodKey
	for j := i % k; j < n && len(out) < m; j += k {
		out = append(out, workload.PodAt(j, k))
	}
	return out
}

// cpuMeter reads a process's CPU use over a phase, in cores.
type cpuMeter struct {
	pid int
	c0  harness.CPUReading
	t0  time.Time
}

func startCPU(pid int) (cpuMeter, error) {
	c, err := harness.ReadCPU(pid)
	return cpuMeter{pid: pid, c0: c, t0: time.Now()}, err
}

// cores is the CPU used since start, per second of wall time.
func (m cpuMeter) cores() (float64, error) {
	c, err := harness.ReadCPU(m.pid)
	if err != nil {
		return 0, err
	}
	return c.Since(m.c0).Seconds() / time.Since(m.t0).Seconds(), nil
}

// sortQuery is a REST sorted list's query: a sort order of
// newSortOrders, a page of 50 and the extra parameters.
func sortQuery(seq int, extra ...string) string {
	o := newSortOrders[seq%len(newSortOrders)]
	q := []string{"sort=" + o.sort, "order=" + o.order, fmt.Sprintf("limit=%d", windowLimit)}
	return strings.Join(append(q, extra...), "&")
}
