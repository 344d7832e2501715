package bench

import (
	"context"
	"fmt"
	"io"
	"time"
)

// scenarioReconnect opens N subscribers per arm, lets them see some
// writes, drops every connection, writes more while they are away, and
// reconnects them all at once with their last resourceVersion. It counts
// subscribers resumed without a snapshot, checks that each got exactly the
// writes it missed, and counts kube-apiserver's requests during the storm
// (apiserver_request_total before and after).
func scenarioReconnect(ctx context.Context, env *Env, z Sizes, log io.Writer) ([]Figure, error) {
	pods := make([]PodKey, env.Workload.Pods)
	for j := range pods {
		pods[j] = PodAt(j, len(env.Namespaces))
	}
	plan := UpdatePlan{Count: 40, Rate: 40}
	var figs []Figure
	for _, name := range []string{ArmGateway, ArmJSON} {
		as, err := watchArms(env, z, name)
		if err != nil {
			return figs, err
		}
		a := as[0]
		subs := make([]*subscriber, z.Reconnect)
		for i := range subs {
			subs[i] = &subscriber{}
		}
		rv, err := currentRV(ctx, env.Client())
		if err != nil {
			return figs, err
		}
		if err := a.Open(ctx, subs, rv); err != nil {
			a.Close()
			return figs, fmt.Errorf("%s: open: %w", name, err)
		}
		w1, _, err := Update(ctx, env.Client(), pods, plan)
		if err != nil {
			a.Close()
			return figs, err
		}
		waitFor(ctx, z.Drain, func() bool {
			for _, s := range subs {
				if !s.failed.Load() && int(s.count.Load()) < len(w1) {
					return false
				}
			}
			return true
		})
		a.Close()
		for _, s := range subs {
			if s.err != nil {
				return figs, fmt.Errorf("%s: before the storm: %w", name, s.err)
			}
			// Keep lastRV; forget the first writes.
			s.events = nil
			s.count.Store(0)
		}
		// Writes while everyone is away.
		w2, _, err := Update(ctx, env.Client(), pods, plan)
		if err != nil {
			return figs, err
		}
		reqBefore, err := apiserverRequests(ctx, env)
		if err != nil {
			return figs, err
		}
		as, _ = watchArms(env, z, name)
		a = as[0]
		switch x := a.(type) {
		case *wsArm:
			x.resume = true
		case *jsonArm:
			x.resume = true
		}
		t0 := time.Now()
		if err := a.Open(ctx, subs, 0); err != nil {
			a.Close()
			return figs, fmt.Errorf("%s: reconnect: %w", name, err)
		}
		caughtUp := waitFor(ctx, z.Drain, func() bool {
			for _, s := range subs {
				if !s.failed.Load() && int(s.count.Load()) < len(w2) {
					return false
				}
			}
			return true
		})
		storm := time.Since(t0)
		a.Close()
		// kube-apiserver counts a watch when it ends: wait until the
		// closed ones are counted (kube-apiserver's arm) or Settle passed.
		var reqAfter float64
		waitFor(ctx, max(z.Settle, 5*time.Second), func() bool {
			reqAfter, err = apiserverRequests(ctx, env)
			return err == nil && (reqAfter-reqBefore >= float64(len(subs)) || name == ArmGateway && time.Since(t0) > storm+z.Settle)
		})
		if err != nil {
			return figs, err
		}
		if !caughtUp {
			fmt.Fprintf(log, "  %s: not every subscriber caught up within %v\n", name, z.Drain)
		}
		want := map[uint64]bool{}
		for _, w := range w2 {
			want[w.RV] = true
		}
		missed, dup, resumed := 0, 0, 0
		for _, s := range subs {
			seen := map[uint64]bool{}
			for _, e := range s.events {
				if !want[e.rv] {
					continue
				}
				if seen[e.rv] {
					dup++
				}
				seen[e.rv] = true
			}
			missed += len(want) - len(seen)
			if s.err == nil && s.resets == 0 {
				resumed++
			}
		}
		if ws, ok := a.(*wsArm); ok {
			resumed -= int(ws.snapshots.Load())
		}
		// Pod requests other than the resumed watches: the gateway's arm
		// should cause none (its informer keeps its one watch).
		extra := reqAfter - reqBefore
		fmt.Fprintf(log, "  %s: %d of %d resumed without a snapshot in %v; %0.f apiserver requests; missed %d, duplicated %d\n",
			name, resumed, len(subs), storm.Round(time.Millisecond), extra, missed, dup)
		figs = append(figs,
			Figure{"reconnect", name, "resumed without snapshot", "count", float64(resumed)},
			Figure{"reconnect", name, "apiserver requests during storm", "count", extra},
			Figure{"reconnect", name, "time until all caught up", "ms", float64(storm) / 1e6},
			Figure{"reconnect", name, "missed", "count", float64(missed)},
			Figure{"reconnect", name, "duplicated", "count", float64(dup)},
		)
	}
	return figs, nil
}

// scenarioColdStart starts a second gateway process over the workload and
// measures its time to ready, its peak and steady RSS, and its Go heap in
// use against the JSON size of what it caches. A gateway caching only
// namespaces gives the heap baseline. The heap in use includes whatever
// garbage of the sync has not been collected (a separate process cannot be
// made to collect), so the ratio is an upper bound; BenchmarkCacheMemory
// in internal/informer measures the cache after a collection.
func scenarioColdStart(ctx context.Context, env *Env, z Sizes, log io.Writer) ([]Figure, error) {
	if extra := z.ColdStartPods - env.Workload.Pods; extra > 0 {
		t0 := time.Now()
		if err := createMorePods(ctx, env, env.Workload.Pods, z.ColdStartPods); err != nil {
			return nil, err
		}
		fmt.Fprintf(log, "  created %d more pods in %v\n", extra, time.Since(t0).Round(time.Millisecond))
	}
	pods := max(z.ColdStartPods, env.Workload.Pods)
	empty, err := StartGateway(ctx, GatewayOptions{Binary: env.GatewayBinary, Kubeconfig: env.Kubeconfig, Dir: env.Dir, Resources: []string{"namespaces"}})
	if err != nil {
		return nil, err
	}
	time.Sleep(z.Settle)
	baseHeap, err := heapInuse(ctx, empty.URL)
	empty.Stop()
	if err != nil {
		return nil, err
	}
	g, err := StartGateway(ctx, GatewayOptions{Binary: env.GatewayBinary, Kubeconfig: env.Kubeconfig, Dir: env.Dir, Resources: []string{"pods"}})
	if err != nil {
		return nil, err
	}
	defer g.Stop()
	ready := g.Ready.Sub(g.Started)
	time.Sleep(2 * z.Settle)
	// VmHWM is the peak since the process started, sync included.
	steady, err := ReadProc(g.PID)
	if err != nil {
		return nil, err
	}
	heap, err := heapInuse(ctx, g.URL)
	if err != nil {
		return nil, err
	}
	jsonBytes := env.Workload.PodJSONBytes * float64(pods)
	ratio := (heap - baseHeap) / jsonBytes
	fmt.Fprintf(log, "  %d pods: ready in %v; RSS peak %.0f MiB, steady %.0f MiB; heap %.0f MiB over baseline for %.0f MiB of JSON (%.2fx)\n",
		pods, ready.Round(time.Millisecond), mib(steady.HWM), mib(steady.RSS), (heap-baseHeap)/(1<<20), jsonBytes/(1<<20), ratio)
	m := fmt.Sprintf(" (%d pods)", pods)
	return []Figure{
		{"coldstart", ArmGateway, "time to ready" + m, "ms", float64(ready) / 1e6},
		{"coldstart", ArmGateway, "peak RSS" + m, "MiB", mib(steady.HWM)},
		{"coldstart", ArmGateway, "steady RSS" + m, "MiB", mib(steady.RSS)},
		{"coldstart", ArmGateway, "heap in use (no GC) / JSON size" + m, "x", ratio},
	}, nil
}

// heapInuse reads go_memstats_heap_inuse_bytes from a gateway's /metrics.
func heapInuse(ctx context.Context, base string) (float64, error) {
	b, err := httpGet(ctx, base+"/metrics")
	if err != nil {
		return 0, err
	}
	return metricValue(b, "go_memstats_heap_inuse_bytes")
}
