package scenario

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"kubegate/bench/workload"

	"github.com/coder/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The abuse scenario: one client asks for as much resync work as the
// protocol lets it, while ordinary subscribers measure their latency under
// the usual update load. It runs three phases of the same fan-out to the
// ordinary subscribers (the gateway only: kube-apiserver has no
// server-side resync), without the abusive client, with it, and without it
// again; the two phases without give the run's own noise, against which
// the phase with it is judged.
//
// The abusive client holds one socket with AbuseSubscriptions
// subscriptions to every Pod, each with the shortest resync period
// (AbuseResync: the gateway's cache.minResync, 5s by default; the smoke
// test lowers both) and no initial snapshot (snapshots are bounded by the
// subscribe rate, not the resync budget). It reads as fast as it can.
// Each of its subscriptions also gets every live change, as 100
// subscribers to everything would: that is part of what such a client
// costs.
//
// The gateway bounds what its resyncs send with a per-client budget
// (websocket.resyncBudget, objects/s). The harness does not configure it,
// so the gateway runs its default; the goal compares what the client
// received with Sizes.ResyncBudget, that default. What was sent is read
// from the frames: every SYNC frame counts, and a subscription's resync
// starts with the SYNC frame after it has received a whole number of
// resyncs (all Pods). Resyncs start in rounds: all subscriptions due at
// one tick at once when nothing holds them back, one at a time when the
// budget spaces them out. A round is the starts within a tenth of a resync
// period of its first. The steady rate is the SYNC frames received from
// the second round's first start to the last round's, over that time: whole
// rounds, without the first, which the budget's burst pays for. It is
// judged only when that window spans at least one resync period; the phase
// with the client starts once the client has such a window. The gateway's
// own counters (kubegate_listener_resyncs_total and
// kubegate_listener_resyncs_deferred_total for Pods) are reported beside
// it, so a reader can see whether the budget deferred anything at all.

// abuser is the abusive client. Its receive goroutine is the only writer
// of the fields under mu until it has exited (done).
type abuser struct {
	conn *websocket.Conn
	// pods is how many objects one subscription's resync sends.
	pods   int
	resync time.Duration
	// start is when its subscriptions were all acknowledged; frames are
	// binned by their arrival since then.
	start time.Time
	done  chan struct{}

	mu sync.Mutex // guards the fields below
	// bins counts SYNC frames per abuseBin since start.
	bins []int64
	// perSub counts SYNC frames per subscription id.
	perSub map[string]int
	// starts are the arrival times of each resync's first SYNC frame.
	starts []time.Time
	// completed counts resyncs of which every object arrived.
	completed int
	syncs     int64
	live      int64
	err       error
}

// abuseBin is the resolution of the abuser's SYNC frame counts.
const abuseBin = 10 * time.Millisecond

// openAbuser connects the abusive client and subscribes n times with
// resyncPeriod resync, waiting for every ack.
func openAbuser(ctx context.Context, env *Env, n, pods int, resync time.Duration) (*abuser, error) {
	u := strings.Replace(env.GatewayURL, "http://", "ws://", 1) + "/ws"
	c, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{Subprotocols: []string{"kubegate.v1"}})
	if err != nil {
		return nil, fmt.Errorf("abusive client: dial: %w", err)
	}
	c.SetReadLimit(-1)
	for i := range n {
		f := fmt.Sprintf(`{"type":"subscribe","id":"a%d","resource":"pods","resyncPeriod":%q,"sendInitialEvents":false}`, i, resync)
		if err := c.Write(ctx, websocket.MessageText, []byte(f)); err != nil {
			c.CloseNow()
			return nil, fmt.Errorf("abusive client: subscribe: %w", err)
		}
	}
	// Acks first: nothing but acks (and live changes of the subscriptions
	// already acknowledged) can come before a resync is due.
	var buf bytes.Buffer
	for acks := 0; acks < n; {
		_, r, err := c.Reader(ctx)
		if err == nil {
			buf.Reset()
			_, err = buf.ReadFrom(r)
		}
		if err != nil {
			c.CloseNow()
			return nil, fmt.Errorf("abusive client: %d of %d subscriptions acknowledged: %w", acks, n, err)
		}
		var ferr error
		if err := scanFrames(buf.Bytes(), func(typ, id, rv []byte) {
			switch string(typ) {
			case "ack":
				acks++
			case "error":
				ferr = fmt.Errorf("abusive client: subscription refused: %.300s", buf.Bytes())
			}
		}); err != nil || ferr != nil {
			c.CloseNow()
			return nil, errors.Join(err, ferr)
		}
	}
	a := &abuser{conn: c, pods: pods, resync: resync, start: time.Now(), done: make(chan struct{}), perSub: map[string]int{}}
	go a.receive()
	return a, nil
}

// receive reads until the socket closes, counting SYNC frames.
func (a *abuser) receive() {
	defer close(a.done)
	var buf bytes.Buffer
	for {
		_, r, err := a.conn.Reader(context.Background())
		if err == nil {
			buf.Reset()
			_, err = buf.ReadFrom(r)
		}
		if err != nil {
			a.fail(err)
			return
		}
		now := time.Now()
		bin := int(now.Sub(a.start) / abuseBin)
		a.mu.Lock()
		err = scanFrames(buf.Bytes(), func(typ, id, rv []byte) {
			switch string(typ) {
			case "SYNC":
				n := a.perSub[string(id)]
				if n%a.pods == 0 {
					a.starts = append(a.starts, now)
				}
				a.perSub[string(id)] = n + 1
				if (n+1)%a.pods == 0 {
					a.completed++
				}
				a.syncs++
				for len(a.bins) <= bin {
					a.bins = append(a.bins, 0)
				}
				a.bins[bin]++
			case "MODIFIED", "ADDED", "DELETED":
				a.live++
			case "error", "RESET":
				if a.err == nil {
					a.err = fmt.Errorf("abusive client: %s frame: %.300s", typ, buf.Bytes())
				}
			}
		})
		a.mu.Unlock()
		if err != nil {
			a.fail(fmt.Errorf("abusive client: bad frame: %w", err))
			return
		}
	}
}

func (a *abuser) fail(err error) {
	a.mu.Lock()
	if a.err == nil {
		a.err = err
	}
	a.mu.Unlock()
}

// steadyLocked is the window of the steady rate: from the second round's
// first resync start to the last round's. ok is false with fewer than
// three rounds. Caller must hold mu.
func (a *abuser) steadyLocked() (from, to time.Time, ok bool) {
	var rounds []time.Time
	for _, t := range a.starts {
		if len(rounds) == 0 || t.Sub(rounds[len(rounds)-1]) > a.resync/10 {
			rounds = append(rounds, t)
		}
	}
	if len(rounds) < 3 {
		return from, to, false
	}
	return rounds[1], rounds[len(rounds)-1], true
}

// steadyWindow is the length of the steady rate's window so far.
func (a *abuser) steadyWindow() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	from, to, _ := a.steadyLocked()
	return to.Sub(from)
}

// liveCount is how many live changes (MODIFIED, ADDED, DELETED) the
// client has received.
func (a *abuser) liveCount() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.live
}

// close ends the socket and waits for the receiver. It returns the error
// that stopped the receiver before close, if any.
func (a *abuser) close() error {
	a.mu.Lock()
	err := a.err
	a.mu.Unlock()
	_ = a.conn.CloseNow()
	<-a.done
	return err
}

// abuseRates are what the abusive client received.
type abuseRates struct {
	// steady is SYNC objects/s over window, from the second round of
	// resyncs to the last (0 with fewer than three rounds).
	steady float64
	window time.Duration
	// whole is SYNC objects/s from the subscriptions' acks to end.
	whole  float64
	starts int
	// completed resyncs, and all SYNC frames.
	completed int
	syncs     int64
	// live is MODIFIED, ADDED and DELETED frames per second.
	live float64
}

// rates reads the counts up to end. Call it after close.
func (a *abuser) rates(end time.Time) abuseRates {
	a.mu.Lock()
	defer a.mu.Unlock()
	span := end.Sub(a.start).Seconds()
	r := abuseRates{starts: len(a.starts), completed: a.completed, syncs: a.syncs}
	if span > 0 {
		r.whole = float64(a.syncs) / span
		r.live = float64(a.live) / span
	}
	if from, to, ok := a.steadyLocked(); ok {
		if w := to.Sub(from); w > 0 {
			r.window = w
			var n int64
			for i := int(from.Sub(a.start) / abuseBin); i < int(to.Sub(a.start)/abuseBin) && i < len(a.bins); i++ {
				n += a.bins[i]
			}
			r.steady = float64(n) / w.Seconds()
		}
	}
	return r
}

// podCount is how many Pods kube-apiserver holds now (the coldstart
// scenario may have created more than the workload).
func podCount(ctx context.Context, env *Env) (int, error) {
	l, err := env.Client().CoreV1().Pods("").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return 0, err
	}
	n := len(l.Items)
	if l.RemainingItemCount != nil {
		n += int(*l.RemainingItemCount)
	}
	return n, nil
}

// gatewayPodsMetric is the value of one of the gateway's metrics labelled
// with resource="pods" (a counter or gauge); found is false when the
// gateway does not export it.
func gatewayPodsMetric(ctx context.Context, env *Env, name string) (v float64, found bool, err error) {
	m, err := metricsOf(ctx, env, ArmGateway)
	if err != nil {
		return 0, false, err
	}
	v, found = m.Get(name, "resource", "pods")
	return v, found, nil
}

// Suffixes of the abuse scenario's three phases.
const (
	abuseBefore = " (before)"
	abuseWith   = " (with abusive client)"
	abuseAfter  = " (after)"
)

func scenarioAbuse(ctx context.Context, env *Env, z Sizes, log io.Writer) ([]Figure, error) {
	plan := workload.UpdatePlan{Count: int(z.AbuseRate * z.Duration.Seconds()), Rate: z.AbuseRate}
	var figs []Figure
	phase := func(suffix string) error {
		spec := fanoutSpec{scenario: "abuse", n: z.Abuse, drain: z.Drain, plan: plan, metricSuffix: suffix}
		st, err := runFanout(ctx, env, newWSArm(env), spec, env.GatewayPID, 0, log)
		if err != nil {
			return err
		}
		fmt.Fprintf(log, "  gateway%s: %d deliveries, missed %d, duplicated %d, out of order %d, cut off %d; gateway CPU %v over %v\n", suffix,
			st.deliveries, st.missed, st.duplicated, st.reordered, st.cutOff, st.serverCPU.Round(time.Millisecond), st.cpuWall.Round(time.Millisecond))
		for _, f := range st.figures("abuse", ArmGateway, suffix) {
			switch strings.TrimSuffix(f.Metric, suffix) {
			case "latency p50", "latency p99", "latency p99.9", "latency from send p99", "missed", "duplicated", "out of order",
				"subscribers cut off", "CPU per 1000 deliveries", "bench CPU":
				figs = append(figs, f)
			}
		}
		cores := 0.0
		if st.cpuWall > 0 {
			cores = st.serverCPU.Seconds() / st.cpuWall.Seconds()
		}
		figs = append(figs, Figure{"abuse", ArmGateway, "CPU used" + suffix, "cores", cores})
		return nil
	}

	if err := phase(abuseBefore); err != nil {
		return figs, err
	}

	pods, err := podCount(ctx, env)
	if err != nil {
		return figs, err
	}
	resyncs0, counted, err := gatewayPodsMetric(ctx, env, "kubegate_listener_resyncs_total")
	if err != nil {
		return figs, err
	}
	deferred0, _, err := gatewayPodsMetric(ctx, env, "kubegate_listener_resyncs_deferred_total")
	if err != nil {
		return figs, err
	}
	a, err := openAbuser(ctx, env, z.AbuseSubscriptions, pods, z.AbuseResync)
	if err != nil {
		return figs, err
	}
	// The phase starts once the client's resyncs are in their steady
	// state (a budget, if any, spent on the first) and its rate can be
	// judged.
	warm := 3*z.AbuseResync + z.Drain
	if !waitFor(ctx, warm, func() bool { return a.steadyWindow() >= z.AbuseResync }) {
		fmt.Fprintf(log, "  abusive client: its resyncs did not span a resync period within %v\n", warm)
	}
	fmt.Fprintf(log, "  abusive client: %d subscriptions to %d pods, resync %v, in its steady state after %v\n",
		z.AbuseSubscriptions, pods, z.AbuseResync, time.Since(a.start).Round(time.Millisecond))
	perr := phase(abuseWith)
	end := time.Now()
	resyncs1, _, err1 := gatewayPodsMetric(ctx, env, "kubegate_listener_resyncs_total")
	deferred1, _, err2 := gatewayPodsMetric(ctx, env, "kubegate_listener_resyncs_deferred_total")
	// The phase's live changes reach the client after the resync each
	// subscription is in the middle of (a subscription's notifications
	// keep their order, and its resyncs go at the budget's pace): they
	// are waited for, within a bound, before its socket closes, so that
	// the figure does not depend on where the phase's end fell.
	if perr == nil {
		want := int64(plan.Count * z.AbuseSubscriptions)
		waitFor(ctx, 3*z.AbuseResync+z.Drain, func() bool { return a.liveCount() >= want })
	}
	aerr := a.close()
	if err := errors.Join(perr, err1, err2, aerr); err != nil {
		return figs, err
	}
	r := a.rates(end)
	fmt.Fprintf(log, "  abusive client: %d SYNC objects over %v: %.0f/s steady (over the %v from the 2nd round of resyncs to the last; %d resyncs started), %.0f/s overall; %d resyncs whole; %.0f live events/s\n",
		r.syncs, end.Sub(a.start).Round(time.Millisecond), r.steady, r.window.Round(time.Millisecond), r.starts, r.whole, r.completed, r.live)
	if r.window >= z.AbuseResync {
		figs = append(figs, Figure{"abuse", ArmGateway, "abusive client: resynced objects/s (steady)", "1/s", r.steady})
	} else {
		fmt.Fprintf(log, "  abusive client: its resync starts spanned less than a resync period: no steady rate\n")
	}
	figs = append(figs,
		Figure{"abuse", ArmGateway, "abusive client: resynced objects/s (overall)", "1/s", r.whole},
		Figure{"abuse", ArmGateway, "abusive client: resyncs started", "count", float64(r.starts)},
		Figure{"abuse", ArmGateway, "abusive client: live events/s", "1/s", r.live},
		Figure{"abuse", ArmBench, "resync budget checked", "1/s", z.ResyncBudget},
	)
	if counted {
		fmt.Fprintf(log, "  gateway counters for pods during the abusive client: %.0f resyncs delivered, %.0f deferred by the budget\n",
			resyncs1-resyncs0, deferred1-deferred0)
		figs = append(figs,
			Figure{"abuse", ArmGateway, "resyncs delivered (gateway's counter)", "count", resyncs1 - resyncs0},
			Figure{"abuse", ArmGateway, "resyncs deferred (gateway's counter)", "count", deferred1 - deferred0})
	} else {
		fmt.Fprintf(log, "  this gateway does not export kubegate_listener_resyncs_total: its resyncs are not counted\n")
	}

	if err := phase(abuseAfter); err != nil {
		return figs, err
	}
	return figs, nil
}
