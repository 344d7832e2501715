package scenario

import (
	"context"
	"fmt"
	"io"
	"time"

	"kubegate/bench/harness"
	"kubegate/bench/workload"
)

// scenarioUpstream measures what one upstream update costs the gateway
// with nobody subscribed: its informer receiving, decoding and caching the
// Pod, which every update pays before any fan-out. It writes z.Upstream
// updates at z.UpstreamRate, waits until the gateway serves the last one,
// and divides the gateway's CPU over that phase, less its CPU over an
// equally long idle period just before, by the updates. kube-apiserver's
// CPU per update (the write itself, with the same idle baseline) is
// reported beside it for scale.
func scenarioUpstream(ctx context.Context, env *Env, z Sizes, log io.Writer) ([]Figure, error) {
	pods := make([]workload.PodKey, env.Workload.Pods)
	for j := range pods {
		pods[j] = workload.PodAt(j, len(env.Namespaces))
	}
	plan := workload.UpdatePlan{Count: z.Upstream, Rate: z.UpstreamRate}
	phase := time.Duration(float64(plan.Count)/plan.Rate*float64(time.Second)) + z.Settle

	// Idle baseline over the length the phase is planned to take; it is
	// scaled to the phase's real length below.
	gw0, api0, err := readBoth(env)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	select {
	case <-time.After(phase):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	gw1, api1, err := readBoth(env)
	if err != nil {
		return nil, err
	}
	idle := time.Since(t0)
	gwIdle, apiIdle := gw1.Since(gw0), api1.Since(api0)

	prof := harness.StartPerf(z.PerfDir, "upstream-gateway", env.GatewayPID, func(f string, a ...any) { fmt.Fprintf(log, f+"\n", a...) })
	t0 = time.Now()
	writes, _, err := workload.Update(ctx, env.Client(), pods, plan)
	if err != nil {
		prof.Stop()
		return nil, err
	}
	// The gateway has processed every update once it serves the last one:
	// its upstream applies them in resourceVersion order.
	last := writes[0]
	for _, w := range writes {
		if w.RV > last.RV {
			last = w
		}
	}
	if !waitFor(ctx, z.Drain, func() bool {
		rv, err := gatewayPodRV(ctx, env, pods[last.Pod])
		return err == nil && rv >= last.RV
	}) {
		prof.Stop()
		return nil, fmt.Errorf("gateway did not serve resourceVersion %d within %v", last.RV, z.Drain)
	}
	gw2, api2, err := readBoth(env)
	busy := time.Since(t0)
	prof.Stop()
	if err != nil {
		return nil, err
	}
	scale := float64(busy) / float64(idle)
	gwCPU := gw2.Since(gw1) - time.Duration(float64(gwIdle)*scale)
	apiCPU := api2.Since(api1) - time.Duration(float64(apiIdle)*scale)
	n := float64(len(writes))
	fmt.Fprintf(log, "  %d updates in %v: gateway CPU %v (idle %v over %v), kube-apiserver CPU %v (idle %v)\n",
		len(writes), busy.Round(time.Millisecond), gw2.Since(gw1).Round(time.Millisecond), gwIdle.Round(time.Millisecond),
		idle.Round(time.Millisecond), api2.Since(api1).Round(time.Millisecond), apiIdle.Round(time.Millisecond))
	return []Figure{
		{"upstream", ArmGateway, "CPU per update, no subscriber", "ms", Milliseconds(gwCPU) / n},
		{"upstream", ArmAPIServer, "CPU per update, no subscriber", "ms", Milliseconds(apiCPU) / n},
		{"upstream", ArmGateway, "idle CPU", "ms/s", Milliseconds(gwIdle) / idle.Seconds()},
		{"upstream", ArmAPIServer, "idle CPU", "ms/s", Milliseconds(apiIdle) / idle.Seconds()},
		{"upstream", ArmBench, "updates", "count", n},
	}, nil
}

// readBoth reads the gateway's and kube-apiserver's CPU.
func readBoth(env *Env) (gw, api harness.CPUReading, err error) {
	if gw, err = harness.ReadCPU(env.GatewayPID); err != nil {
		return gw, api, err
	}
	api, err = harness.ReadCPU(env.APIServerPID)
	return gw, api, err
}

// gatewayPodRV is the resourceVersion of one Pod as the gateway's REST
// layer serves it.
func gatewayPodRV(ctx context.Context, env *Env, key workload.PodKey) (uint64, error) {
	b, err := httpGet(ctx, env.GatewayURL+"/api/v1/namespaces/"+key.Namespace+"/pods/"+key.Name)
	if err != nil {
		return 0, err
	}
	return objectRV(b)
}
