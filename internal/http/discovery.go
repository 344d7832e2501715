package httpapi

import (
	"bytes"
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kubegate/internal/apistatus"
	"kubegate/internal/informer"
)

// servedVerbs are the verbs kubegate serves, in the order kube-apiserver
// lists verbs.
var servedVerbs = []string{"get", "list", "watch"}

// serveDiscovery answers /api, /apis, /apis/{g} and the resource lists of
// /api/v1 and /apis/{g}/{v}, in the aggregated form (apidiscovery.k8s.io
// v2, every group's resources in one document) when the Accept header
// asks for it before plain JSON, as kubectl and client-go do, and in the
// legacy form otherwise.
//
// Both are the apiserver's discovery (informer.Discovery, in the
// apiserver's order) cut to what the gateway serves (see servedDiscovery)
// and rendered as kube-apiserver renders them, so that clients resolve
// names as they would against the apiserver: the same groups in the same
// order and the same preferred versions. Each form is rendered once per
// document the informer manager fetches, so that every answer is the
// same, to the byte, until the apiserver's changes. Aggregated answers
// carry an ETag and answer If-None-Match with 304, as kube-apiserver's do.
func (s *Server) serveDiscovery(w http.ResponseWriter, r *http.Request, rq apiRequest, kind string) {
	src, err := s.opts.Manager.Discovery(r.Context())
	if src == nil {
		s.writeError(w, r, err)
		return
	}
	doc := s.discovery.rendered(src)
	pretty := isTrue(r.URL.Query().Get("pretty"))
	w.Header().Set("Vary", "Accept")
	if (kind == "versions" || kind == "groups") && wantsAggregated(r) {
		a := doc.aggregatedGroups
		if kind == "versions" {
			a = doc.aggregatedCore
		}
		w.Header().Set("Cache-Control", "public")
		w.Header().Set("ETag", a.etag)
		if inm := r.Header.Get("If-None-Match"); inm != "" && etagMatches(inm, a.etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Content-Type", aggregatedContentType)
		writeBody(w, r, a.body, pretty)
		return
	}
	var body []byte
	switch kind {
	case "versions":
		// The address is the one this client reached: the gateway's.
		b, err := json.Marshal(&metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: doc.coreVersions,
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host}}})
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		body = append(b, '\n')
	case "groups":
		body = doc.groupList
	case "group":
		if body = doc.group[rq.gv.Group]; body == nil {
			apistatus.Write(w, notFound("the server could not find the requested resource: no API group %q", rq.gv.Group))
			return
		}
	case "resources":
		if body = doc.resources[rq.gv]; body == nil {
			apistatus.Write(w, notFound("the server could not find the requested resource: no %s", groupVersionName(rq.gv)))
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	writeBody(w, r, body, pretty)
}

// writeBody writes a JSON body that ends in a newline, indented when
// pretty is set.
func writeBody(w http.ResponseWriter, r *http.Request, body []byte, pretty bool) {
	if pretty {
		var ind bytes.Buffer
		if json.Indent(&ind, body, "", "  ") == nil {
			body = ind.Bytes()
		}
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// etagMatches reports whether an If-None-Match header names etag (or is
// "*").
func etagMatches(header, etag string) bool {
	for tag := range strings.SplitSeq(header, ",") {
		tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
		if tag == etag || tag == "*" {
			return true
		}
	}
	return false
}

// discoveryCache holds the rendered forms of the last discovery document.
type discoveryCache struct {
	// passThrough, set once by New, serves the document as kube-apiserver
	// serves it (passedDiscovery) rather than cut to the cache
	// (servedDiscovery).
	passThrough bool
	// mu guards last.
	mu   sync.Mutex
	last *renderedDiscovery
}

// rendered returns src's rendered forms, rendering them if src is not
// the document last rendered.
func (c *discoveryCache) rendered(src *informer.Discovery) *renderedDiscovery {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil || c.last.src != src {
		cut := servedDiscovery
		if c.passThrough {
			cut = passedDiscovery
		}
		c.last = renderDiscovery(src, cut)
	}
	return c.last
}

// renderedDiscovery is one document in every form the gateway serves,
// each JSON ending in a newline, as kube-apiserver's.
type renderedDiscovery struct {
	src                              *informer.Discovery
	aggregatedCore, aggregatedGroups aggregatedBody
	coreVersions                     []string
	groupList                        []byte
	group                            map[string][]byte
	resources                        map[schema.GroupVersion][]byte
}

type aggregatedBody struct {
	body []byte
	etag string
}

func renderDiscovery(src *informer.Discovery, cut func([]apidiscoveryv2.APIGroupDiscovery) []apidiscoveryv2.APIGroupDiscovery) *renderedDiscovery {
	core, groups := cut(src.Core), cut(src.Groups)
	d := &renderedDiscovery{
		src:              src,
		aggregatedCore:   renderAggregated(core),
		aggregatedGroups: renderAggregated(groups),
		coreVersions:     []string{},
		group:            map[string][]byte{},
		resources:        map[schema.GroupVersion][]byte{},
	}
	for _, g := range core {
		for _, v := range g.Versions {
			d.coreVersions = append(d.coreVersions, v.Version)
			// kube-apiserver's /api/v1 has no apiVersion, unlike
			// /apis/{g}/{v}.
			d.resources[schema.GroupVersion{Version: v.Version}] = mustJSON(legacyResources(schema.GroupVersion{Version: v.Version}, v, metav1.TypeMeta{Kind: "APIResourceList"}))
		}
	}
	list := metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{}}
	for _, g := range groups {
		ag := metav1.APIGroup{Name: g.Name}
		for i, v := range g.Versions {
			gv := schema.GroupVersion{Group: g.Name, Version: v.Version}
			gvd := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: v.Version}
			if i == 0 {
				ag.PreferredVersion = gvd
			}
			ag.Versions = append(ag.Versions, gvd)
			d.resources[gv] = mustJSON(legacyResources(gv, v, metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}))
		}
		list.Groups = append(list.Groups, ag)
		ag.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
		d.group[g.Name] = mustJSON(&ag)
	}
	d.groupList = mustJSON(&list)
	return d
}

func renderAggregated(items []apidiscoveryv2.APIGroupDiscovery) aggregatedBody {
	b := mustJSON(&apidiscoveryv2.APIGroupDiscoveryList{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: "apidiscovery.k8s.io/v2"},
		Items:    items,
	})
	return aggregatedBody{body: b, etag: fmt.Sprintf(`"%X"`, sha512.Sum512(b))}
}

// mustJSON marshals discovery types, which always marshal, with the
// newline kube-apiserver ends its answers with.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return append(b, '\n')
}

// legacyResources is version v of a group in the legacy form, as
// kube-apiserver lists it: a resource's kind has a group and version
// only where they differ from the list's, and subresources follow their
// resource, named "resource/subresource" (only with pass-through: see
// servedDiscovery).
func legacyResources(gv schema.GroupVersion, v apidiscoveryv2.APIVersionDiscovery, tm metav1.TypeMeta) *metav1.APIResourceList {
	l := &metav1.APIResourceList{TypeMeta: tm, GroupVersion: gv.String(), APIResources: []metav1.APIResource{}}
	for _, r := range v.Resources {
		res := metav1.APIResource{
			Name:         r.Resource,
			SingularName: r.SingularResource,
			Namespaced:   r.Scope == apidiscoveryv2.ScopeNamespace,
			Verbs:        r.Verbs,
			ShortNames:   r.ShortNames,
			Categories:   r.Categories,
		}
		if rk := r.ResponseKind; rk != nil {
			res.Group, res.Version, res.Kind = rk.Group, rk.Version, rk.Kind
		}
		l.APIResources = append(l.APIResources, res)
		l.APIResources = append(l.APIResources, legacySubresources(r)...)
	}
	return l
}

// servedDiscovery cuts the apiserver's discovery to what the gateway
// serves, keeping every group, version and resource in the apiserver's
// order, so that clients map every kind as they would against the
// apiserver (a client-side dry run of a TokenReview needs its mapping):
// a resource's verbs are those of get, list and watch it has if it can
// be listed and watched (what the gateway serves of it), and none
// otherwise; subresources, of which the gateway serves none, are left
// out.
func servedDiscovery(in []apidiscoveryv2.APIGroupDiscovery) []apidiscoveryv2.APIGroupDiscovery {
	out := make([]apidiscoveryv2.APIGroupDiscovery, 0, len(in))
	for _, g := range in {
		sg := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g.Name}}
		for _, v := range g.Versions {
			sv := apidiscoveryv2.APIVersionDiscovery{Version: v.Version, Freshness: v.Freshness}
			for _, r := range v.Resources {
				r.Verbs = servedVerbsOf(r.Verbs)
				r.Subresources = nil
				sv.Resources = append(sv.Resources, r)
			}
			sg.Versions = append(sg.Versions, sv)
		}
		out = append(out, sg)
	}
	return out
}

// servedVerbsOf returns the verbs the gateway serves of a resource with
// verbs: get, list and watch, in the apiserver's order, if it has list
// and watch (the gateway's informer needs both); none otherwise.
func servedVerbsOf(verbs []string) []string {
	out := []string{}
	if !slices.Contains(verbs, "list") || !slices.Contains(verbs, "watch") {
		return out
	}
	for _, v := range verbs {
		if slices.Contains(servedVerbs, v) {
			out = append(out, v)
		}
	}
	return out
}

const aggregatedContentType = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// wantsAggregated reports whether the Accept header lists aggregated
// discovery v2 before any plain JSON.
func wantsAggregated(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil || (mt != "application/json" && mt != "*/*" && mt != "application/*") {
			continue
		}
		if params["as"] == "" {
			return false
		}
		if params["as"] == "APIGroupDiscoveryList" && params["g"] == "apidiscovery.k8s.io" && params["v"] == "v2" {
			return true
		}
	}
	return false
}

// serveVersion answers /version with the apiserver's version, read once
// at startup.
func (s *Server) serveVersion(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		apistatus.Write(w, apistatus.New(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, "only GET is served"))
		return
	}
	if s.opts.Version == nil {
		apistatus.Write(w, notFound("the server could not find the requested resource"))
		return
	}
	b, _ := json.Marshal(s.opts.Version)
	writeJSON(w, r, http.StatusOK, append(b, '\n'), isTrue(r.URL.Query().Get("pretty")))
}
