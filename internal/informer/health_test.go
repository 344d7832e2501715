package informer

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestAPIHealthStaleness(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	h := &apiHealth{clock: clk, errors: newMetrics(nil).upstreamErrors}
	var status int
	var fail error
	rt := h.wrap(roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		if fail != nil {
			return nil, fail
		}
		return &http.Response{StatusCode: status, Status: http.StatusText(status), Body: http.NoBody}, nil
	}))
	do := func(ctx context.Context, path string) {
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, "https://apiserver"+path, nil)
		if resp, err := rt.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}
	expect := func(path string, want time.Duration, wantErr string) {
		t.Helper()
		d, err := h.stale()
		if path != "" {
			d, err = h.staleResource(path)
		}
		if d != want || (err == nil) != (wantErr == "") || (err != nil && !strings.Contains(err.Error(), wantErr)) {
			t.Fatalf("stale(%q) = %v, %v; want %v, %q", path, d, err, want, wantErr)
		}
	}
	const pods, deploys = "/api/v1/pods", "/apis/apps/v1/deployments"

	status = http.StatusOK
	do(context.Background(), pods)
	expect("", 0, "")
	expect(pods, 0, "")

	fail = errors.New("connection refused")
	do(context.Background(), pods)
	clk.SetTime(clk.Now().Add(10 * time.Second))
	do(context.Background(), "/apis") // a second failure does not move the start
	expect("", 10*time.Second, "connection refused")
	expect(pods, 0, "") // transport errors are the apiserver's, not a resource's

	// A 5xx or 429 answer to a resource's list or watch is that
	// resource's; the apiserver answered, and other resources are not
	// stale for it.
	fail, status = nil, http.StatusTooManyRequests
	clk.SetTime(clk.Now().Add(5 * time.Second))
	do(context.Background(), pods)
	expect("", 0, "")
	expect(pods, 0, "429")
	clk.SetTime(clk.Now().Add(5 * time.Second))
	do(context.Background(), pods) // a second failure does not move the start
	expect(pods, 5*time.Second, "GET /api/v1/pods: HTTP 429")
	expect(deploys, 0, "")

	// Elsewhere (discovery here) they count against the apiserver.
	status = http.StatusServiceUnavailable
	do(context.Background(), "/apis/apps/v1")
	clk.SetTime(clk.Now().Add(time.Second))
	expect("", time.Second, "GET /apis/apps/v1: HTTP 503")

	// Any other answer shows the apiserver is reachable; only an answer
	// to pods clears pods.
	status = http.StatusForbidden
	do(context.Background(), deploys)
	expect("", 0, "")
	expect(pods, 6*time.Second, "429")
	do(context.Background(), pods)
	expect(pods, 0, "")

	// A request the caller cancelled says nothing about the apiserver.
	fail = context.Canceled
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	do(ctx, pods)
	expect("", 0, "")

	for code, want := range map[string]float64{"transport": 2, "429": 2, "503": 1, "403": 0} {
		if got := testutil.ToFloat64(h.errors.WithLabelValues(code)); got != want {
			t.Errorf("kubegate_upstream_errors_total{code=%q} = %v, want %v", code, got, want)
		}
	}
}

func TestCollectionPath(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/pods":                    "/api/v1/pods",
		"/apis/apps/v1/deployments":       "/apis/apps/v1/deployments",
		"/api":                            "",
		"/api/v1":                         "",
		"/apis/apps/v1":                   "",
		"/api/v1/namespaces/default/pods": "",
		"/version":                        "",
	} {
		if got := collectionPath(path); got != want {
			t.Errorf("collectionPath(%q) = %q, want %q", path, got, want)
		}
	}
	for _, gvr := range []schema.GroupVersionResource{{Version: "v1", Resource: "pods"}, {Group: "apps", Version: "v1", Resource: "deployments"}} {
		if p := resourcePath(gvr); collectionPath(p) != p {
			t.Errorf("resourcePath(%v) = %q is not a collection path", gvr, p)
		}
	}
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
	m.opts.health.succeeded("")
	if err := m.Ready(); err != nil {
		t.Fatalf("Ready() = %v after recovery", err)
	}
}

func TestReadinessMessages(t *testing.T) {
	synced := ResourceStatus{Resource: "pods", Gating: true, Synced: true}
	waiting := ResourceStatus{Resource: "configmaps", Gating: true}
	failedList := ResourceStatus{Resource: "secrets", Gating: true, Error: "Internal error occurred: boom"}
	answering429 := ResourceStatus{Resource: "configmaps", Gating: true, FailingFor: 1500 * time.Millisecond,
		FailingError: "GET /api/v1/configmaps: HTTP 429"}
	syncedFailing := ResourceStatus{Resource: "pods", Gating: true, Synced: true, FailingFor: 31 * time.Second,
		FailingError: "GET /api/v1/pods: HTTP 500"}
	onDemand := func(s ResourceStatus) ResourceStatus { s.Gating = false; return s }
	outage := errors.New("dial tcp: connection refused")
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
			"stale: requests to the apiserver have failed for 31s: dial tcp: connection refused"},
		{"not synced", []ResourceStatus{synced, waiting}, 0, nil, "not synced: [configmaps]"},
		{"not synced with list error", []ResourceStatus{failedList}, 0, nil,
			"not synced: [secrets (Internal error occurred: boom)]"},
		// client-go is still retrying a 429 itself: the informer has no
		// error yet, the failing requests explain the wait.
		{"not synced while its requests fail", []ResourceStatus{answering429}, 0, nil,
			"not synced: [configmaps (GET /api/v1/configmaps: HTTP 429)]"},
		{"not synced during an outage", []ResourceStatus{waiting}, 1500 * time.Millisecond, outage,
			"not synced: [configmaps]; requests to the apiserver have failed for 1s: dial tcp: connection refused"},
		{"a resource's requests failing too long", []ResourceStatus{syncedFailing}, 0, nil,
			"stale: [pods (failing for 31s: GET /api/v1/pods: HTTP 500)]"},
		// Resources started on first use never gate readiness.
		{"on demand", []ResourceStatus{synced, onDemand(waiting), onDemand(failedList), onDemand(syncedFailing)}, 0, nil, ""},
		{"on demand during an outage", []ResourceStatus{onDemand(synced)}, 31 * time.Second, outage,
			"stale: requests to the apiserver have failed for 31s: dial tcp: connection refused"},
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

// TestAPIHealthBrokenStream: a watch whose body breaks mid-stream is an
// outage of the apiserver, counted as "stream"; one the caller closed is
// not.
func TestAPIHealthBrokenStream(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	h := &apiHealth{clock: clk, errors: newMetrics(nil).upstreamErrors}
	rt := h.wrap(roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(iotest.ErrReader(errors.New("connection reset by peer")))}, nil
	}))
	read := func(ctx context.Context) {
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, "https://apiserver/api/v1/pods?watch=true", nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if _, err := io.ReadAll(resp.Body); err == nil {
			t.Fatal("read the broken body without an error")
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	read(ctx)
	if got := testutil.ToFloat64(h.errors.WithLabelValues("stream")); got != 0 {
		t.Fatalf("a stream the caller cancelled counted %v times", got)
	}
	read(context.Background())
	clk.SetTime(clk.Now().Add(time.Second))
	if d, err := h.stale(); d != time.Second || err == nil || !strings.Contains(err.Error(), "connection reset") {
		t.Errorf("stale() = %v, %v after a broken stream", d, err)
	}
	if got := testutil.ToFloat64(h.errors.WithLabelValues("stream")); got != 1 {
		t.Errorf(`kubegate_upstream_errors_total{code="stream"} = %v, want 1`, got)
	}
}
