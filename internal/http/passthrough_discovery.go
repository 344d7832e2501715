package httpapi

import (
	"slices"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// servedResources is l as the gateway serves it in discovery. Without
// pass-through, the resources the cache serves with the read verbs only
// (readOnlyResources). With it, every resource, verb and subresource of
// kube-apiserver's, since what the cache does not serve is passed on
// (kubectl scale finds the scale subresource there, kubectl api-resources
// lists what kube-apiserver lists), except the proxy subresources, which
// are never passed.
func (s *Server) servedResources(l *metav1.APIResourceList) *metav1.APIResourceList {
	if s.pass == nil {
		return readOnlyResources(l)
	}
	out := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: l.GroupVersion, APIResources: []metav1.APIResource{}}
	for _, r := range l.APIResources {
		if strings.HasSuffix(r.Name, "/proxy") {
			continue
		}
		r.StorageVersionHash = ""
		out.APIResources = append(out.APIResources, r)
	}
	return out
}

// aggregatedResources is l's resources in aggregated discovery's form:
// each subresource ("deployments/scale") under its resource.
func aggregatedResources(gv schema.GroupVersion, l *metav1.APIResourceList) []apidiscoveryv2.APIResourceDiscovery {
	var out []apidiscoveryv2.APIResourceDiscovery
	for _, res := range l.APIResources {
		parent, sub, isSub := strings.Cut(res.Name, "/")
		if isSub {
			i := slices.IndexFunc(out, func(r apidiscoveryv2.APIResourceDiscovery) bool { return r.Resource == parent })
			if i < 0 {
				continue // kube-apiserver lists a subresource after its resource
			}
			kind := &metav1.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: res.Kind}
			if res.Version != "" {
				kind.Group, kind.Version = res.Group, res.Version
			}
			out[i].Subresources = append(out[i].Subresources, apidiscoveryv2.APISubresourceDiscovery{
				Subresource: sub, ResponseKind: kind, Verbs: res.Verbs,
			})
			continue
		}
		scope := apidiscoveryv2.ScopeCluster
		if res.Namespaced {
			scope = apidiscoveryv2.ScopeNamespace
		}
		out = append(out, apidiscoveryv2.APIResourceDiscovery{
			Resource:         res.Name,
			ResponseKind:     &metav1.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: res.Kind},
			Scope:            scope,
			SingularResource: res.SingularName,
			Verbs:            res.Verbs,
			ShortNames:       res.ShortNames,
			Categories:       res.Categories,
		})
	}
	return out
}
