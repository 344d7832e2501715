package scenario

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestListOutcomeFigures: a finished list reports its time, an unfinished
// one the time it ended under a metric of its own, so that it is never
// read as a list's time.
func TestListOutcomeFigures(t *testing.T) {
	o := listOutcome{d: 1500 * time.Millisecond, bytes: 3 << 20, items: 1000, cpu: 800 * time.Millisecond, peak: 64 << 20}
	want := []Figure{
		{ScenarioScale, ArmGateway, "full list time", "ms", 1500},
		{ScenarioScale, ArmGateway, "full list size", "MiB", 3},
		{ScenarioScale, ArmGateway, "full list small configmaps", "count", 1000},
		{ScenarioScale, ArmGateway, "full list server CPU", "ms", 800},
		{ScenarioScale, ArmGateway, "full list server RSS peak growth", "MiB", 64},
	}
	if d := cmp.Diff(want, o.figures(ArmGateway, scaleFullJSON)); d != "" {
		t.Errorf("finished list (-want +got):\n%s", d)
	}
	o.err = errors.New("stream error")
	got := o.figures(ArmAPIServerRVUnset, scaleFullTable)
	if got[0] != (Figure{ScenarioScale, ArmAPIServerRVUnset, "full list as Table unfinished after", "ms", 1500}) {
		t.Errorf("unfinished list's first figure is %+v", got[0])
	}
	if slices.ContainsFunc(got, func(f Figure) bool { return strings.HasSuffix(f.Metric, scaleTime) }) {
		t.Errorf("an unfinished list reports a list time: %+v", got)
	}
	if s := o.String(); !strings.HasPrefix(s, "UNFINISHED after 1.5s") || !strings.HasSuffix(s, ": stream error") {
		t.Errorf("String() = %q", s)
	}
}

// scaleTestFigures are a run's measured figures at 1,000 small
// ConfigMaps (1,010 cached).
func scaleTestFigures() []Figure {
	f := func(arm, metric, unit string, v float64) Figure { return Figure{ScenarioScale, arm, metric, unit, v} }
	return []Figure{
		f(ArmBench, scaleSmall, "count", 1000),
		f(ArmGateway, scaleObjects, "count", 1024),
		f(ArmGateway, scaleLiveSync, "MiB", 3),
		f(ArmGateway, scaleRSSSync, "MiB", 40),
		f(ArmAPIServer, scaleRSSSync, "MiB", 400),
		f(ArmAPIServer, scaleInuseSync, "MiB", 200),
		f(ArmGateway, scaleLiveTable, "MiB", 4),
		f(ArmGateway, scaleLiveViews, "MiB", 6),
		f(ArmGateway, scaleNewTable, "ms", 1500),
		f(ArmGateway, "gateway CPU per first window, new table", "ms", 900),
		f(ArmGateway, scaleNewSortWS+" (median)", "ms", 30),
		f(ArmGateway, scaleNewSortWS+" (max)", "ms", 45),
		f(ArmGateway, "gateway CPU per "+scaleNewSortWS, "ms", 20),
		f(ArmGateway, scaleNewSortREST+" (median)", "ms", 80),
		f(ArmGateway, scaleNewSortREST+" (max)", "ms", 90),
		f(ArmGateway, "gateway CPU per "+scaleNewSortREST, "ms", 60),
		f(ArmGateway, scaleFirstTable+" p50", "ms", 2),
		f(ArmAPIServerRVUnset, scaleFirstTable+" p50", "ms", 20),
		f(ArmGateway, scaleFullJSON+scaleTime, "ms", 100),
		f(ArmGateway, scaleFullJSON+scaleSize, "MiB", 2),
		f(ArmGateway, scaleFullJSON+scaleServerCPU, "ms", 50),
		f(ArmAPIServerRVUnset, scaleFullJSON+scaleTime, "ms", 900),
		f(ArmGateway, scaleFullTable+scaleTime, "ms", 200),
		f(ArmGateway, scaleFullTable+scaleServerCPU, "ms", 150),
		f(ArmAPIServerRVUnset, scaleFullTable+scaleUnfinished, "ms", 60000),
		f(ArmAPIServerRVUnset, scaleFullTable+scaleServerCPU, "ms", 40000),
	}
}

// TestScaleDerived: per object over the objects cached, and against the
// cached JSON, from the gateway's complete JSON list only.
func TestScaleDerived(t *testing.T) {
	figs := scaleTestFigures()
	got := map[string]float64{}
	for _, f := range scaleDerived(figs) {
		got[f.Metric] = f.Value
	}
	want := map[string]float64{
		scaleCachedJSON:                                2,
		"cached JSON per object":                       2048,
		scaleLivePerObject:                             3072,
		"live heap+stacks after sync / cached JSON":    1.5,
		"RSS per object after sync":                    40960,
		"RSS after sync / cached JSON":                 20,
		"the live table per object (live heap growth)": 1024,
		"idle views per object (live heap growth)":     2048,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("derived figures (-want +got):\n%s", d)
	}

	// A JSON list cut short is no measure of the cache, and without a
	// collection there is no live heap.
	var cut []Figure
	for _, f := range figs {
		switch f.Metric {
		case scaleFullJSON + scaleTime:
			f.Metric = scaleFullJSON + scaleUnfinished
		case scaleLiveSync:
			continue
		}
		cut = append(cut, f)
	}
	for _, f := range scaleDerived(cut) {
		if strings.Contains(f.Metric, "JSON") || strings.HasPrefix(f.Metric, "live heap") || strings.HasPrefix(f.Metric, "the live table") {
			t.Errorf("derived %q = %v without its inputs", f.Metric, f.Value)
		}
	}
	if d := scaleDerived(figs[2:]); d != nil {
		t.Errorf("derived figures without the objects cached: %+v", d)
	}
}

func TestScaleGoals(t *testing.T) {
	figs := scaleTestFigures()
	figs = append(figs, scaleDerived(figs)...)
	got := goalLines(scaleGoals(figs))
	ref := " (set at 100000 Pods; for reference at 1000 small ConfigMaps)"
	want := []string{
		"goal: 1000 small ConfigMaps: cache memory, first window, new sort and Table list recorded beside kube-apiserver's: 1024 ConfigMaps cached, met",
		"goal: cache memory <= 1.5x the cached JSON" + ref + ": live heap+stacks 3 MiB (3072 B per object) for 2 MiB of JSON = 1.50x; RSS 40 MiB, met; kube-apiserver: RSS 400 MiB, heap in use 200 MiB",
		"goal: first window on a resource never opened before <= 1000 ms" + ref + ": 1500 ms (gateway CPU 900 ms), MISSED by 500 ms (1.5x); kube-apiserver: first page of 500 as Table, unsorted, 20 ms, every ConfigMap as JSON 900 ms",
		"goal: a new sort over WebSocket: first rows <= 50 ms (median)" + ref + ": median 30 ms, max 45 ms, gateway CPU 20 ms each, met; kube-apiserver sorts nothing: its client lists every ConfigMap as JSON 900 ms",
		"goal: a new sort over REST: first rows <= 50 ms (median)" + ref + ": median 80 ms, max 90 ms, gateway CPU 60 ms each, MISSED by 30 ms (1.6x); kube-apiserver sorts nothing: its client lists every ConfigMap as JSON 900 ms",
		"goal: full Table list: gateway CPU <= 2x its JSON list's" + ref + ": 150 ms vs 50 ms = 3.0x, MISSED by 1.0x (1.5x the target ratio)",
		"goal: full Table list >= 10x faster than kube-apiserver's Table" + ref + ": gateway 200 ms; kube-apiserver's unfinished after 60000 ms: at least 300.0x, met (server CPU 150 ms vs 40000 ms: 266.7x)",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("goals (-want +got):\n%s", d)
	}

	// What is not recorded misses the goal; a gateway list cut
	// short misses the Table goal.
	var less []Figure
	for _, f := range figs {
		switch {
		case f.Arm == ArmAPIServer && f.Metric == scaleRSSSync, strings.HasPrefix(f.Metric, scaleNewSortREST):
			continue
		case f.Arm == ArmGateway && f.Metric == scaleFullTable+scaleTime:
			f.Metric = scaleFullTable + scaleUnfinished
		}
		less = append(less, f)
	}
	got = goalLines(scaleGoals(less))
	for _, w := range []string{
		"goal: 1000 small ConfigMaps: cache memory, first window, new sort and Table list recorded beside kube-apiserver's: 1024 ConfigMaps cached, MISSED: not recorded: kube-apiserver's memory, new sorts",
		"goal: full Table list >= 10x faster than kube-apiserver's Table" + ref + ": MISSED: the gateway's list ended unfinished after 200 ms (server CPU 150 ms vs 40000 ms: 266.7x)",
	} {
		if !slices.Contains(got, w) {
			t.Errorf("goals lack\n  %s\nin\n  %s", w, strings.Join(got, "\n  "))
		}
	}
	if g := scaleGoals(figs[1:]); g != nil {
		t.Errorf("goals without the scenario's size: %+v", g)
	}
}
