package scenario

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"kubegate/bench/harness"
	"kubegate/bench/workload"

	"github.com/coder/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Sizes are the scenarios' knobs. DefaultSizes finish in a few minutes on
// two cores; FullSizes are the full target sizes.
type Sizes struct {
	// Idle is the number of idle subscribers per arm.
	Idle int
	// Broad: subscribers watching everything, updates/s, seconds.
	Broad     int
	BroadRate float64
	Duration  time.Duration
	// Selective: subscribers, each watching one namespace, updates/s.
	Selective     int
	SelectiveRate float64
	// Burst: subscribers (all objects) and updates written as fast as
	// possible.
	BurstSubscribers int
	BurstUpdates     int
	// Slow: subscribers (1% of them never read) and updates/s.
	Slow     int
	SlowRate float64
	// Reconnect: subscribers that disconnect and resume.
	Reconnect int
	// Snapshots: new subscribers timed per arm.
	Snapshots int
	// RESTReps: lists per case and arm in the rest scenario (RunREST stops
	// a case early past its time budget).
	RESTReps int
	// RESTConcurrency: lists in flight at once per case in the rest
	// scenario. 0 or 1: one at a time, so a latency is one list's own.
	RESTConcurrency int
	// ColdStartPods: Pods the cold-started gateway syncs; when above the
	// workload's, the difference is created first.
	ColdStartPods int
	// Upstream: updates written with no subscriber, and their rate.
	Upstream     int
	UpstreamRate float64
	// Relist: subscribers per arm, each watching one namespace (plus one
	// watching all), and the updates written, at RelistRate, through a
	// kube-apiserver restart (at most one per Pod).
	Relist        int
	RelistUpdates int
	RelistRate    float64
	// Abuse: ordinary subscribers (each watching every Pod) and updates/s
	// in each phase; AbuseSubscriptions, the abusive client's
	// subscriptions on its one socket (abuse.go).
	Abuse              int
	AbuseRate          float64
	AbuseSubscriptions int
	// AbuseResync is the abusive client's resyncPeriod. Below 5s (the
	// gateway's default cache.minResync, and the protocol's least), the
	// benchmark gateway's cache.minResync is lowered to it: for the smoke
	// test, which cannot wait for 5s rounds.
	AbuseResync time.Duration
	// WatchList: REST watch-list clients per server that connect and read
	// nothing; WatchListReaders: clients per server that read their
	// snapshots at full speed (watchlist.go).
	WatchList        int
	WatchListReaders int
	// WindowPods are the Pod counts the windows scenario measures at, in
	// increasing order; Pods are created up to each (windows.go).
	// Windows: windows open during its update phase, one per socket;
	// WindowRate: its updates per second (for Duration); WindowOpens:
	// first windows timed per case and arm; WindowGCWait: the longest
	// wait for a collection before reading the live heap (none: no such
	// figure).
	WindowPods   []int
	Windows      int
	WindowRate   float64
	WindowOpens  int
	WindowGCWait time.Duration
	// PassThroughWrites are the writes timed on each arm of the
	// passthrough scenario (passthrough.go).
	PassThroughWrites int
	// ViewChurn (viewchurn.go): Pods created first; victims, each with a
	// socket, holding ViewChurnWindows windows between them; updates a
	// second to Pods the windows show, for ViewChurnDuration in each
	// phase; the attacker's REST sorted lists and new windows a second;
	// REST watches of every Pod whose CPU per event is measured as JSON
	// and as Tables.
	ViewChurnPods     int
	ViewChurnVictims  int
	ViewChurnWindows  int
	ViewChurnRate     float64
	ViewChurnDuration time.Duration
	ViewChurnRESTRate float64
	ViewChurnWSRate   float64
	ViewChurnWatchers int
	// Tenants sizes the tenants scenario (tenants.go).
	Tenants TenantsSizes
	// ScaleConfigMaps: the small ConfigMaps the scale scenario creates
	// (up to this many) and measures at; ScaleListTimeout bounds each of
	// its full lists, which past it is recorded as unfinished (scale.go).
	// It times WindowOpens new sort orders per form and waits up to
	// WindowGCWait for each live heap reading, as windows does.
	ScaleConfigMaps  int
	ScaleListTimeout time.Duration
	// ResyncBudget is the per-client resync budget (objects/s) the abuse
	// scenario's goal holds the gateway to: the default of the gateway's
	// websocket.resyncBudget. The harness does not configure the gateway's.
	ResyncBudget float64
	// Drain bounds the wait for deliveries after the last write.
	Drain time.Duration
	// Settle is how long memory is left to settle before RSS is read (idle,
	// cold start).
	Settle time.Duration
	// PerfDir, when set, gets perf CPU profiles of the serving processes
	// during the broad, selective and burst scenarios, and of the gateway
	// during the upstream scenario (needs perf and permission to trace
	// them).
	PerfDir string
	// ProtoHTTP2 puts all of the protobuf arm's watches on one HTTP/2
	// connection (client-go's default) instead of one HTTP/1.1 connection
	// each.
	ProtoHTTP2 bool
}

// DefaultSizes finish in a few minutes on a 2-core machine.
var DefaultSizes = Sizes{
	Idle: 1000, Broad: 1000, BroadRate: 20, Duration: 10 * time.Second,
	Selective: 1000, SelectiveRate: 100, BurstSubscribers: 100, BurstUpdates: 1000,
	Slow: 200, SlowRate: 20, Reconnect: 1000, Snapshots: 3, RESTReps: 20, ColdStartPods: 10000,
	Upstream: 1000, UpstreamRate: 100, Relist: 100, RelistUpdates: 1000, RelistRate: 100,
	Abuse: 100, AbuseRate: 20, AbuseSubscriptions: 100, AbuseResync: 5 * time.Second, ResyncBudget: 2000,
	WatchList: 100, WatchListReaders: 10,
	WindowPods: []int{10_000, 100_000}, Windows: 1000, WindowRate: 100, WindowOpens: 20, WindowGCWait: 150 * time.Second,
	ViewChurnPods: 20_000, ViewChurnVictims: 4, ViewChurnWindows: 20, ViewChurnRate: 20, ViewChurnDuration: 20 * time.Second,
	ViewChurnRESTRate: 20, ViewChurnWSRate: 10, ViewChurnWatchers: 50, PassThroughWrites: 500,
	Tenants:         DefaultTenantsSizes,
	ScaleConfigMaps: 1_000_000, ScaleListTimeout: 10 * time.Minute,
	Drain: 60 * time.Second, Settle: 2 * time.Second,
}

// FullSizes are the full target sizes (idle 5k, broad U=100/s, selective
// U=500/s, cold start 100k, abuse with 1k ordinary subscribers at
// U=100/s, 1k stalled and 50 full-speed watch-list clients).
var FullSizes = Sizes{
	Idle: 5000, Broad: 1000, BroadRate: 100, Duration: 30 * time.Second,
	Selective: 1000, SelectiveRate: 500, BurstSubscribers: 1000, BurstUpdates: 5000,
	Slow: 1000, SlowRate: 100, Reconnect: 1000, Snapshots: 10, RESTReps: 50, ColdStartPods: 100000,
	Upstream: 3000, UpstreamRate: 100, Relist: 1000, RelistUpdates: 3000, RelistRate: 100,
	Abuse: 1000, AbuseRate: 100, AbuseSubscriptions: 100, AbuseResync: 5 * time.Second, ResyncBudget: 2000,
	WatchList: 1000, WatchListReaders: 50,
	WindowPods: []int{10_000, 100_000}, Windows: 1000, WindowRate: 100, WindowOpens: 50, WindowGCWait: 150 * time.Second,
	ViewChurnPods: 100_000, ViewChurnVictims: 4, ViewChurnWindows: 20, ViewChurnRate: 20, ViewChurnDuration: 30 * time.Second,
	ViewChurnRESTRate: 40, ViewChurnWSRate: 18, ViewChurnWatchers: 50, PassThroughWrites: 2000,
	Tenants:         DefaultTenantsSizes,
	ScaleConfigMaps: 1_000_000, ScaleListTimeout: 10 * time.Minute,
	Drain: 120 * time.Second, Settle: 2 * time.Second,
}

// watchArms builds the arms named: gateway, apiserver/json,
// apiserver/proto, floor.
func watchArms(env *Env, z Sizes, which ...string) ([]watchArm, error) {
	var arms []watchArm
	for _, w := range which {
		switch w {
		case ArmGateway:
			arms = append(arms, newWSArm(env))
		case ArmJSON:
			a, err := newJSONArm(env)
			if err != nil {
				return nil, err
			}
			arms = append(arms, a)
		case ArmProto:
			a, err := newProtoArm(env, z.ProtoHTTP2)
			if err != nil {
				return nil, err
			}
			arms = append(arms, a)
		case ArmFloor:
			arms = append(arms, newFloorArm(env))
		}
	}
	return arms, nil
}

func armPID(env *Env, arm string) int {
	if arm == ArmGateway {
		return env.GatewayPID
	}
	return env.APIServerPID
}

// writeBaseline measures the CPU kube-apiserver and the gateway spend on
// plan's writes with no subscribers.
func writeBaseline(ctx context.Context, env *Env, z Sizes, plan workload.UpdatePlan) (api, gw time.Duration, err error) {
	g0, a0, err := readBoth(env)
	if err != nil {
		return 0, 0, err
	}
	pods := make([]workload.PodKey, env.Workload.Pods)
	for j := range pods {
		pods[j] = workload.PodAt(j, len(env.Namespaces))
	}
	if _, _, err := workload.Update(ctx, env.Client(), pods, plan); err != nil {
		return 0, 0, err
	}
	// Let the gateway's informer finish with the last events.
	time.Sleep(z.Settle / 4)
	g1, a1, err := readBoth(env)
	if err != nil {
		return 0, 0, err
	}
	return a1.Since(a0), g1.Since(g0), nil
}

// fanoutScenario runs spec on each arm after a no-subscriber baseline.
// kube-apiserver's CPU per delivery excludes the baseline (the cost of the
// writes). The gateway's includes all of its CPU: its informer decoding
// the events is part of what fan-out through it costs. The floor's is its
// process's, which does nothing else.
func fanoutScenario(ctx context.Context, env *Env, z Sizes, spec fanoutSpec, arms []string, log io.Writer) ([]Figure, error) {
	apiBase, gwBase, err := writeBaseline(ctx, env, z, spec.plan)
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	fmt.Fprintf(log, "  baseline without subscribers: %d writes cost kube-apiserver %.2fs CPU, the gateway (its informer) %.2fs\n",
		spec.plan.Count, apiBase.Seconds(), gwBase.Seconds())
	as, err := watchArms(env, z, arms...)
	if err != nil {
		return nil, err
	}
	var figs []Figure
	for _, a := range as {
		base := time.Duration(0)
		if isAPIServer(a.Name()) {
			base = apiBase
		}
		st, err := runFanout(ctx, env, a, spec, armPID(env, a.Name()), base, log)
		if err != nil {
			return figs, err
		}
		if f, ok := a.(*floorArm); ok && f.Err() != nil {
			return figs, f.Err()
		}
		fmt.Fprintf(log, "  %s: %d deliveries, missed %d, duplicated %d, out of order %d, cut off %d\n", a.Name(), st.deliveries, st.missed, st.duplicated, st.reordered, st.cutOff)
		figs = append(figs, st.figures(spec.scenario, a.Name(), spec.metricSuffix)...)
	}
	return figs, nil
}

func allArms() []string { return []string{ArmGateway, ArmJSON, ArmProto} }

// scenarioBroad is fan-out to subscribers that all watch everything, on
// every arm and on the floor (floor.go).
func scenarioBroad(ctx context.Context, env *Env, z Sizes, log io.Writer) ([]Figure, error) {
	if raceEnabled {
		fmt.Fprintln(log, "  the floor runs from this executable, which has the race detector: its CPU is not comparable")
	}
	return fanoutScenario(ctx, env, z, fanoutSpec{
		scenario: "broad", n: z.Broad, drain: z.Drain, perfDir: z.PerfDir,
		plan: workload.UpdatePlan{Count: int(z.BroadRate * z.Duration.Seconds()), Rate: z.BroadRate},
	}, append(allArms(), ArmFloor), log)
}

func scenarioSelective(ctx context.Context, env *Env, z Sizes, log io.Writer) ([]Figure, error) {
	return fanoutScenario(ctx, env, z, fanoutSpec{
		scenario: "selective", n: z.Selective, selective: true, drain: z.Drain, perfDir: z.PerfDir,
		plan: workload.UpdatePlan{Count: int(z.SelectiveRate * z.Duration.Seconds()), Rate: z.SelectiveRate, Workers: 16},
	}, allArms(), log)
}

func scenarioBurst(ctx context.Context, env *Env, z Sizes, log io.Writer) ([]Figure, error) {
	spec := fanoutSpec{scenario: "burst", n: z.BurstSubscribers, drain: z.Drain, perfDir: z.PerfDir,
		plan: workload.UpdatePlan{Count: z.BurstUpdates, Workers: 64}}
	return fanoutScenario(ctx, env, z, spec, allArms(), log)
}

// scenarioSlow runs the same fan-out twice per arm, without and with 1% of
// the subscribers never reading; healthy subscribers' p99 should not move.
func scenarioSlow(ctx context.Context, env *Env, z Sizes, log io.Writer) ([]Figure, error) {
	plan := workload.UpdatePlan{Count: int(z.SlowRate * z.Duration.Seconds()), Rate: z.SlowRate}
	var figs []Figure
	for _, slow := range []int{0, max(1, z.Slow/100)} {
		suffix := " (no slow)"
		if slow > 0 {
			suffix = fmt.Sprintf(" (%d never read)", slow)
		}
		f, err := fanoutScenario(ctx, env, z, fanoutSpec{scenario: "slow", n: z.Slow, slow: slow, drain: z.Drain, plan: plan, metricSuffix: suffix},
			[]string{ArmGateway, ArmJSON}, log)
		for _, x := range f {
			if strings.HasPrefix(x.Metric, "latency") || strings.HasPrefix(x.Metric, "missed") || strings.HasPrefix(x.Metric, "duplicated") || strings.HasPrefix(x.Metric, "subscribers cut off") {
				figs = append(figs, x)
			}
		}
		if err != nil {
			return figs, err
		}
	}
	return figs, nil
}

// scenarioIdle opens N idle subscribers per arm and reports the serving
// process's RSS growth per subscriber.
func scenarioIdle(ctx context.Context, env *Env, z Sizes, log io.Writer) ([]Figure, error) {
	as, err := watchArms(env, z, allArms()...)
	if err != nil {
		return nil, err
	}
	// The gateway's side runs on a fresh gateway process caching only
	// namespaces: the main one has just decoded 10k Pods, and the garbage
	// and free pages that left would absorb (RSS) or inflate (heap in use)
	// what idle sockets add. An idle subscription's cost does not depend on
	// what the cache holds. kube-apiserver cannot be restarted as cheaply;
	// its figures carry that noise (see docs/benchmarks-history.md).
	fresh, err := env.startGateway(ctx, GatewayConfig(env.Kubeconfig, "namespaces"), false)
	if err != nil {
		return nil, err
	}
	defer fresh.Stop()
	freshEnv := *env
	freshEnv.GatewayURL, freshEnv.GatewayPID = fresh.URL, fresh.PID
	var figs []Figure
	for _, a := range as {
		if ws, ok := a.(*wsArm); ok {
			ws.url = strings.Replace(fresh.URL, "http://", "ws://", 1) + "/ws"
			ws.resource = "namespaces"
		}
		env := env
		if a.Name() == ArmGateway {
			env = &freshEnv
		}
		pid := armPID(env, a.Name())
		before, err := settledRSS(pid, z.Settle)
		if err != nil {
			return figs, err
		}
		memBefore, err := goInuse(ctx, env, a.Name())
		if err != nil {
			return figs, err
		}
		subs := make([]*subscriber, z.Idle)
		for i := range subs {
			subs[i] = &subscriber{}
		}
		rv, err := currentRV(ctx, env.Client())
		if err != nil {
			return figs, err
		}
		if a.Name() == ArmGateway {
			rv = 0 // live changes from now (sendInitialEvents false)
		}
		if err := a.Open(ctx, subs, rv); err != nil {
			a.Close()
			return figs, fmt.Errorf("%s: open %d idle subscribers: %w", a.Name(), z.Idle, err)
		}
		after, err := settledRSS(pid, z.Settle)
		if err != nil {
			a.Close()
			return figs, err
		}
		memAfter, err := goInuse(ctx, env, a.Name())
		a.Close()
		if err != nil {
			return figs, err
		}
		per := float64(after-before) / float64(z.Idle) / 1024
		perGo := (memAfter - memBefore) / float64(z.Idle) / 1024
		fmt.Fprintf(log, "  %s: RSS %.1f -> %.1f MiB with %d idle subscribers: %.1f KiB each; Go heap+stacks in use %.1f KiB each\n",
			a.Name(), mib(before), mib(after), z.Idle, per, perGo)
		figs = append(figs,
			Figure{"idle", a.Name(), fmt.Sprintf("RSS per idle subscriber (N=%d)", z.Idle), "KiB", per},
			Figure{"idle", a.Name(), fmt.Sprintf("Go heap+stacks per idle subscriber (N=%d)", z.Idle), "KiB", perGo})
	}
	return figs, nil
}

// goInuse is the serving process's go_memstats_heap_inuse_bytes plus
// go_memstats_stack_inuse_bytes from its /metrics. RSS alone hides new
// allocations in a process whose heap has free pages (kube-apiserver's
// does after the workload was created), and shows garbage not yet
// collected; in-use heap and stacks are closer to what a subscriber holds.
func goInuse(ctx context.Context, env *Env, arm string) (float64, error) {
	m, err := metricsOf(ctx, env, arm)
	if err != nil {
		return 0, err
	}
	heap, err1 := m.Value("go_memstats_heap_inuse_bytes")
	stack, err2 := m.Value("go_memstats_stack_inuse_bytes")
	return heap + stack, errors.Join(err1, err2)
}

// metricsOf is the /metrics of the gateway (for ArmGateway) or of
// kube-apiserver.
func metricsOf(ctx context.Context, env *Env, arm string) (harness.Metrics, error) {
	var (
		b   []byte
		err error
	)
	if arm == ArmGateway {
		b, err = httpGet(ctx, env.GatewayURL+"/metrics")
	} else {
		b, err = env.Client().CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	}
	if err != nil {
		return nil, err
	}
	return harness.ParseMetrics(bytes.NewReader(b))
}

func httpGet(ctx context.Context, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// settledRSS waits for the process to settle, then reads its RSS.
func settledRSS(pid int, settle time.Duration) (int64, error) {
	time.Sleep(settle)
	st, err := harness.ReadProc(pid)
	return st.RSS, err
}

// scenarioSnapshot times a new subscriber's first complete view of every
// Pod: the gateway's snapshot up to END_OF_SNAPSHOT, kube-apiserver's LIST
// (JSON and protobuf) and its streaming watch list (sendInitialEvents up
// to the initial-events-end bookmark).
func scenarioSnapshot(ctx context.Context, env *Env, z Sizes, log io.Writer) ([]Figure, error) {
	type timer struct {
		arm string
		fn  func(context.Context) (int, error)
	}
	jc, err := http1Client(env.APIServer)
	if err != nil {
		return nil, err
	}
	defer jc.CloseIdleConnections()
	pc, err := kubernetes.NewForConfig(protoConfig(env.APIServer))
	if err != nil {
		return nil, err
	}
	// verifyLater is set by a timer whose result is checked after its
	// clock has stopped.
	var verifyLater func() error
	timers := []timer{
		{ArmGateway, func(ctx context.Context) (int, error) {
			n, verify, err := gatewaySnapshot(ctx, env)
			if err == nil {
				verifyLater = verify
			}
			return n, err
		}},
		{ArmJSON, func(ctx context.Context) (int, error) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, env.APIServer.Host+"/api/v1/pods", nil)
			req.Header.Set("Authorization", "Bearer "+env.APIServer.BearerToken)
			resp, err := jc.Do(req)
			if err != nil {
				return 0, err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			return bytes.Count(b, []byte(`{"metadata":{"name":"web-`)), err
		}},
		{ArmProto, func(ctx context.Context) (int, error) {
			l, err := pc.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
			if err != nil {
				return 0, err
			}
			return len(l.Items), nil
		}},
		{ArmJSON + " watchlist", func(ctx context.Context) (int, error) {
			return watchListSnapshot(ctx, apiserverWatchListTarget(env, jc))
		}},
	}
	var figs []Figure
	for _, t := range timers {
		// Both ends' CPU, so a reader can tell which one limited the time:
		// on a small machine the client reading tens of megabytes can.
		server := env.APIServerPID
		if t.arm == ArmGateway {
			server = env.GatewayPID
		}
		srv0, err := harness.ReadCPU(server)
		if err != nil {
			return figs, err
		}
		self0, err := harness.ReadCPU(os.Getpid())
		if err != nil {
			return figs, err
		}
		var ds []time.Duration
		for range z.Snapshots {
			verifyLater = nil
			t0 := time.Now()
			n, err := t.fn(ctx)
			d := time.Since(t0)
			if err == nil && verifyLater != nil {
				err = verifyLater()
			}
			if err != nil {
				return figs, fmt.Errorf("%s snapshot: %w", t.arm, err)
			}
			if n != env.Workload.Pods {
				return figs, fmt.Errorf("%s snapshot: %d pods, want %d", t.arm, n, env.Workload.Pods)
			}
			ds = append(ds, d)
		}
		srv1, err := harness.ReadCPU(server)
		if err != nil {
			return figs, err
		}
		self1, err := harness.ReadCPU(os.Getpid())
		if err != nil {
			return figs, err
		}
		n := time.Duration(len(ds))
		srvCPU, selfCPU := srv1.Since(srv0)/n, self1.Since(self0)/n
		runs := slices.Clone(ds)
		slices.Sort(ds)
		each := make([]string, len(runs))
		for i, d := range runs {
			each[i] = d.Round(time.Millisecond).String()
		}
		fmt.Fprintf(log, "  %s: snapshot of %d pods: median %v, max %v (runs: %s); CPU per snapshot: server %v, client %v\n", t.arm, env.Workload.Pods,
			ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond), strings.Join(each, ", "), srvCPU.Round(time.Millisecond), selfCPU.Round(time.Millisecond))
		metric := fmt.Sprintf("time to snapshot of %d pods", env.Workload.Pods)
		arm := t.arm
		figs = append(figs,
			Figure{"snapshot", arm, metric + " (median)", "ms", float64(ds[len(ds)/2]) / 1e6},
			Figure{"snapshot", arm, metric + " (max)", "ms", float64(ds[len(ds)-1]) / 1e6},
			Figure{"snapshot", arm, "server CPU/snapshot", "ms", Milliseconds(srvCPU)},
			Figure{"snapshot", ArmBench + " (" + arm + ")", "client CPU/snapshot", "ms", Milliseconds(selfCPU)})
		if arm == ArmGateway {
			// The goal holds for every snapshot, not for a typical one.
			for i, d := range runs {
				figs = append(figs, Figure{"snapshot", arm, fmt.Sprintf("%s (run %d)", metric, i+1), "ms", Milliseconds(d)})
			}
		}
	}
	return figs, nil
}

// gatewaySnapshot subscribes to every Pod on a new socket and counts ADDED
// frames until END_OF_SNAPSHOT.
// gatewaySnapshot subscribes to every Pod and reads the snapshot up to its
// end marker. While the clock runs the reader only receives each message
// (into a buffer sized for a full batch, so it is not regrown as it
// fills) and counts its frames by their leading bytes, as the JSON arm
// counts objects: the figure is the time to deliver the snapshot, not
// this reader's parse of tens of megabytes, which on a small machine takes
// longer than the delivery and would compete with the gateway for CPU.
// verify then parses every frame, after the clock has stopped.
func gatewaySnapshot(ctx context.Context, env *Env) (n int, verify func() error, err error) {
	u := strings.Replace(env.GatewayURL, "http://", "ws://", 1) + "/ws"
	c, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{Subprotocols: []string{"kubegate.v1"}})
	if err != nil {
		return 0, nil, err
	}
	defer c.CloseNow()
	c.SetReadLimit(-1)
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribe","id":"snap","resource":"pods"}`)); err != nil {
		return 0, nil, err
	}
	// The gateway's batches stop growing at 256 KiB (websocket.maxBatchBytes).
	const batchBytes = 256<<10 + 16<<10
	var msgs [][]byte
	for {
		_, r, err := c.Reader(ctx)
		if err != nil {
			return n, nil, err
		}
		b := bytes.NewBuffer(make([]byte, 0, batchBytes))
		if _, err := b.ReadFrom(r); err != nil {
			return n, nil, err
		}
		m := b.Bytes()
		msgs = append(msgs, m)
		n += bytes.Count(m, []byte(`{"type":"ADDED","id":"snap",`))
		// An end marker closes the snapshot's last message; an error or
		// RESET opens one.
		head, tail := m[:min(len(m), 64)], m[max(0, len(m)-128):]
		if bytes.Contains(tail, []byte(`{"type":"END_OF_SNAPSHOT","id":"snap",`)) ||
			bytes.Contains(head, []byte(`{"type":"error"`)) || bytes.Contains(head, []byte(`{"type":"RESET"`)) {
			break
		}
	}
	verify = func() error {
		added, ended := 0, false
		for _, m := range msgs {
			var ferr error
			if err := scanFrames(m, func(typ, id, rv []byte) {
				switch string(typ) {
				case "ADDED":
					added++
				case "END_OF_SNAPSHOT":
					ended = true
				case "error", "RESET":
					ferr = fmt.Errorf("%s frame: %.300s", typ, m)
				}
			}); err != nil {
				return err
			}
			if ferr != nil {
				return ferr
			}
		}
		if !ended || added != n {
			return fmt.Errorf("parsed %d ADDED frames (end marker: %t); counted %d while reading", added, ended, n)
		}
		return nil
	}
	return n, verify, nil
}

// protoConfig is cfg asking for protobuf, as client-go programs for
// built-in types do.
func protoConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.ContentType = "application/vnd.kubernetes.protobuf"
	c.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	// As in the REST scenario: gzip costs kube-apiserver CPU and saves
	// nothing on loopback, and the gateway does not compress.
	c.DisableCompression = true
	return c
}

// apiserverRequests sums kube-apiserver's apiserver_request_total for
// Pods. A watch is counted when it ends.
func apiserverRequests(ctx context.Context, env *Env) (float64, error) {
	m, err := metricsOf(ctx, env, ArmJSON)
	if err != nil {
		return 0, err
	}
	v, _ := m.Get("apiserver_request_total", "resource", "pods")
	return v, nil
}
