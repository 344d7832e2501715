package auth

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

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
