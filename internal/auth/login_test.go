package auth

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

func newTestLogin(t *testing.T) *Login {
	t.Helper()
	return must[*Login](t)(NewLogin(LoginOptions{Tokens: userTokens{"good": alice}}))
}

func postLogin(l *Login, body, contentType string, mod func(*http.Request)) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "http://gw.local/login", strings.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	if mod != nil {
		mod(r)
	}
	w := httptest.NewRecorder()
	l.ServeLogin(w, r)
	return w
}

func TestLoginSetsCookie(t *testing.T) {
	l := newTestLogin(t)
	for _, tc := range []struct {
		name, body, ct string
		mod            func(*http.Request)
		secure         bool
	}{
		{name: "form", body: "token=good", ct: "application/x-www-form-urlencoded"},
		{name: "json", body: `{"token":"good"}`, ct: "application/json; charset=utf-8"},
		{name: "header", mod: func(r *http.Request) { r.Header.Set("Authorization", "Bearer good") }},
		{name: "tls", body: "token=good", ct: "application/x-www-form-urlencoded", mod: func(r *http.Request) { r.TLS = &tls.ConnectionState{} }, secure: true},
		{name: "behind https proxy", body: "token=good", ct: "application/x-www-form-urlencoded", mod: func(r *http.Request) { r.Header.Set("X-Forwarded-Proto", "https") }, secure: true},
		{name: "same origin", body: "token=good", ct: "application/x-www-form-urlencoded", mod: func(r *http.Request) { r.Header.Set("Origin", "http://gw.local") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := postLogin(l, tc.body, tc.ct, tc.mod)
			if w.Code != http.StatusOK {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			var resp LoginResponse
			if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || resp.Username != "alice" {
				t.Fatalf("body %s: %v", w.Body, err)
			}
			cookies := w.Result().Cookies()
			if len(cookies) != 1 {
				t.Fatalf("cookies: %v", cookies)
			}
			c := cookies[0]
			if c.Name != CookieName || c.Value != "good" || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure != tc.secure || c.Path != "/" {
				t.Fatalf("cookie %+v", c)
			}
		})
	}
}

func TestLoginRefusals(t *testing.T) {
	l := newTestLogin(t)
	for _, tc := range []struct {
		name, method, target, body, ct string
		mod                            func(*http.Request)
		code                           int
	}{
		{name: "bad token", body: "token=bad", ct: "application/x-www-form-urlencoded", code: 401},
		{name: "no token", body: "", ct: "application/x-www-form-urlencoded", code: 401},
		{name: "GET", method: http.MethodGet, code: 405},
		{name: "token in query", target: "/login?token=good", code: 400},
		{name: "foreign origin", body: "token=good", ct: "application/x-www-form-urlencoded", mod: func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") }, code: 403},
		{name: "text body", body: "good", ct: "text/plain", code: 415},
		{name: "bad json", body: "{", ct: "application/json", code: 400},
		{name: "huge body", body: "token=" + strings.Repeat("a", maxLoginBody), ct: "application/x-www-form-urlencoded", code: 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method, target := tc.method, tc.target
			if method == "" {
				method = http.MethodPost
			}
			if target == "" {
				target = "/login"
			}
			r := httptest.NewRequest(method, "http://gw.local"+target, strings.NewReader(tc.body))
			if tc.ct != "" {
				r.Header.Set("Content-Type", tc.ct)
			}
			if tc.mod != nil {
				tc.mod(r)
			}
			w := httptest.NewRecorder()
			l.ServeLogin(w, r)
			if w.Code != tc.code {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.code, w.Body)
			}
			if len(w.Result().Cookies()) != 0 {
				t.Fatal("cookie set on a refused login")
			}
			var st struct{ Kind, Message string }
			if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil || st.Kind != "Status" || st.Message == "" {
				t.Fatalf("body is not a Status: %s", w.Body)
			}
		})
	}
}

// TestLoginLimits: failed logins are limited per client address, and
// successful ones per user name. Bogus logins from one address spend
// only that address's budget; a valid token the authenticator knows
// (a token file's) logs in even from an address whose budget is spent.
func TestLoginLimits(t *testing.T) {
	tokens := must[*TokenFile](t)(ParseTokenFile(strings.NewReader("good,alice,a-1\n")))
	clk := fakeClock()
	l := must[*Login](t)(NewLogin(LoginOptions{
		Tokens:   tokens,
		Failures: NewFailureBudget(FailureBudgetOptions{QPS: 1, Burst: 2, clock: clk}),
		Users:    NewRateLimiter(RateLimitOptions{QPS: 1, Burst: 2, clock: clk}, nil),
	}))
	from := func(addr string) func(*http.Request) { return func(r *http.Request) { r.RemoteAddr = addr + ":1234" } }
	login := func(tok, addr string) *httptest.ResponseRecorder {
		return postLogin(l, "token="+tok, "application/x-www-form-urlencoded", from(addr))
	}
	var codes []int
	for range 3 {
		codes = append(codes, login("guess", "192.0.2.1").Code)
	}
	if !slices.Equal(codes, []int{401, 401, 429}) {
		t.Fatalf("bogus logins from one address: %v, want 401 401 429", codes)
	}
	if w := login("guess", "192.0.2.1"); w.Header().Get("Retry-After") != "1" || !strings.Contains(w.Body.String(), `"code":429`) {
		t.Fatalf("refusal: Retry-After %q, %s", w.Header().Get("Retry-After"), w.Body)
	}
	if w := login("guess", "198.51.100.7"); w.Code != 401 {
		t.Fatalf("a bogus login from another address: %d, want 401", w.Code)
	}
	if w := login("good", "192.0.2.1"); w.Code != 200 {
		t.Fatalf("a valid login from the address whose budget is spent: %d %s", w.Code, w.Body)
	}
	// alice has logged in once; one more within her burst, then 429
	// from any address.
	if w := login("good", "198.51.100.7"); w.Code != 200 {
		t.Fatalf("alice's second login: %d", w.Code)
	}
	if w := login("good", "203.0.113.9"); w.Code != 429 || !strings.Contains(w.Body.String(), "rate limit") {
		t.Fatalf("alice's third login at once: %d %s, want 429", w.Code, w.Body)
	}
	clk.Step(time.Second)
	if w := login("good", "203.0.113.9"); w.Code != 200 {
		t.Fatalf("alice a second later: %d", w.Code)
	}
	if w := login("guess", "192.0.2.1"); w.Code != 401 {
		t.Fatalf("a bogus login a second later: %d, want 401 (one more allowed)", w.Code)
	}
}

func TestLogout(t *testing.T) {
	l := newTestLogin(t)
	r := httptest.NewRequest(http.MethodPost, "http://gw.local/logout", nil)
	w := httptest.NewRecorder()
	l.ServeLogout(w, r)
	cookies := w.Result().Cookies()
	if w.Code != http.StatusNoContent || len(cookies) != 1 || cookies[0].Name != CookieName || cookies[0].MaxAge >= 0 || cookies[0].Value != "" {
		t.Fatalf("status %d, cookies %+v", w.Code, cookies)
	}
	r = httptest.NewRequest(http.MethodGet, "http://gw.local/logout", nil)
	w = httptest.NewRecorder()
	l.ServeLogout(w, r)
	if w.Code != http.StatusMethodNotAllowed {
		t.Fatalf("GET /logout: %d", w.Code)
	}
}
