package scenario

import (
	"fmt"
	"strings"
)

// The goals of issues 29 (viewchurn, scale) and 30 (tenants), as
// values: viewChurnGoals, scaleGoals and tenantsGoals judge a run's
// figures against these.
const (
	// goalChurnRatio: the victims' window update p99 while a client
	// churns views, at most this many times their p99 without it.
	goalChurnRatio = 2.0
	// goalNewViewMs: a new sort or filter's first rows (median), and
	// goalNewTableMs: the first window on a resource never opened
	// before, both set at goalPods Pods.
	goalNewViewMs  = 50.0
	goalNewTableMs = 1000.0
	goalPods       = 100_000
	// goalTableListCPU: a REST Table list's gateway CPU at most this many
	// times its JSON list's; goalTableListSpeedup: at least this many
	// times faster than kube-apiserver's Table list (by p50).
	goalTableListCPU     = 2.0
	goalTableListSpeedup = 10.0
	// goalTableWatchCPU: a Table watch event's gateway CPU at most this
	// many times a JSON watch event's.
	goalTableWatchCPU = 2.0
	// goalCacheJSON: the cache's memory (its live heap) at most this
	// many times the JSON it holds, set at goalPods Pods.
	goalCacheJSON = 1.5
	// goalTenantRatio: the victim's p99 (window updates, object events,
	// REST lists) under an attack, at most this many times its baseline's.
	goalTenantRatio = 2.0
	// goalNewTokenMs: a never-seen valid token accepted within this
	// during the token flood.
	goalNewTokenMs = 1000.0
	// goalViewCap: a resource's distinct views (sorts and filters), the
	// most one hoarder may hold is fewer.
	goalViewCap = 64
	// goalMemorySlackMiB and goalMemorySlackFraction: after an attack
	// and the recovery wait, the live heap and stacks may exceed their
	// level before it by the larger of these (gctrace counts whole MiB;
	// the victim's own state moves a little).
	goalMemorySlackMiB      = 4.0
	goalMemorySlackFraction = 0.05
)

// figureIndex looks figures up by scenario, arm and metric.
type figureIndex map[string]float64

func indexFigures(figs []Figure) figureIndex {
	m := figureIndex{}
	for _, f := range figs {
		m[f.Scenario+"|"+f.Arm+"|"+f.Metric] = f.Value
	}
	return m
}

func (m figureIndex) get(scenario, arm, metric string) (float64, bool) {
	v, ok := m[scenario+"|"+arm+"|"+metric]
	return v, ok
}

// sizeNote is the remark for a goal set at goalPods Pods, judged at n.
func sizeNote(n float64) string {
	if n >= goalPods {
		return ""
	}
	return fmt.Sprintf(" (measured at %.0f pods; the goal is set at %d)", n, goalPods)
}

// viewChurnGoals judges the viewchurn scenario.
func viewChurnGoals(figs []Figure) []Goal {
	idx := indexFigures(figs)
	gw := func(metric string) (float64, bool) { return idx.get(ScenarioViewChurn, ArmGateway, metric) }
	pods, _ := idx.get(ScenarioViewChurn, ArmBench, "pods")
	var lines []Goal
	base, ok1 := gw("victims' window update latency p99" + churnBaseline)
	under, ok2 := gw("victims' window update latency p99" + churnUnder)
	if ok1 && ok2 {
		r := under / base
		lines = append(lines, Goal{Goal: fmt.Sprintf("victims' window update p99 while a client churns new views <= %.0fx their baseline", goalChurnRatio),
			Figure:  fmt.Sprintf("%.1f ms vs %.1f ms = %.2fx", under, base, r),
			Verdict: verdictText(r <= goalChurnRatio, fmt.Sprintf("%.2fx (%.1f ms)", r-goalChurnRatio, under-goalChurnRatio*base))})
	}
	if n, ok := gw(victimNewViews + churnUnder); ok {
		g := Goal{Goal: fmt.Sprintf("a user's new sort or filter over WebSocket while another user churns views: first rows <= %.0f ms (median)", goalNewViewMs), After: sizeNote(pods)}
		if p50, ok := gw(victimNewView + " p50" + churnUnder); ok {
			p99, _ := gw(victimNewView + " p99" + churnUnder)
			g.Figure = fmt.Sprintf("median %.1f ms, p99 %.1f ms, %.0f new views over %.0f pods", p50, p99, n, pods)
			g.Verdict = verdictText(p50 <= goalNewViewMs, fmt.Sprintf("%.1f ms (%.1fx)", p50-goalNewViewMs, p50/goalNewViewMs))
		} else {
			g.Verdict = "MISSED: no new view was served"
		}
		lines = append(lines, g)
	}
	// The churner's own new views queue behind each other (its builds
	// wait for a slot in its own queue, held to its share of a CPU):
	// their times say how its queue grew, not what a new view costs. A
	// note, not a goal.
	for _, kind := range []string{churnREST, churnWS} {
		what := "attacker: new view over " + kind
		p50, ok := gw(what + ", time to first rows p50")
		if !ok {
			continue
		}
		p99, _ := gw(what + ", time to first rows p99")
		rate, _ := gw("attacker: new views over " + kind + " served/s")
		lines = append(lines, Goal{Note: true, Goal: fmt.Sprintf("the churner's own new views over %s (%.1f served a second, its builds held to its share): first rows median %.1f ms, p99 %.1f ms", kind, rate, p50, p99)})
	}
	for _, f := range figs {
		if f.Scenario == ScenarioViewChurn && f.Arm == ArmGateway && strings.HasPrefix(f.Metric, "first window, new table (") {
			lines = append(lines, Goal{Goal: fmt.Sprintf("first window on a resource never opened before <= %.0f ms", goalNewTableMs),
				Figure: fmt.Sprintf("%.0f ms over %.0f pods", f.Value, pods), Verdict: verdictText(f.Value <= goalNewTableMs, fmt.Sprintf("%.0f ms (%.1fx)", f.Value-goalNewTableMs, f.Value/goalNewTableMs)),
				After: sizeNote(pods)})
		}
	}
	items, _ := gw("list all as Table items")
	tableCPU, ok1 := gw("list all as Table CPU/list")
	jsonCPU, ok2 := gw("list all CPU/list")
	if ok1 && ok2 && jsonCPU > 0 {
		r := tableCPU / jsonCPU
		lines = append(lines, Goal{Goal: fmt.Sprintf("REST Table list of %.0f pods: gateway CPU <= %.0fx its JSON list's", items, goalTableListCPU),
			Figure:  fmt.Sprintf("%.1f ms vs %.1f ms per list = %.2fx", tableCPU, jsonCPU, r),
			Verdict: verdictText(r <= goalTableListCPU, fmt.Sprintf("%.2fx (%.2fx the target ratio)", r-goalTableListCPU, r/goalTableListCPU))})
	}
	if gw50, ok := gw("list all as Table p50"); ok && gw50 > 0 {
		for _, arm := range []string{ArmAPIServerRVUnset, ArmAPIServerRV0} {
			api50, ok := idx.get(ScenarioViewChurn, arm, "list all as Table p50")
			if !ok {
				continue
			}
			x := api50 / gw50
			g := Goal{Goal: fmt.Sprintf("REST Table list of %.0f pods >= %.0fx faster than %s's Table", items, goalTableListSpeedup, arm),
				Figure:  fmt.Sprintf("gateway p50 %.1f ms, %s p50 %.1f ms: %.1fx", gw50, arm, api50, x),
				Verdict: verdictText(x >= goalTableListSpeedup, fmt.Sprintf("a factor of %.1f (%.2fx where the goal is %.0fx)", goalTableListSpeedup/x, x, goalTableListSpeedup))}
			if apiCPU, ok := idx.get(ScenarioViewChurn, arm, "list all as Table CPU/list"); ok && tableCPU > 0 {
				g.After = fmt.Sprintf(" (CPU per list %.1f ms vs %.1f ms: %.1fx)", tableCPU, apiCPU, apiCPU/tableCPU)
			}
			lines = append(lines, g)
		}
	}
	tw, ok1 := gw("CPU per 1000 deliveries (REST watch, Table)")
	jw, ok2 := gw("CPU per 1000 deliveries (REST watch, JSON)")
	if ok1 && ok2 && jw > 0 {
		r := tw / jw
		lines = append(lines, Goal{Goal: fmt.Sprintf("Table watch: gateway CPU per event <= %.0fx a JSON watch's", goalTableWatchCPU),
			Figure:  fmt.Sprintf("%.3f s vs %.3f s per 1000 = %.1fx", tw, jw, r),
			Verdict: verdictText(r <= goalTableWatchCPU, fmt.Sprintf("%.1fx (%.1fx the target ratio)", r-goalTableWatchCPU, r/goalTableWatchCPU))})
	}
	return lines
}

// tenantsGoals judges the tenants scenario, attack by attack.
func tenantsGoals(figs []Figure) []Goal {
	idx := indexFigures(figs)
	gw := func(metric string) (float64, bool) { return idx.get(ScenarioTenants, ArmGateway, metric) }
	sum := func(suffix string, metrics ...string) float64 {
		t := 0.0
		for _, m := range metrics {
			v, _ := gw(m + suffix)
			t += v
		}
		return t
	}
	var lines []Goal
	for _, a := range TenantsAttacks {
		sfx, bsfx := attackSuffix(a), baselineSuffix(a)
		if _, ok := gw("victim socket failures" + sfx); !ok {
			continue
		}
		// The victim's p99s against its baseline.
		var parts, over []string
		for _, k := range []struct{ name, metric string }{
			{"window updates", "victim window update latency p99"},
			{"object events", "victim object event latency p99"},
			{"REST lists", "victim REST list latency p99"},
		} {
			base, ok1 := gw(k.metric + bsfx)
			under, ok2 := gw(k.metric + sfx)
			switch {
			case !ok2:
				parts = append(parts, k.name+": none under the attack")
				over = append(over, k.name+" (none arrived)")
			case !ok1 || base <= 0:
				parts = append(parts, fmt.Sprintf("%s %.1f ms (no baseline)", k.name, under))
				over = append(over, k.name+" (no baseline)")
			default:
				r := under / base
				parts = append(parts, fmt.Sprintf("%s %.1f vs %.1f ms (%.1fx)", k.name, under, base, r))
				if r > goalTenantRatio {
					over = append(over, fmt.Sprintf("%s %.1fx", k.name, r))
				}
			}
		}
		lines = append(lines, Goal{Goal: fmt.Sprintf("%s: the victim's p99 <= %.0fx its baseline", a, goalTenantRatio),
			Figure: strings.Join(parts, "; "), Verdict: missedList(over)})

		failed := sum(sfx, "victim REST lists failed", "victim socket failures", "missed window updates", "missed object events")
		lists, _ := gw("victim REST lists failed" + sfx)
		sock, _ := gw("victim socket failures" + sfx)
		missed := sum(sfx, "missed window updates", "missed object events")
		lines = append(lines, Goal{Goal: fmt.Sprintf("%s: no victim request fails", a),
			Figure:  fmt.Sprintf("REST lists failed %.0f, window or subscription failures %.0f, updates missed %.0f", lists, sock, missed),
			Verdict: verdictText(failed == 0, fmt.Sprintf("%.0f failures", failed))})

		// The attacker's refusals.
		var n429, bad float64
		for _, f := range figs {
			if f.Scenario != ScenarioTenants || f.Arm != ArmGateway || !strings.HasSuffix(f.Metric, sfx) {
				continue
			}
			m := strings.TrimSuffix(f.Metric, sfx)
			switch {
			case strings.HasSuffix(m, "refused (429)") || strings.HasSuffix(m, "answered 429"):
				n429 += f.Value
			case strings.HasSuffix(m, "429s without Retry-After or a complete Status"):
				bad += f.Value
			}
		}
		g := Goal{Goal: fmt.Sprintf("%s: the attacker's refusals are 429 with Retry-After (REST) and a complete Status", a),
			Figure: fmt.Sprintf("%.0f 429s, %.0f of them incomplete", n429, bad), Verdict: verdictText(bad == 0, fmt.Sprintf("%.0f", bad))}
		if n429 == 0 {
			g.After = "; the gateway refused the attacker nothing with 429"
		}
		lines = append(lines, g)

		before, ok1 := gw("live heap+stacks before" + sfx)
		after, ok2 := gw("live heap+stacks after" + sfx)
		mg := Goal{Goal: fmt.Sprintf("%s: what the attack grows comes back (live heap+stacks after it <= before + max(%.0f MiB, %.0f%%))", a, goalMemorySlackMiB, goalMemorySlackFraction*100)}
		if ok1 && ok2 {
			slack := max(goalMemorySlackMiB, goalMemorySlackFraction*before)
			during := ""
			if d, ok := gw("live heap+stacks during" + sfx); ok {
				during = fmt.Sprintf(", %.0f during", d)
			}
			mg.Figure = fmt.Sprintf("%.0f MiB before%s, %.0f after", before, during, after)
			mg.Verdict = verdictText(after <= before+slack, fmt.Sprintf("%.0f MiB", after-before-slack))
		} else {
			mg.Verdict = "not judged: the gateway did not collect within the wait (-tenants-gc-wait)"
		}
		lines = append(lines, mg)

		switch a {
		case AttackTokenFlood:
			tried, _ := gw("never-seen valid token accepted: tried" + sfx)
			notServed, _ := gw("never-seen valid token accepted: not served" + sfx)
			worst, ok := gw("never-seen valid token accepted: time max" + sfx)
			reached, _ := gw("flooder: requests/s reached" + sfx)
			sent, _ := gw("flooder: requests/s sent" + sfx)
			asked, _ := idx.get(ScenarioTenants, ArmBench, "flooder: requests/s asked"+sfx)
			g := Goal{Goal: fmt.Sprintf("token-flood: a never-seen valid token is accepted within %.0f ms", goalNewTokenMs),
				After: fmt.Sprintf(" (flood: %.0f requests/s asked, %.0f sent, %.0f answered)", asked, sent, reached)}
			switch {
			case tried == 0:
				g.Verdict = "not judged: no token was tried"
			case !ok:
				g.Figure = fmt.Sprintf("%.0f tried, none accepted", tried)
				g.Verdict = fmt.Sprintf("MISSED: none of %.0f accepted", tried)
			default:
				g.Figure = fmt.Sprintf("slowest %.0f ms, %.0f of %.0f not accepted within %v", worst, notServed, tried, newTokenTimeout)
				var over []string
				if worst > goalNewTokenMs {
					over = append(over, fmt.Sprintf("%.0f ms", worst-goalNewTokenMs))
				}
				if notServed > 0 {
					over = append(over, fmt.Sprintf("%.0f never accepted", notServed))
				}
				g.Verdict = missedList(over)
			}
			lines = append(lines, g)
		case AttackViewHoard:
			held, _ := gw("hoarder: windows held" + sfx)
			tried, _ := idx.get(ScenarioTenants, ArmBench, "hoarder: windows tried"+sfx)
			lines = append(lines, Goal{Goal: fmt.Sprintf("view-hoard: one user holds fewer than the resource's %d views", goalViewCap),
				Figure: fmt.Sprintf("%.0f of %.0f windows held", held, tried), Verdict: verdictText(held < goalViewCap, fmt.Sprintf("%.0f views", held-goalViewCap+1))})
			w, _ := gw("victim new window during the hoard: not served" + sfx)
			wt, _ := gw("victim new window during the hoard: tried" + sfx)
			l, _ := gw("victim new sorted list during the hoard: not served" + sfx)
			lt, _ := gw("victim new sorted list during the hoard: tried" + sfx)
			lines = append(lines, Goal{Goal: "view-hoard: others still get new views",
				Figure:  fmt.Sprintf("victim's new windows: %.0f of %.0f not served; new sorted lists: %.0f of %.0f", w, wt, l, lt),
				Verdict: verdictText(w+l == 0 && wt+lt > 0, fmt.Sprintf("%.0f refused", w+l))})
		case AttackSocketFill:
			n, _ := gw("victim new socket to its first window: not served" + sfx)
			t, _ := gw("victim new socket to its first window: tried" + sfx)
			held, _ := gw("socket fillers: sockets held" + sfx)
			lo, _ := gw("socket fillers: sockets held per identity (min)" + sfx)
			hi, _ := gw("socket fillers: sockets held per identity (max)" + sfx)
			lines = append(lines, Goal{Goal: "socket-fill: the victim still connects",
				Figure:  fmt.Sprintf("%.0f of %.0f new sockets not served; fillers held %.0f sockets (%.0f to %.0f each)", n, t, held, lo, hi),
				Verdict: verdictText(n == 0 && t > 0, fmt.Sprintf("%.0f refused", n))})
		}
	}
	return lines
}

// missedList is "met" without items, else MISSED by them.
func missedList(over []string) string {
	if len(over) == 0 {
		return "met"
	}
	return "MISSED by " + strings.Join(over, ", ")
}
