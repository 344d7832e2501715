package jsclient_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"kubegate/internal/auth"
	"kubegate/internal/controlplane"
	httpapi "kubegate/internal/http"
	"kubegate/internal/informer"
	"kubegate/internal/testenv"
	"kubegate/internal/ws"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Users: []controlplane.User{{Name: "alice"}}})
}

// history is the gateway's history per resource: short, so that the node
// tests can outrun it and get a RESET.
const history = 30

// startGateway runs an informer.Manager, the WebSocket server and the HTTP
// API with token authentication (TokenReview against the test apiserver)
// until the test ends, and returns the gateway's base URL.
func startGateway(t *testing.T) string {
	t.Helper()
	env := testenv.Get(t)
	reg := prometheus.NewRegistry()
	mgr, err := informer.New(informer.Options{Config: env.Config, Logger: zaptest.NewLogger(t).Named("informer"), Registerer: reg, HistoryEvents: history})
	if err != nil {
		t.Fatal(err)
	}
	wsServer, err := ws.New(ws.Options{Manager: mgr, Logger: zaptest.NewLogger(t).Named("ws"), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := auth.NewTokenReview(auth.TokenReviewOptions{Client: env.Client})
	if err != nil {
		t.Fatal(err)
	}
	authn, err := auth.NewBearer(auth.BearerOptions{Tokens: tr})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := httpapi.New(httpapi.Options{Manager: mgr, Listener: ln, Registry: reg, Logger: zaptest.NewLogger(t).Named("http"),
		WebSocket: wsServer, Authenticator: authn, ShutdownTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for name, start := range map[string]func(context.Context) error{"manager": mgr.Start, "http": srv.Start, "ws": wsServer.Start} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := start(ctx); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}()
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return "http://" + ln.Addr().String()
}

// nodeTools finds node ($NODE overrides) and Debian's ws package ($NODE_WS
// names another copy's directory), which `make node` installs. Without
// them the test fails, except under -short where it is skipped. It returns
// node's path and the directory to put on NODE_PATH.
func nodeTools(t *testing.T) (node, nodePath string) {
	t.Helper()
	missing := func(msg string) {
		t.Helper()
		msg += " (run `make node`, which installs Debian's nodejs and node-ws)"
		if testing.Short() {
			t.Skip(msg)
		}
		t.Fatal(msg)
	}
	name := os.Getenv("NODE")
	if name == "" {
		name = "node"
	}
	node, err := exec.LookPath(name)
	if err != nil {
		missing(fmt.Sprintf("node not found as %s (or set $NODE): %v", name, err))
	}
	wsDir := os.Getenv("NODE_WS")
	if wsDir == "" {
		wsDir = "/usr/share/nodejs/ws"
	}
	if _, err := os.Stat(filepath.Join(wsDir, "package.json")); err != nil {
		missing(fmt.Sprintf("the ws package is not at %s (or set $NODE_WS to its directory): %v", wsDir, err))
	}
	return node, filepath.Dir(wsDir)
}

var tapCount = regexp.MustCompile(`(?m)^# (pass|fail|cancelled|skipped|todo) (\d+)$`)

// TestNode runs the client's node tests (test/*.test.js): the unit tests,
// and the tests against a gateway with token authentication on the test
// apiserver. Every node test must pass; a skipped one fails the run.
func TestNode(t *testing.T) {
	node, nodePath := nodeTools(t)
	env := testenv.Get(t)
	base := startGateway(t)
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, env.Config.CAData, 0o600); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("test/*.test.js")
	if err != nil || len(files) == 0 {
		t.Fatalf("no node tests in test/ (%v)", err)
	}
	if p := os.Getenv("NODE_PATH"); p != "" {
		nodePath += string(os.PathListSeparator) + p
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"--test", "--test-reporter=tap"}, files...)...)
	cmd.Env = append(os.Environ(),
		"KUBEGATE_TEST_GATEWAY="+base,
		"KUBEGATE_TEST_TOKEN="+env.CP.UserConfig("alice").BearerToken,
		"KUBEGATE_TEST_APISERVER="+env.Config.Host,
		"KUBEGATE_TEST_ADMIN_TOKEN="+env.Config.BearerToken,
		"KUBEGATE_TEST_HISTORY="+strconv.Itoa(history),
		"NODE_EXTRA_CA_CERTS="+ca,
		"NODE_PATH="+nodePath,
	)
	out, err := cmd.CombinedOutput()
	counts := map[string]int{}
	for _, m := range tapCount.FindAllStringSubmatch(string(out), -1) {
		counts[m[1]], _ = strconv.Atoi(m[2])
	}
	t.Logf("node tests: %d passed, %d failed, %d skipped", counts["pass"], counts["fail"], counts["skipped"])
	if err != nil || counts["pass"] == 0 || counts["fail"]+counts["cancelled"]+counts["skipped"]+counts["todo"] != 0 {
		t.Fatalf("node --test: %v, counts %v; output:\n%s", err, counts, indent(out))
	}
	if testing.Verbose() {
		t.Logf("output:\n%s", indent(out))
	}
}

func indent(b []byte) string {
	return "\t" + strings.ReplaceAll(strings.TrimRight(string(b), "\n"), "\n", "\n\t")
}
