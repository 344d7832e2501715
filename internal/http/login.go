package httpapi

import "github.com/go-chi/chi/v5"

// mountLogin mounts the browser login endpoints, which set and clear the
// token cookie (see auth.Login). They sit outside authentication: /login
// is how a browser gets authenticated.
func (s *Server) mountLogin(r chi.Router) {
	if s.opts.Login == nil {
		return
	}
	r.HandleFunc("/login", s.opts.Login.ServeLogin)
	r.HandleFunc("/logout", s.opts.Login.ServeLogout)
}
