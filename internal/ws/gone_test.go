package ws

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kubegate/internal/informer"
	"kubegate/internal/testenv"
)

var (
	crdGVR     = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	wobblesGVR = schema.GroupVersionResource{Group: "gone.kubegate.test", Version: "v1", Resource: "wobbles"}
)

const wobblesCRD = "wobbles.gone.kubegate.test"

// createWobbleCRD creates (or, once the deletion of an earlier one has
// completed, creates again) a CRD of its own, and waits until the
// apiserver serves it.
func createWobbleCRD(t *testing.T) {
	t.Helper()
	env := testenv.Get(t)
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": wobblesCRD},
		"spec": map[string]any{
			"group": wobblesGVR.Group, "scope": "Namespaced",
			"names": map[string]any{"plural": "wobbles", "singular": "wobble", "kind": "Wobble"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object",
					"x-kubernetes-preserve-unknown-fields": true}}}},
		},
	}}
	eventually(t, "the earlier wobble CRD to be deleted", func() bool {
		_, err := env.Dynamic.Resource(crdGVR).Get(context.Background(), wobblesCRD, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if _, err := env.Dynamic.Resource(crdGVR).Create(context.Background(), crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Dynamic.Resource(crdGVR).Delete(context.Background(), wobblesCRD, metav1.DeleteOptions{})
	})
	eventually(t, "the wobble CRD to be served", func() bool {
		_, err := env.Dynamic.Resource(wobblesGVR).Namespace("default").List(context.Background(), metav1.ListOptions{})
		return err == nil
	})
}

func createWobble(t *testing.T, ns, name string) {
	t.Helper()
	o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "gone.kubegate.test/v1", "kind": "Wobble",
		"metadata": map[string]any{"name": name}}}
	if _, err := testenv.Get(t).Dynamic.Resource(wobblesGVR).Namespace(ns).Create(context.Background(), o, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestSubscriptionEndsWhenItsResourceGoes deletes the CRD of a subscribed
// resource: the subscription gets a DELETED per object, then an error
// frame marked ended with a complete 404 Status, then nothing; the
// socket's other subscription goes on. A subscribe while the CRD is
// absent is refused with 404; once it is back, a subscribe gets the new
// objects.
func TestSubscriptionEndsWhenItsResourceGoes(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	createWobbleCRD(t)
	createWobble(t, ns, "w1")
	createWobble(t, ns, "w2")
	// How often the gateway may look unknown names up in discovery.
	m := startManager(t, env.Config, func(o *informer.Options) { o.DiscoveryRefreshInterval = 100 * time.Millisecond })
	ts := startServer(t, m, nil)
	c := dial(t, ts)
	c.subscribe("w", "wobbles", ns)
	if names, _ := c.snapshot("w"); len(names) != 2 {
		t.Fatalf("snapshot = %v", names)
	}
	c.subscribe("cms", "configmaps", ns)
	c.snapshot("cms")

	if err := env.Dynamic.Resource(crdGVR).Delete(context.Background(), wobblesCRD, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var deleted []string
	f := c.next()
	for ; f.Type == "DELETED" && f.ID == "w"; f = c.next() {
		deleted = append(deleted, f.name())
	}
	slices.Sort(deleted)
	if !slices.Equal(deleted, []string{"w1", "w2"}) {
		t.Fatalf("DELETED frames %v before %v, want w1 and w2", deleted, f)
	}
	st := f.Status
	if f.Type != "error" || f.ID != "w" || !f.Ended || f.Request != "" || st == nil {
		t.Fatalf("frame after the deletions: %v (ended %v, request %q), want an error frame marked ended", f, f.Ended, f.Request)
	}
	if st.Kind != "Status" || st.APIVersion != "v1" || st.Status != metav1.StatusFailure || st.Code != 404 ||
		st.Reason != metav1.StatusReasonNotFound || !strings.Contains(st.Message, "wobbles.gone.kubegate.test is no longer served") {
		t.Fatalf("ended status %+v, want a complete 404 NotFound naming the resource", st)
	}
	// Its informer was stopped and dropped before the frame was sent.
	for _, s := range m.Status() {
		if s.Resource == wobblesGVR.GroupResource().String() {
			t.Fatalf("the manager still reports the resource: %+v", s)
		}
	}
	// Nothing more for "w": the next frame is the other subscription's.
	createCM(t, ns, "after", nil)
	if f := c.expect("ADDED", "cms"); f.name() != "after" {
		t.Fatalf("other subscription: %v", f)
	}

	c.subscribe("again", "wobbles", ns)
	if f := c.expect("error", "again"); f.Request != "subscribe" || f.Status.Code != 404 || f.Status.Reason != metav1.StatusReasonNotFound {
		t.Fatalf("subscribe while the CRD is absent: %v", f)
	}

	createWobbleCRD(t)
	createWobble(t, ns, "w3")
	// The gateway looks the name up again (discovery is refreshed for
	// an unknown name at most every DiscoveryRefreshInterval).
	eventually(t, "the gateway to resolve wobbles again", func() bool {
		_, err := m.Resolve(context.Background(), "wobbles")
		return err == nil
	})
	c.subscribe("back", "wobbles", ns)
	if names, _ := c.snapshot("back"); !slices.Equal(names, []string{"w3"}) {
		t.Fatalf("snapshot after the CRD came back = %v, want [w3]", names)
	}
}
