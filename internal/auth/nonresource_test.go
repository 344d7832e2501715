package auth

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubegate/internal/apistatus"
)

// metricsReaders allows get on /metrics to the group "monitoring".
func metricsReaders(s authorizationv1.SubjectAccessReviewSpec) bool {
	nra := s.NonResourceAttributes
	for _, g := range s.Groups {
		if g == "monitoring" && nra != nil && nra.Path == "/metrics" && nra.Verb == "get" {
			return true
		}
	}
	return false
}

func TestNonResourceReviewSendsPathVerbAndIdentity(t *testing.T) {
	s := newReviewServer()
	s.allow = func(authorizationv1.SubjectAccessReviewSpec) bool { return true }
	a := newTestSAR(t, s, SubjectAccessReviewOptions{})
	if err := a.AuthorizeNonResource(context.Background(), alice, "get", "/metrics"); err != nil {
		t.Fatal(err)
	}
	want := authorizationv1.SubjectAccessReviewSpec{
		User: "alice", UID: "a-1", Groups: []string{"devs", "system:authenticated"},
		Extra:                 map[string]authorizationv1.ExtraValue{"scopes": {"x", "y"}},
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
	}
	if diff := cmp.Diff([]authorizationv1.SubjectAccessReviewSpec{want}, s.specs); diff != "" {
		t.Fatalf("specs (-want +got):\n%s", diff)
	}
}

// A denial reads as kube-apiserver's for its own /metrics, as a complete
// Status.
func TestNonResourceDenialIsTheAPIServers(t *testing.T) {
	s := newReviewServer()
	s.allow = metricsReaders
	a := newTestSAR(t, s, SubjectAccessReviewOptions{})
	err := a.AuthorizeNonResource(context.Background(), alice, "get", "/metrics")
	want := &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
		Message: `forbidden: User "alice" cannot get path "/metrics"`,
		Details: &metav1.StatusDetails{},
	}
	if diff := cmp.Diff(want, apistatus.FromError(err)); diff != "" {
		t.Fatalf("status (-want +got):\n%s", diff)
	}

	bob := &User{Name: "bob", Groups: []string{"monitoring"}}
	if err := a.AuthorizeNonResource(context.Background(), bob, "get", "/metrics"); err != nil {
		t.Fatalf("bob, in group monitoring: %v", err)
	}
	if err := a.AuthorizeNonResource(context.Background(), bob, "post", "/metrics"); !isCode(err, http.StatusForbidden) {
		t.Fatalf("post: err = %v, want 403", err)
	}
}

func TestNonResourceDecisionsAreCachedWithTheirTTLs(t *testing.T) {
	s := newReviewServer()
	s.allow = metricsReaders
	clk := fakeClock()
	a := newTestSAR(t, s, SubjectAccessReviewOptions{clock: clk, AllowTTL: 5 * time.Second, DenyTTL: 2 * time.Second})
	ctx := context.Background()
	bob := &User{Name: "bob", Groups: []string{"monitoring"}}
	for range 3 {
		if err := a.AuthorizeNonResource(ctx, bob, "get", "/metrics"); err != nil {
			t.Fatal(err)
		}
		if err := a.AuthorizeNonResource(ctx, alice, "get", "/metrics"); !isCode(err, http.StatusForbidden) {
			t.Fatalf("alice: err = %v, want 403", err)
		}
	}
	if n := s.accessReviews.Load(); n != 2 {
		t.Fatalf("%d reviews, want 2 (one per user)", n)
	}
	clk.Step(2 * time.Second) // the denial expires, the allow does not
	_ = a.AuthorizeNonResource(ctx, bob, "get", "/metrics")
	_ = a.AuthorizeNonResource(ctx, alice, "get", "/metrics")
	if n := s.accessReviews.Load(); n != 3 {
		t.Fatalf("%d reviews after the deny TTL, want 3", n)
	}
	clk.Step(3 * time.Second)
	_ = a.AuthorizeNonResource(ctx, bob, "get", "/metrics")
	if n := s.accessReviews.Load(); n != 4 {
		t.Fatalf("%d reviews after the allow TTL, want 4", n)
	}
}

// An allowed resource request never answers for a path: the decisions
// are kept apart.
func TestNonResourceDecisionIsNotAResourceDecision(t *testing.T) {
	s := newReviewServer()
	s.allow = func(s authorizationv1.SubjectAccessReviewSpec) bool { return s.ResourceAttributes != nil }
	a := newTestSAR(t, s, SubjectAccessReviewOptions{})
	ctx := context.Background()
	if _, err := a.Authorize(ctx, alice, Request{Verb: "get", Resource: podsGVR}); err != nil {
		t.Fatal(err)
	}
	if err := a.AuthorizeNonResource(ctx, alice, "get", "/metrics"); !isCode(err, http.StatusForbidden) {
		t.Fatalf("err = %v, want 403", err)
	}
}

// A review that cannot be made is a 503, never an allow, and is not
// cached.
func TestNonResourceReviewFailureDenies(t *testing.T) {
	s := newReviewServer()
	s.allow = metricsReaders
	s.fail = errUnavailable
	a := newTestSAR(t, s, SubjectAccessReviewOptions{})
	bob := &User{Name: "bob", Groups: []string{"monitoring"}}
	if err := a.AuthorizeNonResource(context.Background(), bob, "get", "/metrics"); !isCode(err, http.StatusServiceUnavailable) {
		t.Fatalf("err = %v, want 503", err)
	}
	s.set(func(s *reviewServer) { s.fail = nil })
	if err := a.AuthorizeNonResource(context.Background(), bob, "get", "/metrics"); err != nil {
		t.Fatalf("after the apiserver is back: %v", err)
	}
}

func TestNonResourceWithoutUserIsUnauthorized(t *testing.T) {
	a := newTestSAR(t, newReviewServer(), SubjectAccessReviewOptions{})
	if err := a.AuthorizeNonResource(context.Background(), nil, "get", "/metrics"); !isCode(err, http.StatusUnauthorized) {
		t.Fatalf("err = %v, want 401", err)
	}
	if err := (AlwaysAllow{}).AuthorizeNonResource(context.Background(), alice, "get", "/metrics"); err != nil {
		t.Fatalf("AlwaysAllow: %v", err)
	}
}
