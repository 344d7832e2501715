package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

// Options configures Run. Defaults finish in a few minutes on two cores;
// docs/benchmarks.md lists the full sizes of the issue and the flags that
// reach them.
type Options struct {
	// GatewayBinary is the gateway executable. Required.
	GatewayBinary string
	// Scenarios to run, in order. Default DefaultScenarios.
	Scenarios []string
	// Pods and Namespaces size the workload. Defaults 1000 and 10.
	Pods, Namespaces int
	// Log receives progress lines. Default none.
	Log io.Writer
}

// DefaultScenarios are the scenarios Run runs when Options.Scenarios is
// empty.
var DefaultScenarios = []string{"setup"}

// Run starts an Env, runs the scenarios and returns every figure.
func Run(ctx context.Context, o Options) (Report, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	if len(o.Scenarios) == 0 {
		o.Scenarios = DefaultScenarios
	}
	r := Report{Machine: DescribeMachine()}
	env, err := StartEnv(ctx, EnvOptions{GatewayBinary: o.GatewayBinary, Pods: o.Pods, Namespaces: o.Namespaces, Log: o.Log})
	if err != nil {
		return r, err
	}
	defer env.Close()
	r.Workload = env.Workload
	for _, s := range o.Scenarios {
		var figs []Figure
		switch s {
		case "setup":
			figs, err = setupFigures(env)
		default:
			err = fmt.Errorf("unknown scenario %q", s)
		}
		r.Figures = append(r.Figures, figs...)
		if err != nil {
			return r, fmt.Errorf("scenario %s: %w", s, err)
		}
	}
	return r, nil
}

// setupFigures reports the workload and both processes' memory once the
// gateway has synced it.
func setupFigures(env *Env) ([]Figure, error) {
	gw, err := ReadProc(env.GatewayPID)
	if err != nil {
		return nil, err
	}
	api, err := ReadProc(env.APIServerPID)
	if err != nil {
		return nil, err
	}
	return []Figure{
		{"setup", ArmBench, "pod JSON size (cached)", "B", env.Workload.PodJSONBytes},
		{"setup", ArmBench, "pod JSON size (served)", "B", env.Workload.PodJSONBytesServed},
		{"setup", ArmGateway, "RSS after sync", "MiB", mib(gw.RSS)},
		{"setup", ArmAPIServer, "RSS after sync", "MiB", mib(api.RSS)},
	}, nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// DescribeMachine reads the CPU model and memory from /proc.
func DescribeMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Started: time.Now().UTC().Format(time.RFC3339)}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				m.MemTotal = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}
