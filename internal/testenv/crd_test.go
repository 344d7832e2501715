package testenv

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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestCRD creates a CRD, which is then served, deletes it while an object
// with a finalizer holds its deletion, and creates it again meanwhile:
// the deletion returns only once the CRD is gone, and the new CRD is
// created only after that.
func TestCRD(t *testing.T) {
	e := Get(t)
	ns := e.Namespace(t)
	crd := NewCRD("crd.kubegate.test", "thingies", "Thingy")
	gvr := schema.GroupVersionResource{Group: "crd.kubegate.test", Version: "v1", Resource: "thingies"}
	const name = "thingies.crd.kubegate.test"
	if crd.GetName() != name {
		t.Fatalf("NewCRD named %q, want %q", crd.GetName(), name)
	}
	e.CreateCRD(t, crd)

	list, err := e.Client.Discovery().ServerResourcesForGroupVersion("crd.kubegate.test/v1")
	if err != nil || !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool {
		return r.Name == "thingies" && r.Kind == "Thingy" && r.SingularName == "thingy" && r.Namespaced
	}) {
		t.Fatalf("discovery of crd.kubegate.test/v1 right after CreateCRD: %v, %+v", err, list)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "crd.kubegate.test/v1", "kind": "Thingy",
		"metadata": map[string]any{"name": "held", "finalizers": []any{"kubegate.io/test"}}, "spec": map[string]any{"any": "field"}}}
	if _, err := e.Dynamic.Resource(gvr).Namespace(ns).Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create an object right after CreateCRD: %v", err)
	}
	old, err := e.Dynamic.Resource(crdResource).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	e.EnsureCRD(t, crd) // uses the existing CRD
	if err := e.createCRD(t.Context(), crd, false); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Fatalf("creating an existing CRD: err = %v, want one saying it exists", err)
	}

	deleted := make(chan error, 1)
	go func() { deleted <- e.deleteCRD(context.Background(), name) }()
	if err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, crdTimeout, true, func(ctx context.Context) (bool, error) {
		got, err := e.Dynamic.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
		return err == nil && got.GetDeletionTimestamp() != nil, nil
	}); err != nil {
		t.Fatalf("the CRD is not being deleted: %v", err)
	}
	created := make(chan error, 1)
	go func() { created <- e.createCRD(context.Background(), crd, false) }()
	// The object's finalizer keeps the CRD until it is removed.
	select {
	case err := <-deleted:
		t.Fatalf("deleteCRD returned (%v) while the CRD still exists", err)
	case err := <-created:
		t.Fatalf("createCRD returned (%v) while the earlier CRD still exists", err)
	default:
	}
	if _, err := e.Dynamic.Resource(gvr).Namespace(ns).Patch(t.Context(), "held", types.MergePatchType,
		[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	if err := <-created; err != nil {
		t.Fatalf("creating the CRD again while the earlier one was being deleted: %v", err)
	}
	t.Cleanup(func() {
		_ = e.Dynamic.Resource(crdResource).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	got, err := e.Dynamic.Resource(crdResource).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the CRD after it was created again: %v", err)
	}
	if got.GetUID() == old.GetUID() {
		t.Fatalf("the CRD created again has the earlier one's uid %s", old.GetUID())
	}

	e.DeleteCRD(t, name)
	if _, err := e.Dynamic.Resource(crdResource).Get(t.Context(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("CRD right after DeleteCRD: err = %v, want NotFound", err)
	}
}
