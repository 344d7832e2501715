package web

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHandler(t *testing.T) {
	h := Handler()
	tests := []struct {
		method, path string
		code         int
		contentType  string
		body         string
	}{
		{"GET", "/", 200, "text/html; charset=utf-8", `<script type="module" src="app.js">`},
		{"GET", "/index.html", 200, "text/html; charset=utf-8", "<title>kubegate</title>"},
		{"HEAD", "/", 200, "text/html; charset=utf-8", ""},
		{"GET", "/app.js", 200, "text/javascript; charset=utf-8", "kubegate.v1"},
		{"GET", "/table.js", 200, "text/javascript; charset=utf-8", "requestAnimationFrame"},
		{"GET", "/yaml.js", 200, "text/javascript; charset=utf-8", "export function toYAML"},
		{"GET", "/kubegate.js", 200, "text/javascript; charset=utf-8", "export class KubegateClient"},
		{"GET", "/style.css", 200, "text/css; charset=utf-8", ":root"},
		{"GET", "/nope.js", 404, "", ""},
		{"GET", "/../embed.go", 404, "", ""},
		{"POST", "/", 405, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, "http://gw.example:8080"+tc.path, nil)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.code {
				t.Fatalf("code = %d, want %d", w.Code, tc.code)
			}
			csp := w.Header().Get("Content-Security-Policy")
			for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self' ws://gw.example:8080 wss://gw.example:8080", "frame-ancestors 'none'"} {
				if !strings.Contains(csp, want) {
					t.Errorf("CSP %q lacks %q", csp, want)
				}
			}
			if got := w.Header().Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options = %q", got)
			}
			if got := w.Header().Get("X-Frame-Options"); got != "DENY" {
				t.Errorf("X-Frame-Options = %q", got)
			}
			if tc.code != 200 {
				return
			}
			if got := w.Header().Get("Content-Type"); got != tc.contentType {
				t.Errorf("Content-Type = %q, want %q", got, tc.contentType)
			}
			if got := w.Header().Get("Cache-Control"); got != "no-cache" {
				t.Errorf("Cache-Control = %q, want no-cache", got)
			}
			if !strings.Contains(w.Body.String(), tc.body) {
				t.Errorf("body lacks %q", tc.body)
			}
			if tc.method == "HEAD" && w.Body.Len() != 0 {
				t.Errorf("HEAD answered with a body")
			}
		})
	}
}

func TestHandlerRevalidates(t *testing.T) {
	h := Handler()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/app.js", nil))
	etag := w.Header().Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	r := httptest.NewRequest("GET", "/app.js", nil)
	r.Header.Set("If-None-Match", etag)
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusNotModified || w.Body.Len() != 0 {
		t.Fatalf("revalidation: code %d, %d body bytes; want 304 and none", w.Code, w.Body.Len())
	}
}

// A forged Host header must not be able to add CSP directives.
func TestHandlerHostNotInjected(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	r.Host = "evil.example; script-src *"
	w := httptest.NewRecorder()
	Handler().ServeHTTP(w, r)
	csp := w.Header().Get("Content-Security-Policy")
	if strings.Contains(csp, "evil") || !strings.Contains(csp, "connect-src 'self';") {
		t.Fatalf("CSP = %q", csp)
	}
}
