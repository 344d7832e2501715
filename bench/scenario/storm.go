package scenario

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"kubegate/bench/harness"
	"kubegate/bench/workload"
)

// scenarioReconnect opens N subscribers per arm, lets them see some
// writes, drops every connection, writes more while they are away, and
// reconnects them all at once with their last resourceVersion. It counts
// subscribers resumed without a snapshot, checks that each got exactly the
// writes it missed, and counts kube-apiserver's requests during the storm
// (apiserver_request_total before and after).
func scenarioReconnect(ctx context.Context, env *Env, z Sizes, log io.Writer) ([]Figure, error) {
	pods := make([]workload.PodKey, env.Workload.Pods)
	for j := range pods {
		pods[j] = workload.PodAt(j, len(env.Namespaces))
	}
	plan := workload.UpdatePlan{Count: 40, Rate: 40}
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
		w1, _, err := workload.Update(ctx, env.Client(), pods, plan)
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
		w2, _, err := workload.Update(ctx, env.Client(), pods, plan)
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
		if err := workload.CreatePods(ctx, env.Client(), len(env.Namespaces), env.Workload.Pods, z.ColdStartPods); err != nil {
			return nil, err
		}
		fmt.Fprintf(log, "  created %d more pods in %v\n", extra, time.Since(t0).Round(time.Millisecond))
	}
	pods := max(z.ColdStartPods, env.Workload.Pods)
	// What the gateway's start is judged against: one plain JSON LIST of
	// the same Pods from kube-apiserver, read to the last byte, the least
	// any client needs to see them all.
	api0, err := harness.ReadCPU(env.APIServerPID)
	if err != nil {
		return nil, err
	}
	list, size, err := timeJSONList(ctx, env, pods)
	if err != nil {
		return nil, err
	}
	api1, err := harness.ReadCPU(env.APIServerPID)
	if err != nil {
		return nil, err
	}
	listCPU := api1.Since(api0)
	fmt.Fprintf(log, "  apiserver/json: one LIST of %d pods (%.0f MiB) in %v\n", pods, mib(size), list.Round(time.Millisecond))
	empty, err := env.startGateway(ctx, GatewayConfig(env.Kubeconfig, "namespaces"), false)
	if err != nil {
		return nil, err
	}
	time.Sleep(z.Settle)
	baseHeap, err := heapInuse(ctx, empty.URL)
	empty.Stop()
	if err != nil {
		return nil, err
	}
	api2, err := harness.ReadCPU(env.APIServerPID)
	if err != nil {
		return nil, err
	}
	g, err := env.startGateway(ctx, GatewayConfig(env.Kubeconfig, "pods"), false)
	if err != nil {
		return nil, err
	}
	defer g.Stop()
	ready := g.Ready.Sub(g.Started)
	// Both sides' CPU up to ready, to tell which one the start waited on.
	gwCPU, err := harness.ReadProc(g.PID)
	if err != nil {
		return nil, err
	}
	api3, err := harness.ReadCPU(env.APIServerPID)
	if err != nil {
		return nil, err
	}
	startCPU := api3.Since(api2)
	fmt.Fprintf(log, "  CPU: kube-apiserver %v for the LIST, %v while the gateway started; the gateway %v up to ready\n",
		listCPU.Round(time.Millisecond), startCPU.Round(time.Millisecond), gwCPU.CPU.Round(time.Millisecond))
	time.Sleep(2 * z.Settle)
	// VmHWM is the peak since the process started, sync included.
	steady, err := harness.ReadProc(g.PID)
	if err != nil {
		return nil, err
	}
	heap, err := heapInuse(ctx, g.URL)
	if err != nil {
		return nil, err
	}
	jsonBytes := env.Workload.PodJSONBytes * float64(pods)
	ratio := (heap - baseHeap) / jsonBytes
	fmt.Fprintf(log, "  %d pods: ready in %v (%.2fx the LIST); RSS peak %.0f MiB, steady %.0f MiB; heap %.0f MiB over baseline for %.0f MiB of JSON (%.2fx)\n",
		pods, ready.Round(time.Millisecond), float64(ready)/float64(list), mib(steady.HWM), mib(steady.RSS), (heap-baseHeap)/(1<<20), jsonBytes/(1<<20), ratio)
	m := fmt.Sprintf(" (%d pods)", pods)
	return []Figure{
		{"coldstart", ArmGateway, "time to ready" + m, "ms", float64(ready) / 1e6},
		// Paired with the gateway's time to ready, so the table prints
		// the ratio the goal is stated in.
		{"coldstart", ArmJSON, "time to ready" + m, "ms", float64(list) / 1e6},
		{"coldstart", ArmJSON, "LIST size" + m, "MiB", mib(size)},
		// The serving process's CPU for the one LIST, against
		// kube-apiserver's while serving the gateway's start.
		{"coldstart", ArmJSON, "apiserver CPU to ready" + m, "ms", Milliseconds(listCPU)},
		{"coldstart", ArmGateway, "apiserver CPU to ready" + m, "ms", Milliseconds(startCPU)},
		{"coldstart", ArmGateway, "gateway CPU to ready" + m, "ms", Milliseconds(gwCPU.CPU)},
		{"coldstart", ArmGateway, "peak RSS" + m, "MiB", mib(steady.HWM)},
		{"coldstart", ArmGateway, "steady RSS" + m, "MiB", mib(steady.RSS)},
		{"coldstart", ArmGateway, "heap in use (no GC) / JSON size" + m, "x", ratio},
	}, nil
}

// heapInuse reads go_memstats_heap_inuse_bytes from a gateway's /metrics.
func heapInuse(ctx context.Context, base string) (float64, error) {
	m, err := harness.ScrapeMetrics(ctx, http.DefaultClient, base+"/metrics")
	if err != nil {
		return 0, err
	}
	return m.Value("go_memstats_heap_inuse_bytes")
}

// timeJSONList times one LIST of every Pod from kube-apiserver as JSON
// over HTTP/1.1, without gzip (see http1Client), from sending the request
// to reading the last byte. It checks that want Pods came back.
func timeJSONList(ctx context.Context, env *Env, want int) (time.Duration, int64, error) {
	c, err := http1Client(env.APIServer)
	if err != nil {
		return 0, 0, err
	}
	defer c.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, env.APIServer.Host+"/api/v1/pods", nil)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+env.APIServer.BearerToken)
	req.Header.Set("Accept", "application/json")
	t0 := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return 0, 0, fmt.Errorf("LIST pods: %s: %s", resp.Status, b)
	}
	// Counted as it streams: holding 1.5 GB (100k Pods) would time the
	// client's allocations too.
	cw := &markCounter{mark: []byte(`{"metadata":{"name":"web-`)}
	size, err := io.Copy(cw, resp.Body)
	d := time.Since(t0)
	if err != nil {
		return 0, 0, err
	}
	if cw.n != want {
		return 0, 0, fmt.Errorf("LIST pods: %d pods, want %d", cw.n, want)
	}
	return d, size, nil
}

// markCounter counts the occurrences of mark in what is written to it,
// also across writes.
type markCounter struct {
	mark []byte
	tail []byte // the last len(mark)-1 bytes written
	n    int
}

func (c *markCounter) Write(p []byte) (int, error) {
	k := len(c.mark) - 1
	if len(p) >= k {
		// Marks that straddle the previous write and this one.
		edge := append(c.tail, p[:k]...)
		c.n += bytes.Count(edge, c.mark)
		c.n += bytes.Count(p, c.mark)
		c.tail = append(c.tail[:0], p[len(p)-k:]...)
	} else {
		buf := append(c.tail, p...)
		c.n += bytes.Count(buf, c.mark) - bytes.Count(c.tail, c.mark)
		c.tail = append(c.tail[:0], buf[max(0, len(buf)-k):]...)
	}
	return len(p), nil
}
