package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kubegate/internal/config"
)

func TestLastGC(t *testing.T) {
	log := []byte(`{"level":"warn","msg":"gc 99 is not a trace line"}
gc 1 @0.012s 2%: 0.016+1.2+0.021 ms clock, 0.033+0.31/0.92/0+0.043 ms cpu, 3->4->1 MB, 4 MB goal, 0 MB stacks, 0 MB globals, 2 P
gc 12 @61.520s 0%: 0.11+35+0.004 ms clock, 0.22+1.1/17/0+0.009 ms cpu, 1210->1215->1034 MB, 2260 MB goal, 3 MB stacks, 0 MB globals, 2 P (forced)
{"level":"warn","msg":"after"}
`)
	got, ok := lastGC(log)
	if want := (GC{Num: 12, Live: 1034 << 20, Stacks: 3 << 20}); !ok || got != want {
		t.Errorf("lastGC = %+v, %t; want %+v", got, ok, want)
	}
	if _, ok := lastGC([]byte(`{"level":"warn"}`)); ok {
		t.Error("lastGC found a collection in a log without one")
	}
}

func TestParseMetrics(t *testing.T) {
	const text = `# HELP go_goroutines Number of goroutines.
# TYPE go_goroutines gauge
go_goroutines 42
kubegate_ws_resets_total{reason="Overflow"} 3
kubegate_ws_resets_total{reason="Reauthorized"} 2
kubegate_webhook_deliveries_total{outcome="delivered",webhook="soak"} 10
kubegate_webhook_deliveries_total{outcome="superseded",webhook="soak"} 1
apiserver_request_total{resource="pods",verb="LIST"} 4
apiserver_request_total{resource="pods",verb="WATCH"} 6
apiserver_request_total{resource="configmaps",verb="LIST"} 100
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0.5"} 0.001
go_gc_duration_seconds_sum 0.5
go_gc_duration_seconds_count 17
weird{l="a } b"} 1.5e+06 1700000000
`
	m, err := ParseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	get := func(name string, labels ...string) float64 {
		v, _ := m.Get(name, labels...)
		return v
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"gauge", get("go_goroutines"), 42},
		{"sum over labels", get("kubegate_ws_resets_total"), 5},
		{"one label", get("kubegate_webhook_deliveries_total", "outcome", "delivered"), 10},
		{"label sum", get("apiserver_request_total", "resource", "pods"), 10},
		{"two labels", get("apiserver_request_total", "resource", "pods", "verb", "LIST"), 4},
		{"summary count", get("go_gc_duration_seconds_count"), 17},
		{"summary sum", get("go_gc_duration_seconds_sum"), 0.5},
		{"label value with a brace and a timestamp", get("weird"), 1.5e6},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	if _, ok := m.Get("kubegate_ws_resets_total", "reason", "Expired"); ok {
		t.Error("a label value nobody has was found")
	}
	if _, err := m.Value("absent"); err == nil {
		t.Error("Value of an absent metric: no error")
	}
	if _, err := ParseMetrics(strings.NewReader("novalue\n")); err == nil {
		t.Error("a line without a value parsed")
	}
}

// TestWriteConfig: what the harness writes is what the gateway reads, and
// a zero that config.Config cannot carry in a file is refused rather
// than measured as the default.
func TestWriteConfig(t *testing.T) {
	dir := t.TempDir()
	c := config.Default()
	c.Listen = "127.0.0.1:9999"
	c.Kubeconfig = "/tmp/kubeconfig"
	c.Cache.Resources = []string{"pods", "configmaps"}
	c.Cache.MinResync = config.Duration(time.Second)
	c.WebSocket.MaxSockets = 1_000_000
	c.Auth.Authn, c.Auth.Authz = "none", "always-allow"
	c.Auth.UserQPS = 1e9
	path := filepath.Join(dir, "ok.yaml")
	if err := WriteConfig(path, c); err != nil {
		t.Fatal(err)
	}
	back, err := config.Load(path, config.Default())
	if err != nil {
		t.Fatal(err)
	}
	if back.Auth.UserQPS != 1e9 || back.Cache.MinResync != config.Duration(time.Second) || back.Listen != c.Listen {
		t.Errorf("read back %+v", back)
	}

	c.Auth.UserQPS = 0 // no limit: written out, so it reads back
	if err := WriteConfig(filepath.Join(dir, "nolimit.yaml"), c); err != nil {
		t.Errorf("WriteConfig with userQPS 0: %v", err)
	}
	c.Cache.HistoryEvents = 0 // left out of the file, so the default (10000) would apply
	if err := WriteConfig(filepath.Join(dir, "zero.yaml"), c); err == nil || !strings.Contains(err.Error(), "does not read back") {
		t.Errorf("WriteConfig with historyEvents 0: %v, want an error", err)
	}
}

// TestReadProc reads this process: /proc must give a resident set, a
// peak at least as large, the TCP memory line and the load.
func TestReadProc(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	st, err := ReadProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.RSS <= 0 || st.HWM < st.RSS {
		t.Errorf("RSS %d, peak %d", st.RSS, st.HWM)
	}
	if _, err := TCPMemory(); err != nil {
		t.Error(err)
	}
	if m := DescribeMachine(); m.CPUs == 0 || m.LoadAvg == "" {
		t.Errorf("machine %+v", m)
	}
}

func TestCPUReadingSince(t *testing.T) {
	r := func(threads, ticks time.Duration) CPUReading {
		return CPUReading{Threads: threads, Ticks: ticks}
	}
	for _, tc := range []struct {
		name          string
		before, after CPUReading
		want          time.Duration
	}{
		{"threads are finer than ticks", r(100*time.Millisecond, 100*time.Millisecond), r(103*time.Millisecond, 110*time.Millisecond), 3 * time.Millisecond},
		{"an exited thread's time is lost: ticks", r(500*time.Millisecond, 500*time.Millisecond), r(200*time.Millisecond, 800*time.Millisecond), 300 * time.Millisecond},
		{"never negative", r(10*time.Millisecond, 0), r(5*time.Millisecond, 0), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.after.Since(tc.before); got != tc.want {
				t.Errorf("Since = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestReadCPU burns CPU in this process until /proc/<pid>/stat counts 50ms
// more, and checks the threads' run time agrees.
func TestReadCPU(t *testing.T) {
	before, err := ReadCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	var after CPUReading
	deadline := time.Now().Add(20 * time.Second)
	for after.Ticks-before.Ticks < 50*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("20s of spinning did not add 50ms of CPU: %v -> %v", before, after)
		}
		for i := 0; i < 1_000_000; i++ {
			x := i * i
			_ = x
		}
		if after, err = ReadCPU(os.Getpid()); err != nil {
			t.Fatal(err)
		}
	}
	// Ticks are sampled: allow them a tick or two either way.
	if d := after.Since(before); d < 30*time.Millisecond || d > after.Ticks-before.Ticks+50*time.Millisecond {
		t.Errorf("threads ran %v while ticks counted %v", d, after.Ticks-before.Ticks)
	}
	if zero, err := ReadCPU(0); err != nil || zero != (CPUReading{}) {
		t.Errorf("ReadCPU(0) = %v, %v", zero, err)
	}
	if _, err := ReadCPU(1 << 30); err == nil {
		t.Error("ReadCPU of a pid that does not exist succeeded")
	}
}
