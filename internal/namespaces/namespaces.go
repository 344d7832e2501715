// Package namespaces lists the cluster's namespaces from the gateway's own
// namespaces informer, for the authorizer's namespace scans
// (auth.SubjectAccessReviewOptions.Namespaces).
//
// It is the seam between the cache and authorization: auth asks for an
// auth.NamespaceLister and knows nothing of informers, and informer knows
// nothing of auth. Only the code that wires the gateway together
// (cmd/gateway, and tests that build a gateway) imports it. It does not
// import auth either, so auth's own tests may use it.
package namespaces

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"kubegate/internal/informer"
)

// Informer lists namespaces from a Manager's namespaces informer (started
// on first use), so computing a user's namespace set costs no apiserver
// list. The gateway needs list and watch on namespaces for it. It
// satisfies auth.NamespaceLister.
type Informer struct {
	m *informer.Manager
}

// FromInformer returns a lister that reads m's namespaces informer.
func FromInformer(m *informer.Manager) Informer { return Informer{m: m} }

// NamespaceNames returns the names of every cached namespace, once the
// informer has synced.
func (l Informer) NamespaceNames(ctx context.Context) ([]string, error) {
	r, err := l.m.Resource(ctx, "namespaces")
	if err != nil {
		return nil, fmt.Errorf("namespaces informer: %w", err)
	}
	if err := r.WaitForSync(ctx); err != nil {
		return nil, fmt.Errorf("namespaces informer: %w", err)
	}
	objs, _ := r.List(&informer.Filter{})
	names := make([]string, len(objs))
	for i, o := range objs {
		names[i] = o.Name
	}
	return names, nil
}

// NamespacesHolding returns the namespaces in which an object of
// resource named name is cached, once both its informer and the
// namespaces informer have synced; ok is false when it cannot tell
// (resource not started by a read yet, or not synced). It never starts
// an informer: it is asked before the caller is authorized. It satisfies
// auth.ObjectLocator, with one cache lookup per namespace.
func (l Informer) NamespacesHolding(ctx context.Context, resource schema.GroupVersionResource, name string) ([]string, bool) {
	r, ok := l.m.Started(resource)
	if !ok || !r.Synced() {
		return nil, false
	}
	nsGVR := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	nr, ok := l.m.Started(nsGVR)
	if !ok || !nr.Synced() {
		return nil, false
	}
	nss, _ := nr.List(&informer.Filter{})
	var out []string
	for _, ns := range nss {
		if _, ok := r.Get(ns.Name, name); ok {
			out = append(out, ns.Name)
		}
	}
	return out, true
}
