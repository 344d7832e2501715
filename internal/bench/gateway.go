package bench

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
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"kubegate/internal/controlplane"
)

// GatewayOptions configures StartGateway.
type GatewayOptions struct {
	// Binary is the gateway executable. Required.
	Binary string
	// Kubeconfig is the file the gateway reads to reach kube-apiserver.
	// Required.
	Kubeconfig string
	// Resources are cached at start and gate readiness. Default pods and
	// configmaps.
	Resources []string
	// Dir holds the config file and the gateway's log. Required.
	Dir string
	// ReadyTimeout bounds the wait for /readyz. Default 5m (a cold start of
	// 100k Pods takes a while on two cores).
	ReadyTimeout time.Duration
	// MinResync, when set, is the gateway's cache.minResync. Default: the
	// gateway's own (5s).
	MinResync time.Duration
	// GCTrace runs the gateway with GODEBUG=gctrace=1, so that its log
	// has a line per collection, with the heap it found live
	// (Gateway.LastGC).
	GCTrace bool
}

// Gateway is a running gateway subprocess.
//
// One goroutine waits for the process and closes done; Stop returns after
// it has.
type Gateway struct {
	URL     string // http://127.0.0.1:<port>
	PID     int
	Started time.Time
	// Ready is when /readyz first answered 200.
	Ready time.Time

	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	waitErr error // written before done is closed
}

// gatewayConfig lifts every per-client limit: the benchmark opens
// thousands of sockets from one address as one anonymous user, which the
// defaults (100 sockets per client, 50 requests/s per user) would refuse.
// Authentication is off (loopback only) and authorization always allows;
// kube-apiserver's arm uses a system:masters token, which its RBAC also
// allows without a review, so neither side pays for authorization.
const gatewayConfig = `kubeconfig: %q
listen: %q
log: {level: warn, format: json}
cache:
  resources: [%s]%s
websocket:
  maxSockets: 1000000
  maxSocketsPerClient: 1000000
  maxSubscriptionsPerSocket: 10000
  subscribeRate: 1000000
  subscribeBurst: 1000000
auth:
  authn: none
  authz: always-allow
  userQPS: 0
  userMaxInflight: 0
`

// StartGateway starts the gateway binary and waits until /readyz answers.
func StartGateway(ctx context.Context, o GatewayOptions) (*Gateway, error) {
	if o.Binary == "" || o.Kubeconfig == "" || o.Dir == "" {
		return nil, errors.New("start gateway: Binary, Kubeconfig and Dir are required")
	}
	if len(o.Resources) == 0 {
		o.Resources = []string{"pods", "configmaps"}
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
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(o.Dir, "gateway-"+strings.ReplaceAll(addr, ":", "-")+".yaml")
	minResync := ""
	if o.MinResync > 0 {
		minResync = "\n  minResync: " + o.MinResync.String()
	}
	cfg := fmt.Sprintf(gatewayConfig, o.Kubeconfig, addr, strings.Join(o.Resources, ", "), minResync)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	logPath := strings.TrimSuffix(cfgPath, ".yaml") + ".log"
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--config", cfgPath)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if o.GCTrace {
		cmd.Env = append(os.Environ(), "GODEBUG=gctrace=1")
	}
	// Its own process group (a terminal's Ctrl-C reaches only us, and we
	// stop it in order), and on Linux killed if we die.
	cmd.SysProcAttr = controlplane.ChildProcAttr(false)
	g := &Gateway{URL: "http://" + addr, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	g.Started = time.Now()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start gateway: %w", err)
	}
	g.PID = cmd.Process.Pid
	go func() {
		g.waitErr = cmd.Wait()
		logFile.Close()
		close(g.done)
	}()

	rctx, cancel := context.WithTimeout(ctx, o.ReadyTimeout)
	defer cancel()
	client := &http.Client{Timeout: 5 * time.Second}
	err = wait.PollUntilContextCancel(rctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case <-g.done:
			return false, fmt.Errorf("gateway exited: %v; log:\n%s", g.waitErr, g.tail())
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.URL+"/readyz?verbose", nil)
		resp, err := client.Do(req)
		if err != nil {
			return false, nil
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return false, nil
		}
		// /readyz can answer 200 before the configured informers have
		// started (it judges only started ones), so wait for each by name.
		for _, r := range o.Resources {
			if !bytes.Contains(body, []byte("[+]informer "+r+" ok")) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		g.Stop()
		return nil, fmt.Errorf("gateway not ready: %w", err)
	}
	g.Ready = time.Now()
	return g, nil
}

// Stop sends SIGTERM, then SIGKILL after 20s, and waits for the process.
func (g *Gateway) Stop() error {
	select {
	case <-g.done:
		return nil
	default:
	}
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
		return nil
	case <-time.After(20 * time.Second):
	}
	_ = g.cmd.Process.Kill()
	<-g.done
	return errors.New("gateway did not stop within 20s of SIGTERM")
}

func (g *Gateway) tail() string {
	b, _ := os.ReadFile(g.logPath)
	if len(b) > 4096 {
		b = b[len(b)-4096:]
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
	b, err := os.ReadFile(g.logPath)
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

// NextGC waits, polling the log, for a collection after the one
// numbered after (0: any), and returns it; false if none came within
// timeout. The runtime collects at least every two minutes.
func (g *Gateway) NextGC(ctx context.Context, after int, timeout time.Duration) (GC, bool) {
	var gc GC
	ok := waitForEvery(ctx, timeout, 100*time.Millisecond, func() bool {
		var found bool
		gc, found = g.LastGC()
		return found && gc.Num > after
	})
	return gc, ok
}
