package httpapi

import "github.com/go-chi/chi/v5"

// mountAPI mounts the Kubernetes-compatible read API.
func (s *Server) mountAPI(r chi.Router) {}
