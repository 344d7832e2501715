package soak

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"))
}

// TestSoak runs the soak: SOAK_DURATION of mixed load (default 60s, the
// short version that runs in make test), then the pass conditions. `make
// soak DURATION=30m` runs the long version. SOAK_RACE=1 builds the gateway
// with the race detector; SOAK_OUT is where the CSV and JSON reports go
// (default .local/soak at the repository root).
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak starts a control plane and runs for a minute; not a unit test")
	}
	d := 60 * time.Second
	if v := os.Getenv("SOAK_DURATION"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d <= 0 {
			t.Fatalf("SOAK_DURATION=%q: want a positive duration such as 30m", v)
		}
	}
	out := os.Getenv("SOAK_OUT")
	if out == "" {
		out = filepath.Join("..", "..", ".local", "soak")
	}
	ctx := t.Context()
	bin, err := BuildGateway(ctx, t.TempDir(), os.Getenv("SOAK_RACE") == "1")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(ctx, Options{
		Gateway:  bin,
		Duration: d,
		Out:      tableWriter{t},
		Logf:     t.Logf,
	})
	if rep != nil {
		files, ferr := rep.WriteFiles(out)
		if ferr != nil {
			t.Errorf("write report: %v", ferr)
		}
		t.Logf("soak: report in %s; totals %+v", strings.Join(files, ", "), rep.Totals)
		t.Logf("soak: the gateway logged %d warnings or errors (in the JSON report)", len(rep.GatewayWarnings)+rep.WarningsDropped)
		for _, p := range rep.Problems {
			t.Error(p)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}

// tableWriter logs each row of the table as it is written.
type tableWriter struct{ t *testing.T }

func (w tableWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestCheckFlat(t *testing.T) {
	b := Bound{Factor: 1.2, Slack: 10}
	for _, c := range []struct {
		name   string
		values []float64
		fail   bool
	}{
		{"flat", []float64{100, 110, 105, 100, 108, 104, 102, 109, 107}, false},
		{"within factor and slack", []float64{100, 100, 100, 100, 100, 100, 125, 130, 120}, false},
		{"leak", []float64{100, 110, 120, 130, 140, 150, 160, 170, 180}, true},
		{"too few samples", []float64{1, 1000}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, p := checkFlat("x", c.values, b)
			if (p != "") != c.fail {
				t.Errorf("problem %q, want failure=%v", p, c.fail)
			}
		})
	}
}

func TestDiff(t *testing.T) {
	got := diff(map[string]string{"a/x": "1", "a/y": "2", "a/gone": "3"}, map[string]string{"a/x": "1", "a/y": "5", "a/new": "4"})
	for _, want := range []string{"missing [a/new]", "deleted but kept [a/gone]", "stale [a/y@2 want 5]"} {
		if !strings.Contains(got, want) {
			t.Errorf("diff %q does not say %q", got, want)
		}
	}
}

func TestWarnLines(t *testing.T) {
	w := &warnLines{max: 2}
	for _, chunk := range []string{
		`{"level":"info","msg":"a"}` + "\n" + `{"level":"warn","msg":"b"`,
		`}` + "\n" + `{"level":"error","msg":"c"}` + "\n",
		`{"level":"warn","msg":"d"}` + "\n",
	} {
		if _, err := w.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	lines, dropped := w.get()
	want := []string{`{"level":"warn","msg":"b"}`, `{"level":"error","msg":"c"}`}
	if strings.Join(lines, "|") != strings.Join(want, "|") || dropped != 1 {
		t.Errorf("lines %q dropped %d, want %q and 1", lines, dropped, want)
	}
}
