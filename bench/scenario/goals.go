package scenario

import (
	"fmt"
	"math"
	"strings"
)

// Goal is one performance goal judged against a run's figures.
type Goal struct {
	// Goal says what is promised: "burst p99 latency <= apiserver/json's".
	Goal string
	// Figure is what the run measured for it: "20.0 ms vs 30.0 ms".
	Figure string
	// Verdict is "met", "MISSED by <how much>" (or "MISSED: <what>"), or
	// why the goal was not judged.
	Verdict string
	// After is context printed after the verdict.
	After string
	// Note marks a remark about the run rather than a goal (Goal holds
	// it).
	Note bool
}

// String is the goal as kubegate-bench prints it: "goal: <goal>:
// <figure>, <verdict><after>", or "note: <remark>".
func (g Goal) String() string {
	if g.Note {
		return "note: " + g.Goal
	}
	if g.Figure == "" {
		return "goal: " + g.Goal + ": " + g.Verdict + g.After
	}
	return "goal: " + g.Goal + ": " + g.Figure + ", " + g.Verdict + g.After
}

// Met reports whether the goal was judged and met.
func (g Goal) Met() bool { return !g.Note && g.Verdict == "met" }

// goalLines is gs as printed, one line each.
func goalLines(gs []Goal) []string {
	if gs == nil {
		return nil
	}
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = g.String()
	}
	return out
}

// Goals states the performance goals (docs/benchmarks.md) against the
// figures of a run: measured, target, met or MISSED (and by how much).
// Goals whose figures the run did not produce are left out.
func Goals(figs []Figure) []Goal {
	get := func(scenario, arm, metric string) (float64, bool) {
		for _, f := range figs {
			if f.Scenario == scenario && f.Arm == arm && f.Metric == metric {
				return f.Value, true
			}
		}
		return 0, false
	}
	find := func(scenario, arm, prefix string) (Figure, bool) {
		for _, f := range figs {
			if f.Scenario == scenario && f.Arm == arm && strings.HasPrefix(f.Metric, prefix) {
				return f, true
			}
		}
		return Figure{}, false
	}
	verdict := verdictText
	var lines []Goal
	for _, api := range []string{ArmJSON, ArmProto} {
		gw, ok1 := get("broad", ArmGateway, "CPU per 1000 deliveries")
		a, ok2 := get("broad", api, "CPU per 1000 deliveries")
		if ok1 && ok2 && a > 0 {
			r := gw / a
			lines = append(lines, Goal{Goal: "fan-out CPU per delivery <= 0.5x " + api,
				Figure:  fmt.Sprintf("%.3f s vs %.3f s per 1000 = %.2fx", gw, a, r),
				Verdict: verdict(r <= 0.5, fmt.Sprintf("%.0f%% (%.2fx the target ratio)", (r/0.5-1)*100, r/0.5))})
		}
		gw99, ok1 := get("broad", ArmGateway, "latency p99")
		a99, ok2 := get("broad", api, "latency p99")
		if ok1 && ok2 {
			lines = append(lines, Goal{Goal: "broad fan-out p99 latency <= " + api + "'s",
				Figure: fmt.Sprintf("%.1f ms vs %.1f ms", gw99, a99), Verdict: verdict(gw99 <= a99, fmt.Sprintf("%.1f ms", gw99-a99))})
		}
	}
	if gw, ok1 := get("broad", ArmGateway, "CPU per 1000 deliveries"); ok1 {
		if fl, ok2 := get("broad", ArmFloor, "CPU per 1000 deliveries"); ok2 && fl > 0 {
			r := gw / fl
			lines = append(lines, Goal{Goal: "broad fan-out CPU per delivery <= 1.5x the floor's (the same frames from a plain loop)",
				Figure:  fmt.Sprintf("%.3f s vs %.3f s per 1000 = %.2fx", gw, fl, r),
				Verdict: verdict(r <= 1.5, fmt.Sprintf("%.0f%% (%.2fx the target ratio)", (r/1.5-1)*100, r/1.5))})
		}
	}
	if f, ok := find("idle", ArmGateway, "RSS per idle subscriber"); ok {
		lines = append(lines, Goal{Goal: f.Metric + " <= 16 KiB", Figure: fmt.Sprintf("%.1f KiB", f.Value), Verdict: verdict(f.Value <= 16, fmt.Sprintf("%.1f KiB", f.Value-16))})
	}
	if f, ok := find("idle", ArmGateway, "Go heap+stacks per idle subscriber"); ok {
		lines = append(lines, Goal{Goal: f.Metric + " <= 16 KiB", Figure: fmt.Sprintf("%.1f KiB", f.Value), Verdict: verdict(f.Value <= 16, fmt.Sprintf("%.1f KiB", f.Value-16))})
	}
	if f, ok := find("snapshot", ArmGateway, "time to snapshot of"); ok && strings.HasSuffix(f.Metric, "(median)") {
		cpu := ""
		srv, ok1 := get("snapshot", ArmGateway, "server CPU/snapshot")
		cli, ok2 := get("snapshot", ArmBench+" ("+ArmGateway+")", "client CPU/snapshot")
		if ok1 && ok2 {
			cpu = fmt.Sprintf(" (CPU per snapshot: gateway %.1f ms, client %.1f ms)", srv, cli)
		}
		var runs []string
		over := 0
		for _, r := range figs {
			if r.Scenario == "snapshot" && r.Arm == ArmGateway && strings.HasPrefix(r.Metric, "time to snapshot of") && strings.Contains(r.Metric, " (run ") {
				runs = append(runs, fmt.Sprintf("%.0f", r.Value))
				if r.Value > 100 {
					over++
				}
			}
		}
		if len(runs) == 0 {
			// A run from before the per-run figures: only the median.
			lines = append(lines, Goal{Goal: f.Metric + " <= 100 ms", Figure: fmt.Sprintf("%.1f ms", f.Value), Verdict: verdict(f.Value <= 100, fmt.Sprintf("%.1f ms", f.Value-100)), After: cpu})
		} else {
			metric := strings.TrimSuffix(f.Metric, " (median)")
			lines = append(lines, Goal{Goal: metric + " <= 100 ms in every run", Figure: fmt.Sprintf("%s ms (median %.1f)", strings.Join(runs, ", "), f.Value),
				Verdict: verdict(over == 0, fmt.Sprintf("%d of %d runs", over, len(runs))), After: cpu})
		}
	}
	if gw, ok := get("upstream", ArmGateway, "CPU per update, no subscriber"); ok {
		api, _ := get("upstream", ArmAPIServer, "CPU per update, no subscriber")
		lines = append(lines, Goal{Goal: "gateway CPU per upstream update (no subscriber) <= 0.1 ms",
			Figure: fmt.Sprintf("%.3f ms (kube-apiserver: %.2f ms per write)", gw, api), Verdict: verdict(gw <= 0.1, fmt.Sprintf("%.3f ms (%.1fx the target)", gw-0.1, gw/0.1))})
	}
	if gw, ok := find("coldstart", ArmGateway, "time to ready"); ok {
		if list, ok := get("coldstart", ArmJSON, gw.Metric); ok && list > 0 {
			r := gw.Value / list
			lines = append(lines, Goal{Goal: "cold start " + strings.TrimPrefix(gw.Metric, "time to ready ") + " <= 1.5x one JSON LIST",
				Figure: fmt.Sprintf("%.0f ms vs %.0f ms = %.2fx", gw.Value, list, r), Verdict: verdict(r <= 1.5, fmt.Sprintf("%.2fx (%.2fx the target ratio)", r-1.5, r/1.5))})
		}
	}
	if gw, ok1 := get("burst", ArmGateway, "latency p99"); ok1 {
		if a, ok2 := get("burst", ArmJSON, "latency p99"); ok2 {
			lines = append(lines, Goal{Goal: "burst p99 latency <= " + ArmJSON + "'s", Figure: fmt.Sprintf("%.1f ms vs %.1f ms", gw, a),
				Verdict: verdict(gw <= a, fmt.Sprintf("%.1f ms (%.2fx)", gw-a, gw/a))})
		}
	}
	if gw, ok1 := get("selective", ArmGateway, "CPU per 1000 deliveries"); ok1 {
		if a, ok2 := get("selective", ArmProto, "CPU per 1000 deliveries"); ok2 && a > 0 {
			lines = append(lines, Goal{Goal: "selective fan-out CPU per delivery <= " + ArmProto + "'s",
				Figure: fmt.Sprintf("%.3f s vs %.3f s per 1000 = %.2fx", gw, a, gw/a), Verdict: verdict(gw <= a, fmt.Sprintf("%.0f%%", (gw/a-1)*100))})
		}
	}
	lines = append(lines, abuseGoals(get)...)
	lines = append(lines, watchListGoals(figs)...)
	var relistBad []string
	relistArms := 0
	for _, f := range figs {
		if f.Scenario != "relist" || f.Arm == ArmBench {
			continue
		}
		switch f.Metric {
		case "missed":
			relistArms++
			fallthrough
		case "final state not reached", "duplicated", "out of order":
			if f.Value != 0 {
				relistBad = append(relistBad, fmt.Sprintf("%s/%s=%.0f", f.Arm, f.Metric, f.Value))
			}
		}
	}
	if relistArms > 0 {
		rl := "not counted by this gateway"
		if n, ok := get("relist", ArmGateway, "upstream relists"); ok {
			rl = fmt.Sprintf("%.0f", n)
		}
		v := "met"
		if len(relistBad) > 0 {
			v = "MISSED: " + strings.Join(relistBad, ", ")
		}
		lines = append(lines, Goal{Goal: fmt.Sprintf("relist under load, 0 missed, duplicated or reordered events on every arm (%d arms; the gateway's upstream relists: %s)", relistArms, rl), Verdict: v})
	}
	if f, ok := find("coldstart", ArmGateway, "heap in use (no GC) / JSON size"); ok {
		lines = append(lines, Goal{Goal: "cache memory <= 1.3x JSON", Figure: fmt.Sprintf("%s %.2fx", f.Metric, f.Value),
			Verdict: "not judged here: an upper bound (garbage of the sync included); BenchmarkCacheMemory (internal/informer) measures it after a GC"})
	}
	// The goal is the gateway's. kube-apiserver ends watches that fall too
	// far behind (a client would relist), and their lost events count as
	// missed on its arms: that is reported, but it is not the gateway's.
	var gwBad, apiBad, floorBad []string
	counted := false // whether the run counted events at all
	for _, f := range figs {
		if !strings.HasPrefix(f.Metric, "missed") && !strings.HasPrefix(f.Metric, "duplicated") && !strings.HasPrefix(f.Metric, "out of order") {
			continue
		}
		counted = true
		if f.Value == 0 {
			continue
		}
		w := fmt.Sprintf("%s/%s/%s=%.0f", f.Scenario, f.Arm, f.Metric, f.Value)
		switch {
		case f.Arm == ArmGateway:
			gwBad = append(gwBad, w)
		case isAPIServer(f.Arm):
			apiBad = append(apiBad, w)
		default:
			floorBad = append(floorBad, w)
		}
	}
	switch {
	case !counted:
	case len(gwBad) == 0:
		lines = append(lines, Goal{Goal: "zero missed or duplicated events in every scenario (gateway)", Verdict: "met"})
	default:
		lines = append(lines, Goal{Goal: "zero missed or duplicated events in every scenario (gateway)", Verdict: "MISSED: " + strings.Join(gwBad, ", ")})
	}
	if len(apiBad) > 0 {
		cut := 0.0
		for _, f := range figs {
			if f.Arm != ArmGateway && strings.HasPrefix(f.Metric, "subscribers cut off") {
				cut += f.Value
			}
		}
		lines = append(lines, Goal{Note: true, Goal: fmt.Sprintf("kube-apiserver arms lost events: %s (%.0f watches ended by kube-apiserver; a client relists)",
			strings.Join(apiBad, ", "), cut)})
	}
	if len(floorBad) > 0 {
		// The floor drops nothing by design: a loss there is the harness's.
		lines = append(lines, Goal{Note: true, Goal: "the floor lost events, so its figures do not hold: " + strings.Join(floorBad, ", ")})
	}
	lines = append(lines, RESTGoals(figs)...)
	lines = append(lines, passThroughGoals(get)...)
	lines = append(lines, windowGoals(figs)...)
	lines = append(lines, viewChurnGoals(figs)...)
	lines = append(lines, tenantsGoals(figs)...)
	return append(lines, scaleGoals(figs)...)
}

// passThroughGoals judges the passthrough scenario: what passing a write
// through the gateway adds to its median latency, against the same write
// sent straight to kube-apiserver in the same run.
func passThroughGoals(get func(scenario, arm, metric string) (float64, bool)) []Goal {
	gw, ok1 := get(ScenarioPassThrough, ArmGateway, "write p50")
	api, ok2 := get(ScenarioPassThrough, ArmAPIServer, "write p50")
	if !ok1 || !ok2 {
		return nil
	}
	added := gw - api
	g := Goal{Goal: "pass-through adds <= 1 ms at p50 to a write (the same write straight to kube-apiserver, same run)",
		Figure: fmt.Sprintf("%.2f ms through the gateway vs %.2f ms straight: %+.2f ms", gw, api, added), Verdict: verdictText(added <= 1, fmt.Sprintf("%.2f ms", added-1))}
	if cpu, ok := get(ScenarioPassThrough, ArmGateway, "CPU per write"); ok {
		g.After = fmt.Sprintf(" (gateway CPU %.3f ms per passed write)", cpu)
	}
	return []Goal{g}
}

// abuseGoals judges the abuse scenario: other subscribers' p99 with the
// abusive client within the run's own noise, and what its resyncs got
// within the budget.
func abuseGoals(get func(scenario, arm, metric string) (float64, bool)) []Goal {
	var lines []Goal
	before, ok1 := get("abuse", ArmGateway, "latency p99"+abuseBefore)
	with, ok2 := get("abuse", ArmGateway, "latency p99"+abuseWith)
	after, ok3 := get("abuse", ArmGateway, "latency p99"+abuseAfter)
	if ok1 && ok2 && ok3 {
		// The noise is how far the two phases without the client differ
		// (at least a tenth of the larger): "unchanged" is within that of
		// the worse of them.
		base := max(before, after)
		allow := max(math.Abs(before-after), 0.1*base)
		lines = append(lines, Goal{Goal: "other subscribers' p99 unchanged by an abusive client (within the run's noise)",
			Figure:  fmt.Sprintf("%.1f ms with it, %.1f and %.1f ms without (bound %.1f ms)", with, before, after, base+allow),
			Verdict: verdictText(with <= base+allow, fmt.Sprintf("%.1f ms", with-base-allow))})
	}
	if overall, ok := get("abuse", ArmGateway, "abusive client: resynced objects/s (overall)"); ok {
		budget, _ := get("abuse", ArmBench, "resync budget checked")
		rate, steady := get("abuse", ArmGateway, "abusive client: resynced objects/s (steady)")
		g := Goal{Goal: fmt.Sprintf("objects resynced to an abusive client <= the resync budget (%.0f/s)", budget)}
		if steady {
			g.Figure = fmt.Sprintf("%.0f/s steady (%.0f/s overall)", rate, overall)
		} else {
			g.Figure = fmt.Sprintf("%.0f/s overall", overall)
		}
		deferred, counted := get("abuse", ArmGateway, "resyncs deferred (gateway's counter)")
		if counted {
			g.Figure += fmt.Sprintf(", %.0f resyncs deferred by the gateway", deferred)
		}
		if !steady {
			g.Verdict = "not judged: the resyncs seen spanned less than a resync period (lengthen -duration)"
		} else {
			// 5% for where the window's ends fall on the resyncs' arrivals.
			g.Verdict = verdictText(rate <= 1.05*budget, fmt.Sprintf("%.0f/s (%.2fx the budget, 5%% allowed)", rate-budget, rate/budget))
			if counted && deferred == 0 && rate > budget {
				g.After = "; the gateway deferred no resync: it bounds no client's resyncs (websocket.resyncBudget)"
			}
		}
		lines = append(lines, g)
	}
	return lines
}

func verdictText(ok bool, by string) string {
	if ok {
		return "met"
	}
	return "MISSED by " + by
}

// watchListGoals judges the watchlist scenario: at most 1 MiB of extra
// gateway memory per watch-list client, in Go heap+stacks and in RSS, in
// each phase; kube-apiserver's figures beside them.
func watchListGoals(figs []Figure) []Goal {
	var lines []Goal
	for _, phase := range []struct{ heap, rss, what string }{
		{"Go heap+stacks per client (", "RSS per client (", "connected at once, snapshots in flight"},
		{"Go heap+stacks peak per client (", "RSS peak per client (", "at their peak, snapshots read at full speed"},
	} {
		var heap, rss, apiHeap, apiRSS *Figure
		for i := range figs {
			f := &figs[i]
			if f.Scenario != "watchlist" {
				continue
			}
			switch {
			case f.Arm == ArmGateway && strings.HasPrefix(f.Metric, phase.heap):
				heap = f
			case f.Arm == ArmGateway && strings.HasPrefix(f.Metric, phase.rss):
				rss = f
			case isAPIServer(f.Arm) && strings.HasPrefix(f.Metric, phase.heap):
				apiHeap = f
			case isAPIServer(f.Arm) && strings.HasPrefix(f.Metric, phase.rss):
				apiRSS = f
			}
		}
		if heap == nil || rss == nil {
			continue
		}
		n := strings.TrimSuffix(heap.Metric[strings.LastIndexByte(heap.Metric, '(')+1:], ")")
		api := ""
		if apiHeap != nil && apiRSS != nil {
			api = fmt.Sprintf(" (kube-apiserver: %.0f KiB and %.0f KiB)", apiHeap.Value, apiRSS.Value)
		}
		worst := max(heap.Value, rss.Value)
		lines = append(lines, Goal{Goal: fmt.Sprintf("extra gateway memory per watch-list client <= 1 MiB, %s (%s)", n, phase.what),
			Figure: fmt.Sprintf("Go heap+stacks %.0f KiB, RSS %.0f KiB", heap.Value, rss.Value), Verdict: verdictText(worst <= 1024, fmt.Sprintf("%.0f KiB", worst-1024)), After: api})
	}
	return lines
}
