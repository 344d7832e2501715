package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"kubegate/internal/config"
	"kubegate/internal/controlplane"
)

// GatewayOptions configures StartGateway.
type GatewayOptions struct {
	// Binary is the gateway executable. Required.
	Binary string
	// Config is the gateway's configuration: start from config.Default()
	// and change fields. It is written as YAML to a file in Dir, which the
	// gateway reads with --config and nothing else. An empty Listen is set
	// to a free loopback port. Cache.Resources gate readiness.
	Config config.Config
	// Dir holds the config file and the gateway's log. Required.
	Dir string
	// ReadyTimeout bounds the wait for /readyz. Default 5m (a cold start of
	// 100k Pods takes a while on two cores).
	ReadyTimeout time.Duration
	// GCTrace runs the gateway with GODEBUG=gctrace=1, so that its log
	// has a line per collection, with the heap it found live
	// (Gateway.LastGC).
	GCTrace bool
	// Output, when set, also receives everything the gateway writes to
	// stdout and stderr. It must be safe for concurrent use with nothing
	// else; one goroutine writes to it. Default: the log file only.
	Output io.Writer
}

// Gateway is a running gateway subprocess.
//
// One goroutine waits for the process and closes done; Stop returns after
// it has.
type Gateway struct {
	URL     string // http://127.0.0.1:<port>
	PID     int
	Started time.Time
	// Ready is when /readyz first answered 200 with every configured
	// informer synced.
	Ready time.Time
	// ConfigPath is the file the gateway was started with, LogPath its
	// output.
	ConfigPath, LogPath string

	resources []string
	client    *http.Client
	cmd       *exec.Cmd
	done      chan struct{}
	waitErr   error // written before done is closed
}

// WriteConfig renders c as YAML to path. It fails if reading the file
// back as the gateway does (config.Load over config.Default()) gives
// another configuration: a field left at a zero that means something
// (the file omits zeros, so the gateway would take its default) would
// otherwise be measured as something it is not.
func WriteConfig(path string, c config.Config) error {
	b, err := yaml.Marshal(c)
	if err != nil {
		return fmt.Errorf("render config: %w", err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return err
	}
	back, err := config.Load(path, config.Default())
	if err != nil {
		return err
	}
	c.ConfigPath, back.ConfigPath = "", ""
	if !reflect.DeepEqual(back, c) {
		return fmt.Errorf("config %s does not read back as written (a zero that means something is left out of the file, and the gateway would take its default):\n%s", path, b)
	}
	return nil
}

// StartGateway starts the gateway binary with o.Config and waits until
// /readyz answers with every configured informer synced.
func StartGateway(ctx context.Context, o GatewayOptions) (*Gateway, error) {
	if o.Binary == "" || o.Dir == "" {
		return nil, errors.New("start gateway: Binary and Dir are required")
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 5 * time.Minute
	}
	bin, err := filepath.Abs(o.Binary)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("gateway binary: %w (build it with `make build`)", err)
	}
	cfg := o.Config
	if cfg.Listen == "" {
		if cfg.Listen, err = freeAddr(); err != nil {
			return nil, err
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("gateway config: %w", err)
	}
	name := "gateway-" + strings.NewReplacer(":", "-", "[", "", "]", "").Replace(cfg.Listen)
	g := &Gateway{
		URL:        "http://" + cfg.Listen,
		ConfigPath: filepath.Join(o.Dir, name+".yaml"),
		LogPath:    filepath.Join(o.Dir, name+".log"),
		resources:  cfg.Cache.Resources,
		client:     &http.Client{Timeout: 5 * time.Second},
		done:       make(chan struct{}),
	}
	if err := WriteConfig(g.ConfigPath, cfg); err != nil {
		return nil, err
	}
	logFile, err := os.Create(g.LogPath)
	if err != nil {
		return nil, err
	}
	g.cmd = exec.Command(bin, "--config", g.ConfigPath)
	var out io.Writer = logFile
	if o.Output != nil {
		out = io.MultiWriter(logFile, o.Output)
	}
	g.cmd.Stdout, g.cmd.Stderr = out, out
	if o.GCTrace {
		g.cmd.Env = append(os.Environ(), "GODEBUG=gctrace=1")
	}
	// Its own process group (a terminal's Ctrl-C reaches only us, and we
	// stop it in order), and on Linux killed if we die.
	g.cmd.SysProcAttr = controlplane.ChildProcAttr(false)
	g.Started = time.Now()
	if err := g.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start gateway: %w", err)
	}
	g.PID = g.cmd.Process.Pid
	go func() {
		g.waitErr = g.cmd.Wait()
		logFile.Close()
		close(g.done)
	}()

	rctx, cancel := context.WithTimeout(ctx, o.ReadyTimeout)
	defer cancel()
	err = wait.PollUntilContextCancel(rctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if g.Exited() {
			return false, fmt.Errorf("gateway exited: %v; log:\n%s", g.waitErr, g.Tail(4096))
		}
		return g.CheckReady(ctx) == nil, nil
	})
	if err != nil {
		_ = g.Stop()
		return nil, fmt.Errorf("gateway not ready: %w", err)
	}
	g.Ready = time.Now()
	return g, nil
}

// CheckReady asks /readyz?verbose and returns nil when it answers 200
// and reports every informer of the config's Cache.Resources synced:
// /readyz can answer 200 before the configured informers have started
// (it judges only started ones).
func (g *Gateway) CheckReady(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.URL+"/readyz?verbose", nil)
	if err != nil {
		return err
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("readyz: %s: %s", resp.Status, bytes.TrimSpace(body))
	}
	for _, r := range g.resources {
		if !bytes.Contains(body, []byte("[+]informer "+r+" ok")) {
			return fmt.Errorf("readyz: informer %s not synced: %s", r, bytes.TrimSpace(body))
		}
	}
	return nil
}

// Metrics scrapes the gateway's /metrics.
func (g *Gateway) Metrics(ctx context.Context) (Metrics, error) {
	return ScrapeMetrics(ctx, g.client, g.URL+"/metrics")
}

// Exited reports whether the process has ended.
func (g *Gateway) Exited() bool {
	select {
	case <-g.done:
		return true
	default:
		return false
	}
}

// Err is how the process ended (nil for exit status 0). Call it once
// Exited reports true.
func (g *Gateway) Err() error {
	<-g.done
	return g.waitErr
}

// Stop sends SIGTERM, then SIGKILL after 20s, and waits for the process.
// It returns how the process ended, or that it had to be killed.
func (g *Gateway) Stop() error {
	if g.Exited() {
		return g.waitErr
	}
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
		return g.waitErr
	case <-time.After(20 * time.Second):
	}
	_ = g.cmd.Process.Kill()
	<-g.done
	return errors.New("gateway did not stop within 20s of SIGTERM")
}

// Tail returns the last n bytes of the gateway's output.
func (g *Gateway) Tail(n int) string {
	b, _ := os.ReadFile(g.LogPath)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(bytes.TrimSpace(b))
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// GC is one collection as the runtime's gctrace line reports it.
type GC struct {
	// Num numbers the collections from 1.
	Num int
	// Live is the heap marked live, Stacks the goroutine stacks scanned,
	// both in whole MiB as gctrace prints them.
	Live, Stacks int64
}

// gctraceLine matches a gctrace line: "gc 12 @3.456s 1%: ... ms cpu,
// 4->4->2 MB, 5 MB goal, 0 MB stacks, 0 MB globals, 2 P".
var gctraceLine = regexp.MustCompile(`(?m)^gc (\d+) @[^\n]*?, \d+->\d+->(\d+) MB, \d+ MB goal, (\d+) MB stacks`)

// LastGC returns the last collection in the gateway's log, if it was
// started with GatewayOptions.GCTrace and has collected.
func (g *Gateway) LastGC() (GC, bool) {
	b, err := os.ReadFile(g.LogPath)
	if err != nil {
		return GC{}, false
	}
	return lastGC(b)
}

// lastGC finds the last gctrace line in a log.
func lastGC(b []byte) (GC, bool) {
	m := gctraceLine.FindAllSubmatch(b, -1)
	if len(m) == 0 {
		return GC{}, false
	}
	last := m[len(m)-1]
	num, _ := strconv.Atoi(string(last[1]))
	live, _ := strconv.ParseInt(string(last[2]), 10, 64)
	stacks, _ := strconv.ParseInt(string(last[3]), 10, 64)
	return GC{Num: num, Live: live << 20, Stacks: stacks << 20}, true
}

// NextGC waits, reading the log every 100ms, for a collection after the
// one numbered after (0: any), and returns it; false if none came within
// timeout. The runtime collects at least every two minutes.
func (g *Gateway) NextGC(ctx context.Context, after int, timeout time.Duration) (GC, bool) {
	var gc GC
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		var found bool
		gc, found = g.LastGC()
		return found && gc.Num > after, nil
	})
	return gc, err == nil
}
