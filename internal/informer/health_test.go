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

func TestReadinessMessages(t *testing.T) {
	synced := ResourceStatus{Resource: "pods", Synced: true}
	waiting := ResourceStatus{Resource: "configmaps"}
	failedList := ResourceStatus{Resource: "secrets", Error: "Internal error occurred: boom"}
	outage := errors.New("GET /api/v1/configmaps: HTTP 429")
	for _, tc := range []struct {
		name    string
		status  []ResourceStatus
		failing time.Duration
		lastErr error
		want    string // "" for ready
	}{
		{"all synced", []ResourceStatus{synced}, 0, nil, ""},
		{"short outage while synced", []ResourceStatus{synced}, 30 * time.Second, outage, ""},
		{"stale", []ResourceStatus{synced}, 31 * time.Second, outage,
			"stale: requests to the apiserver have failed for 31s: GET /api/v1/configmaps: HTTP 429"},
		{"not synced", []ResourceStatus{synced, waiting}, 0, nil, "not synced: [configmaps]"},
		{"not synced with list error", []ResourceStatus{failedList}, 0, nil,
			"not synced: [secrets (Internal error occurred: boom)]"},
		// client-go is still retrying a 429 itself: the informer has no
		// error yet, the failing requests explain the wait.
		{"not synced while requests fail", []ResourceStatus{waiting}, 1500 * time.Millisecond, outage,
			"not synced: [configmaps]; requests to the apiserver have failed for 1s: GET /api/v1/configmaps: HTTP 429"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := readiness(tc.status, tc.failing, tc.lastErr, 30*time.Second)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("readiness() = %q, want %q", got, tc.want)
			}
		})
	}
}
