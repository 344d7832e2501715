package faults

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubegate/internal/controlplane"
	"kubegate/internal/informer"
	"kubegate/internal/testenv"
)

// HTTP/2 health check used by these tests: a connection silent for
// readIdle is pinged, and dropped if the ping is not answered within
// pingTimeout. client-go reads them from the environment when it builds a
// transport; its defaults are 30s and 15s (see docs/reliability.md).
const (
	readIdle    = 2 * time.Second
	pingTimeout = 2 * time.Second
	staleAfter  = 2 * time.Second
)

func TestMain(m *testing.M) {
	os.Setenv("HTTP2_READ_IDLE_TIMEOUT_SECONDS", fmt.Sprint(int(readIdle.Seconds())))
	os.Setenv("HTTP2_PING_TIMEOUT_SECONDS", fmt.Sprint(int(pingTimeout.Seconds())))
	testenv.Main(m, testenv.Options{
		// Without the watch cache, watches resume from etcd, so compaction
		// makes an old resume point answer 410 as in a busy cluster.
		ExtraAPIServerFlags: map[string]string{"watch-cache": "false", "etcd-compaction-interval": "2s"},
	})
}

// controlPlane is the package's control plane. Unlike other packages'
// tests, those here stop and restart it: each waits until it serves
// again before it ends.
func controlPlane(t testing.TB) *controlplane.ControlPlane {
	t.Helper()
	return testenv.Get(t).CP
}

func client(t *testing.T) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(controlPlane(t).AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// namespace creates a namespace for one test, named after it with a
// random suffix, so that a test run again (-count) gets a new one.
func namespace(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	name := strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	if len(name) > 50 {
		name = name[:50]
	}
	ns, err := cs.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// viaProxy returns the admin config pointed at addr (host:port), keeping TLS
// verification: the serving certificate covers 127.0.0.1.
func viaProxy(t *testing.T, addr string) *rest.Config {
	t.Helper()
	cfg := controlPlane(t).AdminConfig()
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = addr
	cfg.Host = u.String()
	return cfg
}

func apiserverAddr(t *testing.T) string {
	u, err := url.Parse(controlPlane(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// startManager runs a manager until the test ends. resources are its
// configured resources, which gate readiness.
func startManager(t *testing.T, cfg *rest.Config, resources ...string) *informer.Manager {
	t.Helper()
	return startManagerWith(t, informer.Options{Config: cfg, Logger: zaptest.NewLogger(t), Resources: resources})
}

// startManagerWith runs a manager with opts (StaleAfter set for these
// tests) until the test ends.
func startManagerWith(t *testing.T, opts informer.Options) *informer.Manager {
	t.Helper()
	opts.StaleAfter = staleAfter
	m, err := informer.New(opts)
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

func configMaps(t *testing.T, m *informer.Manager) *informer.Resource {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := m.Resource(ctx, "configmaps")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	return r
}

// subscriber keeps the state a client would build from its notifications:
// name → resourceVersion, with RESET clearing it, and counts MODIFIED
// notifications per name.
type subscriber struct {
	l        *informer.Listener
	wake     chan struct{}
	buf      []informer.Notification
	state    map[string]string
	pending  map[string]string // snapshot being rebuilt after a RESET
	inReset  bool
	modified map[string]int
	resets   int
}

func subscribe(t *testing.T, r *informer.Resource, ns string) *subscriber {
	t.Helper()
	s := &subscriber{wake: make(chan struct{}, 1), state: map[string]string{}, modified: map[string]int{}}
	l, err := r.AddListener(informer.ListenerOptions{
		Filter:            informer.Filter{Namespace: ns},
		SendInitialEvents: true,
		Wake:              s.wake,
	})
	if err != nil {
		t.Fatal(err)
	}
	s.l = l
	t.Cleanup(l.Stop)
	return s
}

func (s *subscriber) apply() {
	s.buf = s.l.Pop(s.buf[:0])
	for _, n := range s.buf {
		switch n.Type {
		case informer.Reset:
			s.resets++
			s.inReset, s.pending = true, map[string]string{}
		case informer.EndOfSnapshot:
			if s.inReset {
				s.state, s.inReset = s.pending, false
			}
		case informer.Added, informer.Sync:
			s.target()[n.Object.Name] = n.Object.ResourceVersion
		case informer.Modified:
			s.modified[n.Object.Name]++
			s.target()[n.Object.Name] = n.Object.ResourceVersion
		case informer.Deleted:
			delete(s.target(), n.Object.Name)
		}
	}
}

func (s *subscriber) target() map[string]string {
	if s.inReset {
		return s.pending
	}
	return s.state
}

// converge waits until the subscriber's state equals want.
func (s *subscriber) converge(t *testing.T, want map[string]string) {
	t.Helper()
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	for {
		if !s.inReset && maps.Equal(s.state, want) {
			return
		}
		select {
		case <-s.wake:
			s.apply()
		case <-deadline.C:
			t.Fatalf("subscriber state %v, want %v", s.state, want)
		}
	}
}

// truth lists the namespace's config maps from the apiserver itself.
func truth(t *testing.T, cs kubernetes.Interface, ns string) map[string]string {
	t.Helper()
	l, err := cs.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, cm := range l.Items {
		out[cm.Name] = cm.ResourceVersion
	}
	return out
}

func create(t *testing.T, cs kubernetes.Interface, ns string, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(context.Background(),
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n}, Data: map[string]string{"v": "0"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func update(t *testing.T, cs kubernetes.Interface, ns, name, v string) {
	t.Helper()
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{"v": v}
	if _, err := cs.CoreV1().ConfigMaps(ns).Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func remove(t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	if err := cs.CoreV1().ConfigMaps(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// pollReady waits until m.Ready() is nil (want true) or an error (want
// false) and returns how long that took.
func pollReady(t *testing.T, m *informer.Manager, want bool, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, limit, true,
		func(context.Context) (bool, error) { return (m.Ready() == nil) == want, nil })
	if err != nil {
		t.Fatalf("Ready() did not become ready=%v within %s: last %v", want, limit, m.Ready())
	}
	return time.Since(start)
}

func noExtraModified(t *testing.T, subs []*subscriber, want map[string]int) {
	t.Helper()
	for i, s := range subs {
		for name, n := range s.modified {
			if n > want[name] {
				t.Errorf("subscriber %d: %d MODIFIED for %s, want at most %d (changes made)", i, n, name, want[name])
			}
		}
	}
}

// TestAPIServerAndEtcdRestart stops kube-apiserver, then restarts etcd,
// while subscribers are attached: Ready (/readyz) turns unready once the
// apiserver outage passes StaleAfter and ready again after it, every
// subscriber converges to the apiserver's state, and unchanged objects get
// no MODIFIED.
func TestAPIServerAndEtcdRestart(t *testing.T) {
	cs := client(t)
	ns := namespace(t, cs)
	create(t, cs, ns, "keep", "change", "drop")
	m := startManager(t, controlPlane(t).AdminConfig())
	r := configMaps(t, m)
	subs := []*subscriber{subscribe(t, r, ns), subscribe(t, r, ns), subscribe(t, r, ns)}
	for _, s := range subs {
		s.converge(t, truth(t, cs, ns))
	}
	ctx := context.Background()

	if err := controlPlane(t).StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	d := pollReady(t, m, false, 30*time.Second)
	t.Logf("apiserver stopped: unready after %s (StaleAfter %s)", d, staleAfter)
	if err := controlPlane(t).StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	d = pollReady(t, m, true, 60*time.Second)
	t.Logf("apiserver restarted: ready again after %s", d)
	update(t, cs, ns, "change", "1")
	remove(t, cs, ns, "drop")
	create(t, cs, ns, "new")
	for _, s := range subs {
		s.converge(t, truth(t, cs, ns))
	}

	// etcd restarted behind a running apiserver. The gateway's watch stays
	// open through it (the apiserver holds it), so no outage is visible to
	// the gateway; what matters is that changes after it arrive.
	if err := controlPlane(t).StopEtcd(); err != nil {
		t.Fatal(err)
	}
	if err := controlPlane(t).StartEtcd(ctx); err != nil {
		t.Fatal(err)
	}
	// The apiserver reports unready until its etcd client reconnects.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true,
		func(ctx context.Context) (bool, error) { return controlPlane(t).Ready(ctx) == nil, nil }); err != nil {
		t.Fatalf("apiserver not ready after etcd restart: %v", controlPlane(t).Ready(ctx))
	}
	d = pollReady(t, m, true, 60*time.Second)
	t.Logf("etcd restarted: ready again after %s", d)
	update(t, cs, ns, "change", "2")
	remove(t, cs, ns, "new")
	for _, s := range subs {
		s.converge(t, truth(t, cs, ns))
	}
	noExtraModified(t, subs, map[string]int{"change": 2})
}

// TestHalfOpenCut black-holes the connection between the gateway and the
// apiserver without closing it, deletes and changes objects meanwhile,
// then restores the path: the stall is detected within
// readIdle+pingTimeout+StaleAfter (plus polling slack), and every
// subscriber sees the delete.
func TestHalfOpenCut(t *testing.T) {
	cs := client(t)
	ns := namespace(t, cs)
	create(t, cs, ns, "keep", "change", "drop")
	p := newTCPProxy(t, apiserverAddr(t))
	m := startManager(t, viaProxy(t, p.addr()))
	r := configMaps(t, m)
	subs := []*subscriber{subscribe(t, r, ns), subscribe(t, r, ns)}
	for _, s := range subs {
		s.converge(t, truth(t, cs, ns))
	}

	p.freeze()
	remove(t, cs, ns, "drop")
	update(t, cs, ns, "change", "1")
	bound := readIdle + pingTimeout + staleAfter + 2*time.Second
	d := pollReady(t, m, false, 2*bound)
	t.Logf("half-open path: unready after %s (bound %s)", d, bound)
	if d > bound {
		t.Errorf("stall detected after %s, want within %s", d, bound)
	}
	p.thaw()
	d = pollReady(t, m, true, 60*time.Second)
	t.Logf("path restored: ready again after %s", d)
	want := truth(t, cs, ns)
	if _, ok := want["drop"]; ok {
		t.Fatal("test bug: drop still exists")
	}
	for _, s := range subs {
		s.converge(t, want)
	}
	noExtraModified(t, subs, map[string]int{"change": 1})
}

// TestCompactedResumePoint cuts the gateway off while objects change and
// etcd compacts past the gateway's last resourceVersion, so its watch
// cannot resume (410): it relists, converges, and stays ready.
func TestCompactedResumePoint(t *testing.T) {
	cs := client(t)
	ns := namespace(t, cs)
	create(t, cs, ns, "keep", "change", "drop")
	p := newTCPProxy(t, apiserverAddr(t))
	m := startManager(t, viaProxy(t, p.addr()))
	r := configMaps(t, m)
	sub := subscribe(t, r, ns)
	sub.converge(t, truth(t, cs, ns))
	_, lastRV := r.List(nil)

	p.freeze()
	remove(t, cs, ns, "drop")
	for i := range 5 {
		update(t, cs, ns, "change", fmt.Sprint(i))
	}
	// Wait until the gateway's resume point is really gone.
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 60*time.Second, true,
		func(ctx context.Context) (bool, error) {
			w, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: fmt.Sprint(lastRV)})
			if err != nil {
				return apierrors.IsResourceExpired(err) || apierrors.IsGone(err), nil
			}
			defer w.Stop()
			select {
			case ev := <-w.ResultChan():
				st, ok := ev.Object.(*metav1.Status)
				return ok && (st.Code == 410), nil
			case <-time.After(time.Second):
				return false, nil
			}
		})
	if err != nil {
		t.Fatalf("resourceVersion %d was never compacted: %v", lastRV, err)
	}
	// Make another change so the stream has something after the cut.
	create(t, cs, ns, "after")
	p.thaw()
	pollReady(t, m, true, 60*time.Second)
	sub.converge(t, truth(t, cs, ns))
	if err := m.Ready(); err != nil {
		t.Errorf("not ready after relist: %v", err)
	}
}
