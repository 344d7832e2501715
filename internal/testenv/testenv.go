// Package testenv gives a package's integration tests a real kube-apiserver.
//
// A package opts in from its TestMain:
//
//	func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}) }
//
// Main starts one control plane (see package controlplane) for the whole
// test binary, runs the tests, stops it and then checks for leaked
// goroutines the way goleak.VerifyTestMain does. Tests reach it with Get
// and isolate themselves in a namespace of their own with Env.Namespace.
// Env.CreateCRD, Env.EnsureCRD and Env.DeleteCRD add and remove
// CustomResourceDefinitions and wait until kube-apiserver serves them, or
// no longer does.
// Missing binaries fail the run with instructions (Env.Kubectl fails the
// test that needs kubectl); tests are never skipped silently.
package testenv

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubegate/internal/controlplane"
)

// Options configures Main. The zero value is usable.
type Options struct {
	// Users are extra static-token users; see controlplane.User.
	Users []controlplane.User
	// Log receives etcd's and kube-apiserver's output. Default: none, or
	// os.Stderr when KUBEGATE_TEST_CONTROLPLANE_LOG is set.
	Log io.Writer
	// LeakOptions are passed to goleak after the control plane stopped,
	// in addition to ignoring klog's flush daemon.
	LeakOptions []goleak.Option
	// StartTimeout bounds starting the control plane. Default: 2 minutes.
	StartTimeout time.Duration
}

// Env is a package's shared control plane and admin clients. Tests must
// not stop or restart it; a test that injects faults starts its own
// controlplane.ControlPlane.
type Env struct {
	CP *controlplane.ControlPlane
	// Config is an admin (system:masters) config; Client and Dynamic use
	// it. Copy it with rest.CopyConfig before changing it.
	Config  *rest.Config
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
}

// env is set by Main before any test runs and never changes while tests
// run.
var env *Env

// Main starts a control plane, runs the package's tests, stops the control
// plane, checks for leaked goroutines and exits. Call it from TestMain.
func Main(m *testing.M, opts Options) {
	os.Exit(run(m, opts))
}

// Run is Main without the exit: it returns the exit code, for a TestMain
// that has its own cleanup to do afterwards.
func Run(m *testing.M, opts Options) int { return run(m, opts) }

func run(m *testing.M, opts Options) int {
	if opts.Log == nil && os.Getenv("KUBEGATE_TEST_CONTROLPLANE_LOG") != "" {
		opts.Log = os.Stderr
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.StartTimeout)
	cp, err := controlplane.Start(ctx, controlplane.Options{Users: opts.Users, Log: opts.Log})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: start control plane: %v\n", err)
		return 1
	}
	e, hc, err := newEnv(cp)
	if err != nil {
		cp.Stop()
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 1
	}
	env = e

	code := m.Run()

	if err := cp.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: stop control plane: %v\n", err)
		code = max(code, 1)
	}
	hc.CloseIdleConnections()
	if code == 0 {
		leakOpts := append([]goleak.Option{
			// klog starts its flush daemon when client-go is imported.
			goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		}, opts.LeakOptions...)
		if err := goleak.Find(leakOpts...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: Errors on successful test run: %v\n", err)
			code = 1
		}
	}
	return code
}

// newEnv builds the admin clients on one HTTP client, whose idle
// connections Main closes at the end.
func newEnv(cp *controlplane.ControlPlane) (*Env, interface{ CloseIdleConnections() }, error) {
	cfg := cp.AdminConfig()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("admin HTTP client: %w", err)
	}
	client, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, nil, fmt.Errorf("admin client: %w", err)
	}
	dyn, err := dynamic.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, nil, fmt.Errorf("admin dynamic client: %w", err)
	}
	return &Env{CP: cp, Config: cfg, Client: client, Dynamic: dyn}, hc, nil
}

// Get returns the package's shared environment. It fails the test if the
// package's TestMain does not call Main.
func Get(t testing.TB) *Env {
	t.Helper()
	if env == nil {
		t.Fatal("testenv.Get: this package's TestMain must call testenv.Main")
	}
	return env
}

// Kubectl returns the kubectl binary from the directory the control
// plane's binaries came from ($KUBEGATE_ASSETS, see
// controlplane.ResolveAssetsDir), where "make bins" builds it. Like a
// missing etcd or kube-apiserver, a missing kubectl fails the test with
// instructions; only under -short is the test skipped instead.
func (e *Env) Kubectl(t testing.TB) string {
	t.Helper()
	bin, err := e.CP.Binary(controlplane.KubectlBinary)
	if err != nil {
		if testing.Short() {
			t.Skipf("-short: %v", err)
		}
		t.Fatal(err)
	}
	return bin
}

var unsafeNameChars = regexp.MustCompile(`[^a-z0-9]+`)

// Namespace creates a namespace named after the test, with a random
// suffix, and deletes it when the test ends. Without a controller-manager
// the namespace then stays Terminating with its content, which no other
// test sees.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	base := strings.Trim(unsafeNameChars.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(base) > 40 {
		base = strings.TrimRight(base[:40], "-")
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "t-" + base + "-",
		Labels:       map[string]string{"kubegate.io/test": "true"},
	}}
	created, err := e.Client.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	name := created.Name
	t.Cleanup(func() {
		// t.Context is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := e.Client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete namespace %s: %v", name, err)
		}
	})
	return name
}
