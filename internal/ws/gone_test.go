package ws

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kubegate/internal/informer"
	"kubegate/internal/testenv"
)

var wobblesGVR = schema.GroupVersionResource{Group: "gone.kubegate.test", Version: "v1", Resource: "wobbles"}

const wobblesCRD = "wobbles.gone.kubegate.test"

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
	env.CreateCRD(t, testenv.NewCRD(wobblesGVR.Group, wobblesGVR.Resource, "Wobble"))
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

	env.DeleteCRD(t, wobblesCRD)
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

	env.CreateCRD(t, testenv.NewCRD(wobblesGVR.Group, wobblesGVR.Resource, "Wobble"))
	createWobble(t, ns, "w3")
	// The gateway looks the name up again (discovery is refreshed for
	// an unknown name at most every DiscoveryRefreshInterval).
	testenv.Eventually(t, "the gateway to resolve wobbles again", func() bool {
		_, err := m.Resolve(context.Background(), "wobbles")
		return err == nil
	})
	c.subscribe("back", "wobbles", ns)
	if names, _ := c.snapshot("back"); !slices.Equal(names, []string{"w3"}) {
		t.Fatalf("snapshot after the CRD came back = %v, want [w3]", names)
	}
}
