package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"kubegate/internal/apistatus"
	"kubegate/internal/auth"
	"kubegate/internal/informer"
)

// mountAPI mounts the Kubernetes-compatible read API: discovery, list,
// get and watch, all answered from the informer cache. Paths are parsed
// by hand below /api and /apis so that the metrics label stays one of a
// few route patterns whatever the object names.
func (s *Server) mountAPI(r chi.Router) {
	r.HandleFunc("/version", s.serveVersion)
	r.HandleFunc("/api", s.serveAPI)
	r.HandleFunc("/api/*", s.serveAPI)
	r.HandleFunc("/apis", s.serveAPI)
	r.HandleFunc("/apis/*", s.serveAPI)
}

// apiRequest is a parsed resource path.
type apiRequest struct {
	gv        schema.GroupVersion
	resource  string
	namespace string
	name      string
}

// parseAPIPath splits /api/v1/... and /apis/g/v/... The second result
// says what the path names: "" (invalid), "versions" (/api), "groups"
// (/apis), "group" (/apis/g), "resources" (/api/v1, /apis/g/v), "list" or
// "get".
func parseAPIPath(path string) (apiRequest, string) {
	var rq apiRequest
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for _, s := range segs {
		if s == "" {
			return rq, ""
		}
	}
	switch {
	case segs[0] == "api":
		if len(segs) == 1 {
			return rq, "versions"
		}
		rq.gv = schema.GroupVersion{Version: segs[1]}
		segs = segs[2:]
	case segs[0] == "apis":
		switch len(segs) {
		case 1:
			return rq, "groups"
		case 2:
			rq.gv.Group = segs[1]
			return rq, "group"
		}
		rq.gv = schema.GroupVersion{Group: segs[1], Version: segs[2]}
		segs = segs[3:]
	default:
		return rq, ""
	}
	switch {
	case len(segs) == 0:
		return rq, "resources"
	case len(segs) == 1:
		rq.resource = segs[0]
		return rq, "list"
	case len(segs) == 2:
		rq.resource, rq.name = segs[0], segs[1]
		return rq, "get"
	case len(segs) == 3 && segs[0] == "namespaces":
		rq.namespace, rq.resource = segs[1], segs[2]
		return rq, "list"
	case len(segs) == 4 && segs[0] == "namespaces":
		rq.namespace, rq.resource, rq.name = segs[1], segs[2], segs[3]
		return rq, "get"
	}
	// Subresources (pods/x/log, .../status) and anything longer.
	return rq, ""
}

func notFound(format string, args ...any) *metav1.Status {
	return apistatus.New(http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf(format, args...))
}

func badRequest(format string, args ...any) *metav1.Status {
	return apistatus.New(http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf(format, args...))
}

// serveAPI dispatches everything below /api and /apis: what the cache
// does not serve to pass-through (passthrough.go), the rest to the cache.
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	if p, ok := passes(r); ok {
		s.servePassThrough(w, r, p)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		apistatus.Write(w, apistatus.New(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
			fmt.Sprintf("%s is not allowed: kubegate serves a read-only cache (get, list, watch)", r.Method)))
		return
	}
	rq, kind := parseAPIPath(r.URL.Path)
	switch kind {
	case "versions", "groups", "group", "resources":
		s.serveDiscovery(w, r, rq, kind)
		return
	case "list", "get":
	default:
		apistatus.Write(w, notFound("the server could not find the requested resource (%s)", r.URL.Path))
		return
	}
	q := r.URL.Query()
	if err := validateQuery(q); err != nil {
		apistatus.Write(w, err)
		return
	}
	info, err := s.resolve(r.Context(), rq)
	if errors.Is(err, informer.ErrNotWatchable) && s.serveRead(w, r) {
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if !info.Namespaced && rq.namespace != "" {
		apistatus.Write(w, notFound("%s is cluster-scoped: it has no namespace path", info.GVR.GroupResource()))
		return
	}
	if info.Namespaced && rq.namespace == "" && rq.name != "" {
		apistatus.Write(w, notFound("%s is namespaced: get it under /namespaces/{namespace}/", info.GVR.GroupResource()))
		return
	}
	watch := isTrue(q.Get("watch"))
	if watch && isSortedList(q) {
		s.writeError(w, r, sortedWatch())
		return
	}
	verb := kind
	if watch {
		verb = "watch"
	}
	setAPIRoute(r, routeTemplate(rq, verb))
	// A get, or a watch on an object path, is authorized for the path's
	// name; a list or watch for the name its field selector requires, as
	// kube-apiserver does, so RBAC resourceNames apply to both. A watch
	// is re-checked with the same request.
	areq := auth.Request{Verb: verb, Resource: info.GVR, Namespaced: info.Namespaced, Namespace: rq.namespace, Name: rq.name}
	if kind == "list" {
		areq.Name = auth.SelectedName(q)
	}
	dec, err := s.opts.Authorizer.Authorize(r.Context(), auth.UserFrom(r.Context()), areq)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.opts.Manager.ResourceFor(r.Context(), info)
	if err == nil {
		err = res.WaitForSync(r.Context())
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// kube-apiserver warns on every request for a deprecated API; the
	// gateway repeats what it warned on the gateway's own list.
	for _, text := range res.Warnings() {
		if h, err := utilnet.NewWarningHeader(299, "-", text); err == nil {
			w.Header().Add("Warning", h)
		}
	}
	switch {
	case watch:
		s.serveWatch(w, r, rq, res, areq, dec)
	case kind == "get":
		s.serveGet(w, r, rq, res)
	default:
		s.serveList(w, r, rq, res, dec)
	}
}

// resolve maps the path's group, version and resource to a served
// resource, exactly: short names, kinds or other versions are not paths.
func (s *Server) resolve(ctx context.Context, rq apiRequest) (*informer.ResourceInfo, error) {
	want := rq.gv.WithResource(rq.resource)
	name := rq.resource
	if rq.gv.Group != "" {
		name = rq.resource + "." + rq.gv.Version + "." + rq.gv.Group
	}
	info, err := s.opts.Manager.Resolve(ctx, name)
	var ue *informer.UnknownResourceError
	if errors.As(err, &ue) || (err == nil && info.GVR != want) {
		return nil, notFoundError(fmt.Sprintf("the server could not find the requested resource: no resource %q in %s",
			rq.resource, groupVersionName(rq.gv)))
	}
	return info, err
}

func groupVersionName(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "api " + gv.Version
	}
	return gv.String()
}

// statusError carries a ready-made Status through error returns.
type statusError struct{ st *metav1.Status }

func (e *statusError) Error() string           { return e.st.Message }
func (e *statusError) Status() metav1.Status   { return *e.st }
func notFoundError(msg string) error           { return &statusError{notFound("%s", msg)} }
func badRequestError(f string, a ...any) error { return &statusError{badRequest(f, a...)} }
func statusErr(st *metav1.Status) error        { return &statusError{st} }

// writeError answers with err as a Status, logging errors that are hidden
// behind InternalError.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return // the client is gone
	}
	st := apistatus.WriteError(w, err)
	if apistatus.Internal(st) {
		s.log.Error("request failed", zap.String("path", r.URL.Path), zap.Error(err))
	}
}

func isTrue(v string) bool { return v == "true" || v == "1" }

// knownParams are the query parameters the API reads or knowingly ignores.
var knownParams = map[string]bool{
	"watch": true, "labelSelector": true, "fieldSelector": true, "limit": true, "continue": true,
	"resourceVersion": true, "resourceVersionMatch": true, "pretty": true, "allowWatchBookmarks": true,
	"sendInitialEvents": true, "timeoutSeconds": true, "timeout": true, "includeObject": true,
	"shardSelector": true,
	// Sorted lists (sorted.go).
	"sort": true, "order": true, "filter": true,
}

// validateQuery rejects malformed boolean parameters and repeated
// parameters, so a typo does not silently change the answer.
func validateQuery(q map[string][]string) *metav1.Status {
	for k, vs := range q {
		if !knownParams[k] {
			continue // the apiserver ignores unknown parameters too
		}
		if len(vs) > 1 {
			return badRequest("query parameter %q given %d times", k, len(vs))
		}
		switch k {
		case "watch", "allowWatchBookmarks", "sendInitialEvents", "pretty":
			switch vs[0] {
			case "", "true", "false", "1", "0":
			default:
				return badRequest("query parameter %s=%q: want true or false", k, vs[0])
			}
		}
	}
	return nil
}

// routeTemplate is the metrics route of a resource request.
func routeTemplate(rq apiRequest, verb string) string {
	t := "/api/{version}"
	if rq.gv.Group != "" {
		t = "/apis/{group}/{version}"
	}
	if rq.namespace != "" {
		t += "/namespaces/{namespace}"
	}
	t += "/{resource}"
	if rq.name != "" {
		t += "/{name}"
	}
	return t + " " + verb
}
