package scenario

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestWindowGoals(t *testing.T) {
	figs := []Figure{}
	add := func(n int, arm, metric string, v float64) {
		figs = append(figs, Figure{ScenarioWindows, arm, metric + " (" + strconv.Itoa(n) + " pods)", "ms", v})
	}
	for _, n := range []int{10000, 100000} {
		add(n, ArmGateway, "first 50 rows (median)", 0.8)
		add(n, ArmGateway, "first 50 rows (max)", 1.5)
		add(n, ArmGateway, "server CPU per first 50 rows", 0.4)
		add(n, ArmGateway, "first window, rows shown before (median)", 0.5)
		add(n, ArmAPIServer+" limit=50", "first 50 rows (median)", 12)
		add(n, ArmJSON+" full list", "first 50 rows (median)", 3000)
		add(n, ArmProto+" full list", "first 50 rows (median)", 2000)
		add(n, ArmGateway, "allocated per window (N=1000)", 30)
		add(n, ArmGateway, "RSS per window (N=1000)", float64(n)/1000) // garbage: not judged
		add(n, ArmGateway, "CPU per update, 1 window", 0.3)
	}
	add(10000, ArmGateway, "first window, new sort order (median)", 9)
	add(100000, ArmGateway, "first window, new sort order (median)", 150)
	add(100000, ArmGateway, "first window, new sort order (max)", 180)
	add(100000, ArmGateway, "gateway CPU per first window, new sort order", 120)
	add(100000, ArmGateway, "first window, new filter (median)", 40)
	add(100000, ArmGateway, "first window, new filter (max)", 60)
	add(100000, ArmGateway, "gateway CPU per first window, new filter", 45)
	add(100000, ArmGateway, "first window, new table", 800)
	add(100000, ArmGateway, "gateway CPU per first window, new table", 300)
	add(10000, ArmGateway, "live heap+stacks once ready / cached JSON", 1.6)
	add(100000, ArmGateway, "live heap+stacks once ready", 1000)
	add(100000, ArmGateway, "live heap+stacks once ready per pod", 10486)
	add(100000, ArmGateway, "cached JSON", 800)
	add(100000, ArmGateway, "live heap+stacks once ready / cached JSON", 1.25)
	add(100000, ArmGateway, "RSS once ready", 1300)
	add(10000, ArmGateway, "CPU per update, 1000 windows", 0.5)
	add(100000, ArmGateway, "CPU per update, 1000 windows", 1.0)
	add(10000, ArmGateway, "live heap+stacks per window (N=1000)", 4)
	add(100000, ArmGateway, "live heap+stacks per window (N=1000)", 7)
	add(100000, ArmGateway, "allocated per socket (N=1000)", 9) // no counterpart at 10,000, and not judged

	got := goalLines(windowGoals(figs))
	for _, want := range []string{
		"goal: first window of 50 rows over 10000 pods <= 10 ms, its sort order in use, rows new to it: median 0.80 ms (max 1.50, gateway CPU 0.40 ms each), met; kube-apiserver: first page of 50, unsorted, 12.0 ms, full list 3000 ms (JSON) and 2000 ms (protobuf)",
		"goal: first window of 50 rows over 10000 pods <= 10 ms, rows shown before: 0.50 ms, met",
		"goal: first window over 10000 pods, a new sort order (its index built) <= 50 ms (median): median 9.0 ms (max 0.0, gateway CPU 0.0 ms each), met (measured at 10000 pods; the goal is set at 100000)",
		"goal: first window over 100000 pods, a new sort order (its index built) <= 50 ms (median): median 150.0 ms (max 180.0, gateway CPU 120.0 ms each), MISSED by 100.0 ms (3.0x)",
		"goal: first window over 100000 pods, a new filter (a label selector every pod matches: its view built) <= 50 ms (median): median 40.0 ms (max 60.0, gateway CPU 45.0 ms each), met",
		"goal: first window on a resource never opened before (100000 pods) <= 1000 ms: 800.0 ms (gateway CPU 300.0 ms; the live table built at start, before readiness), met",
		"goal: cache memory of 10000 pods, live table included, <= 1.5x the cached JSON: live heap+stacks 0 MiB (0 B per pod) for 0 MiB of JSON = 1.60x; RSS 0 MiB, MISSED by 0.10x (1.07x the target ratio) (measured at 10000 pods; the goal is set at 100000)",
		"goal: cache memory of 100000 pods, live table included, <= 1.5x the cached JSON: live heap+stacks 1000 MiB (10486 B per pod) for 800 MiB of JSON = 1.25x; RSS 1300 MiB, met",
		"goal: CPU per update, 1000 windows flat in the number of objects (at most 1.5x from 10000 to 100000 pods): 0.500 and 1.000, 2.00x, MISSED by 0.50x",
		"goal: allocated per window (N=1000) flat in the number of objects (at most 1.5x from 10000 to 100000 pods): 30.000 and 30.000, 1.00x, met",
		"goal: live heap+stacks per window (N=1000) flat in the number of objects (at most 1.5x from 10000 to 100000 pods): 4.000 and 7.000, 1.75x, MISSED by 0.25x",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("goals lack\n  %s\nin\n  %s", want, strings.Join(got, "\n  "))
		}
	}
	if len(got) != 13 {
		t.Errorf("%d goal lines, want 13:\n  %s", len(got), strings.Join(got, "\n  "))
	}
}
