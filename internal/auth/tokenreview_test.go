package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
)

func newTestTokenReview(t *testing.T, s *reviewServer, opts TokenReviewOptions) *TokenReview {
	t.Helper()
	opts.Client = s.client
	if opts.clock == nil {
		opts.clock = fakeClock()
	}
	return must[*TokenReview](t)(NewTokenReview(opts))
}

func TestTokenReviewCachesSuccessForSuccessTTL(t *testing.T) {
	s := newReviewServer()
	s.tokens["good"] = authenticationv1.UserInfo{Username: "alice", UID: "u1", Groups: []string{"devs", "system:authenticated"},
		Extra: map[string]authenticationv1.ExtraValue{"scopes": {"a"}}}
	clk := fakeClock()
	a := newTestTokenReview(t, s, TokenReviewOptions{clock: clk})
	ctx := context.Background()

	want := &User{Name: "alice", UID: "u1", Groups: []string{"devs", "system:authenticated"}, Extra: map[string][]string{"scopes": {"a"}}}
	for range 3 {
		u, err := a.AuthenticateToken(ctx, "good")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, u, cmpopts.IgnoreUnexported(User{})); diff != "" {
			t.Fatalf("user (-want +got):\n%s", diff)
		}
	}
	if n := s.tokenReviews.Load(); n != 1 {
		t.Fatalf("%d TokenReviews for one token within the TTL, want 1", n)
	}
	clk.Step(DefaultTokenSuccessTTL - time.Millisecond)
	_, _ = a.AuthenticateToken(ctx, "good")
	if n := s.tokenReviews.Load(); n != 1 {
		t.Fatalf("%d TokenReviews just before the TTL ends, want 1", n)
	}
	clk.Step(time.Millisecond)
	_, _ = a.AuthenticateToken(ctx, "good")
	if n := s.tokenReviews.Load(); n != 2 {
		t.Fatalf("%d TokenReviews after the TTL, want 2", n)
	}
}

func TestTokenReviewCachesFailureForFailureTTL(t *testing.T) {
	s := newReviewServer()
	clk := fakeClock()
	a := newTestTokenReview(t, s, TokenReviewOptions{clock: clk, FailureTTL: time.Second})
	ctx := context.Background()
	for range 2 {
		if _, err := a.AuthenticateToken(ctx, "bad"); !isCode(err, http.StatusUnauthorized) {
			t.Fatalf("err = %v, want 401", err)
		}
	}
	if n := s.tokenReviews.Load(); n != 1 {
		t.Fatalf("%d TokenReviews, want 1", n)
	}
	// The token becomes valid (say, its service account is created): it
	// is accepted once the failure has expired.
	s.set(func(s *reviewServer) { s.tokens["bad"] = authenticationv1.UserInfo{Username: "late"} })
	clk.Step(time.Second)
	if u, err := a.AuthenticateToken(ctx, "bad"); err != nil || u.Name != "late" {
		t.Fatalf("after the failure TTL: %v, %v", u, err)
	}
}

func TestTokenReviewErrorsAreNotCached(t *testing.T) {
	s := newReviewServer()
	s.tokens["good"] = authenticationv1.UserInfo{Username: "alice"}
	s.fail = errUnavailable
	a := newTestTokenReview(t, s, TokenReviewOptions{})
	ctx := context.Background()
	_, err := a.AuthenticateToken(ctx, "good")
	if !errors.Is(err, ErrReviewFailed) {
		t.Fatalf("err = %v, want ErrReviewFailed", err)
	}
	if isCode(err, http.StatusServiceUnavailable) {
		t.Fatal("the apiserver's status leaks through the error")
	}
	s.set(func(s *reviewServer) { s.fail = nil })
	if u, err := a.AuthenticateToken(ctx, "good"); err != nil || u.Name != "alice" {
		t.Fatalf("after the apiserver recovered: %v, %v (the error was cached?)", u, err)
	}
	if n := s.tokenReviews.Load(); n != 2 {
		t.Fatalf("%d TokenReviews, want 2", n)
	}
}

func TestTokenReviewSharesConcurrentLookups(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newReviewServer()
		s.tokens["good"] = authenticationv1.UserInfo{Username: "alice"}
		gate := make(chan struct{})
		s.gate = gate
		a := must[*TokenReview](t)(NewTokenReview(TokenReviewOptions{Client: s.client}))
		var wg sync.WaitGroup
		errs := make(chan error, 20)
		for range 20 {
			wg.Go(func() {
				u, err := a.AuthenticateToken(context.Background(), "good")
				if err == nil && u.Name != "alice" {
					err = errors.New("wrong user " + u.Name)
				}
				errs <- err
			})
		}
		synctest.Wait() // every caller is waiting on the one review
		if n := s.tokenReviews.Load(); n != 1 {
			t.Fatalf("%d TokenReviews for 20 concurrent lookups, want 1", n)
		}
		close(gate)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestTokenReviewCallerCancelDoesNotFailOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newReviewServer()
		s.tokens["good"] = authenticationv1.UserInfo{Username: "alice"}
		gate := make(chan struct{})
		s.gate = gate
		a := must[*TokenReview](t)(NewTokenReview(TokenReviewOptions{Client: s.client}))
		ctx, cancel := context.WithCancel(context.Background())
		first := make(chan error, 1)
		go func() { _, err := a.AuthenticateToken(ctx, "good"); first <- err }()
		synctest.Wait()
		second := make(chan error, 1)
		go func() { _, err := a.AuthenticateToken(context.Background(), "good"); second <- err }()
		synctest.Wait()
		cancel()
		if err := <-first; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled caller: %v", err)
		}
		close(gate)
		if err := <-second; err != nil {
			t.Fatalf("the other caller failed with the first one's cancellation: %v", err)
		}
	})
}

func TestTokenReviewAudiences(t *testing.T) {
	s := newReviewServer()
	s.tokens["good"] = authenticationv1.UserInfo{Username: "alice"}
	// The fake returns no audiences, as if the token were not for ours.
	a := newTestTokenReview(t, s, TokenReviewOptions{Audiences: []string{"kubegate"}})
	if _, err := a.AuthenticateToken(context.Background(), "good"); !isCode(err, http.StatusUnauthorized) {
		t.Fatalf("token without our audience: err = %v, want 401", err)
	}
}

func TestTokenCacheKeyIsAHash(t *testing.T) {
	s := newReviewServer()
	s.tokens["secret-token-value"] = authenticationv1.UserInfo{Username: "alice"}
	a := newTestTokenReview(t, s, TokenReviewOptions{})
	_, _ = a.AuthenticateToken(context.Background(), "secret-token-value")
	_, _ = a.AuthenticateToken(context.Background(), "secret-bogus-value")
	for name, keys := range map[string][]any{"valid": a.valid.lru.Keys(), "rejected": a.rejected.lru.Keys()} {
		if len(keys) != 1 {
			t.Fatalf("%d %s cache entries, want 1", len(keys), name)
		}
		for _, k := range keys {
			if k == "secret-token-value" || k == "secret-bogus-value" || len(k.(string)) != 32 {
				t.Fatalf("%s cache key %q is not a SHA-256", name, k)
			}
		}
	}
}

// TestRevalidate checks that a user from a TokenReview stops being
// authorized once its token is no longer accepted (after the success TTL),
// which is how streams notice expired and revoked tokens.
func TestRevalidate(t *testing.T) {
	s := newReviewServer()
	s.tokens["good"] = authenticationv1.UserInfo{Username: "alice"}
	s.allow = func(authorizationv1.SubjectAccessReviewSpec) bool { return true }
	clk := fakeClock()
	tr := newTestTokenReview(t, s, TokenReviewOptions{clock: clk})
	sar := newTestSAR(t, s, SubjectAccessReviewOptions{clock: clk})
	ctx := context.Background()
	u, err := tr.AuthenticateToken(ctx, "good")
	if err != nil {
		t.Fatal(err)
	}
	req := Request{Verb: "watch", Resource: podsGVR, Namespaced: true, Namespace: "ns-a"}
	if _, err := sar.Authorize(ctx, u, req); err != nil {
		t.Fatal(err)
	}
	s.set(func(s *reviewServer) { delete(s.tokens, "good") })
	clk.Step(DefaultTokenSuccessTTL - time.Millisecond)
	if _, err := sar.Authorize(ctx, u, req); err != nil {
		t.Fatalf("within the success TTL: %v", err)
	}
	clk.Step(time.Millisecond)
	if _, err := sar.Authorize(ctx, u, req); !isCode(err, http.StatusUnauthorized) {
		t.Fatalf("after the token was revoked: err = %v, want 401", err)
	}
	// While the apiserver cannot be asked, a re-check answers 503, not
	// 401 (the token may be fine) and not 500.
	s.set(func(s *reviewServer) { s.tokens["good"] = authenticationv1.UserInfo{Username: "alice"} })
	clk.Step(DefaultTokenFailureTTL)
	if _, err := sar.Authorize(ctx, u, req); err != nil {
		t.Fatalf("token accepted again: %v", err)
	}
	s.set(func(s *reviewServer) { s.fail = errUnavailable })
	clk.Step(DefaultTokenSuccessTTL)
	if _, err := sar.Authorize(ctx, u, req); !isCode(err, http.StatusServiceUnavailable) {
		t.Fatalf("TokenReview failing: err = %v, want 503", err)
	}
	// Users whose credentials cannot change have nothing to revalidate.
	if err := alice.Revalidate(ctx); err != nil {
		t.Fatal(err)
	}
	var none *User
	if err := none.Revalidate(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRejectedTokensDoNotEvictValidOnes: a flood of bogus tokens fills the
// cache of rejected tokens only: a valid token stays cached, and is not
// reviewed again within its TTL.
func TestRejectedTokensDoNotEvictValidOnes(t *testing.T) {
	s := newReviewServer()
	s.tokens["good"] = authenticationv1.UserInfo{Username: "alice"}
	a := newTestTokenReview(t, s, TokenReviewOptions{MaxEntries: 10, MaxRejectedEntries: 10})
	ctx := context.Background()
	if _, err := a.AuthenticateToken(ctx, "good"); err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		if _, err := a.AuthenticateToken(ctx, fmt.Sprint("bogus-", i)); !isCode(err, http.StatusUnauthorized) {
			t.Fatalf("bogus token: %v", err)
		}
	}
	if n := len(a.rejected.lru.Keys()); n != 10 {
		t.Fatalf("%d rejected tokens cached, want the bound 10", n)
	}
	before := s.tokenReviews.Load()
	if u, ok := a.CachedToken("good"); !ok || u.Name != "alice" {
		t.Fatal("the valid token left the cache during the flood")
	}
	if _, err := a.AuthenticateToken(ctx, "good"); err != nil || s.tokenReviews.Load() != before {
		t.Fatalf("the valid token was reviewed again (%v)", err)
	}
	// A rejected token still cached is refused without a review.
	if _, err := a.AuthenticateToken(ctx, "bogus-999"); !isCode(err, http.StatusUnauthorized) || s.tokenReviews.Load() != before {
		t.Fatalf("a cached rejection: %v, %d reviews", err, s.tokenReviews.Load()-before)
	}
}
