package informer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
)

// ResourceInfo describes a resolved resource.
type ResourceInfo struct {
	GVR        schema.GroupVersionResource
	GVK        schema.GroupVersionKind
	Namespaced bool
	// API is the discovery entry (verbs, short names, categories...).
	API metav1.APIResource

	selectableFields []string
}

// NewResourceInfo describes a resource as discovery would, with the
// field selectors kube-apiserver supports for it, but no discovery entry
// (API).
func NewResourceInfo(gvr schema.GroupVersionResource, gvk schema.GroupVersionKind, namespaced bool) *ResourceInfo {
	return &ResourceInfo{GVR: gvr, GVK: gvk, Namespaced: namespaced,
		selectableFields: append([]string{"metadata.name", "metadata.namespace"}, extraSelectableFields[gvr.GroupResource()]...)}
}

// SelectableFields lists the fields field selectors may use for this
// resource. The returned slice must not be modified.
func (i *ResourceInfo) SelectableFields() []string { return i.selectableFields }

// resolver turns the names users type into resources, the way kubectl
// does: plural, singular, short name, kind, "resource.group" and
// "resource.version.group", using discovery through a cached RESTMapper.
// When a name is not found, discovery is refreshed (rate-limited) so CRDs
// created after start resolve without a restart.
type resolver struct {
	disc     discovery.CachedDiscoveryInterface
	deferred *restmapper.DeferredDiscoveryRESTMapper
	mapper   meta.RESTMapper
	// refresh limits discovery refreshes, caused by unknown names or
	// due for the served document.
	refresh flowcontrol.RateLimiter
	// mu serialises refreshes and guards resets, which counts them: a
	// caller that read it before a reset knows the cache is fetched
	// after that read (see served).
	mu     sync.Mutex
	resets uint64

	// direct is discovery without the cache, for Discovery.
	direct discovery.DiscoveryInterface
	// docMu guards doc and docErr, the discovery document last served
	// and the error it came with; Discovery holds it while it fetches,
	// so concurrent callers wait for one fetch.
	docMu  sync.Mutex
	doc    *Discovery
	docErr error
}

func newResolver(dc discovery.DiscoveryInterface, refreshQPS float32, clk clock.Clock) *resolver {
	cached := memory.NewMemCacheClient(dc)
	deferred := restmapper.NewDeferredDiscoveryRESTMapper(cached)
	return &resolver{
		direct:   dc,
		disc:     cached,
		deferred: deferred,
		mapper:   restmapper.NewShortcutExpander(deferred, cached, nil),
		refresh:  flowcontrol.NewTokenBucketRateLimiterWithClock(refreshQPS, 1, clk),
	}
}

func (r *resolver) Resolve(ctx context.Context, name string) (*ResourceInfo, error) {
	info, err := r.resolve(name)
	if err == nil || !isNoMatch(err) {
		return info, err
	}
	r.mu.Lock()
	refreshed := r.refresh.TryAccept()
	if refreshed {
		r.resetLocked()
	}
	r.mu.Unlock()
	if !refreshed {
		return nil, err
	}
	return r.resolve(name)
}

// resetLocked drops the cached discovery: the next lookup fetches it
// again. Caller must hold r.mu.
func (r *resolver) resetLocked() {
	r.deferred.Reset()
	r.resets++
}

// generation returns the number of resets so far, for served.
func (r *resolver) generation() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.resets
}

// served reports whether discovery lists gvr, as fetched after gen was
// read (from generation): if nobody has reset the cache since, served
// resets it, so the answer reflects the apiserver after the caller's
// read. Resources that go away together (an aggregated API, CRDs deleted
// at once) so share one refresh. A lookup that fails says nothing either
// way: the error is returned.
func (r *resolver) served(ctx context.Context, gvr schema.GroupVersionResource, gen uint64) (bool, error) {
	r.mu.Lock()
	if r.resets == gen {
		r.resetLocked()
	}
	r.mu.Unlock()
	var list *metav1.APIResourceList
	var err error
	if dc, ok := r.disc.(discovery.CachedDiscoveryInterfaceWithContext); ok {
		list, err = dc.ServerResourcesForGroupVersionWithContext(ctx, gvr.GroupVersion().String())
	} else {
		list, err = r.disc.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	}
	switch {
	case errors.Is(err, memory.ErrCacheNotFound):
		// Discovery was fetched and has no such group version. Any
		// other error, a 404 included (a proxy in the way answering
		// 404 for everything), says nothing about the resource.
		return false, nil
	case err != nil:
		return false, err
	}
	return slices.ContainsFunc(list.APIResources, func(api metav1.APIResource) bool { return api.Name == gvr.Resource }), nil
}

func isNoMatch(err error) bool {
	var u *UnknownResourceError
	return errors.As(err, &u) || meta.IsNoMatchError(err)
}

func (r *resolver) resolve(name string) (*ResourceInfo, error) {
	arg := strings.ToLower(strings.TrimSpace(name))
	if arg == "" || strings.ContainsAny(arg, "/ ") || len(arg) > 253 {
		return nil, &UnknownResourceError{Name: name}
	}
	var gvr schema.GroupVersionResource
	var err error
	full, gr := schema.ParseResourceArg(arg)
	if full != nil {
		gvr, err = r.mapper.ResourceFor(*full)
	}
	if full == nil || err != nil {
		gvr, err = r.mapper.ResourceFor(gr.WithVersion(""))
	}
	if err != nil {
		if meta.IsNoMatchError(err) {
			return nil, &UnknownResourceError{Name: name, Err: err}
		}
		return nil, fmt.Errorf("resolve %q: %w", name, err)
	}
	gvk, err := r.mapper.KindFor(gvr)
	if err != nil {
		return nil, &UnknownResourceError{Name: name, Err: err}
	}
	list, err := r.disc.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if err != nil {
		return nil, fmt.Errorf("discover %s: %w", gvr.GroupVersion(), err)
	}
	for _, api := range list.APIResources {
		if api.Name != gvr.Resource {
			continue
		}
		if !slices.Contains(api.Verbs, "list") || !slices.Contains(api.Verbs, "watch") {
			return nil, fmt.Errorf("%s: %w", gvr.GroupResource(), ErrNotWatchable)
		}
		info := NewResourceInfo(gvr, gvk, api.Namespaced)
		info.API = api
		info.API.Group, info.API.Version = gvr.Group, gvr.Version
		return info, nil
	}
	return nil, &UnknownResourceError{Name: name}
}

// Discovery returns the discovery document, for serving discovery.
//
// The document is fetched again when the refresh limit allows (at most
// once per Options.DiscoveryRefreshInterval), so resources added since
// (CRDs) are served, as kube-apiserver serves them: clients that resolve
// names from this document never ask for a resource it lacks, so a
// refresh on unknown names alone would never happen for them. Another
// kubegate reading from this one is such a client. The fetch bypasses
// the mapper's cache, which is reset only when the document changed: if
// the fetch fails (the apiserver is down), the last document is served
// and names still resolve from the cache.
//
// The document keeps the apiserver's order (see Discovery), so that it
// is the same from one call to the next as long as the apiserver's is.
func (r *resolver) Discovery(ctx context.Context) (*Discovery, error) {
	r.mu.Lock()
	due := r.refresh.TryAccept()
	r.mu.Unlock()

	r.docMu.Lock()
	defer r.docMu.Unlock()
	if !due && r.doc != nil {
		return r.doc, r.docErr
	}
	fresh, err := fetchDiscovery(ctx, r.direct)
	if fresh == nil {
		if r.doc != nil {
			return r.doc, r.docErr
		}
		return nil, err
	}
	if r.doc != nil && apiequality.Semantic.DeepEqual(fresh, r.doc) {
		// Unchanged: readers keep the same document, and the mapper
		// its cache.
		r.docErr = err
		return r.doc, err
	}
	r.mu.Lock()
	r.resetLocked()
	r.mu.Unlock()
	r.doc, r.docErr = fresh, err
	return fresh, err
}
