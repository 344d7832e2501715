package informer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubegate/internal/controlplane"
	"kubegate/internal/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Users: []controlplane.User{{Name: "nobody"}}})
}

// startManager runs a Manager against the test apiserver until the test ends.
func startManager(t *testing.T, cfg *rest.Config, mod func(*Options)) *Manager {
	t.Helper()
	opts := Options{Config: cfg, Logger: zaptest.NewLogger(t)}
	if mod != nil {
		mod(&opts)
	}
	m, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
	return m
}

func syncedResource(t *testing.T, m *Manager, name string) *Resource {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := m.Resource(ctx, name)
	if err != nil {
		t.Fatalf("Resource(%q): %v", name, err)
	}
	if err := r.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	return r
}

// collector gathers a listener's notifications as the consumer would:
// woken by the channel, popping everything pending.
type collector struct {
	l    *Listener
	wake chan struct{}
	got  []Notification
}

func listen(t *testing.T, r *Resource, opts ListenerOptions) *collector {
	t.Helper()
	c := &collector{wake: make(chan struct{}, 1)}
	opts.Wake = c.wake
	l, err := r.AddListener(opts)
	if err != nil {
		t.Fatalf("AddListener: %v", err)
	}
	c.l = l
	t.Cleanup(l.Stop)
	return c
}

// until pops until cond holds or 30s pass (a failure bound, not a delay).
func (c *collector) until(t *testing.T, what string, cond func([]Notification) bool) []Notification {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for !cond(c.got) {
		select {
		case <-c.wake:
			c.got = c.l.Pop(c.got)
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s; got %v", what, seen(c.got))
		}
	}
	return c.got
}

func changesOf(ns []Notification, name string) []string {
	var out []string
	for _, n := range ns {
		if n.Object != nil && n.Object.Name == name && n.Type != Sync {
			out = append(out, n.Type.String())
		}
	}
	return out
}

func hasEnd(ns []Notification) bool {
	return slices.ContainsFunc(ns, func(n Notification) bool { return n.Type == EndOfSnapshot })
}

func TestResolveLikeKubectl(t *testing.T) {
	env := testenv.Get(t)
	m := startManager(t, env.Config, func(o *Options) { o.DiscoveryRefreshInterval = time.Millisecond })
	ctx := context.Background()
	for name, want := range map[string]string{
		"pods":                "/v1, Resource=pods",
		"po":                  "/v1, Resource=pods",
		"Pod":                 "/v1, Resource=pods",
		"deploy":              "apps/v1, Resource=deployments",
		"deployments.apps":    "apps/v1, Resource=deployments",
		"deployments.v1.apps": "apps/v1, Resource=deployments",
		"cm":                  "/v1, Resource=configmaps",
	} {
		info, err := m.Resolve(ctx, name)
		if err != nil {
			t.Errorf("Resolve(%q): %v", name, err)
			continue
		}
		if got := info.GVR.String(); got != want {
			t.Errorf("Resolve(%q) = %s, want %s", name, got, want)
		}
	}
	for _, bad := range []string{"nosuchthing", "pods/status", "", "deployments.v9.apps"} {
		var ue *UnknownResourceError
		if _, err := m.Resolve(ctx, bad); !errors.As(err, &ue) {
			t.Errorf("Resolve(%q) err = %v, want UnknownResourceError", bad, err)
		}
	}

	// A CRD created after start resolves by plural and short name.
	gizmos := testenv.NewCRD("test.kubegate.io", "gizmos", "Gizmo")
	if err := unstructured.SetNestedStringSlice(gizmos.Object, []string{"gz"}, "spec", "names", "shortNames"); err != nil {
		t.Fatal(err)
	}
	env.CreateCRD(t, gizmos)
	for _, name := range []string{"gizmos", "gz", "gizmos.test.kubegate.io"} {
		info, err := m.Resolve(ctx, name)
		if err != nil {
			t.Fatalf("Resolve(%q) after CRD creation: %v", name, err)
		}
		if info.GVR.Resource != "gizmos" || !info.Namespaced {
			t.Fatalf("Resolve(%q) = %+v", name, info.GVR)
		}
	}
}

func TestListenersSeeExactOrderedChanges(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	other := env.Namespace(t)
	m := startManager(t, env.Config, nil)
	cms := env.Client.CoreV1().ConfigMaps(ns)
	ctx := context.Background()
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pre", Labels: map[string]string{"app": "web"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := syncedResource(t, m, "configmaps")
	info := r.Info
	webFilter, err := ParseFilter(info, ns, "app=web", "")
	if err != nil {
		t.Fatal(err)
	}
	all := listen(t, r, ListenerOptions{SendInitialEvents: true, Filter: Filter{Namespace: ns}})
	web := listen(t, r, ListenerOptions{SendInitialEvents: true, Filter: webFilter})
	byName, _ := ParseFilter(info, "", "", "metadata.name=x")
	named := listen(t, r, ListenerOptions{Filter: byName})
	all.until(t, "snapshot", hasEnd)
	web.until(t, "snapshot", hasEnd)

	x := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: map[string]string{"app": "web"}}}
	x, err = cms.Create(ctx, x, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		x.Data = map[string]string{"i": fmt.Sprint(i)}
		if x, err = cms.Update(ctx, x, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	x.Labels = map[string]string{"app": "db"}
	if _, err = cms.Update(ctx, x, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "x", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// A change elsewhere that only the cluster-wide name filter sees.
	if _, err := env.Client.CoreV1().ConfigMaps(other).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	got := all.until(t, "delete of x", func(ns []Notification) bool { return slices.Contains(changesOf(ns, "x"), "DELETED") })
	if diff := cmp.Diff([]string{"ADDED", "MODIFIED", "MODIFIED", "MODIFIED", "MODIFIED", "DELETED"}, changesOf(got, "x")); diff != "" {
		t.Fatalf("namespace listener (-want +got):\n%s", diff)
	}
	if !slices.Contains(changesOf(got, "pre"), "ADDED") {
		t.Fatalf("snapshot lacks the pre-existing object: %v", seen(got))
	}
	if err := checkOrder(got, true); err != nil {
		t.Fatalf("namespace listener: %v: %v", err, seen(got))
	}
	// The label filter sees x until its label moves away, which it learns
	// as a delete (as from the apiserver's watch); it is not told about the
	// real delete, which it does not match.
	gotWeb := web.until(t, "x leaving the selector", func(ns []Notification) bool { return len(changesOf(ns, "x")) >= 5 })
	if diff := cmp.Diff([]string{"ADDED", "MODIFIED", "MODIFIED", "MODIFIED", "DELETED"}, changesOf(gotWeb, "x")); diff != "" {
		t.Fatalf("label listener (-want +got):\n%s", diff)
	}
	if err := checkOrder(gotWeb, true); err != nil {
		t.Fatalf("label listener: %v: %v", err, seen(gotWeb))
	}
	gotNamed := named.until(t, "x in the other namespace", func(ns []Notification) bool {
		return slices.ContainsFunc(ns, func(n Notification) bool { return n.Object != nil && n.Object.Namespace == other })
	})
	for _, n := range gotNamed {
		if n.Object.Name != "x" {
			t.Fatalf("field-selector listener got %s", n.Object.Key())
		}
	}
	if err := checkOrder(gotNamed, false); err != nil {
		t.Fatalf("field-selector listener: %v: %v", err, seen(gotNamed))
	}
}

func TestNeverDrainingListenerStaysBounded(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	m := startManager(t, env.Config, nil)
	r := syncedResource(t, m, "configmaps")
	stuck := listen(t, r, ListenerOptions{Filter: Filter{Namespace: ns}, MaxEvents: 5})
	healthy := listen(t, r, ListenerOptions{Filter: Filter{Namespace: ns}, MaxEvents: 5})
	ctx := context.Background()
	const n = 40
	for i := 0; i < n; i++ {
		if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%02d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The healthy consumer drains as it goes; the stuck one never does.
		select {
		case <-healthy.wake:
			healthy.got = healthy.l.Pop(healthy.got)
		default:
		}
		if s := stuck.l.Stats(); s.Buffered > 5 {
			t.Fatalf("stuck listener holds %d > 5", s.Buffered)
		}
	}
	got := healthy.until(t, "every create", func(ns []Notification) bool { return len(ns) >= n })
	if len(got) != n || slices.ContainsFunc(got, func(x Notification) bool { return x.Type != Added }) {
		t.Fatalf("healthy listener got %d notifications: %v", len(got), seen(got))
	}
	stuckGot := stuck.until(t, "reset and snapshot", hasEnd)
	if stuckGot[0].Type != Reset || len(stuckGot) != n+2 {
		t.Fatalf("stuck listener after overflow: %v", seen(stuckGot))
	}
}

func TestResumeInsideAndOutsideHistory(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	m := startManager(t, env.Config, func(o *Options) { o.HistoryEvents = 5 })
	r := syncedResource(t, m, "configmaps")
	first := listen(t, r, ListenerOptions{Filter: Filter{Namespace: ns}})
	ctx := context.Background()
	cms := env.Client.CoreV1().ConfigMaps(ns)
	for i := 0; i < 3; i++ {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("a%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	got := first.until(t, "three creates", func(ns []Notification) bool { return len(ns) == 3 })
	seenRV := got[0].Object.ResourceVersion
	first.l.Stop()

	resumed := listen(t, r, ListenerOptions{Filter: Filter{Namespace: ns}, ResourceVersion: seenRV, SendInitialEvents: true})
	again := resumed.until(t, "replay", func(ns []Notification) bool { return len(ns) == 2 })
	if again[0].Object.Name != "a1" || again[1].Object.Name != "a2" {
		t.Fatalf("resume from %s replayed %v", seenRV, seen(again))
	}

	for i := 0; i < 10; i++ { // push the history past seenRV
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("b%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	resumed.until(t, "later creates", func(ns []Notification) bool { return len(ns) == 12 })
	if _, err := r.AddListener(ListenerOptions{ResourceVersion: seenRV, Wake: make(chan struct{}, 1)}); !errors.Is(err, ErrExpired) {
		t.Fatalf("resume from an evicted version: err = %v, want ErrExpired", err)
	}
}

func TestForbiddenResourceFailsLoudly(t *testing.T) {
	env := testenv.Get(t)
	m := startManager(t, env.CP.UserConfig("nobody"), nil)
	_, err := m.Resource(context.Background(), "secrets")
	var fe *GatewayForbiddenError
	if !errors.As(err, &fe) || fe.GVR.Resource != "secrets" {
		t.Fatalf("Resource(secrets) as an unprivileged user: err = %v, want GatewayForbiddenError", err)
	}
	if err := m.Ready(); err != nil {
		t.Fatalf("a refused resource must not be started and block readiness: %v", err)
	}
}

// TestForbiddenListWithoutPreCheck: behind an upstream that takes no
// access review (another kubegate) the informer starts unchecked, and the
// upstream's 403 to the gateway's own list is the gateway's problem, not
// the caller's: a GatewayForbiddenError (503), as the pre-check gives.
func TestForbiddenListWithoutPreCheck(t *testing.T) {
	env := testenv.Get(t)
	m := startManager(t, env.CP.UserConfig("nobody"), func(o *Options) {
		o.canList = func(context.Context, schema.GroupVersionResource) error { return nil }
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := m.Resource(ctx, "secrets")
	if err != nil {
		t.Fatal(err)
	}
	err = r.WaitForSync(ctx)
	var fe *GatewayForbiddenError
	if !errors.As(err, &fe) || fe.GVR.Resource != "secrets" || fe.Verb != "list" {
		t.Fatalf("WaitForSync = %v, want a GatewayForbiddenError for list secrets", err)
	}
}

func TestCacheConvergesAcrossAPIServerRestart(t *testing.T) {
	testenv.SkipShort(t)
	// Its own control plane: the shared one must not be restarted.
	ctx := context.Background()
	cp, err := controlplane.Start(ctx, controlplane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	client := kubernetes.NewForConfigOrDie(cp.AdminConfig())
	ns := "restart"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	m := startManager(t, cp.AdminConfig(), nil)
	cms := client.CoreV1().ConfigMaps(ns)
	for i := 0; i < 5; i++ {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("r%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	r := syncedResource(t, m, "configmaps")
	c := listen(t, r, ListenerOptions{Filter: Filter{Namespace: ns}, SendInitialEvents: true})
	c.until(t, "snapshot", hasEnd)

	if err := cp.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	if err := cp.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := cms.Delete(ctx, fmt.Sprintf("r%d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	got := c.until(t, "deletes after the restart", func(ns []Notification) bool {
		deleted := 0
		for _, n := range ns {
			if n.Type == Deleted {
				deleted++
			}
		}
		return deleted >= 3
	})
	for _, n := range got {
		if n.Type == Modified {
			t.Fatalf("restart produced a MODIFIED for an unchanged object: %v", seen(got))
		}
	}
	objs, _ := r.List(&Filter{Namespace: ns})
	var names []string
	for _, o := range objs {
		names = append(names, o.Name)
	}
	slices.Sort(names)
	if diff := cmp.Diff([]string{"r3", "r4"}, names); diff != "" {
		t.Fatalf("cache after restart (-want +got):\n%s", diff)
	}
}

func TestCompactObject(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	m := startManager(t, env.Config, nil)
	ctx := context.Background()
	if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"app": "x"}},
		Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := syncedResource(t, m, "pods")
	o, ok := r.Get(ns, "p")
	if !ok {
		t.Fatal("pod not in cache")
	}
	var u unstructured.Unstructured
	if err := u.UnmarshalJSON(o.Raw); err != nil {
		t.Fatal(err)
	}
	if u.GetKind() != "Pod" || u.GetAPIVersion() != "v1" || len(u.GetManagedFields()) != 0 {
		t.Fatalf("cached JSON: kind=%q apiVersion=%q managedFields=%d", u.GetKind(), u.GetAPIVersion(), len(u.GetManagedFields()))
	}
	if o.Get("spec.nodeName") != "node-1" || o.Labels["app"] != "x" {
		t.Fatalf("indexed fields: nodeName=%q labels=%v", o.Get("spec.nodeName"), o.Labels)
	}
}

// Starting several resources at once must not start one resource's
// informer (through the shared factory) before it is configured.
func TestConcurrentFirstUse(t *testing.T) {
	env := testenv.Get(t)
	names := []string{"pods", "configmaps", "secrets", "services", "namespaces", "serviceaccounts",
		"endpointslices.discovery.k8s.io", "events", "limitranges", "resourcequotas", "deployments.apps", "replicasets.apps",
		"statefulsets.apps", "daemonsets.apps", "jobs.batch", "cronjobs.batch", "roles.rbac.authorization.k8s.io"}
	for round := range 5 {
		m := startManager(t, env.CP.AdminConfig(), nil)
		// Resolve first so the starts, not discovery, race.
		for _, n := range names {
			if _, err := m.Resolve(context.Background(), n); err != nil {
				t.Fatal(err)
			}
		}
		start := make(chan struct{})
		errs := make(chan error, len(names))
		var wg sync.WaitGroup
		for _, n := range names {
			wg.Go(func() {
				<-start
				_, err := m.Resource(context.Background(), n)
				if err != nil {
					err = fmt.Errorf("round %d: Resource(%q): %w", round, n, err)
				}
				errs <- err
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
	}
}

// Configured resources gate readiness, from before Start has started them
// until they sync; resources started on first use are reported but do not.
func TestConfiguredResourcesGateReadiness(t *testing.T) {
	env := testenv.Get(t)
	m, err := New(Options{Config: env.CP.AdminConfig(), Logger: zaptest.NewLogger(t), Resources: []string{"cm", "configmaps"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Ready(); err == nil || !strings.Contains(err.Error(), "starting: 2 configured resources") {
		t.Fatalf("Ready() before Start = %v, want starting", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	}()
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return m.Ready() == nil, nil }); err != nil {
		t.Fatalf("never ready: %v", m.Ready())
	}
	if _, err := m.Resource(ctx, "secrets"); err != nil {
		t.Fatal(err)
	}
	gating := map[string]bool{}
	for _, s := range m.Status() {
		gating[s.Resource] = s.Gating
	}
	if want := map[string]bool{"configmaps": true, "secrets": false}; !cmp.Equal(gating, want) {
		t.Fatalf("Status gating = %v, want %v", gating, want)
	}
}
