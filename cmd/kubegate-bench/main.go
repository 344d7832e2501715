// Command kubegate-bench measures kubegate against kube-apiserver on the
// same workload in one run (package bench/scenario does the work). It
// starts its own etcd + kube-apiserver, runs the gateway binary as a
// subprocess, prints a table with gateway/apiserver ratios and writes JSON.
//
// Usage:
//
//	make build
//	go run ./cmd/kubegate-bench -gateway bin/gateway -json .local/bench/load.json
//	go run ./cmd/kubegate-bench -report .local/bench/load.json -doc docs/benchmarks.md -figures docs/benchmarks-figures.md
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"kubegate/bench/scenario"
)

func main() {
	// The broad scenario starts its floor (a minimal WebSocket writer) as
	// this executable again.
	scenario.RunFloorIfAsked()
	var (
		o       scenario.Options
		scen    string
		jsonOut string
		md      bool
		full    bool
		from    string
		report  string
		doc     string
		figures string
	)
	z := &o.Sizes
	d := scenario.DefaultSizes
	flag.StringVar(&o.GatewayBinary, "gateway", "bin/gateway", "gateway `binary` (make build)")
	flag.StringVar(&scen, "scenarios", strings.Join(scenario.DefaultScenarios, ","), "comma-separated `scenarios` to run (opt-in: "+strings.Join(scenario.OptInScenarios, ", ")+")")
	flag.IntVar(&o.Pods, "pods", 10000, "Pods to create (~7 KB JSON each; one ConfigMap per 10 Pods)")
	flag.IntVar(&o.Namespaces, "namespaces", 100, "namespaces to spread the Pods over (the selective scenario's subscribers each watch one)")
	flag.BoolVar(&full, "full", false, "use the full target sizes (idle 5k, broad 100/s, selective 500/s, burst of 5k updates to 1k subscribers, cold start 100k Pods, relist with 1k subscribers, abuse with 1k subscribers at 100/s, 1k stalled and 50 full-speed watch-list clients, 50 first windows per case, viewchurn at 100k Pods with issue 30's churn rates); explicit size flags still win")
	flag.IntVar(&z.Idle, "idle", d.Idle, "idle: subscribers per arm")
	flag.IntVar(&z.Broad, "broad", d.Broad, "broad: subscribers per arm, each watching every Pod")
	flag.Float64Var(&z.BroadRate, "broad-rate", d.BroadRate, "broad: updates per second")
	flag.DurationVar(&z.Duration, "duration", d.Duration, "broad, selective, slow: length of the update phase")
	flag.IntVar(&z.Selective, "selective", d.Selective, "selective: subscribers per arm, each watching one namespace")
	flag.Float64Var(&z.SelectiveRate, "selective-rate", d.SelectiveRate, "selective: updates per second")
	flag.IntVar(&z.BurstSubscribers, "burst-subscribers", d.BurstSubscribers, "burst: subscribers per arm")
	flag.IntVar(&z.BurstUpdates, "burst-updates", d.BurstUpdates, "burst: updates written as fast as possible")
	flag.IntVar(&z.Slow, "slow", d.Slow, "slow: subscribers per arm (1% never read)")
	flag.Float64Var(&z.SlowRate, "slow-rate", d.SlowRate, "slow: updates per second")
	flag.IntVar(&z.Abuse, "abuse", d.Abuse, "abuse: ordinary subscribers, each watching every Pod, measured without, with and again without the abusive client")
	flag.Float64Var(&z.AbuseRate, "abuse-rate", d.AbuseRate, "abuse: updates per second in each phase")
	flag.IntVar(&z.AbuseSubscriptions, "abuse-subscriptions", d.AbuseSubscriptions, "abuse: the abusive client's subscriptions (one socket, every Pod, resync 5s)")
	flag.DurationVar(&z.AbuseResync, "abuse-resync", d.AbuseResync, "abuse: the abusive client's resyncPeriod (below 5s, the gateway's cache.minResync is lowered to it)")
	flag.Float64Var(&z.ResyncBudget, "resync-budget", d.ResyncBudget, "abuse: objects/s the abusive client's resyncs may get (the gateway's websocket.resyncBudget; the harness does not set it)")
	flag.IntVar(&z.WatchList, "watchlist", d.WatchList, "watchlist: REST watch-list clients per server that connect at once and read nothing (memory per client)")
	flag.IntVar(&z.WatchListReaders, "watchlist-readers", d.WatchListReaders, "watchlist: REST watch-list clients per server that read their snapshots at full speed, all at once")
	flag.IntVar(&z.Reconnect, "reconnect", d.Reconnect, "reconnect: subscribers per arm that drop and resume")
	flag.IntVar(&z.Snapshots, "snapshots", d.Snapshots, "snapshot: new subscribers timed per arm")
	flag.IntVar(&z.RESTReps, "rest-reps", d.RESTReps, "rest: lists per case and arm")
	flag.IntVar(&z.RESTConcurrency, "rest-concurrency", 1, "rest: lists in flight at once per case and arm (1: sequential, so a latency is one list's own)")
	flag.IntVar(&z.ColdStartPods, "coldstart-pods", d.ColdStartPods, "coldstart: Pods the new gateway syncs (more are created if needed)")
	flag.IntVar(&z.Upstream, "upstream", d.Upstream, "upstream: updates written with no subscriber (the gateway's CPU per update)")
	flag.Float64Var(&z.UpstreamRate, "upstream-rate", d.UpstreamRate, "upstream: updates per second")
	flag.IntVar(&z.Relist, "relist", d.Relist, "relist: subscribers per arm, each watching one namespace (plus one watching all)")
	flag.IntVar(&z.RelistUpdates, "relist-updates", d.RelistUpdates, "relist: updates written through a kube-apiserver restart (at most one per Pod)")
	flag.Float64Var(&z.RelistRate, "relist-rate", d.RelistRate, "relist: updates per second")
	z.WindowPods = d.WindowPods
	flag.Func("windows-pods", "windows: comma-separated Pod `counts` to measure at, created as needed (default 10000,100000)", func(v string) error {
		z.WindowPods = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				return fmt.Errorf("%q is not a positive count", f)
			}
			z.WindowPods = append(z.WindowPods, n)
		}
		return nil
	})
	flag.IntVar(&z.Windows, "windows", d.Windows, "windows: windows of 50 rows open during the update phase, one per socket")
	flag.Float64Var(&z.WindowRate, "windows-rate", d.WindowRate, "windows: updates per second during the update phases (for -duration)")
	flag.IntVar(&z.WindowOpens, "windows-opens", d.WindowOpens, "windows: first windows timed per case and arm (at least 3, until 10s have passed)")
	flag.DurationVar(&z.WindowGCWait, "windows-gc-wait", d.WindowGCWait, "windows: longest wait for the gateway's next collection before reading its live heap (the runtime collects at least every 2m)")
	flag.IntVar(&z.PassThroughWrites, "passthrough-writes", d.PassThroughWrites, "passthrough: writes timed on each arm (straight to kube-apiserver, through the gateway's pass-through)")
	flag.IntVar(&z.ViewChurnPods, "viewchurn-pods", d.ViewChurnPods, "viewchurn: Pods to create and measure at (the goals are set at 100000)")
	flag.IntVar(&z.ViewChurnVictims, "viewchurn-victims", d.ViewChurnVictims, "viewchurn: victim clients, one socket each")
	flag.IntVar(&z.ViewChurnWindows, "viewchurn-windows", d.ViewChurnWindows, "viewchurn: windows the victims hold between them")
	flag.Float64Var(&z.ViewChurnRate, "viewchurn-rate", d.ViewChurnRate, "viewchurn: updates per second to Pods the windows show (and to the REST watches)")
	flag.DurationVar(&z.ViewChurnDuration, "viewchurn-duration", d.ViewChurnDuration, "viewchurn: length of each phase (baseline, under churn, each watch form)")
	flag.Float64Var(&z.ViewChurnRESTRate, "viewchurn-rest-rate", d.ViewChurnRESTRate, "viewchurn: the attacker's REST sorted lists per second, each a new sort and filter")
	flag.Float64Var(&z.ViewChurnWSRate, "viewchurn-ws-rate", d.ViewChurnWSRate, "viewchurn: the attacker's new windows per second")
	flag.IntVar(&z.ViewChurnWatchers, "viewchurn-watchers", d.ViewChurnWatchers, "viewchurn: REST watches of every Pod whose CPU per event is measured as JSON and as Tables")
	t, dt := &z.Tenants, d.Tenants
	flag.IntVar(&t.Pods, "tenants-pods", dt.Pods, "tenants: Pods to create and measure at")
	flag.Func("tenants-attacks", "tenants: comma-separated `attacks` to run, in order (default "+strings.Join(scenario.TenantsAttacks, ",")+")", func(v string) error {
		t.Attacks = nil
		for _, a := range strings.Split(v, ",") {
			if a = strings.TrimSpace(a); a != "" {
				t.Attacks = append(t.Attacks, a)
			}
		}
		return nil
	})
	flag.DurationVar(&t.Duration, "tenants-duration", dt.Duration, "tenants: length of each baseline and each attack phase")
	flag.DurationVar(&t.Recovery, "tenants-recovery", dt.Recovery, "tenants: wait after an attack before its memory is read")
	flag.DurationVar(&t.GCWait, "tenants-gc-wait", dt.GCWait, "tenants: longest wait for the gateway's next collection when reading its live heap")
	flag.Float64Var(&t.Rate, "tenants-rate", dt.Rate, "tenants: updates per second to Pods the victim shows")
	flag.Float64Var(&t.ListRate, "tenants-list-rate", dt.ListRate, "tenants: the victim's REST lists per second")
	flag.IntVar(&t.VictimWindows, "tenants-victim-windows", dt.VictimWindows, "tenants: the victim's windows")
	flag.Float64Var(&t.FloodRate, "tenants-flood-rate", dt.FloodRate, "tenants: token-flood requests per second, each with a fresh random token")
	flag.IntVar(&t.FloodConns, "tenants-flood-conns", dt.FloodConns, "tenants: token-flood connections")
	flag.IntVar(&t.NewTokens, "tenants-new-tokens", dt.NewTokens, "tenants: never-seen valid tokens timed during the token flood")
	flag.Float64Var(&t.ChurnRate, "tenants-churn-rate", dt.ChurnRate, "tenants: view-churn-rest's sorted lists per second with a fresh labelSelector")
	flag.Float64Var(&t.LongSelectorRate, "tenants-long-selector-rate", dt.LongSelectorRate, "tenants: view-churn-rest's sorted lists per second with a fresh 4 KiB labelSelector")
	flag.Float64Var(&t.WSChurnRate, "tenants-ws-churn-rate", dt.WSChurnRate, "tenants: view-churn-ws's new windows per second")
	flag.IntVar(&t.Hoard, "tenants-hoard", dt.Hoard, "tenants: windows of distinct filters the hoarder tries to hold")
	flag.Float64Var(&t.ReviewRate, "tenants-review-rate", dt.ReviewRate, "tenants: review-flood's name-selected cluster-wide lists per second")
	flag.IntVar(&t.SocketIdentities, "tenants-socket-identities", dt.SocketIdentities, "tenants: socket-fill's ServiceAccounts without RBAC")
	flag.IntVar(&t.SocketsPerIdentity, "tenants-sockets-per-identity", dt.SocketsPerIdentity, "tenants: sockets each of them tries to hold")
	flag.IntVar(&z.ScaleConfigMaps, "scale-configmaps", d.ScaleConfigMaps, "scale: small ConfigMaps (one data key each, in 100 namespaces of their own) to create and measure at; it times -windows-opens new sorts and waits up to -windows-gc-wait for each live heap")
	flag.DurationVar(&z.ScaleListTimeout, "scale-list-timeout", d.ScaleListTimeout, "scale: longest wait for one full list of every ConfigMap, past which it is recorded as unfinished")
	flag.DurationVar(&z.Drain, "drain", d.Drain, "longest wait for deliveries after the last write")
	flag.StringVar(&z.PerfDir, "perf", "", "record perf CPU profiles of the gateway and kube-apiserver during the broad, selective and burst scenarios (and of the gateway during upstream) into this `dir`")
	flag.BoolVar(&z.ProtoHTTP2, "proto-http2", false, "put the protobuf arm's watches on one HTTP/2 connection (client-go's default) instead of one HTTP/1.1 connection each")
	flag.StringVar(&jsonOut, "json", "", "also write the results as JSON to this `file`")
	flag.BoolVar(&md, "markdown", false, "print the table as Markdown")
	flag.StringVar(&from, "from", "", "print the table and goals of an earlier run's JSON `file` instead of running")
	flag.StringVar(&report, "report", "", "render an earlier run's JSON `file` as docs/benchmarks.md shows it (its stamp, the goals table, a table per scenario) instead of running; to stdout, or into -doc")
	flag.StringVar(&doc, "doc", "", "with -report, regenerate the marked section of this Markdown `file` (make bench-report: docs/benchmarks.md) instead of printing")
	flag.StringVar(&figures, "figures", "", "with -doc, put the scenarios' tables in the marked section of this Markdown `file` (make bench-report: docs/benchmarks-figures.md), and only the goals in -doc")
	flag.Parse()
	if full {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		explicit := *z
		*z = scenario.FullSizes
		keep := map[string]func(){
			"idle": func() { z.Idle = explicit.Idle }, "broad": func() { z.Broad = explicit.Broad },
			"broad-rate": func() { z.BroadRate = explicit.BroadRate }, "duration": func() { z.Duration = explicit.Duration },
			"selective": func() { z.Selective = explicit.Selective }, "selective-rate": func() { z.SelectiveRate = explicit.SelectiveRate },
			"burst-subscribers": func() { z.BurstSubscribers = explicit.BurstSubscribers }, "burst-updates": func() { z.BurstUpdates = explicit.BurstUpdates },
			"slow": func() { z.Slow = explicit.Slow }, "slow-rate": func() { z.SlowRate = explicit.SlowRate },
			"reconnect": func() { z.Reconnect = explicit.Reconnect }, "snapshots": func() { z.Snapshots = explicit.Snapshots },
			"rest-reps":        func() { z.RESTReps = explicit.RESTReps },
			"rest-concurrency": func() { z.RESTConcurrency = explicit.RESTConcurrency },
			"coldstart-pods":   func() { z.ColdStartPods = explicit.ColdStartPods }, "drain": func() { z.Drain = explicit.Drain },
			"upstream": func() { z.Upstream = explicit.Upstream }, "upstream-rate": func() { z.UpstreamRate = explicit.UpstreamRate },
			"relist": func() { z.Relist = explicit.Relist }, "relist-updates": func() { z.RelistUpdates = explicit.RelistUpdates },
			"relist-rate": func() { z.RelistRate = explicit.RelistRate },
			"abuse":       func() { z.Abuse = explicit.Abuse }, "abuse-rate": func() { z.AbuseRate = explicit.AbuseRate },
			"abuse-subscriptions": func() { z.AbuseSubscriptions = explicit.AbuseSubscriptions },
			"resync-budget":       func() { z.ResyncBudget = explicit.ResyncBudget },
			"abuse-resync":        func() { z.AbuseResync = explicit.AbuseResync },
			"watchlist":           func() { z.WatchList = explicit.WatchList },
			"watchlist-readers":   func() { z.WatchListReaders = explicit.WatchListReaders },
			"proto-http2":         func() { z.ProtoHTTP2 = explicit.ProtoHTTP2 },
			"windows-pods":        func() { z.WindowPods = explicit.WindowPods },
			"windows":             func() { z.Windows = explicit.Windows },
			"windows-rate":        func() { z.WindowRate = explicit.WindowRate },
			"windows-opens":       func() { z.WindowOpens = explicit.WindowOpens },
			"windows-gc-wait":     func() { z.WindowGCWait = explicit.WindowGCWait },
			"passthrough-writes":  func() { z.PassThroughWrites = explicit.PassThroughWrites },
			"perf":                func() { z.PerfDir = explicit.PerfDir },
			"viewchurn-pods":      func() { z.ViewChurnPods = explicit.ViewChurnPods },
			"viewchurn-victims":   func() { z.ViewChurnVictims = explicit.ViewChurnVictims },
			"viewchurn-windows":   func() { z.ViewChurnWindows = explicit.ViewChurnWindows },
			"viewchurn-rate":      func() { z.ViewChurnRate = explicit.ViewChurnRate },
			"viewchurn-duration":  func() { z.ViewChurnDuration = explicit.ViewChurnDuration },
			"viewchurn-rest-rate": func() { z.ViewChurnRESTRate = explicit.ViewChurnRESTRate },
			"viewchurn-ws-rate":   func() { z.ViewChurnWSRate = explicit.ViewChurnWSRate },
			"viewchurn-watchers":  func() { z.ViewChurnWatchers = explicit.ViewChurnWatchers },
			"scale-configmaps":    func() { z.ScaleConfigMaps = explicit.ScaleConfigMaps },
			"scale-list-timeout":  func() { z.ScaleListTimeout = explicit.ScaleListTimeout },
		}
		// The tenants scenario's sizes are issue 30's in both: its flags
		// (defaults or set) are kept whole.
		z.Tenants = explicit.Tenants
		for name, f := range keep {
			if set[name] {
				f()
			}
		}
	}
	for _, s := range strings.Split(scen, ",") {
		if s = strings.TrimSpace(s); s != "" {
			o.Scenarios = append(o.Scenarios, s)
		}
	}
	o.Log = os.Stderr
	if report != "" {
		if err := writeReport(report, doc, figures); err != nil {
			fmt.Fprintln(os.Stderr, "kubegate-bench:", err)
			os.Exit(1)
		}
		return
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var (
		r   scenario.Report
		err error
	)
	if from != "" {
		r, err = scenario.ReadJSON(from)
		jsonOut = ""
	} else {
		t0 := time.Now()
		// Read before the run: the tree may change while it lasts.
		at := commit()
		r, err = scenario.Run(ctx, o)
		r.Commit = at
		r.Command = "kubegate-bench " + strings.Join(os.Args[1:], " ")
		r.Wall = time.Since(t0).Round(time.Second).String()
	}
	if md {
		scenario.Markdown(os.Stdout, r.Figures)
	} else {
		scenario.Table(os.Stdout, r.Figures)
	}
	fmt.Println()
	for _, g := range scenario.Goals(r.Figures) {
		fmt.Println(g)
	}
	if jsonOut != "" {
		if werr := scenario.WriteJSON(jsonOut, r); werr != nil {
			fmt.Fprintln(os.Stderr, "kubegate-bench:", werr)
			os.Exit(1)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubegate-bench:", err)
		os.Exit(1)
	}
}

// writeReport renders the run in the JSON file from as Markdown, into
// the marked sections of doc and figures, or to stdout when doc is "".
func writeReport(from, doc, figures string) error {
	r, err := scenario.ReadJSON(from)
	if err != nil {
		return err
	}
	if doc != "" {
		return scenario.WriteDoc(doc, figures, r)
	}
	r.Markdown(os.Stdout)
	return nil
}

// commit is the commit of the working tree the tool runs in, with
// "-dirty" when it has changes, or "" outside a git tree.
func commit() string {
	out, err := exec.Command("git", "describe", "--always", "--dirty", "--abbrev=12").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
