package openapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeAPIServer serves OpenAPI documents as kube-apiserver does: an
// ETag per document (the same for its JSON and protobuf forms), 304 to
// If-None-Match, 406 to what it cannot serve, 404 for unknown paths.
// It counts the requests and the bodies it sent.
type fakeAPIServer struct {
	srv *httptest.Server
	// mu guards the fields below.
	mu       sync.Mutex
	docs     map[string]string // path to JSON
	down     bool
	requests []string // "path accept if-none-match"
	bodies   int
}

func newFakeAPIServer(t *testing.T) *fakeAPIServer {
	f := &fakeAPIServer{docs: map[string]string{
		"/openapi/v2":              `{"swagger":"2.0","v":1}`,
		"/openapi/v3":              `{"paths":{"api/v1":{"serverRelativeURL":"/openapi/v3/api/v1?hash=X"}}}`,
		"/openapi/v3/api/v1":       `{"openapi":"3.0.0","v":1}`,
		"/openapi/v3/apis/apps/v1": `{"openapi":"3.0.0","apps":1}`,
	}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func etagOf(doc string) string { return fmt.Sprintf(`"%X"`, len(doc)*7919+int(doc[len(doc)-2])) }

func (f *fakeAPIServer) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r.URL.Path+" "+r.Header.Get("Accept")+" "+r.Header.Get("If-None-Match"))
	if f.down {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	doc, ok := f.docs[r.URL.Path]
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	body := doc
	switch accept := r.Header.Get("Accept"); {
	case r.URL.Path == "/openapi/v3":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	case accept == "application/json":
		w.Header().Set("Content-Type", "application/json")
	case strings.Contains(accept, "protobuf"):
		w.Header().Set("Content-Type", accept)
		body = "PB:" + doc
	default:
		w.WriteHeader(http.StatusNotAcceptable)
		return
	}
	if r.URL.Path != "/openapi/v3" {
		w.Header().Set("ETag", etagOf(doc))
		if r.Header.Get("If-None-Match") == etagOf(doc) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	w.Header().Set("Last-Modified", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Format(http.TimeFormat))
	f.bodies++
	_, _ = io.WriteString(w, body)
}

func (f *fakeAPIServer) set(path, doc string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.docs[path] = doc
}

func (f *fakeAPIServer) counts() (requests, bodies int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests), f.bodies
}

func (f *fakeAPIServer) last() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[len(f.requests)-1]
}

type answer struct {
	code int
	hdr  http.Header
	body string
}

func serve(h http.Handler, method, target string, hdr ...string) answer {
	req := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return answer{rec.Code, rec.Header(), rec.Body.String()}
}

func newHandler(t *testing.T, f *fakeAPIServer, mod func(*Options)) (*Handler, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC))
	o := Options{Config: &rest.Config{Host: f.srv.URL}, Clock: clk}
	if mod != nil {
		mod(&o)
	}
	h, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return h, clk
}

// TestCacheFollowsETags: a document is fetched once, served from the
// cache for RefreshInterval, then revalidated with the apiserver's ETag:
// a 304 keeps it without a body crossing; a changed document (a new CRD)
// replaces it at the next revalidation.
func TestCacheFollowsETags(t *testing.T) {
	f := newFakeAPIServer(t)
	h, clk := newHandler(t, f, nil)
	a := serve(h, "GET", "/openapi/v2", "Accept", "application/json")
	if a.code != 200 || a.body != `{"swagger":"2.0","v":1}` || a.hdr.Get("ETag") != etagOf(`{"swagger":"2.0","v":1}`) ||
		a.hdr.Get("Content-Type") != "application/json" || a.hdr.Get("Last-Modified") != "Fri, 02 Jan 2026 03:04:05 GMT" {
		t.Fatalf("first: %d %v %s", a.code, a.hdr, a.body)
	}
	for range 5 {
		if b := serve(h, "GET", "/openapi/v2", "Accept", "application/json"); b.body != a.body {
			t.Fatalf("cached: %d %s", b.code, b.body)
		}
	}
	if n, _ := f.counts(); n != 1 {
		t.Fatalf("%d requests to the apiserver within the refresh interval, want 1", n)
	}

	clk.Step(5 * time.Second)
	if b := serve(h, "GET", "/openapi/v2", "Accept", "application/json"); b.body != a.body {
		t.Fatalf("revalidated: %d %s", b.code, b.body)
	}
	if n, bodies := f.counts(); n != 2 || bodies != 1 || f.last() != "/openapi/v2 application/json "+a.hdr.Get("ETag") {
		t.Fatalf("revalidation: %d requests, %d bodies, last %q; want a second request with If-None-Match and no body", n, bodies, f.last())
	}

	f.set("/openapi/v2", `{"swagger":"2.0","v":2}`)
	if b := serve(h, "GET", "/openapi/v2", "Accept", "application/json"); b.body != a.body {
		t.Fatalf("within the interval after the change: %s, want the cached document", b.body)
	}
	clk.Step(5 * time.Second)
	if b := serve(h, "GET", "/openapi/v2", "Accept", "application/json"); b.body != `{"swagger":"2.0","v":2}` ||
		b.hdr.Get("ETag") != etagOf(`{"swagger":"2.0","v":2}`) {
		t.Fatalf("after the change: %s %s", b.hdr.Get("ETag"), b.body)
	}
}

// TestConditionalRequests: the gateway answers If-None-Match with 304 as
// kube-apiserver does, HEAD with the headers alone, and Range.
func TestConditionalRequests(t *testing.T) {
	f := newFakeAPIServer(t)
	h, _ := newHandler(t, f, nil)
	etag := serve(h, "GET", "/openapi/v2").hdr.Get("ETag")
	if a := serve(h, "GET", "/openapi/v2", "If-None-Match", etag); a.code != http.StatusNotModified || a.body != "" || a.hdr.Get("ETag") != etag {
		t.Fatalf("If-None-Match the current ETag: %d %v %q", a.code, a.hdr, a.body)
	}
	if a := serve(h, "GET", "/openapi/v2", "If-None-Match", `"other"`); a.code != 200 {
		t.Fatalf("If-None-Match another ETag: %d", a.code)
	}
	if a := serve(h, "HEAD", "/openapi/v2"); a.code != 200 || a.body != "" || a.hdr.Get("Content-Length") != fmt.Sprint(len(`{"swagger":"2.0","v":1}`)) {
		t.Fatalf("HEAD: %d %v %q", a.code, a.hdr, a.body)
	}
	if a := serve(h, "GET", "/openapi/v2", "Range", "bytes=0-9"); a.code != http.StatusPartialContent || a.body != `{"swagger"` {
		t.Fatalf("Range: %d %q", a.code, a.body)
	}
}

// TestNegotiation: the media types kube-openapi serves, in its order for
// wildcards; both protobuf names get the protobuf form, answered with
// the apiserver's Content-Type; anything else is 406 with a Status.
func TestNegotiation(t *testing.T) {
	f := newFakeAPIServer(t)
	h, _ := newHandler(t, f, nil)
	for _, tc := range []struct {
		path, accept, wantType, wantBody string
	}{
		{"/openapi/v2", "", "application/json", `{"swagger":"2.0","v":1}`},
		{"/openapi/v2", "*/*", "application/json", `{"swagger":"2.0","v":1}`},
		{"/openapi/v2", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf", "application/com.github.proto-openapi.spec.v2.v1.0+protobuf", `PB:{"swagger":"2.0","v":1}`},
		{"/openapi/v2", "application/com.github.proto-openapi.spec.v2.v1.0+protobuf", "application/com.github.proto-openapi.spec.v2.v1.0+protobuf", `PB:{"swagger":"2.0","v":1}`},
		{"/openapi/v2", "application/json;q=0.5, application/com.github.proto-openapi.spec.v2@v1.0+protobuf", "application/com.github.proto-openapi.spec.v2.v1.0+protobuf", `PB:{"swagger":"2.0","v":1}`},
		{"/openapi/v3/api/v1", "application/json", "application/json", `{"openapi":"3.0.0","v":1}`},
		{"/openapi/v3/api/v1", "application/com.github.proto-openapi.spec.v3@v1.0+protobuf", "application/com.github.proto-openapi.spec.v3.v1.0+protobuf", `PB:{"openapi":"3.0.0","v":1}`},
		// The index has one form, whatever is asked.
		{"/openapi/v3", "text/html", "text/plain; charset=utf-8", `{"paths":{"api/v1":{"serverRelativeURL":"/openapi/v3/api/v1?hash=X"}}}`},
	} {
		a := serve(h, "GET", tc.path, "Accept", tc.accept)
		if a.code != 200 || a.hdr.Get("Content-Type") != tc.wantType || a.body != tc.wantBody || a.hdr.Get("Vary") != "Accept" {
			t.Errorf("%s, Accept %q: %d %v %q", tc.path, tc.accept, a.code, a.hdr, a.body)
		}
	}
	for _, path := range []string{"/openapi/v2", "/openapi/v3/api/v1"} {
		a := serve(h, "GET", path, "Accept", "text/html")
		var st metav1.Status
		if err := json.Unmarshal([]byte(a.body), &st); err != nil || a.code != http.StatusNotAcceptable ||
			st.Reason != metav1.StatusReasonNotAcceptable || st.Code != http.StatusNotAcceptable {
			t.Errorf("%s, Accept text/html: %d %s", path, a.code, a.body)
		}
	}
}

// TestHashAddressedDocuments: a /openapi/v3 document asked for by the
// hash of the current one gets it with kube-apiserver's headers for an
// immutable answer; once the document changed, the old hash is
// redirected to the new one, as kube-apiserver redirects it.
func TestHashAddressedDocuments(t *testing.T) {
	f := newFakeAPIServer(t)
	h, clk := newHandler(t, f, nil)
	doc := `{"openapi":"3.0.0","v":1}`
	hash := strings.Trim(etagOf(doc), `"`)
	u := "/openapi/v3/api/v1?hash=" + hash
	a := serve(h, "GET", u, "Accept", "application/json")
	if a.code != 200 || a.body != doc || a.hdr.Get("Cache-Control") != "public, immutable" ||
		a.hdr.Get("Expires") != "Sat, 01 May 2027 00:00:00 GMT" || a.hdr.Get("ETag") != `"`+hash+`"` {
		t.Fatalf("by hash: %d %v %s", a.code, a.hdr, a.body)
	}
	if b := serve(h, "GET", "/openapi/v3/api/v1", "Accept", "application/json"); b.code != 200 || b.hdr.Get("Cache-Control") != "no-cache, private" {
		t.Fatalf("without hash: %d, Cache-Control %q", b.code, b.hdr.Get("Cache-Control"))
	}
	if b := serve(h, "GET", "/openapi/v3/api/v1?hash=0BAD", "Accept", "application/json"); b.code != http.StatusMovedPermanently ||
		b.hdr.Get("Location") != u || b.body != "" || b.hdr.Get("ETag") != `"`+hash+`"` {
		t.Fatalf("unknown hash: %d %v %q, want 301 to %s", b.code, b.hdr, b.body, u)
	}

	newDoc := `{"openapi":"3.0.0","v":22}`
	f.set("/openapi/v3/api/v1", newDoc)
	clk.Step(5 * time.Second)
	b := serve(h, "GET", u, "Accept", "application/json")
	want := "/openapi/v3/api/v1?hash=" + strings.Trim(etagOf(newDoc), `"`)
	if b.code != http.StatusMovedPermanently || b.hdr.Get("Location") != want || b.body != "" {
		t.Fatalf("old hash after the change: %d %v %q, want 301 to %s", b.code, b.hdr, b.body, want)
	}
	if c := serve(h, "GET", want, "Accept", "application/json"); c.code != 200 || c.body != newDoc {
		t.Fatalf("new hash: %d %s", c.code, c.body)
	}
}

// TestUpstreamFailures: a document the apiserver does not have is 404
// with a Status and is not kept; an apiserver that cannot answer leaves
// the last document served, and without one the answer is 503.
func TestUpstreamFailures(t *testing.T) {
	f := newFakeAPIServer(t)
	h, clk := newHandler(t, f, nil)
	a := serve(h, "GET", "/openapi/v3/apis/nothing/v1")
	if a.code != http.StatusNotFound || !strings.Contains(a.body, `"reason":"NotFound"`) {
		t.Fatalf("unknown group version: %d %s", a.code, a.body)
	}
	f.set("/openapi/v3/apis/nothing/v1", `{"openapi":"3.0.0","late":1}`)
	if a := serve(h, "GET", "/openapi/v3/apis/nothing/v1"); a.code != 200 {
		t.Fatalf("a group version that came later: %d %s", a.code, a.body)
	}

	serve(h, "GET", "/openapi/v2")
	f.mu.Lock()
	f.down = true
	f.mu.Unlock()
	clk.Step(time.Minute)
	if a := serve(h, "GET", "/openapi/v2"); a.code != 200 || a.body != `{"swagger":"2.0","v":1}` {
		t.Fatalf("apiserver down, document cached: %d %s", a.code, a.body)
	}
	a = serve(h, "GET", "/openapi/v3/apis/apps/v1")
	if a.code != http.StatusServiceUnavailable || !strings.Contains(a.body, `"reason":"ServiceUnavailable"`) {
		t.Fatalf("apiserver down, nothing cached: %d %s", a.code, a.body)
	}
	for _, m := range []string{"POST", "PUT", "DELETE"} {
		if a := serve(h, m, "/openapi/v2"); a.code != http.StatusMethodNotAllowed || a.hdr.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s: %d %v", m, a.code, a.hdr)
		}
	}
	if a := serve(h, "GET", "/openapi/v4"); a.code != http.StatusNotFound {
		t.Errorf("/openapi/v4: %d", a.code)
	}
}

// TestBytesBound: the cache keeps at most MaxBytes, dropping the least
// recently used document first; a document larger than the bound is
// served but not kept.
func TestBytesBound(t *testing.T) {
	f := newFakeAPIServer(t)
	big := `{"openapi":"3.0.0","x":"` + strings.Repeat("x", 200) + `"}`
	f.set("/openapi/v3/apis/big/v1", big)
	v1, apps := len(`{"openapi":"3.0.0","v":1}`), len(`{"openapi":"3.0.0","apps":1}`)
	h, _ := newHandler(t, f, func(o *Options) { o.MaxBytes = int64(v1 + apps) })
	serve(h, "GET", "/openapi/v3/api/v1")
	serve(h, "GET", "/openapi/v3/apis/apps/v1")
	if got := h.Bytes(); got != int64(v1+apps) {
		t.Fatalf("kept %d bytes, want %d", got, v1+apps)
	}
	serve(h, "GET", "/openapi/v3/api/v1") // api/v1 is now the most recent
	serve(h, "GET", "/openapi/v2")        // drops apps/v1
	if got := h.Bytes(); got > int64(v1+apps) {
		t.Fatalf("kept %d bytes, over the bound %d", got, v1+apps)
	}
	n, _ := f.counts()
	serve(h, "GET", "/openapi/v3/api/v1")
	if m, _ := f.counts(); m != n {
		t.Fatalf("the most recently used document was dropped")
	}
	serve(h, "GET", "/openapi/v3/apis/apps/v1")
	if m, _ := f.counts(); m != n+1 {
		t.Fatalf("the least recently used document was kept")
	}
	if a := serve(h, "GET", "/openapi/v3/apis/big/v1"); a.code != 200 || !bytes.Equal([]byte(a.body), []byte(big)) {
		t.Fatalf("a document over the bound: %d", a.code)
	}
	if got := h.Bytes(); got > int64(v1+apps) {
		t.Fatalf("kept %d bytes after a document over the bound", got)
	}
}

// roundTripFunc is an in-memory apiserver.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestOneFetchForConcurrentRequests: requests for a document that is not
// cached all wait for one fetch.
func TestOneFetchForConcurrentRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var mu sync.Mutex
		fetches := 0
		rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			fetches++
			mu.Unlock()
			<-release
			return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}, "Etag": {`"A"`}},
				Body: io.NopCloser(strings.NewReader(`{"swagger":"2.0"}`)), Request: r}, nil
		})
		h, err := New(Options{Config: &rest.Config{Host: "https://apiserver.invalid", Transport: rt}})
		if err != nil {
			t.Fatal(err)
		}
		codes := make(chan int, 20)
		for range 20 {
			go func() { codes <- serve(h, "GET", "/openapi/v2").code }()
		}
		synctest.Wait() // every request waits: one at the apiserver, the rest on it
		mu.Lock()
		n := fetches
		mu.Unlock()
		if n != 1 {
			t.Fatalf("%d fetches for 20 concurrent requests, want 1", n)
		}
		close(release)
		for range 20 {
			if c := <-codes; c != 200 {
				t.Fatalf("code %d", c)
			}
		}
	})
}

// TestFetchOfARequestThatEnds: a fetch runs on the goroutine of the
// request that started it and ends with it; a request that waited for it
// then fetches for itself instead of failing.
func TestFetchOfARequestThatEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		fetches := 0
		rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			fetches++
			n := fetches
			mu.Unlock()
			if n == 1 {
				<-r.Context().Done()
				return nil, r.Context().Err()
			}
			return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}, "Etag": {`"A"`}},
				Body: io.NopCloser(strings.NewReader(`{"swagger":"2.0"}`)), Request: r}, nil
		})
		h, err := New(Options{Config: &rest.Config{Host: "https://apiserver.invalid", Transport: rt}})
		if err != nil {
			t.Fatal(err)
		}
		first, leave := context.WithCancel(context.Background())
		firstDone := make(chan struct{})
		go func() {
			defer close(firstDone)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/openapi/v2", nil).WithContext(first))
		}()
		synctest.Wait() // the first request's fetch waits for the apiserver
		second := make(chan answer, 1)
		go func() { second <- serve(h, "GET", "/openapi/v2") }()
		synctest.Wait() // the second waits for the first's fetch
		leave()
		<-firstDone
		if a := <-second; a.code != 200 || a.body != `{"swagger":"2.0"}` {
			t.Fatalf("the request that waited: %d %s", a.code, a.body)
		}
		if fetches != 2 {
			t.Fatalf("%d fetches, want 2", fetches)
		}
	})
}
