package informer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// Discovery is the apiserver's discovery document, as the gateway last
// fetched it, in the aggregated form (apidiscovery.k8s.io/v2) that
// kubectl and client-go read: Core is what /api lists (the core group,
// named ""), Groups what /apis lists.
//
// Order carries meaning and is the apiserver's: groups come in its
// priority order, and each group's versions in its order of preference,
// the first being the preferred version (which a RESTMapper resolves
// "hpa" to). Resources come in the order the apiserver lists them.
//
// A Discovery is immutable once fetched and shared by every reader:
// callers must not modify it.
type Discovery struct {
	Core   []apidiscoveryv2.APIGroupDiscovery
	Groups []apidiscoveryv2.APIGroupDiscovery
}

var aggregatedV2 = schema.GroupVersionKind{Group: "apidiscovery.k8s.io", Version: "v2", Kind: "APIGroupDiscoveryList"}

// fetchDiscovery reads the apiserver's discovery. It asks for the
// aggregated document of /api and /apis first, which keeps everything in
// the apiserver's order; an apiserver (or a proxy in the way) that
// answers in the legacy form is read the legacy way, a request per group
// version, and its answer is put in the aggregated form (see
// fromLegacy).
//
// A group version that could not be read is kept, marked Stale and
// without resources, as kube-apiserver marks an aggregated API it cannot
// reach; the error then says which.
func fetchDiscovery(ctx context.Context, dc discovery.DiscoveryInterface) (*Discovery, error) {
	if rc := dc.RESTClient(); rc != nil {
		core, coreOK, err := fetchAggregated(ctx, dc, "/api")
		if err != nil {
			return nil, err
		}
		groups, groupsOK, err := fetchAggregated(ctx, dc, "/apis")
		if err != nil {
			return nil, err
		}
		if coreOK && groupsOK {
			return &Discovery{Core: core, Groups: groups}, nil
		}
	}
	groups, lists, err := discovery.ServerGroupsAndResources(dc)
	if len(groups) == 0 {
		if err == nil {
			err = errors.New("the apiserver lists no API groups")
		}
		return nil, err
	}
	var failed map[schema.GroupVersion]error
	var gdf *discovery.ErrGroupDiscoveryFailed
	if errors.As(err, &gdf) {
		failed = gdf.Groups
	} else if err != nil {
		return nil, err
	}
	return fromLegacy(groups, lists, failed), err
}

// fetchAggregated GETs path asking for aggregated discovery (and plain
// JSON after it, as client-go does). ok is false when the answer was the
// legacy form. A 404 for /api is an empty core group: aggregated
// apiservers serve no /api.
func fetchAggregated(ctx context.Context, dc discovery.DiscoveryInterface, path string) (_ []apidiscoveryv2.APIGroupDiscovery, ok bool, _ error) {
	var contentType string
	body, err := dc.RESTClient().Get().AbsPath(path).
		SetHeader("Accept", discovery.AcceptV2+","+discovery.AcceptV1).
		Do(ctx).ContentType(&contentType).Raw()
	if err != nil {
		if path == "/api" && apierrors.IsNotFound(err) {
			return nil, true, nil
		}
		return nil, false, fmt.Errorf("discovery %s: %w", path, err)
	}
	if aggregated, _ := discovery.ContentTypeIsGVK(contentType, aggregatedV2); !aggregated {
		return nil, false, nil
	}
	var l apidiscoveryv2.APIGroupDiscoveryList
	if err := json.Unmarshal(body, &l); err != nil {
		return nil, false, fmt.Errorf("discovery %s: %w", path, err)
	}
	return l.Items, true, nil
}

// fromLegacy puts legacy discovery (an APIGroupList and an
// APIResourceList per group version) in the aggregated form, as
// kube-apiserver builds its aggregated document from the same lists:
// versions preferred first, subresources ("pods/status") under their
// resource, kinds of the group version itself with an empty group and
// version. A group version in failed is Stale.
func fromLegacy(groups []*metav1.APIGroup, lists []*metav1.APIResourceList, failed map[schema.GroupVersion]error) *Discovery {
	byGV := make(map[string]*metav1.APIResourceList, len(lists))
	for _, l := range lists {
		byGV[l.GroupVersion] = l
	}
	d := &Discovery{}
	for _, g := range groups {
		versions := make([]metav1.GroupVersionForDiscovery, 0, len(g.Versions))
		if g.PreferredVersion.Version != "" {
			versions = append(versions, g.PreferredVersion)
		}
		for _, v := range g.Versions {
			if v.Version != g.PreferredVersion.Version {
				versions = append(versions, v)
			}
		}
		out := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g.Name}}
		for _, v := range versions {
			gv := schema.GroupVersion{Group: g.Name, Version: v.Version}
			vd := apidiscoveryv2.APIVersionDiscovery{Version: v.Version, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
			if _, bad := failed[gv]; bad {
				vd.Freshness = apidiscoveryv2.DiscoveryFreshnessStale
			} else if l := byGV[gv.String()]; l != nil {
				vd.Resources = resourcesFromLegacy(l.APIResources)
			}
			out.Versions = append(out.Versions, vd)
		}
		if g.Name == "" {
			d.Core = append(d.Core, out)
		} else {
			d.Groups = append(d.Groups, out)
		}
	}
	return d
}

func resourcesFromLegacy(in []metav1.APIResource) []apidiscoveryv2.APIResourceDiscovery {
	var out []apidiscoveryv2.APIResourceDiscovery
	index := map[string]int{}
	for _, r := range in {
		if strings.Contains(r.Name, "/") {
			continue
		}
		scope := apidiscoveryv2.ScopeCluster
		if r.Namespaced {
			scope = apidiscoveryv2.ScopeNamespace
		}
		index[r.Name] = len(out)
		out = append(out, apidiscoveryv2.APIResourceDiscovery{
			Resource:         r.Name,
			ResponseKind:     &metav1.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind},
			Scope:            scope,
			SingularResource: r.SingularName,
			Verbs:            r.Verbs,
			ShortNames:       r.ShortNames,
			Categories:       r.Categories,
		})
	}
	for _, r := range in {
		parent, sub, ok := strings.Cut(r.Name, "/")
		i, found := index[parent]
		if !ok || !found {
			continue
		}
		out[i].Subresources = append(out[i].Subresources, apidiscoveryv2.APISubresourceDiscovery{
			Subresource:  sub,
			ResponseKind: &metav1.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind},
			Verbs:        r.Verbs,
		})
	}
	return out
}
