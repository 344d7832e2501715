package httpapi

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"kubegate/internal/auth"
	"kubegate/internal/informer"
	"kubegate/internal/livequery/wire"
)

// upstream stands in for kube-apiserver: it records the requests it gets
// and answers with handler.
type upstream struct {
	srv     *httptest.Server
	record  bool // keep the requests (default true)
	mu      sync.Mutex
	got     []*http.Request
	bodies  []string
	handler http.HandlerFunc
}

func newUpstream(t testing.TB, h http.HandlerFunc) *upstream {
	u := &upstream{handler: h, record: true}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body string
		if !isUpgrade(r) {
			b, _ := io.ReadAll(r.Body)
			body = string(b)
		}
		u.mu.Lock()
		if u.record {
			u.got = append(u.got, r)
			u.bodies = append(u.bodies, body)
		}
		u.mu.Unlock()
		u.handler(w, r)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) requests() ([]*http.Request, []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]*http.Request(nil), u.got...), append([]string(nil), u.bodies...)
}

// passServer is a server whose pass-through goes to up, authenticating
// the token "good" as alice. pt, when set, adjusts the options.
func passServer(t testing.TB, up *upstream, pt func(*PassThrough), opts func(*Options)) *Server {
	t.Helper()
	mgr, err := informer.New(informer.Options{Config: &rest.Config{Host: "http://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.ParseTokenFile(strings.NewReader("good,alice,a-1\n"))
	if err != nil {
		t.Fatal(err)
	}
	// As the gateway builds them, both from websocket.allowedOrigins.
	origins := []string{"dash.example.com"}
	bearer, err := auth.NewBearer(auth.BearerOptions{Tokens: tokens, AllowedOrigins: origins})
	if err != nil {
		t.Fatal(err)
	}
	login, err := auth.NewLogin(auth.LoginOptions{Tokens: tokens, AllowedOrigins: origins})
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Manager: mgr, Tables: wire.NewTables(mgr, zap.NewNop(), wire.ViewLimits{}), Listener: nopListener{}, Authenticator: bearer, Login: login}
	if up != nil {
		u, _ := url.Parse(up.srv.URL)
		normal := &http.Transport{}
		upgrade := &http.Transport{}
		t.Cleanup(normal.CloseIdleConnections)
		t.Cleanup(upgrade.CloseIdleConnections)
		p := &PassThrough{Upstream: u, Transport: normal, UpgradeTransport: upgrade, AllowedOrigins: origins}
		if pt != nil {
			pt(p)
		}
		o.PassThrough = p
	}
	if opts != nil {
		opts(&o)
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func status(t testing.TB, body []byte) metav1.Status {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal(body, &st); err != nil || st.Kind != "Status" {
		t.Fatalf("want a Status, got %q (%v)", body, err)
	}
	return st
}

// TestPassThroughHeaders: what reaches kube-apiserver carries the
// caller's token as the only credential, however it came, the client
// address the gateway determined, and the client's own headers
// otherwise (impersonation included); the answer comes back as it is,
// without cookies and with nosniff.
func TestPassThroughHeaders(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Set-Cookie", "planted=1")
		w.Header().Set("Audit-Id", "a-1")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"kind":"ConfigMap"}`)
	})
	s := passServer(t, up, nil, nil)
	h := s.Handler()

	login := httptest.NewRecorder()
	lr := httptest.NewRequest(http.MethodPost, "http://gw.local/login", strings.NewReader("token=good"))
	lr.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	h.ServeHTTP(login, lr)
	if login.Code != http.StatusOK {
		t.Fatalf("login: %d %s", login.Code, login.Body)
	}
	cookie := login.Result().Cookies()[0]

	for _, tc := range []struct {
		name string
		hdr  map[string]string
	}{
		{"header", map[string]string{"Authorization": "Bearer good"}},
		{"cookie", map[string]string{"Cookie": cookie.String() + "; other=1", "Origin": "http://gw.local"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "http://gw.local/api/v1/namespaces/ns/configmaps?fieldManager=kubectl&dryRun=All", strings.NewReader(`{"kind":"ConfigMap"}`))
			r.RemoteAddr = "192.0.2.7:5555"
			for k, v := range tc.hdr {
				r.Header.Set(k, v)
			}
			r.Header.Set("X-Forwarded-For", "203.0.113.9")
			r.Header.Set("Forwarded", "for=203.0.113.9")
			r.Header.Set("Impersonate-User", "bob")
			r.Header.Set("Impersonate-Group", "devs")
			r.Header.Set("X-Remote-User", "root")
			r.Header.Set("X-Remote-Group", "system:masters")
			r.Header.Set("User-Agent", "kubectl/v1.37.2")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusCreated || w.Body.String() != `{"kind":"ConfigMap"}` {
				t.Fatalf("answer %d %q, want kube-apiserver's 201 as it is", w.Code, w.Body)
			}
			if c := w.Header().Values("Set-Cookie"); len(c) != 0 {
				t.Errorf("Set-Cookie %q from upstream reached the client", c)
			}
			if w.Header().Get("X-Content-Type-Options") != "nosniff" || w.Header().Get("Audit-Id") != "a-1" {
				t.Errorf("headers %v: want nosniff and upstream's Audit-Id", w.Header())
			}
			reqs, bodies := up.requests()
			got := reqs[len(reqs)-1]
			for k, want := range map[string]string{
				"Authorization":     "Bearer good",
				"Cookie":            "",
				"X-Forwarded-For":   "192.0.2.7",
				"Forwarded":         "",
				"X-Forwarded-Host":  "",
				"Impersonate-User":  "bob",
				"Impersonate-Group": "devs",
				"X-Remote-User":     "",
				"X-Remote-Group":    "",
				"User-Agent":        "kubectl/v1.37.2",
			} {
				if g := strings.Join(got.Header.Values(k), ","); g != want {
					t.Errorf("upstream got %s %q, want %q", k, g, want)
				}
			}
			if got.URL.Path != "/api/v1/namespaces/ns/configmaps" || got.URL.RawQuery != "fieldManager=kubectl&dryRun=All" || bodies[len(bodies)-1] != `{"kind":"ConfigMap"}` {
				t.Errorf("upstream got %s?%s %q", got.URL.Path, got.URL.RawQuery, bodies[len(bodies)-1])
			}
		})
	}
}

// TestPassThroughCookieNeedsOrigin: with the login cookie, a request
// that changes something must show it comes from the gateway's own page
// (or an allowed one); reads need not. Refused requests never reach
// kube-apiserver.
func TestPassThroughCookieNeedsOrigin(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	s := passServer(t, up, nil, nil) // allowing dash.example.com
	h := s.Handler()
	cookie := (&http.Cookie{Name: auth.CookieName, Value: "good"}).String()
	for _, tc := range []struct {
		name, method, path string
		hdr                map[string]string
		code               int
	}{
		{"same origin", http.MethodDelete, "/api/v1/namespaces/ns/configmaps/c", map[string]string{"Origin": "http://gw.local"}, 200},
		{"allowed origin", http.MethodPatch, "/api/v1/namespaces/ns/configmaps/c", map[string]string{"Origin": "https://dash.example.com"}, 200},
		{"marked same-origin", http.MethodPost, "/api/v1/namespaces/ns/configmaps", map[string]string{"Sec-Fetch-Site": "same-origin"}, 200},
		{"foreign origin", http.MethodPost, "/api/v1/namespaces/ns/configmaps", map[string]string{"Origin": "https://evil.example"}, 403},
		{"same-site sibling", http.MethodDelete, "/api/v1/namespaces/ns/configmaps/c", map[string]string{"Origin": "http://evil.gw.local"}, 403},
		{"cross-site", http.MethodPut, "/api/v1/namespaces/ns/configmaps/c", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"no origin", http.MethodDelete, "/api/v1/namespaces/ns/configmaps/c", nil, 403},
		{"upgrade without origin", http.MethodGet, "/api/v1/namespaces/ns/pods/p/exec", map[string]string{"Connection": "Upgrade", "Upgrade": "websocket"}, 403},
		{"read without origin", http.MethodGet, "/api/v1/namespaces/ns/pods/p/log", nil, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := up.requests()
			r := httptest.NewRequest(tc.method, "http://gw.local"+tc.path, nil)
			r.Header.Set("Cookie", cookie)
			for k, v := range tc.hdr {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.code {
				t.Fatalf("%d %s, want %d", w.Code, w.Body, tc.code)
			}
			after, _ := up.requests()
			if reached := len(after) > len(before); reached != (tc.code == 200) {
				t.Errorf("reached kube-apiserver: %v", reached)
			}
			if tc.code == 403 {
				if st := status(t, w.Body.Bytes()); st.Reason != metav1.StatusReasonForbidden {
					t.Errorf("Status %+v", st)
				}
			}
		})
	}
	// The header transport is not a browser's: no Origin needed.
	r := httptest.NewRequest(http.MethodDelete, "http://gw.local/api/v1/namespaces/ns/configmaps/c", nil)
	r.Header.Set("Authorization", "Bearer good")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("bearer DELETE without Origin: %d %s", w.Code, w.Body)
	}
}

// TestPassThroughBodyLimit: a body over MaxBodyBytes is refused with
// 413, whether its length is announced or not.
func TestPassThroughBodyLimit(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) })
	s := passServer(t, up, func(p *PassThrough) { p.MaxBodyBytes = 1024 }, nil)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	for _, tc := range []struct {
		name    string
		size    int
		chunked bool
		code    int
	}{
		{"at the limit", 1024, false, 201},
		{"announced over", 1025, false, 413},
		{"chunked at the limit", 1024, true, 201},
		{"chunked over", 4096, true, 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader = strings.NewReader(strings.Repeat("x", tc.size))
			if tc.chunked {
				body = io.MultiReader(body) // no length known: sent chunked
			}
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/namespaces/ns/configmaps", body)
			req.Header.Set("Authorization", "Bearer good")
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.code {
				t.Fatalf("%d %s, want %d", resp.StatusCode, b, tc.code)
			}
			if tc.code == 413 {
				st := status(t, b)
				if st.Reason != metav1.StatusReasonRequestEntityTooLarge || !strings.Contains(st.Message, "1024 bytes") {
					t.Errorf("Status %+v", st)
				}
			}
		})
	}
}

// TestPassThroughTimeout: a request that is not a stream gets 504 when
// kube-apiserver does not answer within Timeout; a stream (logs) goes on
// past it.
func TestPassThroughTimeout(t *testing.T) {
	const timeout = 50 * time.Millisecond
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/log") {
			_, _ = io.WriteString(w, "line 1\n")
			w.(http.Flusher).Flush()
			<-time.After(4 * timeout) // longer than the timeout, which must not apply
			_, _ = io.WriteString(w, "line 2\n")
			return
		}
		<-r.Context().Done() // never answers
	})
	s := passServer(t, up, func(p *PassThrough) { p.Timeout = timeout }, nil)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	get := func(path string) (int, []byte) {
		req, _ := http.NewRequest(http.MethodPatch, srv.URL+path, strings.NewReader("{}"))
		if strings.HasSuffix(path, "/log") {
			req.Method = http.MethodGet
		}
		req.Header.Set("Authorization", "Bearer good")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	code, b := get("/api/v1/namespaces/ns/configmaps/c")
	if code != http.StatusGatewayTimeout || status(t, b).Reason != metav1.StatusReasonTimeout {
		t.Fatalf("hanging write: %d %s, want 504 Timeout", code, b)
	}
	code, b = get("/api/v1/namespaces/ns/pods/p/log")
	if code != http.StatusOK || string(b) != "line 1\nline 2\n" {
		t.Fatalf("log: %d %q, want both lines", code, b)
	}
}

// TestPassThroughUpgrade: a WebSocket handshake whose token comes in the
// bearer subprotocol reaches kube-apiserver with the token in
// Authorization and the subprotocol gone, and the connection is then
// kube-apiserver's, both ways; an upgrade to another protocol (SPDY, as
// older kubectl exec uses) is carried the same way.
func TestPassThroughUpgrade(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "SPDY/3.1" {
			hj, _, _ := http.NewResponseController(w).Hijack()
			defer hj.Close()
			_, _ = io.WriteString(hj, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n")
			_, _ = io.Copy(hj, io.LimitReader(hj, 4)) // echo four bytes
			return
		}
		if auth := r.Header.Get("Authorization"); auth != "Bearer good" || strings.Contains(r.Header.Get("Sec-WebSocket-Protocol"), "bearer") {
			http.Error(w, "credentials: "+auth+" / "+r.Header.Get("Sec-WebSocket-Protocol"), http.StatusUnauthorized)
			return
		}
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"v5.channel.k8s.io"}})
		if err != nil {
			return
		}
		defer c.CloseNow()
		typ, msg, err := c.Read(r.Context())
		if err != nil {
			return
		}
		_ = c.Write(r.Context(), typ, append([]byte("echo:"), msg...))
		_ = c.Close(websocket.StatusNormalClosure, "")
	})
	s := passServer(t, up, nil, nil)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	bearer := auth.BearerProtocolPrefix + base64.RawURLEncoding.EncodeToString([]byte("good"))
	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/api/v1/namespaces/ns/pods/p/exec?command=ls&stdout=true",
		&websocket.DialOptions{Subprotocols: []string{"v5.channel.k8s.io", bearer}})
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	defer c.CloseNow()
	if c.Subprotocol() != "v5.channel.k8s.io" {
		t.Fatalf("subprotocol %q", c.Subprotocol())
	}
	if err := c.Write(ctx, websocket.MessageBinary, []byte("\x00ls")); err != nil {
		t.Fatal(err)
	}
	_, msg, err := c.Read(ctx)
	if err != nil || string(msg) != "echo:\x00ls" {
		t.Fatalf("read %q, %v", msg, err)
	}

	// SPDY: a raw HTTP/1.1 upgrade.
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = io.WriteString(conn, "POST /api/v1/namespaces/ns/pods/p/exec?command=ls HTTP/1.1\r\nHost: gw.local\r\nAuthorization: Bearer good\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nContent-Length: 0\r\n\r\n")
	br := bufio.NewReader(conn)
	sresp, err := http.ReadResponse(br, nil)
	if err != nil || sresp.StatusCode != http.StatusSwitchingProtocols || sresp.Header.Get("Upgrade") != "SPDY/3.1" {
		t.Fatalf("SPDY upgrade: %v %v", sresp, err)
	}
	_, _ = io.WriteString(conn, "ping")
	echo := make([]byte, 4)
	if _, err := io.ReadFull(br, echo); err != nil || string(echo) != "ping" {
		t.Fatalf("SPDY echo %q, %v", echo, err)
	}
}

// TestPassThroughRefused: with pass-through off, writes are 405 and
// subresources 404, as before, with the reason in the Status; proxy
// subresources are refused even with it on, and reach nothing.
func TestPassThroughRefused(t *testing.T) {
	const why = "pass-through needs --authn=kubernetes (a test)"
	off := passServer(t, nil, nil, func(o *Options) { o.PassThroughOff = why })
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	on := passServer(t, up, nil, nil)
	for _, tc := range []struct {
		name, method, path string
		s                  *Server
		code               int
		reason             metav1.StatusReason
		msg                string
	}{
		{"write, off", http.MethodPost, "/api/v1/namespaces/ns/configmaps", off, 405, metav1.StatusReasonMethodNotAllowed, why},
		{"delete, off", http.MethodDelete, "/apis/apps/v1/namespaces/ns/deployments/d", off, 405, metav1.StatusReasonMethodNotAllowed, why},
		{"log, off", http.MethodGet, "/api/v1/namespaces/ns/pods/p/log", off, 404, metav1.StatusReasonNotFound, why},
		{"scale, off", http.MethodGet, "/apis/apps/v1/namespaces/ns/deployments/d/scale", off, 404, metav1.StatusReasonNotFound, why},
		{"pod proxy", http.MethodGet, "/api/v1/namespaces/ns/pods/p/proxy/index.html", on, 403, metav1.StatusReasonForbidden, "proxy"},
		{"service proxy", http.MethodPost, "/api/v1/namespaces/ns/services/s:80/proxy", on, 403, metav1.StatusReasonForbidden, "proxy"},
		{"node proxy", http.MethodGet, "/api/v1/nodes/n/proxy/metrics", on, 403, metav1.StatusReasonForbidden, "proxy"},
		{"discovery write", http.MethodPost, "/apis/apps/v1", on, 405, metav1.StatusReasonMethodNotAllowed, "read-only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, "http://gw.local"+tc.path, strings.NewReader("{}"))
			r.Header.Set("Authorization", "Bearer good")
			w := httptest.NewRecorder()
			tc.s.Handler().ServeHTTP(w, r)
			st := status(t, w.Body.Bytes())
			if w.Code != tc.code || st.Reason != tc.reason || !strings.Contains(st.Message, tc.msg) {
				t.Fatalf("%d %+v, want %d %s with %q", w.Code, st, tc.code, tc.reason, tc.msg)
			}
		})
	}
	if reqs, _ := up.requests(); len(reqs) != 0 {
		t.Errorf("%d refused requests reached kube-apiserver", len(reqs))
	}
}

// TestPassThroughLimits: pass-through requests count against the
// caller's rate.
func TestPassThroughLimits(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	s := passServer(t, up, nil, func(o *Options) {
		o.RateLimiter = auth.NewRateLimiter(auth.RateLimitOptions{QPS: 0.001, Burst: 2}, nil)
	})
	var codes []int
	for range 3 {
		r := httptest.NewRequest(http.MethodDelete, "http://gw.local/api/v1/namespaces/ns/configmaps/c", nil)
		r.Header.Set("Authorization", "Bearer good")
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, r)
		codes = append(codes, w.Code)
	}
	if codes[0] != 200 || codes[1] != 200 || codes[2] != 429 {
		t.Fatalf("codes %v, want 200 200 429", codes)
	}
	if reqs, _ := up.requests(); len(reqs) != 2 {
		t.Errorf("%d requests reached kube-apiserver, want 2", len(reqs))
	}
}

func TestParseResourcePath(t *testing.T) {
	core := schema.GroupVersion{Version: "v1"}
	apps := schema.GroupVersion{Group: "apps", Version: "v1"}
	for _, tc := range []struct {
		path  string
		want  resourcePath
		ok    bool
		route string
	}{
		{"/api", resourcePath{}, false, ""},
		{"/api/v1", resourcePath{}, false, ""},
		{"/apis/apps/v1", resourcePath{}, false, ""},
		{"/api/v1//pods", resourcePath{}, false, ""},
		{"/api/v1/pods", resourcePath{gv: core, resource: "pods"}, true, "/api/{version}/{resource} pass-through"},
		{"/api/v1/namespaces/ns/pods/p/log", resourcePath{gv: core, namespace: "ns", resource: "pods", name: "p", subresource: "log"}, true,
			"/api/{version}/namespaces/{namespace}/{resource}/{name}/{subresource} pass-through"},
		{"/apis/apps/v1/namespaces/ns/deployments/d/scale", resourcePath{gv: apps, namespace: "ns", resource: "deployments", name: "d", subresource: "scale"}, true,
			"/apis/{group}/{version}/namespaces/{namespace}/{resource}/{name}/{subresource} pass-through"},
		{"/api/v1/namespaces/ns", resourcePath{gv: core, namespace: "ns", resource: "namespaces", name: "ns"}, true, "/api/{version}/{resource}/{name} pass-through"},
		{"/api/v1/namespaces/ns/finalize", resourcePath{gv: core, namespace: "ns", resource: "namespaces", name: "ns", subresource: "finalize"}, true,
			"/api/{version}/{resource}/{name}/{subresource} pass-through"},
		{"/api/v1/namespaces/ns/status", resourcePath{gv: core, namespace: "ns", resource: "namespaces", name: "ns", subresource: "status"}, true,
			"/api/{version}/{resource}/{name}/{subresource} pass-through"},
		{"/api/v1/nodes/n/proxy/metrics", resourcePath{gv: core, resource: "nodes", name: "n", subresource: "proxy", more: true}, true,
			"/api/{version}/{resource}/{name}/{subresource} pass-through"},
		{"/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", resourcePath{gv: schema.GroupVersion{Group: "authorization.k8s.io", Version: "v1"}, resource: "selfsubjectaccessreviews"}, true,
			"/apis/{group}/{version}/{resource} pass-through"},
	} {
		got, ok := parseResourcePath(tc.path)
		if ok != tc.ok || got != tc.want {
			t.Errorf("%s: %+v %v, want %+v %v", tc.path, got, ok, tc.want, tc.ok)
		}
		if ok && got.route() != tc.route {
			t.Errorf("%s: route %q, want %q", tc.path, got.route(), tc.route)
		}
	}
}
