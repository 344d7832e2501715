package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"kubegate/internal/controlplane"
	"kubegate/internal/testenv"
)

func TestMain(m *testing.M) {
	code := testenv.Run(m, testenv.Options{Users: []controlplane.User{{Name: tierUser}}})
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	binDir    string // set once by gatewayBinary; TestMain removes it
	binPath   string
	buildErr  error
)

// gatewayBinary builds the gateway once per test binary run: a link takes
// seconds, many more on a busy machine.
func gatewayBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "kubegate-gateway-test-"); buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "gateway")
		if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// gatewayProcess is a running gateway binary with its output captured.
type gatewayProcess struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan error
	base string
}

func startGateway(t *testing.T, bin string, args ...string) *gatewayProcess {
	t.Helper()
	g := &gatewayProcess{out: &syncBuffer{}, done: make(chan error, 1)}
	g.cmd = exec.Command(bin, args...)
	g.cmd.Stdout, g.cmd.Stderr = g.out, g.out
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { g.done <- g.cmd.Wait() }()
	t.Cleanup(func() {
		_ = g.cmd.Process.Kill()
		<-g.done
		if t.Failed() {
			t.Logf("gateway output:\n%s", g.out.String())
		}
	})
	return g
}

func get(ctx context.Context, url string) (int, string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// TestGatewaySeesClusterObjects runs the real binary against the real
// apiserver: it becomes ready, sees an object created with client-go, and
// exits cleanly on SIGTERM.
func TestGatewaySeesClusterObjects(t *testing.T) {
	env := testenv.Get(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.CP.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	addr := freeAddr(t)
	g := startGateway(t, gatewayBinary(t), "--kubeconfig", kubeconfig, "--listen", addr, "--resources", "configmaps", "--log-format", "json")
	base := "http://" + addr
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// /readyz?verbose counts objects for a caller who may read /metrics:
	// the admin.
	objects := regexp.MustCompile(`informer configmaps ok \((\d+) objects\)`)
	countObjects := func() (string, error) {
		code, body, err := getAs(ctx, base+"/readyz?verbose", env.Config.BearerToken)
		if err != nil || code != http.StatusOK {
			return "", fmt.Errorf("readyz: %d %v %s", code, err, body)
		}
		m := objects.FindStringSubmatch(body)
		if m == nil {
			return "", fmt.Errorf("readyz has no configmaps line: %s", body)
		}
		return m[1], nil
	}
	var before string
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		n, err := countObjects()
		before = n
		return err == nil, nil
	}); err != nil {
		t.Fatalf("gateway never became ready: %v", err)
	}
	if code, body, err := get(ctx, base+"/healthz"); err != nil || code != 200 || body != "ok\n" {
		t.Fatalf("healthz = %d %q %v", code, body, err)
	}
	// The dashboard is embedded and served at /.
	if code, body, err := get(ctx, base+"/"); err != nil || code != 200 || !strings.Contains(body, "<title>kubegate</title>") {
		t.Fatalf("GET / = %d %v, want the dashboard: %.200s", code, err, body)
	}

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "seen-by-gateway"}, Data: map[string]string{"k": "v"}}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		n, err := countObjects()
		return err == nil && n != before, nil
	}); err != nil {
		t.Fatalf("gateway never saw the new configmap (had %s objects): %v", before, err)
	}
	// The REST API serves it from the cache to an authenticated caller.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/namespaces/"+ns+"/configmaps/seen-by-gateway", nil)
	req.Header.Set("Authorization", "Bearer "+env.Config.BearerToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"name":"seen-by-gateway"`) {
		t.Fatalf("REST get: %d %s", resp.StatusCode, body)
	}

	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-g.done:
		g.done <- err // for Cleanup
		if err != nil {
			t.Fatalf("gateway exited with %v after SIGTERM", err)
		}
	case <-ctx.Done():
		t.Fatal("gateway did not exit after SIGTERM")
	}
}

// TestStartupErrors: bad input gives one line naming cause and fix, and a
// non-zero exit, without hanging.
func TestStartupErrors(t *testing.T) {
	env := testenv.Get(t)
	bin := gatewayBinary(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.CP.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dead := filepath.Join(t.TempDir(), "dead-kubeconfig")
	if err := os.WriteFile(dead, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://%s"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, freeAddr(t))), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"bad flag", []string{"--no-such-flag"}, 2, "see gateway --help"},
		{"bad log level", []string{"--log-level", "loud"}, 2, "log"},
		{"missing kubeconfig", []string{"--kubeconfig", "/nonexistent/kubeconfig"}, 1, "/nonexistent/kubeconfig"},
		{"unreachable apiserver", []string{"--kubeconfig", dead}, 1, "cannot reach the apiserver"},
		{"port in use", []string{"--kubeconfig", kubeconfig, "--listen", busy.Addr().String()}, 1, "--listen"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, tc.args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			code := cmd.ProcessState.ExitCode()
			if ctx.Err() != nil {
				t.Fatalf("hung: %s", stderr.String())
			}
			if err == nil || code != tc.code {
				t.Fatalf("exit code %d (%v), want %d; stderr:\n%s", code, err, tc.code, stderr.String())
			}
			last := lastLine(stderr.String())
			if !strings.Contains(last, tc.want) {
				t.Fatalf("last stderr line %q does not mention %q", last, tc.want)
			}
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func TestHelp(t *testing.T) {
	out, err := exec.Command(gatewayBinary(t), "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("--help: %v\n%s", err, out)
	}
	for _, flag := range []string{"-kubeconfig", "-listen", "-config", "-log-level", "-log-format"} {
		if !bytes.Contains(out, []byte(flag)) {
			t.Errorf("--help does not document %s:\n%s", flag, out)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the process's writers and the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
