package httpapi

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"slices"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kubegate/internal/apistatus"
)

// readVerbs are the only verbs kubegate serves.
var readVerbs = metav1.Verbs{"get", "list", "watch"}

// serveDiscovery answers /api, /apis, /apis/{g} and the resource lists of
// /api/v1 and /apis/{g}/{v} from the apiserver's discovery (cached by the
// informer manager), keeping only resources that support list and watch
// and advertising only get, list and watch.
//
// /api and /apis also answer aggregated discovery (apidiscovery.k8s.io/v2,
// every group's resources in one document) when the Accept header asks for
// it before plain JSON, as kubectl and client-go do; otherwise the legacy
// form with Content-Type application/json.
func (s *Server) serveDiscovery(w http.ResponseWriter, r *http.Request, rq apiRequest, kind string) {
	lists, err := s.opts.Manager.ServerResources()
	if err != nil && len(lists) == 0 {
		s.writeError(w, r, err)
		return
	}
	// gvs: served group versions in discovery order (preferred first).
	var gvs []schema.GroupVersion
	byGV := map[schema.GroupVersion]*metav1.APIResourceList{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		rl := s.servedResources(l)
		if len(rl.APIResources) == 0 {
			continue
		}
		if _, dup := byGV[gv]; !dup {
			gvs = append(gvs, gv)
		}
		byGV[gv] = rl
	}
	pretty := isTrue(r.URL.Query().Get("pretty"))
	w.Header().Set("Vary", "Accept")
	if (kind == "versions" || kind == "groups") && wantsAggregated(r) {
		b, err := json.Marshal(aggregated(kind == "versions", gvs, byGV))
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		w.Header().Set("Content-Type", aggregatedContentType)
		if pretty {
			var ind bytes.Buffer
			if json.Indent(&ind, b, "", "  ") == nil {
				b = ind.Bytes()
			}
		}
		w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			_, _ = w.Write(append(b, '\n'))
		}
		return
	}
	var body any
	switch kind {
	case "versions":
		body = &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host}}}
	case "groups":
		gl := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{}}
		for _, gv := range gvs {
			if gv.Group == "" || slices.ContainsFunc(gl.Groups, func(g metav1.APIGroup) bool { return g.Name == gv.Group }) {
				continue
			}
			gl.Groups = append(gl.Groups, apiGroup(gv.Group, gvs))
		}
		body = gl
	case "group":
		g := apiGroup(rq.gv.Group, gvs)
		if len(g.Versions) == 0 {
			apistatus.Write(w, notFound("the server could not find the requested resource: no API group %q", rq.gv.Group))
			return
		}
		body = &g
	case "resources":
		rl := byGV[rq.gv]
		if rl == nil {
			apistatus.Write(w, notFound("the server could not find the requested resource: no %s", groupVersionName(rq.gv)))
			return
		}
		body = rl
	}
	b, err := json.Marshal(body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, append(b, '\n'), pretty)
}

func apiGroup(group string, gvs []schema.GroupVersion) metav1.APIGroup {
	g := metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: group}
	for _, gv := range gvs {
		if gv.Group != group {
			continue
		}
		v := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
		if len(g.Versions) == 0 {
			g.PreferredVersion = v
		}
		g.Versions = append(g.Versions, v)
	}
	return g
}

// readOnlyResources copies l keeping list+watch resources (no
// subresources) with the read verbs only.
func readOnlyResources(l *metav1.APIResourceList) *metav1.APIResourceList {
	out := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: l.GroupVersion, APIResources: []metav1.APIResource{}}
	for _, r := range l.APIResources {
		if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "watch") {
			continue
		}
		r.Verbs = readVerbs
		r.StorageVersionHash = ""
		out.APIResources = append(out.APIResources, r)
	}
	return out
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

// aggregated builds the v2 aggregated discovery document of the core group
// (/api) or of the named groups (/apis), preferred versions first.
func aggregated(core bool, gvs []schema.GroupVersion, byGV map[schema.GroupVersion]*metav1.APIResourceList) *apidiscoveryv2.APIGroupDiscoveryList {
	out := &apidiscoveryv2.APIGroupDiscoveryList{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: "apidiscovery.k8s.io/v2"},
		Items:    []apidiscoveryv2.APIGroupDiscovery{},
	}
	index := map[string]int{}
	for _, gv := range gvs {
		if (gv.Group == "") != core {
			continue
		}
		i, ok := index[gv.Group]
		if !ok {
			i = len(out.Items)
			index[gv.Group] = i
			out.Items = append(out.Items, apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: gv.Group}})
		}
		v := apidiscoveryv2.APIVersionDiscovery{Version: gv.Version, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent,
			Resources: aggregatedResources(gv, byGV[gv])}
		out.Items[i].Versions = append(out.Items[i].Versions, v)
	}
	return out
}
