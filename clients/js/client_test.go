package jsclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"kubegate/internal/config"
	"kubegate/internal/controlplane"
	"kubegate/internal/gateway"
	"kubegate/internal/gateway/gatewaytest"
	"kubegate/internal/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Users: []controlplane.User{{Name: "alice"}}})
}

// history is the gateway's history per resource: short, so that the node
// tests can outrun it and get a RESET.
const history = 30

// startGateway runs the gateway with token authentication (TokenReview
// against the test apiserver) and every read allowed until the test
// ends, and returns its base URL.
func startGateway(t *testing.T) string {
	t.Helper()
	cfg := gatewaytest.Config()
	cfg.Auth.Authz = "always-allow"
	cfg.Cache.HistoryEvents = history
	cfg.ShutdownTimeout = config.Duration(5 * time.Second)
	return gatewaytest.Start(t, cfg, gateway.Options{}).URL()
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

var update = flag.Bool("update", false, "rewrite test/testdata/human-duration.json")

// humanDurationFixture is the node tests' reference for humanDuration:
// apimachinery's duration.HumanDuration of durations around each of its
// boundaries.
const humanDurationFixture = "test/testdata/human-duration.json"

// TestHumanDurationFixture checks that the fixture holds what
// duration.HumanDuration says today (go test -run HumanDuration -update
// rewrites it).
func TestHumanDurationFixture(t *testing.T) {
	const (
		s = time.Second
		m = time.Minute
		h = time.Hour
		d = 24 * h
		y = 365 * d
	)
	type sample struct {
		MS   int64  `json:"ms"`
		Text string `json:"text"`
	}
	var cases []sample
	for _, dur := range []time.Duration{
		-3 * s, -2*s - time.Millisecond, -2 * s, -1999 * time.Millisecond, -1500 * time.Millisecond, -s, -time.Millisecond,
		0, 999 * time.Millisecond, s, 59 * s, 2*m - time.Millisecond, 2 * m, 2*m + s, 3*m + 12*s, 9*m + 59*s + 999*time.Millisecond,
		10 * m, 10*m + 30*s, 3*h - time.Millisecond, 3 * h, 5 * h, 7*h + 59*m, 8*h - time.Millisecond, 8 * h, 47*h + 59*m,
		48 * h, 49 * h, 2*d + 3*h, 8*d - time.Millisecond, 8 * d, 40 * d, 2*y - time.Millisecond, 2 * y, 3*y + 12*d,
		8*y - time.Millisecond, 8 * y, 20*y + 100*d,
	} {
		cases = append(cases, sample{dur.Milliseconds(), duration.HumanDuration(dur)})
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(cases); err != nil {
		t.Fatal(err)
	}
	want := buf.Bytes()
	if *update {
		if err := os.WriteFile(humanDurationFixture, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(humanDurationFixture)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s is not what duration.HumanDuration says (%v); run go test ./clients/js/ -run HumanDuration -update", humanDurationFixture, err)
	}
}
