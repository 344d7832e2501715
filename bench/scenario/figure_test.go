package scenario

import (
	"strings"
	"testing"
)

func TestTableRatios(t *testing.T) {
	figs := []Figure{
		{"broad", ArmGateway, "latency p99", "ms", 5},
		{"broad", ArmJSON, "latency p99", "ms", 10},
		{"broad", ArmProto, "latency p99", "ms", -1},
		{"broad", ArmGateway, "missed", "count", 0},
		{"broad", ArmJSON, "missed", "count", 0},
		{"broad", ArmBench + " (" + ArmGateway + ")", "bench CPU", "s", 1.5},
		{"broad", ArmFloor, "latency p99", "ms", 2},
		{"coldstart", ArmGateway, "time to ready", "ms", 900},
	}
	var b strings.Builder
	Markdown(&b, figs)
	got := b.String()
	for _, want := range []string{
		"| broad | latency p99 | ms | 5.00 | apiserver/json | 10.00 | 0.50 |",
		"| broad | latency p99 | ms | 5.00 | apiserver/proto | -1.00 | - |", // no ratio of a negative value
		"| broad | missed | count | 0 | apiserver/json | 0 | = |",
		"| broad | latency p99 | ms | 5.00 | floor | 2.00 | 2.50 |", // the floor is a reference too
		"| broad | bench CPU | s | - | bench (gateway) | 1.50 | - |",
		"| coldstart | time to ready | ms | 900.0 | - | - | - |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
}

func TestGoals(t *testing.T) {
	figs := []Figure{
		{"broad", ArmGateway, "CPU per 1000 deliveries", "s", 0.03},
		{"broad", ArmJSON, "CPU per 1000 deliveries", "s", 0.05},
		{"broad", ArmGateway, "latency p99", "ms", 20},
		{"broad", ArmJSON, "latency p99", "ms", 30},
		{"broad", ArmJSON, "missed", "count", 2},
		{"broad", ArmJSON, "subscribers cut off", "count", 1},
		{"broad", ArmFloor, "CPU per 1000 deliveries", "s", 0.025},
		{"burst", ArmGateway, "duplicated", "count", 3},
		{"abuse", ArmGateway, "latency p99 (before)", "ms", 10},
		{"abuse", ArmGateway, "latency p99 (with abusive client)", "ms", 12},
		{"abuse", ArmGateway, "latency p99 (after)", "ms", 11},
		{"abuse", ArmGateway, "abusive client: resynced objects/s (steady)", "1/s", 40000},
		{"abuse", ArmGateway, "abusive client: resynced objects/s (overall)", "1/s", 30000},
		{"abuse", ArmGateway, "resyncs deferred (gateway's counter)", "count", 0},
		{"abuse", ArmBench, "resync budget checked", "1/s", 2000},
		{"watchlist", ArmGateway, "Go heap+stacks per client (N=100 stalled)", "KiB", 300},
		{"watchlist", ArmGateway, "RSS per client (N=100 stalled)", "KiB", 900},
		{"watchlist", ArmJSON, "Go heap+stacks per client (N=100 stalled)", "KiB", 2000},
		{"watchlist", ArmJSON, "RSS per client (N=100 stalled)", "KiB", 1500},
		{"watchlist", ArmGateway, "Go heap+stacks peak per client (N=10 at full speed)", "KiB", 800},
		{"watchlist", ArmGateway, "RSS peak per client (N=10 at full speed)", "KiB", 1500},
		{"snapshot", ArmGateway, "time to snapshot of 10000 pods (median)", "ms", 90},
		{"snapshot", ArmGateway, "time to snapshot of 10000 pods (run 1)", "ms", 90},
		{"snapshot", ArmGateway, "time to snapshot of 10000 pods (run 2)", "ms", 130},
		{"snapshot", ArmGateway, "time to snapshot of 10000 pods (run 3)", "ms", 80},
	}
	got := strings.Join(goalLines(Goals(figs)), "\n")
	for _, want := range []string{
		"time to snapshot of 10000 pods <= 100 ms in every run: 90, 130, 80 ms (median 90.0), MISSED by 1 of 3 runs",
		"p99 unchanged by an abusive client (within the run's noise): 12.0 ms with it, 10.0 and 11.0 ms without (bound 12.1 ms), met",
		"<= the resync budget (2000/s): 40000/s steady (30000/s overall), 0 resyncs deferred by the gateway, MISSED by 38000/s (20.00x the budget, 5% allowed); the gateway deferred no resync",
		"per watch-list client <= 1 MiB, N=100 stalled (connected at once, snapshots in flight): Go heap+stacks 300 KiB, RSS 900 KiB, met (kube-apiserver: 2000 KiB and 1500 KiB)",
		"per watch-list client <= 1 MiB, N=10 at full speed (at their peak, snapshots read at full speed): Go heap+stacks 800 KiB, RSS 1500 KiB, MISSED by 476 KiB",
		"1.5x the floor's (the same frames from a plain loop): 0.030 s vs 0.025 s per 1000 = 1.20x, met",
		"0.60x, MISSED by 20% (1.20x the target ratio)",
		"p99 latency <= apiserver/json's: 20.0 ms vs 30.0 ms, met",
		"zero missed or duplicated events in every scenario (gateway): MISSED: burst/gateway/duplicated=3",
		"note: kube-apiserver arms lost events: broad/apiserver/json/missed=2 (1 watches ended by kube-apiserver; a client relists)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("goals lack %q:\n%s", want, got)
		}
	}
}
