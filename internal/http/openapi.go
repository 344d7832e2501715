package httpapi

import (
	"github.com/go-chi/chi/v5"
)

// mountOpenAPI mounts Options.OpenAPI at /openapi/v2, /openapi/v3 and
// below, for authenticated callers allowed to get the path as a
// non-resource URL: kube-apiserver authorizes the same requests so, and
// its system:discovery ClusterRole lets every authenticated user read
// them.
func (s *Server) mountOpenAPI(r chi.Router) {
	if s.opts.OpenAPI == nil {
		return
	}
	r.With(s.authorizePath).Handle("/openapi/*", s.opts.OpenAPI)
}
