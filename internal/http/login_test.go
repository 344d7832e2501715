package httpapi

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"
	"k8s.io/client-go/rest"

	"kubegate/internal/auth"
	"kubegate/internal/informer"
	"kubegate/internal/livequery/wire"
)

// TestAuthRoutes checks the server's side of authentication: /login and
// /logout are mounted outside authentication, refusals keep their code,
// 401s carry WWW-Authenticate, and the per-user limit answers 429.
func TestAuthRoutes(t *testing.T) {
	mgr, err := informer.New(informer.Options{Config: &rest.Config{Host: "http://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.ParseTokenFile(strings.NewReader("good,alice,a-1\n"))
	if err != nil {
		t.Fatal(err)
	}
	bearer, err := auth.NewBearer(auth.BearerOptions{Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	login, err := auth.NewLogin(auth.LoginOptions{Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	ws := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(auth.UserFrom(r.Context()).Name))
	})
	s, err := New(Options{Manager: mgr, Tables: wire.NewTables(mgr, zap.NewNop(), wire.ViewLimits{}), Listener: nopListener{}, WebSocket: ws, Authenticator: bearer, Login: login,
		RateLimiter: auth.NewRateLimiter(auth.RateLimitOptions{QPS: 1, Burst: 3}, nil)})
	if err != nil {
		t.Fatal(err)
	}
	h := s.Handler()
	do := func(method, target, body string, hdr map[string]string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, "http://gw.local"+target, strings.NewReader(body))
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}

	w := do(http.MethodPost, "/login", "token=good", map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	if w.Code != http.StatusOK || len(w.Result().Cookies()) != 1 {
		t.Fatalf("login: %d %s", w.Code, w.Body)
	}
	cookie := w.Result().Cookies()[0]
	for _, tc := range []struct {
		name   string
		target string
		hdr    map[string]string
		code   int
		body   string
	}{
		{"no credentials", "/ws", nil, 401, "no credentials"},
		{"token in URL", "/ws?access_token=good", nil, 400, "not accepted"},
		{"cookie from foreign origin", "/ws", map[string]string{"Cookie": cookie.String(), "Origin": "https://evil.example"}, 403, "may not use the login cookie"},
		{"cookie same origin", "/ws", map[string]string{"Cookie": cookie.String(), "Origin": "http://gw.local"}, 200, "alice"},
		{"bearer", "/ws", map[string]string{"Authorization": "Bearer good"}, 200, "alice"},
		{"bearer again", "/ws", map[string]string{"Authorization": "Bearer good"}, 200, "alice"},
		{"rate limited", "/ws", map[string]string{"Authorization": "Bearer good"}, 429, "rate limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := do(http.MethodGet, tc.target, "", tc.hdr)
			if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.body) {
				t.Fatalf("%d %s; want %d containing %q", w.Code, w.Body, tc.code, tc.body)
			}
			if tc.code == 401 && w.Header().Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
			if tc.code == 429 && w.Header().Get("Retry-After") == "" {
				t.Fatal("429 without Retry-After")
			}
			if tc.code >= 400 {
				var st struct{ Kind string }
				if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil || st.Kind != "Status" {
					t.Fatalf("not a Status: %s", w.Body)
				}
			}
		})
	}
	if w := do(http.MethodPost, "/logout", "", nil); w.Code != http.StatusNoContent {
		t.Fatalf("logout: %d", w.Code)
	}
}

// nopListener stands in for a listener in tests that only use Handler.
type nopListener struct{ net.Listener }

func (nopListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }
func (nopListener) Close() error   { return nil }
