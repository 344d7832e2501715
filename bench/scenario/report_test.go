package scenario

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kubegate/bench/harness"
	"kubegate/bench/workload"
)

func testReport() Report {
	return Report{
		Commit: "abc1234", Command: "kubegate-bench -gateway bin/gateway -json load.json", Wall: "9m12s",
		Machine:  harness.Machine{CPUs: 2, CPUModel: "Test CPU", MemTotal: "1000 kB", GoVersion: "go1.26", Started: "2026-11-27T10:00:00Z", LoadAvg: "3.10 2.00 1.00"},
		Workload: workload.Workload{Pods: 10000, ConfigMaps: 1000, Namespaces: make([]string, 100), PodJSONBytes: 7843, PodJSONBytesServed: 15655},
		Figures: []Figure{
			{"broad", ArmGateway, "CPU per 1000 deliveries", "s", 0.03},
			{"broad", ArmJSON, "CPU per 1000 deliveries", "s", 0.05},
			{"broad", ArmProto, "CPU per 1000 deliveries", "s", 0.06},
			{"broad", ArmFloor, "CPU per 1000 deliveries", "s", 0.02},
			{"broad", ArmGateway, "latency p99", "ms", 20},
			{"broad", ArmJSON, "latency p99", "ms", 30},
			{"broad", ArmBench + " (" + ArmGateway + ")", "bench CPU", "s", 1.5},
			{"broad", ArmBench + " (" + ArmJSON + ")", "bench CPU", "s", 2.5},
			{"broad", ArmJSON, "missed", "count", 2},
			{"broad", ArmJSON, "subscribers cut off", "count", 1},
			{"setup", ArmBench, "pod JSON size (cached)", "B", 7843},
		},
	}
}

// TestMarkdown: the stamp, one goals table with verdicts and by how
// much, the notes, and a table per scenario with a column per arm, the
// ratio to the gateway in brackets and the load tool's own cost in its
// arm's column without a ratio.
func TestMarkdown(t *testing.T) {
	var b strings.Builder
	testReport().Markdown(&b)
	got := b.String()
	for _, want := range []string{
		"commit `abc1234`, `kubegate-bench -gateway bin/gateway -json load.json`; 2 CPUs (Test CPU), 1000 kB RAM, go1.26, load average 3.10 2.00 1.00 at start; started 2026-11-27T10:00:00Z, took 9m12s",
		"Workload: 10000 Pods (7843 B of JSON as the gateway caches one, 15655 B as kube-apiserver serves it) in 100 namespaces, 1000 ConfigMaps.",
		"| goal | figure | verdict |",
		"| fan-out CPU per delivery <= 0.5x apiserver/json | 0.030 s vs 0.050 s per 1000 = 0.60x | **missed** by 20% (1.20x the target ratio) |",
		"| broad fan-out p99 latency <= apiserver/json's | 20.0 ms vs 30.0 ms | met |",
		"| zero missed or duplicated events in every scenario (gateway) |  | met |",
		"Note: kube-apiserver arms lost events: broad/apiserver/json/missed=2 (1 watches ended by kube-apiserver; a client relists).",
		"### Goals · `abc1234`, 2 CPUs, load 3.10, `kubegate-bench -gateway bin/gateway -json load.json`\n\n| goal |",
		"### broad · `abc1234`, 2 CPUs, load 3.10, `kubegate-bench -gateway bin/gateway -json load.json`\n\n| metric | unit | gateway | apiserver/json | apiserver/proto | floor |",
		"| CPU per 1000 deliveries | s | 0.03 | 0.05 (0.60) | 0.06 (0.50) | 0.02 (1.50) |",
		"| bench CPU | s | 1.50 | 2.50 |  |  |",
		"### setup · `abc1234`, 2 CPUs, load 3.10, `kubegate-bench -gateway bin/gateway -json load.json`\n\n| metric | unit | bench |\n|---|---|---|\n| pod JSON size (cached) | B | 7843 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks\n%s\nin\n%s", want, got)
		}
	}
	if n := strings.Count(got, "| goal | figure | verdict |"); n != 1 {
		t.Errorf("%d goals tables, want one", n)
	}
}

// TestWriteDoc regenerates only the marked part of a document, again
// and again.
func TestWriteDoc(t *testing.T) {
	path := filepath.Join(t.TempDir(), "benchmarks.md")
	doc := "# Benchmarks\n\nprose before\n\n" + DocBegin + "\nold tables\n" + DocEnd + "\n\nprose after\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := WriteDoc(path, "", testReport()); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(path)
		got := string(b)
		if !strings.HasPrefix(got, "# Benchmarks\n\nprose before\n\n"+DocBegin+"\n\nAll figures below: commit `abc1234`") ||
			!strings.HasSuffix(got, DocEnd+"\n\nprose after\n") || strings.Contains(got, "old tables") || strings.Count(got, "### broad ·") != 1 {
			t.Fatalf("after WriteDoc %d:\n%s", i+1, got)
		}
	}
	if err := os.WriteFile(path, []byte("no markers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteDoc(path, "", testReport()); err == nil {
		t.Error("WriteDoc into a document without markers: no error")
	}
}

// TestWriteDocSplit: with a figures file, the document gets the goals
// and the figures file the scenarios' tables, each between the run's
// markers.
func TestWriteDocSplit(t *testing.T) {
	dir := t.TempDir()
	path, figures := filepath.Join(dir, "benchmarks.md"), filepath.Join(dir, "benchmarks-figures.md")
	for _, p := range []string{path, figures} {
		if err := os.WriteFile(p, []byte("prose\n"+DocBegin+"\nold\n"+DocEnd+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteDoc(path, figures, testReport()); err != nil {
		t.Fatal(err)
	}
	g, _ := os.ReadFile(path)
	f, _ := os.ReadFile(figures)
	goals, figs := string(g), string(f)
	if !strings.Contains(goals, "| goal | figure | verdict |") || strings.Contains(goals, "### broad ·") || strings.Contains(goals, "\nold\n") {
		t.Errorf("document:\n%s", goals)
	}
	if !strings.Contains(figs, "All figures below: commit `abc1234`") || !strings.Contains(figs, "### broad ·") ||
		strings.Contains(figs, "| goal | figure | verdict |") || strings.Contains(figs, "\nold\n") {
		t.Errorf("figures:\n%s", figs)
	}
}

// TestWriteDocOptIn: a run of opt-in scenarios only renders into a
// section of its own, leaving the default run's as it was.
func TestWriteDocOptIn(t *testing.T) {
	r := testReport()
	r.Figures = []Figure{
		{ScenarioPassThrough, ArmGateway, "write p50", "ms", 2.6},
		{ScenarioPassThrough, ArmAPIServer, "write p50", "ms", 2.1},
		{ScenarioPassThrough, ArmGateway, "CPU per write", "ms", 0.12},
	}
	begin, end := DocMarkers(r)
	if begin == DocBegin || !strings.Contains(begin, "-scenarios=passthrough") || !strings.Contains(end, "-scenarios=passthrough") {
		t.Fatalf("markers %q %q", begin, end)
	}
	path := filepath.Join(t.TempDir(), "benchmarks.md")
	doc := DocBegin + "\ndefault tables\n" + DocEnd + "\n\n" + begin + "\nold\n" + end + "\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteDoc(path, "", r); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	got := string(b)
	for _, want := range []string{
		DocBegin + "\ndefault tables\n" + DocEnd,
		"| pass-through adds <= 1 ms at p50 to a write (the same write straight to kube-apiserver, same run) | 2.60 ms through the gateway vs 2.10 ms straight: +0.50 ms (gateway CPU 0.120 ms per passed write) | met |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("document lacks\n%s\nin\n%s", want, got)
		}
	}
	if strings.Contains(got, "\nold\n") || strings.Contains(got, "zero missed or duplicated events") {
		t.Errorf("document:\n%s", got)
	}
}
