package webhook

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kubegate/internal/informer"
	"kubegate/internal/testenv"
)

var sprocketsGVR = schema.GroupVersionResource{Group: "gone.kubegate.test", Version: "v1", Resource: "sprockets"}

const sprocketsCRD = "sprockets.gone.kubegate.test"

// createSprocket creates an object and returns it as the receiver's view
// holds it: namespace/name → uid@resourceVersion.
func createSprocket(t *testing.T, ns, name string) (string, string) {
	t.Helper()
	o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "gone.kubegate.test/v1", "kind": "Sprocket",
		"metadata": map[string]any{"name": name}}}
	o, err := testenv.Get(t).Dynamic.Resource(sprocketsGVR).Namespace(ns).Create(context.Background(), o, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns + "/" + name, string(o.GetUID()) + "@" + o.GetResourceVersion()
}

// TestIntegrationResourceGoneAndBack deletes the CRD of a resource a
// webhook watches, then creates it again. The receiver gets a deleted
// event per object, then a reset and an empty snapshot; once the CRD is
// back, the webhook listens again by itself and the receiver gets the
// new objects as added, between a reset and snapshot.end. A receiver
// that reconciles as docs/webhooks.md says holds exactly the objects
// that exist throughout.
func TestIntegrationResourceGoneAndBack(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	env.CreateCRD(t, testenv.NewCRD(sprocketsGVR.Group, sprocketsGVR.Resource, "Sprocket"))
	rcv := newReceiver(t, time.Now)
	c := hookConfig(t, "gone", rcv.srv.URL)
	c.Resources = []Resource{{Resource: "sprockets", Namespace: ns}}
	startRealWith(t, nil, func(o *informer.Options) {
		// How often the webhook looks the absent resource up.
		o.DiscoveryRefreshInterval = 100 * time.Millisecond
	}, c)
	rec := newReconciler()
	want := map[string]string{}
	for _, name := range []string{"s1", "s2"} {
		k, v := createSprocket(t, ns, name)
		want[k] = v
	}
	rec.converge(t, rcv, want)

	env.DeleteCRD(t, sprocketsCRD)
	var got []string
	for len(got) < 4 {
		ce := decode(t, rcv.next())
		rec.apply(t, ce)
		got = append(got, ce.Type[len(eventTypePrefix):])
	}
	if wantTypes := []string{"deleted", "deleted", "reset", "snapshot.end"}; !slices.Equal(got, wantTypes) {
		t.Fatalf("events after the CRD was deleted: %v, want %v", got, wantTypes)
	}
	if len(rec.view()) != 0 {
		t.Fatalf("the receiver holds %v after the CRD was deleted", rec.view())
	}

	env.CreateCRD(t, testenv.NewCRD(sprocketsGVR.Group, sprocketsGVR.Resource, "Sprocket"))
	k, v := createSprocket(t, ns, "s3")
	before := maps.Clone(rec.types)
	rec.converge(t, rcv, map[string]string{k: v})
	// s3 may be in the snapshot (ahead of snapshot.end) or come after it.
	for rec.types["snapshot.end"] == before["snapshot.end"] {
		rec.apply(t, decode(t, rcv.next()))
	}
	if rec.types["added"] != before["added"]+1 || rec.types["reset"] != before["reset"]+1 || rec.types["snapshot.end"] != before["snapshot.end"]+1 {
		t.Fatalf("events once the CRD was back: %v, before %v; want one each of reset, added, snapshot.end", rec.types, before)
	}
	if !maps.Equal(rec.view(), map[string]string{k: v}) {
		t.Fatalf("the receiver holds %v, want %s", rec.view(), k)
	}
}
