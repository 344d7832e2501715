package auth

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
)

func TestRateLimiterRate(t *testing.T) {
	clk := fakeClock()
	l := NewRateLimiter(RateLimitOptions{QPS: 2, Burst: 3, clock: clk}, nil)
	for i := range 3 {
		release, st := l.Acquire("alice")
		if st != nil {
			t.Fatalf("request %d of the burst refused: %v", i, st.Message)
		}
		release()
	}
	_, st := l.Acquire("alice")
	if st == nil || st.Code != http.StatusTooManyRequests || st.Details.RetryAfterSeconds != 1 {
		t.Fatalf("4th request: %+v, want 429 with Retry-After 1", st)
	}
	if _, st := l.Acquire("bob"); st != nil {
		t.Fatalf("bob is limited by alice's requests: %v", st.Message)
	}
	clk.Step(500 * time.Millisecond) // one token back
	if _, st := l.Acquire("alice"); st != nil {
		t.Fatalf("after refill: %v", st.Message)
	}
}

func TestRateLimiterInflight(t *testing.T) {
	l := NewRateLimiter(RateLimitOptions{MaxInflight: 2}, nil)
	r1, _ := l.Acquire("alice")
	r2, _ := l.Acquire("alice")
	if _, st := l.Acquire("alice"); st == nil || st.Code != http.StatusTooManyRequests {
		t.Fatalf("3rd open request: %+v, want 429", st)
	}
	r1()
	r1() // release is idempotent
	r3, st := l.Acquire("alice")
	if st != nil {
		t.Fatalf("after a release: %v", st.Message)
	}
	if _, st := l.Acquire("alice"); st == nil {
		t.Fatal("double release freed two slots")
	}
	r2()
	r3()
}

func TestRateLimiterForgetsIdleIdentities(t *testing.T) {
	clk := fakeClock()
	l := NewRateLimiter(RateLimitOptions{QPS: 1, Burst: 1, clock: clk}, nil)
	for _, id := range []string{"a", "b", "c"} {
		release, _ := l.Acquire(id)
		release()
	}
	open, _ := l.Acquire("d")
	clk.Step(sweepEvery)
	release, _ := l.Acquire("e") // sweeps
	release()
	l.mu.Lock()
	n := len(l.ids)
	l.mu.Unlock()
	if n != 2 { // d is still open, e just arrived
		t.Fatalf("%d identities kept, want 2", n)
	}
	open()
}

func TestRateLimiterMiddleware(t *testing.T) {
	l := NewRateLimiter(RateLimitOptions{QPS: 1, Burst: 1}, nil)
	h := l.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	do := func(u *User, remote string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/api/v1/pods", nil)
		r.RemoteAddr = remote
		if u != nil {
			r = r.WithContext(WithUser(r.Context(), u))
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	if w := do(alice, "10.0.0.1:1"); w.Code != http.StatusOK {
		t.Fatalf("first: %d", w.Code)
	}
	w := do(alice, "10.0.0.2:1") // same user, other address
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
		t.Fatalf("second: %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	// Anonymous callers are told apart by address.
	if w := do(AnonymousUser, "10.0.0.3:1"); w.Code != http.StatusOK {
		t.Fatalf("anonymous 1: %d", w.Code)
	}
	if w := do(AnonymousUser, "10.0.0.4:1"); w.Code != http.StatusOK {
		t.Fatalf("anonymous 2: %d", w.Code)
	}
}

func TestRateLimiterDisabled(t *testing.T) {
	var nilLimiter *RateLimiter
	for _, l := range []*RateLimiter{nilLimiter, NewRateLimiter(RateLimitOptions{}, nil)} {
		for range 100 {
			release, st := l.Acquire("x")
			if st != nil {
				t.Fatal("disabled limiter refused")
			}
			release()
		}
	}
}

// TestReviewsCountAgainstTheRate: the reviews a request causes are
// charged to its identity's rate, so a request that costs many reviews
// leaves fewer requests for its identity, and none for the others'.
func TestReviewsCountAgainstTheRate(t *testing.T) {
	clk := fakeClock()
	l := NewRateLimiter(RateLimitOptions{QPS: 10, Burst: 10, clock: clk}, nil)
	s := newReviewServer()
	s.allow = func(spec authorizationv1.SubjectAccessReviewSpec) bool {
		return spec.ResourceAttributes.Namespace == "ns-a"
	}
	sar := newTestSAR(t, s, SubjectAccessReviewOptions{clock: clk, Namespaces: staticNamespaces("ns-a", "ns-b", "ns-c", "ns-d", "ns-e", "ns-f", "ns-g", "ns-h")})
	var codes []int
	h := l.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := sar.Authorize(r.Context(), alice, Request{Verb: "list", Resource: podsGVR, Namespaced: true}); err != nil {
			t.Fatal(err)
		}
	}))
	do := func(u *User) int {
		r := httptest.NewRequest(http.MethodGet, "/api/v1/pods", nil)
		r = r.WithContext(WithUser(r.Context(), u))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	// The first request costs 9 reviews (the cluster and eight
	// namespaces): with itself, all ten of alice's burst.
	codes = append(codes, do(alice), do(alice))
	if codes[0] != 200 || codes[1] != 429 {
		t.Fatalf("codes %v, want 200 then 429: the scan's reviews count", codes)
	}
	if n := s.accessReviews.Load(); n != 9 {
		t.Fatalf("%d reviews, want 9", n)
	}
	if code := do(&User{Name: "bob"}); code != 200 {
		t.Fatalf("another user: %d", code)
	}
	clk.Step(time.Second) // ten tokens back, the scan cached
	if code := do(alice); code != 200 {
		t.Fatalf("alice a second later: %d", code)
	}
}
