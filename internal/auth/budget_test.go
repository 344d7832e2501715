package auth

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestFailureBudget: an address's budget holds Burst failures and refills
// at QPS; a refund gives a unit back; addresses are apart; refusals are
// 429 with the wait until the next unit.
func TestFailureBudget(t *testing.T) {
	clk := fakeClock()
	b := NewFailureBudget(FailureBudgetOptions{QPS: 2, Burst: 3, clock: clk})
	for i := range 3 {
		if _, st := b.Take("a"); st != nil {
			t.Fatalf("take %d: %v", i, st.Message)
		}
	}
	_, st := b.Take("a")
	if st == nil || st.Code != http.StatusTooManyRequests || st.Details.RetryAfterSeconds != 1 || st.Kind != "Status" {
		t.Fatalf("the 4th at once: %+v, want a 429 Status with Retry-After 1", st)
	}
	if _, st := b.Take("b"); st != nil {
		t.Fatalf("another address: %v", st.Message)
	}
	clk.Step(500 * time.Millisecond) // one unit back
	refund, st := b.Take("a")
	if st != nil {
		t.Fatalf("after 500ms: %v", st.Message)
	}
	refund() // valid after all
	refund() // idempotent
	if _, st := b.Take("a"); st != nil {
		t.Fatal("the refunded unit is not there")
	}
	if _, st := b.Take("a"); st == nil {
		t.Fatal("a refund gave back more than one unit")
	}
}

// TestFailureBudgetBounded: past MaxSources addresses, new ones share one
// budget, and full budgets are forgotten, so memory is bounded whatever
// addresses come.
func TestFailureBudgetBounded(t *testing.T) {
	clk := fakeClock()
	b := NewFailureBudget(FailureBudgetOptions{QPS: 1, Burst: 2, MaxSources: 10, clock: clk})
	for i := range 1000 {
		b.Take(fmt.Sprint("addr-", i))
	}
	if n := b.sources(); n != 11 {
		t.Fatalf("%d budgets kept for 1000 addresses, want 10 and the shared one", n)
	}
	if _, st := b.Take("addr-5000"); st == nil {
		t.Fatal("a new address past the bound has a budget of its own; want the shared one, spent")
	}
	clk.Step(sweepEvery)
	b.Take("late")
	if n := b.sources(); n != 1 {
		t.Fatalf("%d budgets kept after they refilled, want 1", n)
	}
}

// countingTokens is a TokenAuthenticator that knows no token in advance
// (no CachedTokens) and counts what it is asked.
type countingTokens struct {
	valid map[string]*User
	calls int
}

func (c *countingTokens) AuthenticateToken(_ context.Context, tok string) (*User, error) {
	c.calls++
	if u, ok := c.valid[tok]; ok {
		return u, nil
	}
	return nil, unauthorized("invalid bearer token")
}

// TestBearerFailureBudget: failed credentials of any kind spend their
// address's budget and, once it is spent, are refused with 429 before
// the authenticator is asked; valid tokens spend nothing, and a token
// the authenticator knows to be valid (a cached one) is served from an
// address whose budget is spent.
func TestBearerFailureBudget(t *testing.T) {
	clk := fakeClock()
	tokens := &countingTokens{valid: map[string]*User{"good": alice}}
	b := must[*Bearer](t)(NewBearer(BearerOptions{Tokens: tokens, Failures: NewFailureBudget(FailureBudgetOptions{QPS: 1, Burst: 3, clock: clk})}))
	auth := func(addr, hdr string) error {
		r := httptest.NewRequest(http.MethodGet, "/api", nil)
		r.RemoteAddr = addr + ":1"
		if hdr != "" {
			r.Header.Set("Authorization", hdr)
		}
		_, err := b.Authenticate(r)
		return err
	}
	for range 5 {
		if err := auth("192.0.2.1", "Bearer good"); err != nil {
			t.Fatalf("valid token: %v", err)
		}
	}
	for i, hdr := range []string{"", "Basic x", "Bearer bogus"} {
		if err := auth("192.0.2.1", hdr); !isCode(err, http.StatusUnauthorized) {
			t.Fatalf("failure %d: %v, want 401", i, err)
		}
	}
	calls := tokens.calls
	if err := auth("192.0.2.1", "Bearer bogus"); !isCode(err, http.StatusTooManyRequests) {
		t.Fatalf("past the budget: %v, want 429", err)
	}
	if err := auth("192.0.2.1", "Bearer good"); !isCode(err, http.StatusTooManyRequests) {
		t.Fatalf("an unknown valid token past the budget: %v, want 429 (it cannot be told from a bogus one without a review)", err)
	}
	if tokens.calls != calls {
		t.Fatal("the authenticator was asked past the budget")
	}
	if err := auth("198.51.100.7", "Bearer bogus"); !isCode(err, http.StatusUnauthorized) {
		t.Fatalf("another address: %v", err)
	}

	// With a cache of valid tokens, those pass whatever the budget.
	tf := must[*TokenFile](t)(ParseTokenFile(strings.NewReader("good,alice,a-1\n")))
	b = must[*Bearer](t)(NewBearer(BearerOptions{Tokens: tf, Failures: NewFailureBudget(FailureBudgetOptions{QPS: 1, Burst: 1, clock: clk})}))
	_ = auth("192.0.2.1", "Bearer bogus")
	if err := auth("192.0.2.1", "Bearer bogus"); !isCode(err, http.StatusTooManyRequests) {
		t.Fatalf("past the budget: %v, want 429", err)
	}
	if err := auth("192.0.2.1", "Bearer good"); err != nil {
		t.Fatalf("a known valid token past the budget: %v", err)
	}
}
