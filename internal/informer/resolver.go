package informer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
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

	// fields are the resource's field selectors; nil: those
	// builtinFieldSet gives.
	fields *sharedFields
}

// NewResourceInfo describes a resource as discovery would, with the
// field selectors kube-apiserver supports for it as a built-in resource
// (a custom resource's come from its CRD, which Manager.Resolve reads),
// but no discovery entry (API).
func NewResourceInfo(gvr schema.GroupVersionResource, gvk schema.GroupVersionKind, namespaced bool) *ResourceInfo {
	return &ResourceInfo{GVR: gvr, GVK: gvk, Namespaced: namespaced,
		fields: newSharedFields(builtinFieldSet(gvr.GroupResource()), false)}
}

// SelectableFields lists the fields field selectors may use for this
// resource, as kube-apiserver serves them: metadata.name, usually
// metadata.namespace, and the resource's own (a built-in type's, or a
// CRD's selectableFields, which may change while the resource is
// served). The returned slice must not be modified.
func (i *ResourceInfo) SelectableFields() []string { return i.fieldSet().names }

func (i *ResourceInfo) fieldSet() *fieldSet {
	if i.fields == nil {
		return builtinFieldSet(i.GVR.GroupResource())
	}
	return i.fields.load()
}

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

	// readCRD reads a CustomResourceDefinition's JSON by name, for the
	// selectableFields of custom resources; nil: none are read.
	readCRD func(ctx context.Context, name string) ([]byte, error)
	log     *zap.Logger
	// fieldsMu guards fields: the field set of each resource that may be
	// custom, read once and shared by its ResourceInfos (and updated by
	// its informer, see listWatch.refreshFields).
	fieldsMu   sync.Mutex
	fields     map[schema.GroupVersionResource]*fieldsEntry
	crdDenied  sync.Once
	crdFailure sync.Once

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
		fields:   map[schema.GroupVersionResource]*fieldsEntry{},
		log:      zap.NewNop(),
		direct:   dc,
		disc:     cached,
		deferred: deferred,
		mapper:   restmapper.NewShortcutExpander(deferred, cached, nil),
		refresh:  flowcontrol.NewTokenBucketRateLimiterWithClock(refreshQPS, 1, clk),
	}
}

func (r *resolver) Resolve(ctx context.Context, name string) (*ResourceInfo, error) {
	info, err := r.resolve(ctx, name)
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
	return r.resolve(ctx, name)
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

func (r *resolver) resolve(ctx context.Context, name string) (*ResourceInfo, error) {
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
		info.fields = r.fieldsFor(ctx, gvr, api.Namespaced)
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

// crdReadTimeout bounds each read of a CRD (see readCRDFields): when a
// resource is first resolved, on the way to serving a request, and as
// its informer lists and watches, where a read that fails is tried again.
const crdReadTimeout = 10 * time.Second

// fieldsEntry is a resource's field set, once read (ready closed).
type fieldsEntry struct {
	ready  chan struct{}
	fields *sharedFields
}

// fieldsFor returns the field set of gvr. A resource of a group other
// than the core one that builtinFields does not list may be a custom
// resource: its CRD (named <resource>.<group>) is read once, on first
// use, and its field set shared from then on; none (404) means a
// built-in or aggregated resource with the default field selectors.
func (r *resolver) fieldsFor(ctx context.Context, gvr schema.GroupVersionResource, namespaced bool) *sharedFields {
	gr := gvr.GroupResource()
	if _, ok := builtinFields[gr]; ok || gvr.Group == "" || r.readCRD == nil {
		return newSharedFields(builtinFieldSet(gr), false)
	}
	r.fieldsMu.Lock()
	e, ok := r.fields[gvr]
	if !ok {
		e = &fieldsEntry{ready: make(chan struct{})}
		r.fields[gvr] = e
	}
	r.fieldsMu.Unlock()
	if ok {
		select {
		case <-e.ready:
			return e.fields
		case <-ctx.Done():
			return newSharedFields(builtinFieldSet(gr), true)
		}
	}
	// Not under fieldsMu: the read is a request to the apiserver. A
	// caller that gives up does not fail the others, and nobody waits
	// long for fields on the way to serving a request.
	set, crd, err := readCRDFields(context.WithoutCancel(ctx), r.readCRD, gvr, namespaced)
	r.crdError(gvr, err)
	e.fields = newSharedFields(set, crd)
	close(e.ready)
	return e.fields
}

// crdError logs, once per kind of failure, that a CRD could not be read.
func (r *resolver) crdError(gvr schema.GroupVersionResource, err error) {
	switch {
	case err == nil:
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		r.crdDenied.Do(func() {
			r.log.Warn("the gateway may not get CustomResourceDefinitions: custom resources get only the metadata.name and metadata.namespace field selectors, not their selectableFields",
				zap.String("resource", gvr.String()), zap.Error(err))
		})
	default:
		r.crdFailure.Do(func() {
			r.log.Warn("a CustomResourceDefinition could not be read: its selectableFields are served once it can be",
				zap.String("resource", gvr.String()), zap.Error(err))
		})
	}
}

// readCRDFields reads gvr's CRD with read and returns its field set;
// crd is false when there is no such CRD (gvr is not a custom resource).
// On an error it returns the default field set, crd true.
func readCRDFields(ctx context.Context, read func(context.Context, string) ([]byte, error),
	gvr schema.GroupVersionResource, namespaced bool) (set *fieldSet, crd bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, crdReadTimeout)
	defer cancel()
	b, err := read(ctx, gvr.Resource+"."+gvr.Group)
	switch {
	case apierrors.IsNotFound(err):
		return builtinFieldSet(gvr.GroupResource()), false, nil
	case err != nil:
		return builtinFieldSet(gvr.GroupResource()), true, err
	}
	var c struct {
		Spec struct {
			Versions []struct {
				Name             string `json:"name"`
				SelectableFields []struct {
					JSONPath string `json:"jsonPath"`
				} `json:"selectableFields"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return builtinFieldSet(gvr.GroupResource()), true, fmt.Errorf("CustomResourceDefinition %s.%s: %w", gvr.Resource, gvr.Group, err)
	}
	var paths []string
	for _, v := range c.Spec.Versions {
		if v.Name == gvr.Version {
			for _, f := range v.SelectableFields {
				paths = append(paths, f.JSONPath)
			}
		}
	}
	set, err = crdFieldSet(namespaced, paths)
	if err != nil {
		return builtinFieldSet(gvr.GroupResource()), true, fmt.Errorf("CustomResourceDefinition %s.%s: %w", gvr.Resource, gvr.Group, err)
	}
	return set, true, nil
}

// restCRDReader reads CustomResourceDefinitions with client.
func restCRDReader(client rest.Interface) func(context.Context, string) ([]byte, error) {
	return func(ctx context.Context, name string) ([]byte, error) {
		return client.Get().AbsPath("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", name).Do(ctx).Raw()
	}
}
