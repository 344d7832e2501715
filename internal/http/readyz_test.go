package httpapi

import (
	"strings"
	"testing"
	"time"

	"kubegate/internal/informer"
)

func TestInformerChecks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status informer.ResourceStatus
		line   string
		ready  bool
		// withheld is the line for a caller who may not read /metrics:
		// no object count, no error.
		withheld string
	}{
		{"synced", informer.ResourceStatus{Resource: "pods", Gating: true, Synced: true, Objects: 3},
			"[+]informer pods ok (3 objects)\n", true, "[+]informer pods ok\n"},
		{"synced, requests failing", informer.ResourceStatus{Resource: "pods", Gating: true, Synced: true, Objects: 3,
			FailingFor: 2500 * time.Millisecond, FailingError: "GET /api/v1/pods: HTTP 500"},
			"[+]informer pods ok (3 objects); its requests have failed for 2s: GET /api/v1/pods: HTTP 500\n", true,
			"[+]informer pods ok; its requests are failing: reason withheld\n"},
		{"configured, not synced", informer.ResourceStatus{Resource: "pods", Gating: true},
			"[-]informer pods not synced\n", false, "[-]informer pods not synced\n"},
		{"configured, list failed", informer.ResourceStatus{Resource: "pods", Gating: true, Error: "boom"},
			"[-]informer pods failed: boom\n", false, "[-]informer pods failed: reason withheld\n"},
		{"configured, answered 429", informer.ResourceStatus{Resource: "pods", Gating: true, FailingError: "HTTP 429"},
			"[-]informer pods not synced: HTTP 429\n", false, "[-]informer pods not synced: reason withheld\n"},
		{"configured, no longer served", informer.ResourceStatus{Resource: "gizmos.example.com", Gating: true, Gone: true,
			Error: "gizmos.example.com is no longer served by the apiserver (example.com/v1)"},
			"[+]informer gizmos.example.com not served by the apiserver (configured; started again once it is): " +
				"gizmos.example.com is no longer served by the apiserver (example.com/v1)\n", true,
			"[+]informer gizmos.example.com not served by the apiserver (configured; started again once it is): reason withheld\n"},
		{"on demand, not synced", informer.ResourceStatus{Resource: "metrics.k8s.io/pods"},
			"[+]informer metrics.k8s.io/pods not synced (on demand; does not gate readiness)\n", true,
			"[+]informer metrics.k8s.io/pods not synced (on demand; does not gate readiness)\n"},
		{"on demand, list failed", informer.ResourceStatus{Resource: "widgets.example.com", Error: "conversion webhook failed"},
			"[+]informer widgets.example.com failed (on demand; does not gate readiness): conversion webhook failed\n", true,
			"[+]informer widgets.example.com failed (on demand; does not gate readiness): reason withheld\n"},
		{"on demand, answered 503", informer.ResourceStatus{Resource: "widgets.example.com", FailingError: "HTTP 503"},
			"[+]informer widgets.example.com not synced (on demand; does not gate readiness): HTTP 503\n", true,
			"[+]informer widgets.example.com not synced (on demand; does not gate readiness): reason withheld\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := informerChecks([]informer.ResourceStatus{tc.status}, true)
			// The mark says whether the line keeps the gateway unready.
			if ready := strings.HasPrefix(b.String(), "[+]"); b.String() != tc.line || ready != tc.ready {
				t.Errorf("got %q, ready=%v; want %q, ready=%v", b.String(), ready, tc.line, tc.ready)
			}
			if got := informerChecks([]informer.ResourceStatus{tc.status}, false).String(); got != tc.withheld {
				t.Errorf("without detail: got %q, want %q", got, tc.withheld)
			}
		})
	}
}
