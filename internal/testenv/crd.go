package testenv

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
)

// CRDs are handled as unstructured objects through the dynamic client, so
// that tests need no apiextensions clientset (the module does not depend
// on k8s.io/apiextensions-apiserver).
var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// crdTimeout bounds each wait for a CRD to be served or to be gone. It is
// a failure bound, not a period: the waits poll real conditions.
const crdTimeout = time.Minute

// NewCRD returns a CustomResourceDefinition named plural.group for the
// namespaced resource plural of group, of kind kind (singular: kind in
// lower case, listKind: kind + "List"), served and stored as v1, whose
// objects may hold any fields. Change it as needed before creating it.
func NewCRD(group, plural, kind string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": plural + "." + group},
		"spec": map[string]any{
			"group": group, "scope": "Namespaced",
			"names": map[string]any{"plural": plural, "singular": strings.ToLower(kind), "kind": kind, "listKind": kind + "List"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object",
					"x-kubernetes-preserve-unknown-fields": true}}}},
		},
	}}
}

// CreateCRD creates crd and waits until kube-apiserver serves it: the CRD
// is Established, discovery lists its resource in every served version,
// and a list of its objects succeeds. An earlier CRD of the same name that
// is still being deleted is waited for first, so a test can create a CRD
// again right after deleting it. When the test ends the CRD is deleted,
// without waiting for the deletion to complete; the test may delete it
// itself before. A CRD of that name that exists and is not being deleted
// fails the test.
func (e *Env) CreateCRD(t testing.TB, crd *unstructured.Unstructured) {
	t.Helper()
	if err := e.createCRD(t.Context(), crd, false); err != nil {
		t.Fatal(err)
	}
	name := crd.GetName()
	t.Cleanup(func() {
		// t.Context is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := e.Dynamic.Resource(crdResource).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete CRD %s: %v", name, err)
		}
	})
	if err := e.waitCRDServed(t.Context(), crd); err != nil {
		t.Fatal(err)
	}
}

// EnsureCRD is CreateCRD for a CRD that outlives the test and is shared
// by the tests (and -count runs) of a package: a CRD of that name that
// exists already is used as it is, and nothing deletes it.
func (e *Env) EnsureCRD(t testing.TB, crd *unstructured.Unstructured) {
	t.Helper()
	if err := e.createCRD(t.Context(), crd, true); err != nil {
		t.Fatal(err)
	}
	if err := e.waitCRDServed(t.Context(), crd); err != nil {
		t.Fatal(err)
	}
}

// DeleteCRD deletes the CRD name and waits until it is gone: kube-apiserver
// has deleted its objects and then the CRD itself.
func (e *Env) DeleteCRD(t testing.TB, name string) {
	t.Helper()
	if err := e.deleteCRD(t.Context(), name); err != nil {
		t.Fatal(err)
	}
}

// createCRD creates crd once no CRD of its name is being deleted. With
// existingOK a CRD of that name that is not being deleted counts as
// created.
func (e *Env) createCRD(ctx context.Context, crd *unstructured.Unstructured, existingOK bool) error {
	crds := e.Dynamic.Resource(crdResource)
	name := crd.GetName()
	var terminating error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, crdTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := crds.Create(ctx, crd, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			return err == nil, err
		}
		old, err := crds.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err): // gone since; create again
			return false, nil
		case err != nil:
			return false, err
		case old.GetDeletionTimestamp() != nil:
			terminating = fmt.Errorf("an earlier CRD %s (uid %s) is still being deleted", name, old.GetUID())
			return false, nil
		case existingOK:
			return true, nil
		}
		return false, fmt.Errorf("CRD %s exists already", name)
	})
	if err != nil {
		if terminating != nil && wait.Interrupted(err) {
			err = terminating
		}
		return fmt.Errorf("create CRD %s: %w", name, err)
	}
	return nil
}

// waitCRDServed waits until crd is Established, the discovery that clients
// such as kubectl and the gateway use lists its resource in every served
// version, and its objects can be listed.
func (e *Env) waitCRDServed(ctx context.Context, crd *unstructured.Unstructured) error {
	name := crd.GetName()
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	var gvrs []schema.GroupVersionResource
	for _, v := range versions {
		v, _ := v.(map[string]any)
		if served, _ := v["served"].(bool); served {
			version, _ := v["name"].(string)
			gvrs = append(gvrs, schema.GroupVersionResource{Group: group, Version: version, Resource: plural})
		}
	}
	if len(gvrs) == 0 {
		return fmt.Errorf("CRD %s serves no version", name)
	}
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, crdTimeout, true, func(ctx context.Context) (bool, error) {
		last = e.crdServed(ctx, name, gvrs)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s not served: %w", name, errors.Join(err, last))
	}
	return nil
}

// crdServed returns why the CRD name, serving gvrs, is not served yet, or
// nil.
func (e *Env) crdServed(ctx context.Context, name string, gvrs []schema.GroupVersionResource) error {
	got, err := e.Dynamic.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if !crdEstablished(got) {
		return errors.New("not Established")
	}
	// The aggregated discovery document (the default of client-go's
	// discovery client) is the last to learn of a new CRD.
	_, lists, err := e.Client.Discovery().ServerGroupsAndResources()
	if err != nil && len(lists) == 0 {
		return fmt.Errorf("discovery: %w", err)
	}
	for _, gvr := range gvrs {
		i := slices.IndexFunc(lists, func(l *metav1.APIResourceList) bool { return l.GroupVersion == gvr.GroupVersion().String() })
		if i < 0 || !slices.ContainsFunc(lists[i].APIResources, func(r metav1.APIResource) bool { return r.Name == gvr.Resource }) {
			return fmt.Errorf("discovery does not list %s", gvr)
		}
		if _, err := e.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			return fmt.Errorf("list %s: %w", gvr, err)
		}
	}
	return nil
}

func crdEstablished(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	return slices.ContainsFunc(conds, func(c any) bool {
		c2, _ := c.(map[string]any)
		return c2["type"] == "Established" && c2["status"] == "True"
	})
}

// deleteCRD deletes the CRD name and waits until it is gone. A CRD of the
// same name created meanwhile is another one and does not count.
func (e *Env) deleteCRD(ctx context.Context, name string) error {
	crds := e.Dynamic.Resource(crdResource)
	old, err := crds.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("delete CRD %s: %w", name, err)
	}
	uid := old.GetUID()
	if err := crds.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil {
		return fmt.Errorf("delete CRD %s: %w", name, err)
	}
	var last error
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, crdTimeout, true, func(ctx context.Context) (bool, error) {
		got, err := crds.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return true, nil
		case err != nil:
			last = err
			return false, nil
		}
		last = errors.New("it still exists")
		return got.GetUID() != uid, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s not gone after its deletion: %w", name, errors.Join(err, last))
	}
	return nil
}
