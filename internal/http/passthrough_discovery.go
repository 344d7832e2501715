package httpapi

import (
	"slices"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// passedDiscovery is the apiserver's discovery as the gateway serves it
// with pass-through: as it is, every resource with its verbs and
// subresources, since what the cache does not serve is passed on
// (kubectl scale finds the scale subresource there, kubectl api-resources
// lists what kube-apiserver lists), except the proxy subresources, which
// are never passed.
func passedDiscovery(in []apidiscoveryv2.APIGroupDiscovery) []apidiscoveryv2.APIGroupDiscovery {
	out := make([]apidiscoveryv2.APIGroupDiscovery, 0, len(in))
	for _, g := range in {
		sg := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g.Name}}
		for _, v := range g.Versions {
			sv := apidiscoveryv2.APIVersionDiscovery{Version: v.Version, Freshness: v.Freshness}
			for _, r := range v.Resources {
				r.Subresources = slices.DeleteFunc(slices.Clone(r.Subresources), func(s apidiscoveryv2.APISubresourceDiscovery) bool {
					return s.Subresource == "proxy"
				})
				if len(r.Subresources) == 0 {
					r.Subresources = nil
				}
				sv.Resources = append(sv.Resources, r)
			}
			sg.Versions = append(sg.Versions, sv)
		}
		out = append(out, sg)
	}
	return out
}

// legacySubresources are r's subresources in the legacy form, as
// kube-apiserver lists them after their resource: "resource/subresource",
// no singular name, the resource's scope, the subresource's kind (with a
// group and version where they differ from the list's) and verbs.
func legacySubresources(r apidiscoveryv2.APIResourceDiscovery) []metav1.APIResource {
	var out []metav1.APIResource
	for _, sub := range r.Subresources {
		res := metav1.APIResource{
			Name:       r.Resource + "/" + sub.Subresource,
			Namespaced: r.Scope == apidiscoveryv2.ScopeNamespace,
			Verbs:      sub.Verbs,
		}
		if rk := sub.ResponseKind; rk != nil {
			res.Group, res.Version, res.Kind = rk.Group, rk.Version, rk.Kind
		}
		out = append(out, res)
	}
	return out
}
