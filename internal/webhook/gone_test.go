package webhook

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kubegate/internal/config"
	"kubegate/internal/informer"
	"kubegate/internal/testenv"
)

var (
	crdGVR       = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	sprocketsGVR = schema.GroupVersionResource{Group: "gone.kubegate.test", Version: "v1", Resource: "sprockets"}
)

const sprocketsCRD = "sprockets.gone.kubegate.test"

// createSprocketCRD creates (or, once the deletion of an earlier one has
// completed, creates again) a CRD of its own, and waits until the
// apiserver serves it.
func createSprocketCRD(t *testing.T) {
	t.Helper()
	env := testenv.Get(t)
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": sprocketsCRD},
		"spec": map[string]any{
			"group": sprocketsGVR.Group, "scope": "Namespaced",
			"names": map[string]any{"plural": "sprockets", "singular": "sprocket", "kind": "Sprocket"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object",
					"x-kubernetes-preserve-unknown-fields": true}}}},
		},
	}}
	ctx := context.Background()
	eventually(t, "the earlier sprocket CRD to be deleted", func() bool {
		_, err := env.Dynamic.Resource(crdGVR).Get(ctx, sprocketsCRD, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if _, err := env.Dynamic.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Dynamic.Resource(crdGVR).Delete(context.Background(), sprocketsCRD, metav1.DeleteOptions{})
	})
	eventually(t, "the sprocket CRD to be served", func() bool {
		_, err := env.Dynamic.Resource(sprocketsGVR).Namespace("default").List(ctx, metav1.ListOptions{})
		return err == nil
	})
}

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
	createSprocketCRD(t)
	rcv := newReceiver(t, time.Now)
	c := hookConfig(t, "gone", rcv.srv.URL)
	c.Resources = []config.WebhookResource{{Resource: "sprockets", Namespace: ns}}
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

	if err := env.Dynamic.Resource(crdGVR).Delete(context.Background(), sprocketsCRD, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
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

	createSprocketCRD(t)
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
