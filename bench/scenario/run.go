package scenario

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"kubegate/bench/harness"
)

// Options configures Run. Defaults finish in a few minutes on two cores;
// docs/benchmarks.md lists the full target sizes and the flags that
// reach them.
type Options struct {
	// GatewayBinary is the gateway executable. Required.
	GatewayBinary string
	// Scenarios to run, in order. Default DefaultScenarios.
	Scenarios []string
	// Pods and Namespaces size the workload. Defaults 1000 and 10.
	Pods, Namespaces int
	// Sizes of the scenarios. Zero fields take DefaultSizes'.
	Sizes Sizes
	// Log receives progress lines. Default none.
	Log io.Writer
}

// DefaultScenarios are the scenarios Run runs when Options.Scenarios is
// empty.
// relist restarts kube-apiserver, so it runs last.
var DefaultScenarios = []string{"setup", "idle", "snapshot", ScenarioREST, "upstream", "broad", "selective", "burst", "slow", "abuse", "watchlist", "reconnect", "coldstart", "relist"}

// OptInScenarios run only when named. passthrough measures writes
// through the gateway's pass-through, on a gateway of its own. windows,
// viewchurn and tenants create Pods up to their sizes (100,000, 20,000
// and 20,000 by default, minutes on two cores), after which the scenarios
// that count the workload's Pods do not hold: name them last. scale
// creates a million small ConfigMaps in namespaces of its own (tens of
// minutes on two cores), which the Env's gateway caches too.
var OptInScenarios = []string{ScenarioPassThrough, ScenarioWindows, ScenarioViewChurn, ScenarioTenants, ScenarioScale}

// scenarios maps names to their implementations.
var scenarios = map[string]func(context.Context, *Env, Sizes, io.Writer) ([]Figure, error){
	"setup":    func(_ context.Context, env *Env, _ Sizes, _ io.Writer) ([]Figure, error) { return setupFigures(env) },
	"idle":     scenarioIdle,
	"snapshot": scenarioSnapshot,
	ScenarioREST: func(ctx context.Context, env *Env, z Sizes, log io.Writer) ([]Figure, error) {
		return RunREST(ctx, env, RESTOptions{Reps: z.RESTReps, Concurrency: z.RESTConcurrency, Log: log})
	},
	"broad":     scenarioBroad,
	"selective": scenarioSelective,
	"burst":     scenarioBurst,
	"slow":      scenarioSlow,
	"abuse":     scenarioAbuse,
	"watchlist": scenarioWatchList,
	"reconnect": scenarioReconnect,
	"coldstart": scenarioColdStart,
	"upstream":  scenarioUpstream,
	"relist":    scenarioRelist,
	// Opt-in.
	ScenarioPassThrough: scenarioPassThrough,
	ScenarioWindows:     scenarioWindows,
	ScenarioViewChurn:   scenarioViewChurn,
	ScenarioTenants:     scenarioTenants,
	ScenarioScale:       scenarioScale,
}

// withDefaults fills zero sizes from DefaultSizes.
func (z Sizes) withDefaults() Sizes {
	d := DefaultSizes
	set := func(dst *int, v int) {
		if *dst <= 0 {
			*dst = v
		}
	}
	setF := func(dst *float64, v float64) {
		if *dst <= 0 {
			*dst = v
		}
	}
	setD := func(dst *time.Duration, v time.Duration) {
		if *dst <= 0 {
			*dst = v
		}
	}
	set(&z.Idle, d.Idle)
	set(&z.Broad, d.Broad)
	setF(&z.BroadRate, d.BroadRate)
	setD(&z.Duration, d.Duration)
	set(&z.Selective, d.Selective)
	setF(&z.SelectiveRate, d.SelectiveRate)
	set(&z.BurstSubscribers, d.BurstSubscribers)
	set(&z.BurstUpdates, d.BurstUpdates)
	set(&z.Slow, d.Slow)
	setF(&z.SlowRate, d.SlowRate)
	set(&z.Reconnect, d.Reconnect)
	set(&z.Snapshots, d.Snapshots)
	set(&z.RESTReps, d.RESTReps)
	set(&z.ColdStartPods, d.ColdStartPods)
	set(&z.Upstream, d.Upstream)
	setF(&z.UpstreamRate, d.UpstreamRate)
	set(&z.Relist, d.Relist)
	set(&z.RelistUpdates, d.RelistUpdates)
	setF(&z.RelistRate, d.RelistRate)
	set(&z.Abuse, d.Abuse)
	setF(&z.AbuseRate, d.AbuseRate)
	set(&z.AbuseSubscriptions, d.AbuseSubscriptions)
	setD(&z.AbuseResync, d.AbuseResync)
	setF(&z.ResyncBudget, d.ResyncBudget)
	set(&z.WatchList, d.WatchList)
	set(&z.WatchListReaders, d.WatchListReaders)
	if len(z.WindowPods) == 0 {
		z.WindowPods = d.WindowPods
	}
	set(&z.Windows, d.Windows)
	setF(&z.WindowRate, d.WindowRate)
	set(&z.WindowOpens, d.WindowOpens)
	setD(&z.WindowGCWait, d.WindowGCWait)
	set(&z.PassThroughWrites, d.PassThroughWrites)
	set(&z.ViewChurnPods, d.ViewChurnPods)
	set(&z.ViewChurnVictims, d.ViewChurnVictims)
	set(&z.ViewChurnWindows, d.ViewChurnWindows)
	setF(&z.ViewChurnRate, d.ViewChurnRate)
	setD(&z.ViewChurnDuration, d.ViewChurnDuration)
	setF(&z.ViewChurnRESTRate, d.ViewChurnRESTRate)
	setF(&z.ViewChurnWSRate, d.ViewChurnWSRate)
	set(&z.ViewChurnWatchers, d.ViewChurnWatchers)
	z.Tenants = z.Tenants.withDefaults(d.Tenants)
	set(&z.ScaleConfigMaps, d.ScaleConfigMaps)
	setD(&z.ScaleListTimeout, d.ScaleListTimeout)
	setD(&z.Drain, d.Drain)
	setD(&z.Settle, d.Settle)
	return z
}

// Run starts an Env, runs the scenarios and returns every figure.
func Run(ctx context.Context, o Options) (Report, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	if len(o.Scenarios) == 0 {
		o.Scenarios = DefaultScenarios
	}
	for _, s := range o.Scenarios {
		if _, ok := scenarios[s]; !ok {
			return Report{}, fmt.Errorf("unknown scenario %q (known: %s; opt-in: %s)", s, strings.Join(DefaultScenarios, ", "), strings.Join(OptInScenarios, ", "))
		}
	}
	z := o.Sizes.withDefaults()
	r := Report{Machine: harness.DescribeMachine()}
	eo := EnvOptions{GatewayBinary: o.GatewayBinary, Pods: o.Pods, Namespaces: o.Namespaces, Log: o.Log}
	if z.AbuseResync < DefaultSizes.AbuseResync {
		eo.MinResync = z.AbuseResync
	}
	if slices.Contains(o.Scenarios, ScenarioScale) {
		eo.APIServerFlags = scaleAPIServerFlags
	}
	env, err := StartEnv(ctx, eo)
	if err != nil {
		return r, err
	}
	defer env.Close()
	r.Workload = env.Workload
	for _, s := range o.Scenarios {
		fmt.Fprintf(o.Log, "scenario %s\n", s)
		t0 := time.Now()
		figs, err := scenarios[s](ctx, env, z, o.Log)
		r.Figures = append(r.Figures, figs...)
		if err != nil {
			return r, fmt.Errorf("scenario %s: %w", s, err)
		}
		fmt.Fprintf(o.Log, "scenario %s done in %v\n", s, time.Since(t0).Round(time.Second))
	}
	return r, nil
}

// setupFigures reports the workload and both processes' memory once the
// gateway has synced it.
func setupFigures(env *Env) ([]Figure, error) {
	gw, err := harness.ReadProc(env.GatewayPID)
	if err != nil {
		return nil, err
	}
	api, err := harness.ReadProc(env.APIServerPID)
	if err != nil {
		return nil, err
	}
	return []Figure{
		{"setup", ArmBench, "pod JSON size (cached)", "B", env.Workload.PodJSONBytes},
		{"setup", ArmBench, "pod JSON size (served)", "B", env.Workload.PodJSONBytesServed},
		{"setup", ArmGateway, "RSS after sync", "MiB", mib(gw.RSS)},
		{"setup", ArmAPIServer, "RSS after sync", "MiB", mib(api.RSS)},
	}, nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
