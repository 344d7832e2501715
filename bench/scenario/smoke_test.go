package scenario

import (
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	RunFloorIfAsked() // the broad scenario's floor runs from this binary
	goleak.VerifyTestMain(m,
		// klog's flush daemon, started by client-go.
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"))
}

// buildGateway builds cmd/gateway into a temporary directory.
func buildGateway(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gateway")
	out, err := exec.Command("go", "build", "-o", bin, "kubegate/cmd/gateway").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// smokeSizes are tiny, so the whole run takes well under a minute.
var smokeSizes = Sizes{
	Idle: 10, Broad: 10, BroadRate: 40, Duration: 500 * time.Millisecond,
	Selective: 8, SelectiveRate: 40, BurstSubscribers: 5, BurstUpdates: 40,
	Slow: 100, SlowRate: 40, Reconnect: 10, Snapshots: 1, RESTReps: 2, ColdStartPods: 40,
	Upstream: 20, UpstreamRate: 40, Relist: 4, RelistUpdates: 30, RelistRate: 20,
	// The gateway checks resyncs once a second, so 1s is the shortest
	// period that still makes rounds.
	Abuse: 5, AbuseRate: 40, AbuseSubscriptions: 10, AbuseResync: time.Second,
	WatchList: 5, WatchListReaders: 2,
	// Pods are created from the workload's 40 up to 60 between the two.
	// It does not wait for the gateway's collections (its live heap).
	WindowPods: []int{40, 60}, Windows: 10, WindowRate: 40, WindowOpens: 3, WindowGCWait: time.Millisecond,
	// viewchurn and tenants create Pods up to 80 and 100 after windows.
	ViewChurnPods: 80, ViewChurnVictims: 2, ViewChurnWindows: 6, ViewChurnRate: 20, ViewChurnDuration: time.Second,
	ViewChurnRESTRate: 10, ViewChurnWSRate: 5, ViewChurnWatchers: 3,
	// Their live heap figures are left out: the wait for a collection
	// would take most of a minute per attack.
	Tenants: TenantsSizes{Pods: 100, Duration: time.Second, Recovery: 100 * time.Millisecond, GCWait: time.Millisecond,
		Rate: 20, ListRate: 4, VictimWindows: 3, FloodRate: 100, FloodConns: 10, NewTokens: 2,
		ChurnRate: 10, LongSelectorRate: 3, WSChurnRate: 5, Hoard: 30, ReviewRate: 5, SocketIdentities: 2, SocketsPerIdentity: 5},
	PassThroughWrites: 20,
	// scale creates 200 small ConfigMaps; no live heap figures either.
	ScaleConfigMaps: 200,
	Drain:           30 * time.Second, Settle: 200 * time.Millisecond,
}

// TestSmoke runs every scenario at tiny sizes against a real control plane
// and gateway, so the harness cannot rot: every figure must be present,
// no subscriber may miss or see a duplicated or reordered event, and the
// figures that cannot be zero must be positive.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and the gateway binary")
	}
	var log strings.Builder
	const pods = 40
	// The opt-in scenarios too, last: they create Pods.
	scenarios := append(slices.Clone(DefaultScenarios), OptInScenarios...)
	r, err := Run(t.Context(), Options{GatewayBinary: buildGateway(t), Scenarios: scenarios, Pods: pods, Namespaces: 4, Sizes: smokeSizes, Log: &log})
	var table strings.Builder
	Table(&table, r.Figures)
	t.Logf("\n%s\n%s", log.String(), table.String())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r.Workload.PodJSONBytes < 6000 || r.Workload.PodJSONBytes > 9000 {
		t.Errorf("pod JSON is %.0f B, want about 7 KB", r.Workload.PodJSONBytes)
	}

	got := map[string]Figure{}
	for _, f := range r.Figures {
		k := f.Scenario + "|" + f.Arm + "|" + f.Metric
		if _, dup := got[k]; dup {
			t.Errorf("figure %s reported twice", k)
		}
		got[k] = f
		if math.IsNaN(f.Value) || math.IsInf(f.Value, 0) {
			t.Errorf("%s = %v", k, f.Value)
		}
	}
	want := func(scenario, arm, metric string) Figure {
		t.Helper()
		f, ok := got[scenario+"|"+arm+"|"+metric]
		if !ok {
			t.Errorf("figure %s|%s|%s missing", scenario, arm, metric)
		}
		return f
	}
	positive := func(scenario, arm, metric string) {
		t.Helper()
		if f := want(scenario, arm, metric); !(f.Value > 0) {
			t.Errorf("%s|%s|%s = %v, want > 0", scenario, arm, metric, f.Value)
		}
	}
	zero := func(scenario, arm, metric string) {
		t.Helper()
		if f := want(scenario, arm, metric); f.Value != 0 {
			t.Errorf("%s|%s|%s = %v, want 0", scenario, arm, metric, f.Value)
		}
	}
	watchArms := []string{ArmGateway, ArmJSON, ArmProto}
	for _, arm := range watchArms {
		want("idle", arm, fmt.Sprintf("RSS per idle subscriber (N=%d)", smokeSizes.Idle))
		want("idle", arm, fmt.Sprintf("Go heap+stacks per idle subscriber (N=%d)", smokeSizes.Idle))
		for _, m := range []string{"median", "max"} {
			positive("snapshot", arm, fmt.Sprintf("time to snapshot of %d pods (%s)", pods, m))
		}
		positive("snapshot", arm, "server CPU/snapshot")
		positive("snapshot", ArmBench+" ("+arm+")", "client CPU/snapshot")
		for _, s := range []string{"broad", "selective", "burst"} {
			for _, m := range []string{"latency p50", "latency p99", "latency p99.9", "CPU per 1000 deliveries"} {
				want(s, arm, m)
			}
			for _, m := range []string{"latency from send p50", "latency from send p99", "deliveries/s", "peak RSS"} {
				positive(s, arm, m)
			}
			zero(s, arm, "duplicated")
			zero(s, arm, "out of order")
			// kube-apiserver closes a watch that falls behind (on a loaded
			// machine, ours can); the gateway never does, and nothing may be
			// missed on a stream that stayed open.
			if arm == ArmGateway || want(s, arm, "subscribers cut off").Value == 0 {
				zero(s, arm, "missed")
				zero(s, arm, "subscribers cut off")
			}
			want(s, ArmBench+" ("+arm+")", "bench CPU")
		}
	}
	// The floor: the same checks as an arm, and it costs CPU.
	for _, m := range []string{"latency p50", "latency p99", "latency p99.9"} {
		want("broad", ArmFloor, m)
	}
	for _, m := range []string{"latency from send p50", "latency from send p99", "deliveries/s", "peak RSS", "CPU per 1000 deliveries"} {
		positive("broad", ArmFloor, m)
	}
	for _, m := range []string{"missed", "duplicated", "out of order", "subscribers cut off"} {
		zero("broad", ArmFloor, m)
	}
	positive("snapshot", ArmJSON+" watchlist", fmt.Sprintf("time to snapshot of %d pods (median)", pods))
	for i := range smokeSizes.Snapshots {
		positive("snapshot", ArmGateway, fmt.Sprintf("time to snapshot of %d pods (run %d)", pods, i+1))
	}
	for _, s := range []string{"broad", "selective", "burst"} {
		positive(s, ArmGateway, "CPU per 1000 deliveries")
	}
	for _, arm := range []string{ArmGateway, ArmJSON} {
		for _, sfx := range []string{" (no slow)", " (1 never read)"} {
			positive("slow", arm, "latency from send p99"+sfx)
			zero("slow", arm, "duplicated"+sfx)
			if arm == ArmGateway || want("slow", arm, "subscribers cut off"+sfx).Value == 0 {
				zero("slow", arm, "missed"+sfx)
			}
		}
		if f := want("reconnect", arm, "resumed without snapshot"); f.Value != float64(smokeSizes.Reconnect) {
			t.Errorf("reconnect|%s: %v resumed without a snapshot, want all %d", arm, f.Value, smokeSizes.Reconnect)
		}
		positive("reconnect", arm, "time until all caught up")
		zero("reconnect", arm, "missed")
		zero("reconnect", arm, "duplicated")
	}
	for _, sfx := range []string{abuseBefore, abuseWith, abuseAfter} {
		for _, m := range []string{"latency p50", "latency p99", "latency p99.9", "CPU per 1000 deliveries"} {
			want("abuse", ArmGateway, m+sfx)
		}
		positive("abuse", ArmGateway, "latency from send p99"+sfx)
		positive("abuse", ArmGateway, "CPU used"+sfx)
		for _, m := range []string{"missed", "duplicated", "out of order", "subscribers cut off"} {
			zero("abuse", ArmGateway, m+sfx)
		}
		want("abuse", ArmBench+" ("+ArmGateway+")", "bench CPU"+sfx)
	}
	for _, m := range []string{"resynced objects/s (steady)", "resynced objects/s (overall)", "resyncs started", "live events/s"} {
		positive("abuse", ArmGateway, "abusive client: "+m)
	}
	positive("abuse", ArmGateway, "resyncs delivered (gateway's counter)")
	want("abuse", ArmGateway, "resyncs deferred (gateway's counter)")
	positive("abuse", ArmBench, "resync budget checked")
	for _, arm := range []string{ArmGateway, ArmJSON} {
		stalled := fmt.Sprintf("(N=%d stalled)", smokeSizes.WatchList)
		full := fmt.Sprintf("(N=%d at full speed)", smokeSizes.WatchListReaders)
		// Memory can shrink over a phase (a collection); allocations and
		// time cannot.
		want("watchlist", arm, "Go heap+stacks per client "+stalled)
		want("watchlist", arm, "RSS per client "+stalled)
		want("watchlist", arm, "kernel socket buffers per client "+stalled)
		positive("watchlist", arm, "allocated per client "+stalled)
		want("watchlist", arm, "Go heap+stacks peak per client "+full)
		want("watchlist", arm, "RSS peak per client "+full)
		positive("watchlist", arm, "allocated per client "+full)
		positive("watchlist", arm, "time until every snapshot is in "+full)
		positive("watchlist", arm, "server CPU per watch-list "+full)
		want("watchlist", ArmBench+" ("+arm+")", "client CPU per watch-list "+full)
		if arm == ArmGateway {
			if f := want("watchlist", arm, "watches open "+stalled); f.Value != float64(smokeSizes.WatchList) {
				t.Errorf("watchlist: %v watches open while stalled, want %d", f.Value, smokeSizes.WatchList)
			}
		}
	}
	zero("reconnect", ArmGateway, "apiserver requests during storm")
	positive("reconnect", ArmJSON, "apiserver requests during storm")
	rest := 0
	for _, f := range r.Figures {
		if f.Scenario == ScenarioREST {
			rest++
			// CPU of etcd (none for rv=0) and of the client can round to 0.
			if strings.Contains(f.Metric, "CPU") && f.Arm != ArmGateway {
				continue
			}
			if !(f.Value > 0) {
				t.Errorf("%s|%s|%s = %v, want > 0", f.Scenario, f.Arm, f.Metric, f.Value)
			}
		}
	}
	if rest == 0 {
		t.Error("no figures from the rest scenario")
	}
	for _, m := range []string{"time to ready", "peak RSS", "steady RSS", "heap in use (no GC) / JSON size"} {
		positive("coldstart", ArmGateway, fmt.Sprintf("%s (%d pods)", m, pods))
	}
	positive("coldstart", ArmJSON, fmt.Sprintf("time to ready (%d pods)", pods))
	positive("coldstart", ArmJSON, fmt.Sprintf("LIST size (%d pods)", pods))
	positive("coldstart", ArmGateway, fmt.Sprintf("gateway CPU to ready (%d pods)", pods))
	for _, arm := range []string{ArmGateway, ArmJSON} {
		want("coldstart", arm, fmt.Sprintf("apiserver CPU to ready (%d pods)", pods))
	}
	// CPU less an idle baseline: a few updates may not rise above the
	// noise, so only its presence is checked.
	for _, arm := range []string{ArmGateway, ArmAPIServer} {
		want("upstream", arm, "CPU per update, no subscriber")
		want("upstream", arm, "idle CPU")
	}
	positive("upstream", ArmBench, "updates")
	for _, arm := range watchArms {
		for _, m := range []string{"missed", "final state not reached", "duplicated", "out of order"} {
			zero("relist", arm, m)
		}
		want("relist", arm, "reconnects")
	}
	positive("relist", ArmBench, "writes")
	positive("relist", ArmBench, "kube-apiserver outage")
	// The restart must have made the gateway's upstream relist: that is
	// what the scenario is for.
	positive("relist", ArmGateway, "upstream relists")

	for _, arm := range []string{ArmGateway, ArmAPIServer} {
		positive(ScenarioPassThrough, arm, "write p50")
		positive(ScenarioPassThrough, arm, "write p99")
	}
	positive(ScenarioPassThrough, ArmGateway, "CPU per write")
	if f := want(ScenarioPassThrough, ArmBench, "writes per arm"); f.Value != float64(smokeSizes.PassThroughWrites) {
		t.Errorf("passthrough: %v writes per arm, want %d", f.Value, smokeSizes.PassThroughWrites)
	}

	for _, n := range smokeSizes.WindowPods {
		sfx := fmt.Sprintf(" (%d pods)", n)
		w := func(arm, metric string) Figure { t.Helper(); return want(ScenarioWindows, arm, metric+sfx) }
		pos := func(arm, metric string) { t.Helper(); positive(ScenarioWindows, arm, metric+sfx) }
		for _, m := range []string{"first window, new table", "gateway CPU per first window, new table", "gateway CPU per first window, new sort order",
			"gateway CPU per first window, new filter", "window updates received", "window update latency from send p99"} {
			pos(ArmGateway, m)
		}
		for _, m := range []string{"first window, new sort order", "first window, new filter", "first window, rows shown before"} {
			pos(ArmGateway, m+" (median)")
			pos(ArmGateway, m+" (max)")
		}
		for _, arm := range []string{ArmGateway, ArmAPIServer + " limit=50", ArmJSON + " full list", ArmProto + " full list"} {
			pos(arm, "first 50 rows (median)")
			pos(arm, "first 50 rows (max)")
			pos(arm, "server CPU per first 50 rows")
		}
		// CPU less an idle baseline and memory growth can be noise at
		// these sizes: only their presence is checked.
		for _, m := range []string{"CPU per update, 1 window", fmt.Sprintf("CPU per update, %d windows", smokeSizes.Windows),
			fmt.Sprintf("idle CPU, %d windows", smokeSizes.Windows), "window update latency p50", "window update latency p99"} {
			w(ArmGateway, m)
		}
		w(ArmGateway, fmt.Sprintf("RSS per window (N=%d)", smokeSizes.Windows))
		w(ArmGateway, fmt.Sprintf("RSS per socket (N=%d)", smokeSizes.Windows))
		// Allocations cannot shrink.
		pos(ArmGateway, fmt.Sprintf("allocated per window (N=%d)", smokeSizes.Windows))
		pos(ArmGateway, fmt.Sprintf("allocated per socket (N=%d)", smokeSizes.Windows))
		w(ArmBench, "bench CPU, update phase")
		if f := w(ArmGateway, "window updates missed"); f.Value != 0 {
			t.Errorf("windows: %v window updates missed at %d pods", f.Value, n)
		}
		if f := w(ArmGateway, "window resets"); f.Value != 0 {
			t.Errorf("windows: %v window resets at %d pods", f.Value, n)
		}
	}
	smokeViewChurn(t, got, want, positive, zero)
	smokeTenants(t, want, positive, zero)
	smokeScale(t, r.Figures, want, positive)
	judged := map[string]bool{}
	for _, g := range Goals(r.Figures) {
		judged[strings.SplitN(g.Goal, ":", 2)[0]] = true
	}
	for _, a := range TenantsAttacks {
		if !judged[a] {
			t.Errorf("no goal judges the tenants attack %s", a)
		}
	}
}

// smokeViewChurn checks the viewchurn scenario's figures.
func smokeViewChurn(t *testing.T, got map[string]Figure, want func(string, string, string) Figure, positive, zero func(string, string, string)) {
	t.Helper()
	const s = ScenarioViewChurn
	for _, m := range []string{"list all p50", "list all CPU/list", "list all as Table p50", "list all as Table CPU/list"} {
		positive(s, ArmGateway, m)
	}
	for _, arm := range []string{ArmAPIServerRVUnset, ArmAPIServerRV0} {
		positive(s, arm, "list all as Table p50")
		positive(s, arm, "list all as Table CPU/list")
		if f := want(s, arm, "list all as Table items"); f.Value != want(s, ArmGateway, "list all as Table items").Value {
			t.Errorf("viewchurn: %s listed %v rows as a Table, the gateway %v", arm, f.Value, want(s, ArmGateway, "list all as Table items").Value)
		}
	}
	if _, ok := got[s+"|"+ArmGateway+"|list all p50"]; ok {
		if _, dup := got[s+"|"+ArmAPIServerRV0+"|list all p50"]; dup {
			t.Error("viewchurn: the JSON list ran on kube-apiserver too")
		}
	}
	for _, form := range []string{"JSON", "Table"} {
		sfx := " (REST watch, " + form + ")"
		positive(s, ArmGateway, "CPU per 1000 deliveries"+sfx)
		for _, m := range []string{"missed", "duplicated", "out of order", "subscribers cut off"} {
			zero(s, ArmGateway, m+sfx)
		}
	}
	pods := smokeSizes.ViewChurnPods
	positive(s, ArmGateway, fmt.Sprintf("first window, new table (%d pods)", pods))
	positive(s, ArmGateway, fmt.Sprintf("gateway CPU per first window, new table (%d pods)", pods))
	for _, sfx := range []string{churnBaseline, churnUnder} {
		want(s, ArmGateway, "victims' window update latency p99"+sfx) // from the acknowledgement: may be negative
		positive(s, ArmGateway, "victims' window updates received"+sfx)
		zero(s, ArmGateway, "missed window updates"+sfx)
		zero(s, ArmGateway, "victims' failures"+sfx)
	}
	positive(s, ArmGateway, victimNewView+" p50"+churnUnder)
	positive(s, ArmGateway, victimNewViews+churnUnder)
	for _, kind := range []string{churnREST, churnWS} {
		positive(s, ArmGateway, "attacker: new view over "+kind+", time to first rows p50")
		positive(s, ArmGateway, "attacker: new views over "+kind+" served/s")
		zero(s, ArmGateway, "attacker: new views over "+kind+" failed otherwise")
		zero(s, ArmGateway, "attacker: new views over "+kind+": 429s without Retry-After or a complete Status")
	}
}

// smokeTenants checks the tenants scenario's figures, attack by attack.
func smokeTenants(t *testing.T, want func(string, string, string) Figure, positive, zero func(string, string, string)) {
	t.Helper()
	const s = ScenarioTenants
	for _, a := range TenantsAttacks {
		for _, sfx := range []string{baselineSuffix(a), attackSuffix(a)} {
			// Latency is from the write's acknowledgement: an event can
			// arrive before the writer has read it (negative).
			for _, m := range []string{"victim window update latency p99", "victim object event latency p99"} {
				want(s, ArmGateway, m+sfx)
			}
			for _, m := range []string{"victim window updates received", "victim object events received", "victim REST list latency p99", "gateway CPU used"} {
				positive(s, ArmGateway, m+sfx)
			}
			for _, m := range []string{"missed window updates", "missed object events", "victim REST lists failed", "victim socket failures", "victim resets"} {
				want(s, ArmGateway, m+sfx)
			}
		}
		for _, m := range []string{"RSS before", "RSS peak", "RSS after"} {
			positive(s, ArmGateway, m+attackSuffix(a))
		}
	}
	sfx := attackSuffix(AttackTokenFlood)
	positive(s, ArmGateway, "flooder: requests/s reached"+sfx)
	positive(s, ArmGateway, "flooder: answered 401"+sfx)
	positive(s, ArmGateway, "never-seen valid token accepted: tried"+sfx)
	for _, kind := range []string{churnREST, churnLong} {
		positive(s, ArmGateway, "churner: new views over "+kind+" served/s"+attackSuffix(AttackViewChurnREST))
	}
	positive(s, ArmGateway, "churner: new views over "+churnWS+" served/s"+attackSuffix(AttackViewChurnWS))
	sfx = attackSuffix(AttackViewHoard)
	positive(s, ArmGateway, "hoarder: windows held"+sfx)
	positive(s, ArmGateway, "victim new window during the hoard: tried"+sfx)
	positive(s, ArmGateway, "victim new sorted list during the hoard: tried"+sfx)
	positive(s, ArmGateway, "reviewer: requests/s reached"+attackSuffix(AttackReviewFlood))
	sfx = attackSuffix(AttackSocketFill)
	if f := want(s, ArmGateway, "socket fillers: sockets held"+sfx); f.Value != float64(smokeSizes.Tenants.SocketIdentities*smokeSizes.Tenants.SocketsPerIdentity) {
		t.Errorf("tenants: the socket fillers held %v sockets, want all %d (below every cap)", f.Value, smokeSizes.Tenants.SocketIdentities*smokeSizes.Tenants.SocketsPerIdentity)
	}
	positive(s, ArmGateway, "victim new socket to its first window: tried"+sfx)
	zero(s, ArmGateway, "victim new socket to its first window: not served"+sfx)
}

// smokeScale checks the scale scenario's figures: every list finished
// with every small ConfigMap, on both servers, and the goal met.
func smokeScale(t *testing.T, figs []Figure, want func(string, string, string) Figure, positive func(string, string, string)) {
	t.Helper()
	const s = ScenarioScale
	n := float64(smokeSizes.ScaleConfigMaps)
	if f := want(s, ArmBench, scaleSmall); f.Value != n {
		t.Errorf("scale: %v small configmaps, want %v", f.Value, n)
	}
	if f := want(s, ArmGateway, scaleObjects); f.Value <= n {
		t.Errorf("scale: the gateway caches %v configmaps, want more than the %v small ones", f.Value, n)
	}
	for _, m := range []string{scaleReady, "gateway CPU to ready", scaleInuseSync, scaleRSSSync, scaleNewTable, "gateway CPU per first window, new table",
		scaleNewSortWS + " (median)", scaleNewSortWS + " (max)", "gateway CPU per " + scaleNewSortWS,
		scaleNewSortREST + " (median)", scaleNewSortREST + " (max)", "gateway CPU per " + scaleNewSortREST,
		scaleCachedJSON, "RSS per object after sync"} {
		positive(s, ArmGateway, m)
	}
	for _, m := range []string{scaleRSSSync, scaleInuseSync, "etcd database size", "kube-apiserver CPU during the sync"} {
		positive(s, ArmAPIServer, m)
	}
	for _, arm := range []string{ArmGateway, ArmAPIServerRVUnset} {
		for _, page := range []string{scaleFirstTable, scaleFirstPage} {
			positive(s, arm, page+" p50")
			positive(s, arm, page+" items")
		}
		for _, what := range []string{scaleFullJSON, scaleFullTable} {
			positive(s, arm, what+scaleTime)
			positive(s, arm, what+scaleSize)
			positive(s, arm, what+scaleServerCPU)
			if f := want(s, arm, what+" small configmaps"); f.Value != n {
				t.Errorf("scale: %s's %s held %v small configmaps, want %v", arm, what, f.Value, n)
			}
		}
	}
	if _, dup := indexFigures(figs).get(s, ArmAPIServerRV0, scaleFirstTable+" p50"); dup {
		t.Error("scale: the first page was listed at resourceVersion 0, where kube-apiserver ignores its limit")
	}
	for _, g := range scaleGoals(figs) {
		if strings.Contains(g.Goal, "recorded beside kube-apiserver's") && !g.Met() {
			t.Errorf("scale: %s", g)
		}
	}
}
