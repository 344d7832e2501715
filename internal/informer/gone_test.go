package informer

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"kubegate/internal/testenv"
)

var doodadsGVR = schema.GroupVersionResource{Group: "gone.kubegate.io", Version: "v1", Resource: "doodads"}

func createDoodad(t *testing.T, ns, name string) {
	t.Helper()
	o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "gone.kubegate.io/v1", "kind": "Doodad",
		"metadata": map[string]any{"name": name}}}
	if _, err := testenv.Get(t).Dynamic.Resource(doodadsGVR).Namespace(ns).Create(context.Background(), o, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// upstreamGoroutines returns the stacks of the goroutines running
// client-go's informer machinery (reflectors, controllers), which only
// the managers of these tests start.
func upstreamGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte("k8s.io/client-go/tools/cache.")) {
			out = append(out, string(g))
		}
	}
	return out
}

// TestResourceGoneEndsListenersAndConfiguredReturns deletes the CRD of a
// configured resource: its listener gets the deletions and then Ended
// with a 404, its upstream's goroutines exit, the name stops resolving
// and readiness is unaffected. When the CRD is created again, the
// manager starts the resource again by itself, with the new objects.
func TestResourceGoneEndsListenersAndConfiguredReturns(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	env.CreateCRD(t, testenv.NewCRD(doodadsGVR.Group, doodadsGVR.Resource, "Doodad"))
	createDoodad(t, ns, "d1")
	createDoodad(t, ns, "d2")
	reg := prometheus.NewRegistry()
	const name = "doodads.gone.kubegate.io"
	m := startManager(t, env.Config, func(o *Options) {
		o.Resources = []string{name}
		o.Registerer = reg
		// How often the absent resource is looked up.
		o.DiscoveryRefreshInterval = 50 * time.Millisecond
	})
	r := syncedResource(t, m, name)
	c := listen(t, r, ListenerOptions{SendInitialEvents: true, Filter: Filter{Namespace: ns}})
	c.until(t, "snapshot", hasEnd)
	ctx := context.Background()
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return m.Ready() == nil, nil }); err != nil {
		t.Fatalf("never ready: %v", m.Ready())
	}

	if n := seriesFor(t, reg, "gone.kubegate.io", "doodads"); n == 0 {
		t.Fatal("no series of the resource while it is served")
	}

	env.DeleteCRD(t, name)
	got := c.until(t, "Ended", func(ns []Notification) bool {
		return len(ns) > 0 && ns[len(ns)-1].Type == Ended
	})
	var deleted []string
	for _, n := range got {
		if n.Type == Deleted {
			deleted = append(deleted, n.Object.Name)
		}
	}
	slices.Sort(deleted)
	if diff := cmp.Diff([]string{"d1", "d2"}, deleted); diff != "" {
		t.Fatalf("deletions before Ended (-want +got):\n%s\nall: %v", diff, seen(got))
	}
	var gone *ResourceGoneError
	if err := c.l.Err(); !errors.As(err, &gone) || gone.GVR != doodadsGVR || !apierrors.IsNotFound(err) {
		t.Fatalf("Err() = %v, want a 404 ResourceGoneError for %s", err, doodadsGVR)
	}

	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the upstream's goroutine did not exit")
	}
	// The controller's queue closer exits just after the controller.
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return len(upstreamGoroutines()) == 0, nil }); err != nil {
		t.Fatalf("informer goroutines still running after the end:\n%s", upstreamGoroutines())
	}
	want := []ResourceStatus{{Resource: "doodads.gone.kubegate.io", Gating: true, Gone: true, Error: gone.Error()}}
	if diff := cmp.Diff(want, m.Status()); diff != "" {
		t.Fatalf("Status while the CRD is absent (-want +got):\n%s", diff)
	}
	if err := m.Ready(); err != nil {
		t.Fatalf("Ready while the CRD of a configured resource is absent: %v", err)
	}
	// The resource's series are gone with it.
	if n := seriesFor(t, reg, "gone.kubegate.io", "doodads"); n != 0 {
		t.Errorf("%d series of the resource left after the end, want none", n)
	}
	var unknown *UnknownResourceError
	if _, err := m.Resolve(ctx, name); !errors.As(err, &unknown) {
		t.Fatalf("Resolve(%q) while the CRD is absent: err = %v, want UnknownResourceError", name, err)
	}
	if _, err := r.AddListener(ListenerOptions{Wake: make(chan struct{}, 1)}); !errors.As(err, &gone) {
		t.Fatalf("AddListener on the ended resource: err = %v, want ResourceGoneError", err)
	}
	if err := r.WaitForSync(ctx); !errors.As(err, &gone) {
		t.Fatalf("WaitForSync on the ended resource: err = %v, want ResourceGoneError", err)
	}

	env.CreateCRD(t, testenv.NewCRD(doodadsGVR.Group, doodadsGVR.Resource, "Doodad"))
	createDoodad(t, ns, "d3")
	var back *Resource
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		m.mu.Lock()
		back = m.resources[doodadsGVR]
		m.mu.Unlock()
		if back == nil || !back.Synced() {
			return false, nil
		}
		objs, _ := back.List(&Filter{Namespace: ns})
		return len(objs) == 1, nil
	}); err != nil {
		t.Fatalf("the configured resource was not started again; status %+v", m.Status())
	}
	objs, _ := back.List(&Filter{Namespace: ns})
	if objs[0].Name != "d3" {
		t.Fatalf("after the CRD came back the cache holds %s, want d3", objs[0].Key())
	}
	want = []ResourceStatus{{Resource: "doodads.gone.kubegate.io", Gating: true, Synced: true, Objects: 1}}
	if diff := cmp.Diff(want, m.Status()); diff != "" {
		t.Fatalf("Status once the CRD is back (-want +got):\n%s", diff)
	}
	if err := m.Ready(); err != nil {
		t.Fatalf("Ready once the CRD is back: %v", err)
	}
}

// seriesFor counts the series g exports for a resource.
func seriesFor(t *testing.T, g prometheus.Gatherer, group, resource string) int {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range families {
		for _, s := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["group"] == group && labels["resource"] == resource {
				n++
			}
		}
	}
	return n
}
