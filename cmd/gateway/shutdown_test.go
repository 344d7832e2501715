package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"kubegate/internal/auth"
	"kubegate/internal/testenv"
)

// Figures of TestShutdownUnderLoad.
const (
	shutdownSockets = 40 // WebSocket subscribers
	shutdownWatches = 10 // HTTP watch streams
	shutdownBacklog = 40 // webhook events queued when SIGTERM arrives
	// The receiver takes this long per event once it accepts them, so the
	// backlog needs 8s: more than the webhook drain.
	receiverLatency = 200 * time.Millisecond
	// Below the default 15s, so the drain (half of it, at most 5s) must
	// follow it for the exit to come in time.
	shutdownTimeout = 4 * time.Second
	drainTimeout    = shutdownTimeout / 2
)

// slowReceiver is a webhook receiver that answers 503 until accept is
// called, then takes receiverLatency per event (a slow downstream) and
// answers 204. It records the config maps delivered and when the last
// request arrived.
type slowReceiver struct {
	srv       *httptest.Server
	accepting atomic.Bool

	// mu guards delivered and last.
	mu        sync.Mutex
	delivered map[string]bool
	last      time.Time
}

func newSlowReceiver(t *testing.T) *slowReceiver {
	r := &slowReceiver{delivered: map[string]bool{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.last = time.Now()
		r.mu.Unlock()
		if !r.accepting.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		select {
		case <-time.After(receiverLatency): // the downstream's own work
		case <-req.Context().Done():
			return
		}
		var ev struct {
			Data struct {
				Metadata struct{ Name string } `json:"metadata"`
			} `json:"data"`
		}
		_ = json.Unmarshal(body, &ev)
		r.mu.Lock()
		r.delivered[ev.Data.Metadata.Name] = true
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *slowReceiver) stats() (int, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.delivered), r.last
}

// subscriberEnd is how one WebSocket or watch stream ended.
type subscriberEnd struct {
	what string
	err  error
}

// TestShutdownUnderLoad sends SIGTERM to the binary while config map
// updates flow to WebSocket subscribers and HTTP watches and a webhook's
// receiver has a backlog it is slow to take: every socket gets close 1001,
// every watch ends cleanly (the chunked body is terminated, no reset), the
// webhook drain stops within its bound (half the shutdown timeout) with
// every queued event either delivered or counted as undelivered in the
// log, and the process exits 0 within its shutdown timeout.
func TestShutdownUnderLoad(t *testing.T) {
	env := testenv.Get(t)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := env.CP.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	secretPath := filepath.Join(dir, "secret")
	if err := os.WriteFile(secretPath, []byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), 0o600); err != nil {
		t.Fatal(err)
	}
	loadNS, hookNS := env.Namespace(t), env.Namespace(t)
	rcv := newSlowReceiver(t)
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(`shutdownTimeout: %s
webhooks:
- name: backlog
  url: %s
  resources: [{resource: configmaps, namespace: %s}]
  eventTypes: [added]
  secretFile: %s
  allowAddresses: [127.0.0.0/8]
  retry: {maxAttempts: 1000, initialBackoff: 100ms, maxBackoff: 200ms}
`, shutdownTimeout, rcv.srv.URL, hookNS, secretPath)), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	base := "http://" + addr
	g := startGateway(t, gatewayBinary(t), "--kubeconfig", kubeconfig, "--listen", addr, "--config", cfgPath,
		"--resources", "configmaps", "--log-format", "json")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		code, _, err := get(ctx, base+"/readyz")
		return err == nil && code == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("gateway never became ready: %v", err)
	}
	waitFor(t, g, "webhook started")
	began := time.Now()

	// The webhook's backlog: the receiver fails, so the first event is
	// retried and the rest wait behind it.
	cms := env.Client.CoreV1().ConfigMaps(hookNS)
	for i := range shutdownBacklog {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("queued-%02d", i)}}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	queue := regexp.MustCompile(`(?m)^kubegate_webhook_queue_length\{webhook="backlog"\} (\d+)$`)
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		_, body, err := getAs(ctx, base+"/metrics", env.Config.BearerToken)
		m := queue.FindStringSubmatch(body)
		return err == nil && m != nil && m[1] == strconv.Itoa(shutdownBacklog), nil
	}); err != nil {
		t.Fatalf("webhook queue never held the %d events", shutdownBacklog)
	}

	// Load: config maps in loadNS change continuously until the gateway
	// has exited.
	loadCtx, stopLoad := context.WithCancel(ctx)
	var loadWG sync.WaitGroup
	defer func() { stopLoad(); loadWG.Wait() }()
	for i := range 5 {
		name := fmt.Sprintf("load-%d", i)
		if _, err := env.Client.CoreV1().ConfigMaps(loadNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	loadWG.Add(1)
	go func() {
		defer loadWG.Done()
		// Paced, so the test measures the gateway and not a saturated
		// machine: about 50 changes a second, each fanned out to every
		// subscriber.
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-loadCtx.Done():
				return
			case <-tick.C:
			}
			patch := fmt.Appendf(nil, `{"data":{"n":"%d"}}`, n)
			_, _ = env.Client.CoreV1().ConfigMaps(loadNS).Patch(loadCtx, fmt.Sprintf("load-%d", n%5), types.MergePatchType, patch, metav1.PatchOptions{})
		}
	}()

	// Subscribers. Each reports once it has seen a live change, then how
	// it ended.
	live := make(chan struct{}, shutdownSockets+shutdownWatches)
	ends := make(chan subscriberEnd, shutdownSockets+shutdownWatches)
	token := env.Config.BearerToken
	var subs sync.WaitGroup
	for i := range shutdownSockets {
		c, _, err := websocket.Dial(ctx, "ws://"+addr+"/ws", &websocket.DialOptions{
			Subprotocols: []string{auth.BearerProtocolPrefix + base64.RawURLEncoding.EncodeToString([]byte(token)), "kubegate.v1"},
		})
		if err != nil {
			t.Fatalf("socket %d: %v", i, err)
		}
		c.SetReadLimit(-1)
		sub := `{"type":"subscribe","id":"load","resource":"configmaps","namespace":"` + loadNS + `"}`
		if err := c.Write(ctx, websocket.MessageText, []byte(sub)); err != nil {
			t.Fatal(err)
		}
		subs.Add(1)
		go func() {
			defer subs.Done()
			defer c.CloseNow()
			seen := false
			for {
				_, data, err := c.Read(ctx)
				if err != nil {
					ends <- subscriberEnd{fmt.Sprintf("socket %d", i), err}
					return
				}
				if !seen && strings.Contains(string(data), `"MODIFIED"`) {
					seen = true
					live <- struct{}{}
				}
			}
		}()
	}
	for i := range shutdownWatches {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/namespaces/"+loadNS+"/configmaps?watch=1", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("watch %d: %s", i, resp.Status)
		}
		subs.Add(1)
		go func() {
			defer subs.Done()
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(nil, 1<<20)
			seen := false
			for sc.Scan() {
				var ev struct{ Type string }
				if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
					ends <- subscriberEnd{fmt.Sprintf("watch %d", i), fmt.Errorf("bad event %q: %w", sc.Bytes(), err)}
					return
				}
				if !seen && ev.Type == "MODIFIED" {
					seen = true
					live <- struct{}{}
				}
			}
			// Scan ends without error only at a clean end of the body.
			ends <- subscriberEnd{fmt.Sprintf("watch %d", i), sc.Err()}
		}()
	}
	for range shutdownSockets + shutdownWatches {
		select {
		case <-live:
		case <-ctx.Done():
			t.Fatal("not every subscriber saw a live change")
		}
	}

	t.Logf("backlog queued, %d subscribers live after %s", shutdownSockets+shutdownWatches, time.Since(began).Round(10*time.Millisecond))

	// SIGTERM while updates flow; the receiver starts taking events, slowly.
	rcv.accepting.Store(true)
	sigterm := time.Now()
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var exitErr error
	select {
	case exitErr = <-g.done:
		g.done <- exitErr // for Cleanup
	case <-ctx.Done():
		t.Fatal("gateway did not exit after SIGTERM")
	}
	exited := time.Since(sigterm)
	stopLoad()
	subs.Wait()
	close(ends)

	if exitErr != nil {
		t.Errorf("gateway exited with %v after SIGTERM", exitErr)
	}
	if exited > shutdownTimeout {
		t.Errorf("gateway exited %s after SIGTERM, want within shutdownTimeout %s", exited, shutdownTimeout)
	}
	for e := range ends {
		if strings.HasPrefix(e.what, "socket") {
			if code := websocket.CloseStatus(e.err); code != websocket.StatusGoingAway {
				t.Errorf("%s ended with %v, want close 1001", e.what, e.err)
			}
		} else if e.err != nil {
			t.Errorf("%s did not end cleanly: %v", e.what, e.err)
		}
	}

	delivered, last := rcv.stats()
	undelivered := undeliveredAtShutdown(t, g.out.String())
	t.Logf("exit %s after SIGTERM; webhook: %d of %d queued events delivered during the drain, %d reported undelivered; last receiver request %s after SIGTERM",
		exited.Round(10*time.Millisecond), delivered, shutdownBacklog, undelivered, last.Sub(sigterm).Round(10*time.Millisecond))
	if d := last.Sub(sigterm); d > drainTimeout+time.Second {
		t.Errorf("receiver got a request %s after SIGTERM, want the drain to stop within %s", d, drainTimeout)
	}
	if delivered == 0 || undelivered == 0 {
		t.Errorf("delivered %d, undelivered %d: want a drain that delivers some and is cut off", delivered, undelivered)
	}
	// Every queued event is delivered or counted; one attempt cut off by
	// the drain deadline may have reached the receiver and be counted too
	// (delivery is at least once).
	if sum := delivered + undelivered; sum < shutdownBacklog || sum > shutdownBacklog+1 {
		t.Errorf("delivered %d + undelivered %d = %d, want %d (or one more)", delivered, undelivered, sum, shutdownBacklog)
	}
}

// undeliveredAtShutdown sums the webhook's "events not delivered at
// shutdown" log lines.
func undeliveredAtShutdown(t *testing.T, out string) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(out, "\n") {
		var l struct {
			Msg         string `json:"msg"`
			Undelivered int    `json:"undelivered"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "events not delivered at shutdown" {
			n += l.Undelivered
		}
	}
	if n == 0 && !strings.Contains(out, `"stopped"`) {
		t.Errorf("gateway did not log its stop:\n%s", out)
	}
	return n
}
