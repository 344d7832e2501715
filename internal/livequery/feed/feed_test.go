package feed

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	clocktesting "k8s.io/utils/clock/testing"

	"kubegate/internal/informer"
	"kubegate/internal/livequery"
	"kubegate/internal/testenv"
)

func createCM(t *testing.T, ns, name string, lbls map[string]string) *corev1.ConfigMap {
	t.Helper()
	cm, err := testenv.Get(t).Client.CoreV1().ConfigMaps(ns).Create(context.Background(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

func updateCM(t *testing.T, cm *corev1.ConfigMap, data string) *corev1.ConfigMap {
	t.Helper()
	cm = cm.DeepCopy()
	cm.Data = map[string]string{"v": data}
	out, err := testenv.Get(t).Client.CoreV1().ConfigMaps(cm.Namespace).Update(context.Background(), cm, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func deleteCM(t *testing.T, ns, name string) {
	t.Helper()
	if err := testenv.Get(t).Client.CoreV1().ConfigMaps(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func rvOf(t *testing.T, s string) uint64 {
	t.Helper()
	rv, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return rv
}

// nsWindow is a window on namespace ns's configmaps, by name.
func nsWindow(ns string, limit int) livequery.Query {
	return livequery.Query{Sort: livequery.SortSpec{Key: "metadata.name"},
		Filter: livequery.Filter{Namespaces: sets.New(ns)}, Range: livequery.Range{Limit: limit}}
}

func TestSnapshotThenChanges(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	a := createCM(t, ns, "a", nil)
	createCM(t, ns, "b", nil)
	m := startManager(t, env.Config)
	r := resource(t, m, "configmaps")
	ts := startTables(t, Options{})

	c := open(t, ts, r, nsWindow(ns, 10))
	// Open returns once the snapshot is in: the first Pop holds it.
	if got, want := keys(c.rows), []string{ns + "/a", ns + "/b"}; !slices.Equal(got, want) || c.count != 2 {
		t.Fatalf("first Pop: %v (count %d), want %v (count 2)", got, c.count, want)
	}
	if row := c.rows[0]; row.Object.(*informer.Object).Name != "a" || row.RV != rvOf(t, a.ResourceVersion) ||
		row.Created != a.CreationTimestamp.Time || row.Fields.Get("metadata.name") != "a" {
		t.Fatalf("row of a: %+v, want MetadataRow of %s@%s", row, a.Name, a.ResourceVersion)
	}

	created := createCM(t, ns, "c", map[string]string{"x": "1"})
	updated := updateCM(t, a, "1")
	deleteCM(t, ns, "b")
	c.until(t, "a updated, b deleted, c created", func() bool {
		return slices.Equal(versioned(c.rows), []string{
			ns + "/a@" + updated.ResourceVersion, ns + "/c@" + created.ResourceVersion}) && c.count == 2
	})
	if c.rv < rvOf(t, updated.ResourceVersion) {
		t.Fatalf("Pop's version %d is older than the last change applied, %s", c.rv, updated.ResourceVersion)
	}
	if got := c.rows[1].Labels; got["x"] != "1" {
		t.Fatalf("labels of c: %v", got)
	}
	// One listener for every window of the resource.
	open(t, ts, r, livequery.Query{Sort: livequery.SortSpec{Key: "metadata.creationTimestamp", Desc: true}, Range: livequery.Range{Limit: 3}})
	if n := r.Status().Listeners; n != 1 {
		t.Fatalf("%d listeners for two windows, want 1", n)
	}
}

// A reset of the feeder's listener drops the changes it held; the
// snapshot that follows is applied as a Replace, so windows receive the
// net effect, deletions included, and no reset of their own.
func TestResetIsReplace(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	createCM(t, ns, "a", nil)
	b := createCM(t, ns, "b", nil)
	cc := createCM(t, ns, "c", nil)
	m := startManager(t, env.Config)
	r := resource(t, m, "configmaps")
	p := newPauser(t)
	ts := startTables(t, Options{beforeDrain: p.hook})
	c := open(t, ts, r, nsWindow(ns, 10))

	p.arm()
	deleteCM(t, ns, "a")
	f := p.paused(t)
	b = updateCM(t, b, "2")
	d := createCM(t, ns, "d", nil)
	testenv.Eventually(t, "the cache to hold d", func() bool { _, ok := r.Get(ns, "d"); return ok })
	f.l.Reset() // the feeder is held: the listener drops a's deletion and the rest
	before := len(c.ops)
	p.release()

	want := []string{ns + "/b@" + b.ResourceVersion, ns + "/c@" + cc.ResourceVersion, ns + "/d@" + d.ResourceVersion}
	c.until(t, "the net effect", func() bool { return slices.Equal(versioned(c.rows), want) && c.count == 3 })
	if f.resets != 1 {
		t.Fatalf("the feeder saw %d resets, want 1", f.resets)
	}
	for _, op := range c.ops[before:] {
		if op.Type == livequery.OpReset {
			t.Fatalf("the window was reset: %v", c.ops[before:])
		}
	}
}

// A burst larger than the listener's bound resets it once; the feeder
// then sizes its listener for the resource, so the next burst of the
// same size is absorbed without a reset.
func TestBurstResizesInsteadOfResettingAgain(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	m := startManager(t, env.Config)
	r := resource(t, m, "configmaps")
	p := newPauser(t)
	const minBacklog, burst = 8, 30
	ts := startTables(t, Options{beforeDrain: p.hook, MinBacklog: minBacklog})
	c := open(t, ts, r, nsWindow(ns, burst))

	// Past the bound, collapsing cannot help: the burst is all creations.
	p.arm()
	cms := []*corev1.ConfigMap{createCM(t, ns, "cm-00", nil)}
	f := p.paused(t)
	before := f.l.Stats().Resets
	for i := 1; i < burst; i++ {
		cms = append(cms, createCM(t, ns, "cm-"+strconv.Itoa(100 + i)[1:], nil))
	}
	last := cms[len(cms)-1]
	testenv.Eventually(t, "the cache to hold the burst", func() bool { _, ok := r.Get(ns, last.Name); return ok })
	if got := f.l.Stats().Resets; got != before+1 {
		t.Fatalf("first burst: %d listener resets, want 1 (the bound is %d)", got-before, f.maxEvents)
	}
	p.release()
	c.until(t, "the first burst", func() bool { return c.count == burst })

	// The same burst again, of updates this time: the feeder's listener
	// now has room for it.
	p.arm()
	cms[0] = updateCM(t, cms[0], "1")
	f = p.paused(t)
	if f.resizes != 1 || f.maxEvents < 4*burst {
		t.Fatalf("after the first burst: %d resizes, bound %d; want 1 resize and a bound of at least %d", f.resizes, f.maxEvents, 4*burst)
	}
	before = f.l.Stats().Resets
	for i := 1; i < burst; i++ {
		cms[i] = updateCM(t, cms[i], "1")
	}
	last = cms[len(cms)-1]
	testenv.Eventually(t, "the cache to hold the second burst", func() bool {
		o, ok := r.Get(ns, last.Name)
		return ok && o.ResourceVersion == last.ResourceVersion
	})
	if got := f.l.Stats(); got.Resets != before {
		t.Fatalf("second burst: %d listener resets, want none (stats %+v)", got.Resets-before, got)
	}
	p.release()
	want := make([]string, burst)
	for i, cm := range cms {
		want[i] = ns + "/" + cm.Name + "@" + cm.ResourceVersion
	}
	c.until(t, "the second burst", func() bool { return slices.Equal(versioned(c.rows), want) })
}

var doodadsGVR = schema.GroupVersionResource{Group: "feed.kubegate.io", Version: "v1", Resource: "doodads"}

// A resource the apiserver stops serving ends its table: windows pop the
// deletions that came first, then find the ResourceGoneError, and the
// feeder leaves.
func TestEndedEndsWindows(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	const name = "doodads.feed.kubegate.io"
	env.CreateCRD(t, testenv.NewCRD(doodadsGVR.Group, doodadsGVR.Resource, "Doodad"))
	for _, n := range []string{"d1", "d2"} {
		o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "feed.kubegate.io/v1", "kind": "Doodad",
			"metadata": map[string]any{"name": n}}}
		if _, err := env.Dynamic.Resource(doodadsGVR).Namespace(ns).Create(context.Background(), o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	m := startManager(t, env.Config)
	r := resource(t, m, name)
	ts := startTables(t, Options{})
	c := open(t, ts, r, nsWindow(ns, 10))
	if got := keys(c.rows); !slices.Equal(got, []string{ns + "/d1", ns + "/d2"}) {
		t.Fatalf("first Pop: %v", got)
	}
	ts.mu.Lock()
	f := ts.feeders[doodadsGVR]
	ts.mu.Unlock()

	env.DeleteCRD(t, name)
	c.until(t, "the end", func() bool { return c.w.Err() != nil })
	c.pop(t) // what was left before the end
	var gone *informer.ResourceGoneError
	if err := c.w.Err(); !errors.As(err, &gone) || !apierrors.IsNotFound(err) {
		t.Fatalf("Window.Err = %v, want a 404 ResourceGoneError", err)
	}
	if len(c.rows) != 0 || c.count != 0 {
		t.Fatalf("window after the end holds %v (count %d), want the deletions applied", keys(c.rows), c.count)
	}
	select {
	case <-f.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the feeder did not exit")
	}
	ts.mu.Lock()
	left := len(ts.feeders)
	ts.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d feeders left after the end", left)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := ts.Open(ctx, r, nsWindow(ns, 1)); !errors.As(err, &gone) {
		t.Fatalf("Open on the ended resource: %v, want ResourceGoneError", err)
	}
}

// The last window's Close starts the idle grace: a window opened within
// it reuses the table; once it has passed, the listener is stopped, the
// feeder exits, and the next Open builds the table again.
func TestIdleGraceThenStop(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	createCM(t, ns, "a", nil)
	m := startManager(t, env.Config)
	r := resource(t, m, "configmaps")
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	const grace = time.Minute
	ts := startTables(t, Options{IdleGrace: grace, clock: clk})
	feeder := func() *feeder {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		return ts.feeders[schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}]
	}

	c := open(t, ts, r, nsWindow(ns, 5))
	f := feeder()
	if f == nil || r.Status().Listeners != 1 {
		t.Fatalf("after Open: feeder %v, %d listeners; want one of each", f, r.Status().Listeners)
	}
	c.w.Close()
	testenv.Eventually(t, "the idle timer", clk.HasWaiters)
	clk.Step(grace - time.Second)
	c = open(t, ts, r, nsWindow(ns, 5))
	if got := feeder(); got != f {
		t.Fatal("a window opened within the grace period got another table")
	}
	testenv.Eventually(t, "the idle timer to be stopped", func() bool { return !clk.HasWaiters() })
	clk.Step(time.Hour) // no timer: nothing happens
	if got := feeder(); got != f {
		t.Fatal("the table was dropped while it had a window")
	}

	c.w.Close()
	testenv.Eventually(t, "the idle timer", clk.HasWaiters)
	clk.Step(grace)
	select {
	case <-f.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the feeder did not exit after the grace period")
	}
	if got, n := feeder(), r.Status().Listeners; got != nil || n != 0 {
		t.Fatalf("after the grace period: feeder %v, %d listeners; want none", got, n)
	}
	c = open(t, ts, r, nsWindow(ns, 5))
	if got := feeder(); got == nil || got == f || !slices.Equal(keys(c.rows), []string{ns + "/a"}) {
		t.Fatalf("Open after the grace period: feeder %p (old %p), rows %v", got, f, keys(c.rows))
	}
}

// Stopping Tables ends every table with ErrStopped, and Open fails with
// it from then on.
func TestStopEndsTables(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	m := startManager(t, env.Config)
	r := resource(t, m, "configmaps")
	ts := New(Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ts.Start(ctx) }()
	defer cancel()
	c := open(t, ts, r, nsWindow(ns, 5))
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	c.until(t, "the end", func() bool { return c.w.Err() != nil })
	if err := c.w.Err(); !errors.Is(err, ErrStopped) || !errors.Is(err, informer.ErrStopped) {
		t.Fatalf("Window.Err after Start returned: %v, want ErrStopped", err)
	}
	if _, err := ts.Open(context.Background(), r, nsWindow(ns, 5)); !errors.Is(err, ErrStopped) {
		t.Fatalf("Open after Start returned: %v, want ErrStopped", err)
	}
	if n := r.Status().Listeners; n != 0 {
		t.Fatalf("%d listeners after Start returned, want none", n)
	}
}

// Warm builds a table with no window, as its cache syncs; the first
// window then finds it built and shares it. Ready reports a table not
// built yet, builds one for a synced resource that has none, and
// reports nil once every table holds its snapshot.
func TestWarm(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	createCM(t, ns, "a", nil)
	createCM(t, ns, "b", nil)
	m := startManager(t, env.Config)
	cms := resource(t, m, "configmaps")
	ts := startTables(t, Options{})

	ts.Warm(cms)
	testenv.Eventually(t, "the warmed table to be built", func() bool { return ts.Built(cms) })
	warmed := ts.feeders[cms.Info.GVR]
	if n := warmed.table.Len(); n < 2 {
		t.Fatalf("the warmed table holds %d rows, want at least the namespace's 2", n)
	}
	if warmed.refs != 0 {
		t.Fatalf("the warmed table has %d references with no window", warmed.refs)
	}
	c := open(t, ts, cms, nsWindow(ns, 10))
	if got := keys(c.rows); !slices.Equal(got, []string{ns + "/a", ns + "/b"}) {
		t.Fatalf("first window %v", got)
	}
	if f := ts.feeders[cms.Info.GVR]; f != warmed {
		t.Fatal("the first window built a table of its own")
	}
	ts.Warm(cms) // a built table is left as it is
	if err := ts.Ready([]*informer.Resource{cms}); err != nil {
		t.Fatalf("Ready with the table built: %v", err)
	}

	// A synced resource with no table: Ready names it and builds it.
	nss := resource(t, m, "namespaces")
	err := ts.Ready([]*informer.Resource{cms, nss})
	if err == nil || !strings.Contains(err.Error(), "[namespaces]") {
		t.Fatalf("Ready before the namespaces' table: %v, want it named alone", err)
	}
	testenv.Eventually(t, "Ready to build the namespaces' table", func() bool { return ts.Ready([]*informer.Resource{cms, nss}) == nil })
	if !ts.Built(nss) {
		t.Fatal("Ready is nil, and the namespaces' table is not built")
	}
}
