package soak

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// BuildGateway builds cmd/gateway into dir and returns the binary's path.
// race builds it with the race detector.
func BuildGateway(ctx context.Context, dir string, race bool) (string, error) {
	bin := dir + "/gateway"
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	args = append(args, "kubegate/cmd/gateway")
	out, err := exec.CommandContext(ctx, "go", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build gateway: %v\n%s", err, out)
	}
	return bin, nil
}

// gateway is a running gateway process. Its output goes to out, and its
// warning and error lines also to warnings; the goroutine started by
// startGateway waits for the process and closes done.
type gateway struct {
	cmd      *exec.Cmd
	base     string // http://host:port
	out      *tailBuffer
	warnings *warnLines
	done     chan struct{}
	err      error // set before done is closed
}

func startGateway(bin string, args ...string) (*gateway, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	g := &gateway{base: "http://" + addr, out: &tailBuffer{max: 64 << 10}, warnings: &warnLines{max: 1000}, done: make(chan struct{})}
	g.cmd = exec.Command(bin, append([]string{"--listen", addr}, args...)...)
	w := io.MultiWriter(g.out, g.warnings)
	g.cmd.Stdout, g.cmd.Stderr = w, w
	if err := g.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start gateway: %w", err)
	}
	go func() {
		g.err = g.cmd.Wait()
		close(g.done)
	}()
	return g, nil
}

// stop sends SIGTERM and waits up to timeout, then kills.
func (g *gateway) stop(timeout time.Duration) error {
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-g.done:
		return g.err
	case <-t.C:
		_ = g.cmd.Process.Kill()
		<-g.done
		return fmt.Errorf("gateway did not exit within %s of SIGTERM", timeout)
	}
}

func (g *gateway) exited() bool {
	select {
	case <-g.done:
		return true
	default:
		return false
	}
}

// rss reads the process's resident set size from /proc (Linux).
func (g *gateway) rss() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", g.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) < 1 {
				break
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS in /proc status")
}

// metrics is a scrape of /metrics: every sample's value summed per metric
// name (over all label sets), plus the values per label set in byLabel.
type metrics struct {
	sum     map[string]float64
	byLabel map[string]float64 // `name{labels}` as written by the server
}

func (m metrics) get(name string) float64 { return m.sum[name] }

// getLabel returns the sum of name's samples whose label set contains
// label (for example `reason="Overflow"`).
func (m metrics) getLabel(name, label string) float64 {
	var v float64
	for k, x := range m.byLabel {
		if strings.HasPrefix(k, name+"{") && strings.Contains(k, label) {
			v += x
		}
	}
	return v
}

// parseMetrics reads the Prometheus text format.
func parseMetrics(r io.Reader) (metrics, error) {
	m := metrics{sum: map[string]float64{}, byLabel: map[string]float64{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		// name{labels} value [timestamp]; label values may hold spaces.
		key := line
		rest := ""
		if i := strings.LastIndexByte(line, '}'); i >= 0 {
			key, rest = line[:i+1], line[i+1:]
		} else if i := strings.IndexByte(line, ' '); i >= 0 {
			key, rest = line[:i], line[i:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return m, fmt.Errorf("metrics: no value in %q", line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return m, fmt.Errorf("metrics: %q: %w", line, err)
		}
		name := key
		if i := strings.IndexByte(key, '{'); i >= 0 {
			name = key[:i]
		}
		m.sum[name] += v
		m.byLabel[key] = v
	}
	return m, sc.Err()
}

func (g *gateway) scrape(ctx context.Context, hc *http.Client) (metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.base+"/metrics", nil)
	if err != nil {
		return metrics{}, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return metrics{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return metrics{}, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return parseMetrics(resp.Body)
}

func (g *gateway) ready(ctx context.Context, hc *http.Client) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.base+"/readyz?verbose", nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("readyz: %s: %s", resp.Status, bytes.TrimSpace(body))
	}
	return nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex // guards buf
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// warnLines keeps the first max lines of JSON log output whose level is
// warn or above, for the report.
type warnLines struct {
	mu      sync.Mutex // guards the fields below
	max     int
	partial []byte
	lines   []string
	dropped int
}

func (w *warnLines) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		line := w.partial[:i]
		if bytes.Contains(line, []byte(`"level":"warn"`)) || bytes.Contains(line, []byte(`"level":"error"`)) {
			if len(w.lines) < w.max {
				w.lines = append(w.lines, string(line))
			} else {
				w.dropped++
			}
		}
		w.partial = append(w.partial[:0], w.partial[i+1:]...)
	}
	return len(p), nil
}

func (w *warnLines) get() ([]string, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.lines...), w.dropped
}
