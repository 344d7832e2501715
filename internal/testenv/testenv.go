// Package testenv gives a package's integration tests a real kube-apiserver.
//
// A package opts in from its TestMain:
//
//	func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}) }
//
// The control plane (see package controlplane) starts lazily, on the
// first Get, as envtest's does: a run of the package's unit tests alone
// starts nothing. It is shared by the whole test binary and stopped after
// the tests; Main then checks for leaked goroutines the way
// goleak.VerifyTestMain does, whether or not it started.
//
// Under -short, Get skips the test that calls it (it needs etcd and
// kube-apiserver), so `go test -short ./...` is the unit tier. Otherwise
// missing binaries fail the test with instructions; tests are never
// skipped silently.
//
// Tests isolate themselves in a namespace of their own with
// Env.Namespace. Env.CreateCRD, Env.EnsureCRD and Env.DeleteCRD add and
// remove CustomResourceDefinitions and wait until kube-apiserver serves
// them, or no longer does.
package testenv

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
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
	// ExtraAPIServerFlags are passed to kube-apiserver (see
	// controlplane.Options).
	ExtraAPIServerFlags map[string]string
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

var (
	// opts is Main's, read by the first Get.
	opts Options
	// once starts the control plane on the first Get; env and envErr are
	// its result, closer what Main closes after the tests.
	once   sync.Once
	env    *Env
	envErr error
	closer interface{ CloseIdleConnections() }
)

// Main runs the package's tests, stops the control plane if one started,
// checks for leaked goroutines and exits. Call it from TestMain.
func Main(m *testing.M, o Options) {
	os.Exit(Run(m, o))
}

// Run is Main without the exit: it returns the exit code, for a TestMain
// that has its own cleanup to do afterwards.
func Run(m *testing.M, o Options) int {
	if o.Log == nil && os.Getenv("KUBEGATE_TEST_CONTROLPLANE_LOG") != "" {
		o.Log = os.Stderr
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 2 * time.Minute
	}
	opts = o

	code := m.Run()

	if env != nil {
		if err := env.CP.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: stop control plane: %v\n", err)
			code = max(code, 1)
		}
		closer.CloseIdleConnections()
	}
	if code == 0 {
		leakOpts := append([]goleak.Option{
			// klog starts its flush daemon when client-go is imported.
			goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		}, o.LeakOptions...)
		if err := goleak.Find(leakOpts...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: Errors on successful test run: %v\n", err)
			code = 1
		}
	}
	return code
}

// start starts the control plane and builds the admin clients.
func start() (*Env, interface{ CloseIdleConnections() }, error) {
	ctx, cancel := context.WithTimeout(context.Background(), opts.StartTimeout)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{
		Users: opts.Users, Log: opts.Log, ExtraAPIServerFlags: opts.ExtraAPIServerFlags,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("testenv: start control plane: %w", err)
	}
	e, hc, err := newEnv(cp)
	if err != nil {
		_ = cp.Stop()
		return nil, nil, fmt.Errorf("testenv: %w", err)
	}
	return e, hc, nil
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

// Get returns the package's shared environment, starting its control
// plane on the first call. Under -short it skips the test instead: the
// unit tier starts no control plane. It fails the test if the control
// plane cannot start (every later Get fails the same way) or if the
// package's TestMain does not call Main.
func Get(t testing.TB) *Env {
	t.Helper()
	SkipShort(t)
	if opts.StartTimeout == 0 {
		t.Fatal("testenv.Get: this package's TestMain must call testenv.Main")
	}
	once.Do(func() { env, closer, envErr = start() })
	if envErr != nil {
		t.Fatal(envErr)
	}
	return env
}

// SkipShort skips an integration test under -short: it needs a control
// plane, which the unit tier does not start. Get calls it; tests that
// start a control plane of their own call it first.
func SkipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: integration test (needs etcd and kube-apiserver)")
	}
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
