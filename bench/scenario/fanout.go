package scenario

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"kubegate/bench/harness"
	"kubegate/bench/workload"
)

// fanoutSpec is one measured phase: n subscribers on an arm, then the
// updates, then a drain.
type fanoutSpec struct {
	scenario string
	n        int
	// selective gives subscriber i the namespace i mod K; otherwise every
	// subscriber watches all namespaces.
	selective bool
	// slow is how many subscribers never read (they are not checked).
	slow int
	plan workload.UpdatePlan
	// metricSuffix is appended to every metric name (" (1% slow)").
	metricSuffix string
	// drain bounds the wait for deliveries after the last write.
	drain time.Duration
	// perfDir, when set, gets a perf CPU profile of the serving process
	// during the updates and drain: <scenario>-<arm>.perf.data.
	perfDir string
}

// armStats is what one arm measured in one phase.
type armStats struct {
	deliveries int
	missed     int
	duplicated int
	reordered  int
	// cutOff counts healthy subscribers whose stream ended early: the
	// server closed it or sent an error (kube-apiserver closes watchers
	// that fall behind; a client would relist).
	cutOff int
	// latencies are receive - ack in ns; negative when the event arrived
	// before the writer had read the response to its write.
	latencies []int64
	// fromSend are receive - sent in ns.
	fromSend []int64
	span     time.Duration
	// serverCPU is the serving process's CPU (less the baseline) over
	// cpuWall, from just before the first write to the end of the drain.
	serverCPU time.Duration
	cpuWall   time.Duration
	benchCPU  time.Duration
	peakRSS   int64
}

// writeObserver is an arm that must be told of every write as it is
// acknowledged: the floor, which has no watch of its own.
type writeObserver interface {
	observe(workload.Write)
}

// processArm is an arm served by a process of its own (the floor), known
// once Open has returned.
type processArm interface {
	serverPID() int
}

// runFanout runs spec on arm: opens the subscribers from the current
// resourceVersion, writes the updates, waits until every healthy subscriber
// has every write in its scope (or spec.drain passes), then checks and
// measures. pid is the serving process (a processArm's own replaces it);
// baseline is its CPU use for the same writes with no subscribers
// (subtracted, so kube-apiserver is not charged for handling the writes
// themselves).
func runFanout(ctx context.Context, env *Env, arm watchArm, spec fanoutSpec, pid int, baseline time.Duration, log io.Writer) (armStats, error) {
	var st armStats
	subs := make([]*subscriber, spec.n)
	for i := range subs {
		subs[i] = &subscriber{}
		if spec.selective {
			subs[i].namespace = env.Namespaces[i%len(env.Namespaces)]
		}
	}
	// Spread the slow ones evenly.
	if spec.slow > 0 {
		step := spec.n / spec.slow
		for k := range spec.slow {
			subs[k*step].slow = true
		}
	}
	rv, err := currentRV(ctx, env.Client())
	if err != nil {
		return st, err
	}
	t0 := time.Now()
	if err := arm.Open(ctx, subs, rv); err != nil {
		arm.Close()
		return st, fmt.Errorf("%s: open %d subscribers: %w", arm.Name(), spec.n, err)
	}
	fmt.Fprintf(log, "  %s: %d subscribers open in %v\n", arm.Name(), spec.n, time.Since(t0).Round(time.Millisecond))
	if p, ok := arm.(processArm); ok {
		pid = p.serverPID()
	}
	if o, ok := arm.(writeObserver); ok {
		spec.plan.OnAck = o.observe
	}
	_ = harness.ResetPeak(pid)
	// CPU to the nanosecond: at small sizes a phase costs the gateway
	// less than one 10 ms tick of utime+stime.
	cpu0, err := harness.ReadCPU(pid)
	if err != nil {
		arm.Close()
		return st, err
	}
	cpuStart := time.Now()
	self0, _ := harness.ReadProc(selfPID)

	pods := make([]workload.PodKey, env.Workload.Pods)
	for j := range pods {
		pods[j] = workload.PodAt(j, len(env.Namespaces))
	}
	prof := harness.StartPerf(spec.perfDir, spec.scenario+"-"+strings.ReplaceAll(arm.Name(), "/", "-"), pid,
		func(f string, a ...any) { fmt.Fprintf(log, f+"\n", a...) })
	start := time.Now()
	writes, elapsed, err := workload.Update(ctx, env.Client(), pods, spec.plan)
	if err != nil {
		prof.Stop()
		arm.Close()
		return st, err
	}
	// What each scope should see.
	byNS := map[string]int{}
	for _, w := range writes {
		byNS[pods[w.Pod].Namespace]++
	}
	expect := func(s *subscriber) int {
		if s.namespace == "" {
			return len(writes)
		}
		return byNS[s.namespace]
	}
	drained := waitFor(ctx, spec.drain, func() bool {
		for _, s := range subs {
			if !s.slow && !s.failed.Load() && int(s.count.Load()) < expect(s) {
				return false
			}
		}
		return true
	})
	cpu1, cpuErr := harness.ReadCPU(pid)
	st.cpuWall = time.Since(cpuStart)
	after, err := harness.ReadProc(pid)
	err = errors.Join(err, cpuErr)
	self1, _ := harness.ReadProc(selfPID)
	prof.Stop()
	if err != nil {
		arm.Close()
		return st, err
	}
	arm.Close()
	if !drained {
		fmt.Fprintf(log, "  %s: not every event arrived within %v of the last write\n", arm.Name(), spec.drain)
	}

	ackOf := make(map[uint64]workload.Write, len(writes))
	for _, w := range writes {
		ackOf[w.RV] = w
	}
	var last int64
	for _, s := range subs {
		if s.slow {
			continue
		}
		if s.err != nil {
			if st.cutOff == 0 {
				fmt.Fprintf(log, "  %s: subscriber cut off: %v\n", arm.Name(), s.err)
			}
			st.cutOff++
		}
		seen := make(map[uint64]bool, len(s.events))
		lastRV := map[int]uint64{}
		for _, e := range s.events {
			w, ok := ackOf[e.rv]
			if !ok {
				continue // not one of this phase's writes
			}
			if seen[e.rv] {
				st.duplicated++
				continue
			}
			seen[e.rv] = true
			if e.rv < lastRV[w.Pod] {
				st.reordered++
			}
			lastRV[w.Pod] = e.rv
			st.deliveries++
			st.latencies = append(st.latencies, e.at-w.Ack.UnixNano())
			st.fromSend = append(st.fromSend, e.at-w.Sent.UnixNano())
			last = max(last, e.at)
		}
		st.missed += expect(s) - len(seen)
	}
	st.span = max(elapsed, time.Duration(last-start.UnixNano()))
	st.serverCPU = cpu1.Since(cpu0) - baseline
	st.benchCPU = self1.Sub(self0)
	st.peakRSS = max(after.HWM, after.RSS)
	return st, nil
}

// figures turns an arm's stats into Figures.
func (st armStats) figures(scenario, arm, suffix string) []Figure {
	slices.Sort(st.latencies)
	slices.Sort(st.fromSend)
	q := func(p float64) float64 { return quantileMs(st.latencies, p) }
	qs := func(p float64) float64 { return quantileMs(st.fromSend, p) }
	perK := 0.0
	if st.deliveries > 0 {
		perK = st.serverCPU.Seconds() / float64(st.deliveries) * 1000
	}
	m := func(name string) string { return name + suffix }
	figs := []Figure{
		{scenario, arm, m("latency p50"), "ms", q(0.50)},
		{scenario, arm, m("latency p99"), "ms", q(0.99)},
		{scenario, arm, m("latency p99.9"), "ms", q(0.999)},
		{scenario, arm, m("latency from send p50"), "ms", qs(0.50)},
		{scenario, arm, m("latency from send p99"), "ms", qs(0.99)},
		{scenario, arm, m("deliveries/s"), "1/s", float64(st.deliveries) / st.span.Seconds()},
		{scenario, arm, m("missed"), "count", float64(st.missed)},
		{scenario, arm, m("duplicated"), "count", float64(st.duplicated)},
		{scenario, arm, m("out of order"), "count", float64(st.reordered)},
		{scenario, arm, m("subscribers cut off"), "count", float64(st.cutOff)},
		{scenario, arm, m("CPU per 1000 deliveries"), "s", perK},
		{scenario, arm, m("peak RSS"), "MiB", mib(st.peakRSS)},
	}
	figs = append(figs, Figure{scenario, ArmBench + " (" + arm + ")", m("bench CPU"), "s", st.benchCPU.Seconds()})
	return figs
}

// quantileMs is the nearest-rank p-quantile of sorted nanoseconds, in ms.
func quantileMs(sorted []int64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	i = min(max(i, 0), len(sorted)-1)
	return float64(sorted[i]) / 1e6
}
