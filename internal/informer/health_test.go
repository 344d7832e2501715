package informer

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestAPIHealthStaleness(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	h := &apiHealth{clock: clk}
	var status int
	var fail error
	rt := h.wrap(roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		if fail != nil {
			return nil, fail
		}
		return &http.Response{StatusCode: status, Status: http.StatusText(status), Body: http.NoBody}, nil
	}))
	do := func(ctx context.Context) {
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, "https://apiserver/api/v1/pods", nil)
		if resp, err := rt.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}
	expect := func(want time.Duration, wantErr string) {
		t.Helper()
		d, err := h.stale()
		if d != want || (err == nil) != (wantErr == "") || (err != nil && !strings.Contains(err.Error(), wantErr)) {
			t.Fatalf("stale() = %v, %v; want %v, %q", d, err, want, wantErr)
		}
	}

	status = http.StatusOK
	do(context.Background())
	expect(0, "")

	fail = errors.New("connection refused")
	do(context.Background())
	clk.SetTime(clk.Now().Add(10 * time.Second))
	do(context.Background()) // a second failure does not move the start
	expect(10*time.Second, "connection refused")

	fail, status = nil, http.StatusTooManyRequests
	clk.SetTime(clk.Now().Add(5 * time.Second))
	do(context.Background())
	expect(15*time.Second, "429")

	status = http.StatusForbidden // the apiserver answered: reachable
	do(context.Background())
	expect(0, "")

	// A request the caller cancelled says nothing about the apiserver.
	fail = context.Canceled
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	do(ctx)
	expect(0, "")
}

func TestReadyReportsStaleness(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	m := &Manager{opts: Options{StaleAfter: 30 * time.Second, health: &apiHealth{clock: clk}}, resources: nil}
	if err := m.Ready(); err != nil {
		t.Fatalf("Ready() = %v before any failure", err)
	}
	m.opts.health.failed(errors.New("dial tcp: connection refused"))
	clk.Step(30 * time.Second)
	if err := m.Ready(); err != nil {
		t.Fatalf("Ready() = %v at exactly StaleAfter", err)
	}
	clk.Step(time.Second)
	if err := m.Ready(); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Ready() = %v after StaleAfter, want the outage", err)
	}
	m.opts.health.succeeded()
	if err := m.Ready(); err != nil {
		t.Fatalf("Ready() = %v after recovery", err)
	}
}
