package auth

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
)

// BenchmarkAuthorize measures a warm-cache decision, the cost every list,
// get and subscription re-check pays, against AlwaysAllow.
func BenchmarkAuthorize(b *testing.B) {
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		namespaces int
		allowed    int // namespaces the user may read; -1: cluster-wide
	}{
		{"authz=always-allow", 0, -1},
		{"authz=rbac/scope=cluster", 100, -1},
		{"authz=rbac/scope=narrowed/namespaces=100", 100, 10},
		{"authz=rbac/scope=narrowed/namespaces=1000", 1000, 10},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var a Authorizer = AlwaysAllow{}
			if tc.name != "authz=always-allow" {
				s := newReviewServer()
				nss := make([]string, tc.namespaces)
				for i := range nss {
					nss[i] = fmt.Sprintf("ns-%d", i)
				}
				s.allow = func(spec authorizationv1.SubjectAccessReviewSpec) bool {
					if tc.allowed < 0 {
						return true
					}
					var i int
					_, err := fmt.Sscanf(spec.ResourceAttributes.Namespace, "ns-%d", &i)
					return err == nil && i < tc.allowed
				}
				sar, err := NewSubjectAccessReview(SubjectAccessReviewOptions{Client: s.client, Namespaces: staticNamespaces(nss...),
					AllowTTL: 1 << 62, DenyTTL: 1 << 62}) // stay warm for the whole run
				if err != nil {
					b.Fatal(err)
				}
				a = sar
			}
			req := Request{Verb: "list", Resource: podsGVR, Namespaced: true}
			if _, err := a.Authorize(ctx, alice, req); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.Authorize(ctx, alice, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAuthenticate measures a request with a cached token.
func BenchmarkAuthenticate(b *testing.B) {
	s := newReviewServer()
	s.tokens["good"] = authenticationv1.UserInfo{Username: "alice"}
	tr, err := NewTokenReview(TokenReviewOptions{Client: s.client, SuccessTTL: 1 << 62})
	if err != nil {
		b.Fatal(err)
	}
	bearer, err := NewBearer(BearerOptions{Tokens: tr})
	if err != nil {
		b.Fatal(err)
	}
	for _, transport := range []string{"header", "protocol"} {
		b.Run("transport="+transport, func(b *testing.B) {
			r := httptest.NewRequest(http.MethodGet, "/api/v1/pods", nil)
			b.ReportAllocs()
			for b.Loop() {
				if transport == "header" {
					r.Header.Set("Authorization", "Bearer good")
				} else {
					r.Header.Set("Sec-WebSocket-Protocol", "kubegate.v1, "+BearerProtocolPrefix+b64("good"))
				}
				if _, err := bearer.Authenticate(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSteadyStateReviews simulates one minute of re-checks (every
// 5s, as the servers do) for 1,000 subscriptions of 100 users on a fake
// clock, and reports the SubjectAccessReviews sent per minute with the
// default TTLs: the load the gateway puts on the apiserver at steady
// state. Each op is one simulated minute.
func BenchmarkSteadyStateReviews(b *testing.B) {
	const (
		users         = 100
		subsPerUser   = 10
		namespaces    = 50
		recheckPeriod = 5 * time.Second
	)
	ctx := context.Background()
	nss := make([]string, namespaces)
	for i := range nss {
		nss[i] = fmt.Sprintf("ns-%d", i)
	}
	us := make([]*User, users)
	for i := range us {
		us[i] = &User{Name: fmt.Sprintf("user-%d", i), Groups: []string{"system:authenticated"}}
	}
	// Each user may read pods in one namespace.
	allow := func(spec authorizationv1.SubjectAccessReviewSpec) bool {
		var u, n int
		_, err1 := fmt.Sscanf(spec.User, "user-%d", &u)
		_, err2 := fmt.Sscanf(spec.ResourceAttributes.Namespace, "ns-%d", &n)
		return err1 == nil && err2 == nil && u%namespaces == n
	}
	for _, scope := range []string{"namespace", "narrowed"} {
		b.Run(fmt.Sprintf("subscriptions=%d/users=%d/scope=%s", users*subsPerUser, users, scope), func(b *testing.B) {
			s := newReviewServer()
			s.allow = allow
			clk := fakeClock()
			a, err := NewSubjectAccessReview(SubjectAccessReviewOptions{Client: s.client, Namespaces: staticNamespaces(nss...), clock: clk})
			if err != nil {
				b.Fatal(err)
			}
			recheckAll := func() {
				for i := range users * subsPerUser {
					u := us[i%users]
					req := Request{Verb: "watch", Resource: podsGVR, Namespaced: true}
					if scope == "namespace" {
						req.Namespace = nss[(i%users)%namespaces]
					}
					if _, err := a.Authorize(ctx, u, req); err != nil {
						b.Fatal(err)
					}
				}
			}
			recheckAll() // subscribe
			var reviews int64
			for b.Loop() {
				before := s.accessReviews.Load()
				for range time.Minute / recheckPeriod {
					clk.Step(recheckPeriod)
					recheckAll()
				}
				reviews += s.accessReviews.Load() - before
			}
			b.ReportMetric(float64(reviews)/float64(b.N), "reviews/min")
		})
	}
}
