package apistatus

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kubegate/internal/informer"
)

func TestFromError(t *testing.T) {
	secret := errors.New("dial tcp 10.0.0.1:443: secret detail")
	for _, tc := range []struct {
		name   string
		err    error
		code   int32
		reason metav1.StatusReason
	}{
		{"status error", apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "x", errors.New("no")), 403, metav1.StatusReasonForbidden},
		{"bad selector", fmt.Errorf("wrapped: %w", &informer.InvalidFilterError{Param: "labelSelector", Err: errors.New("bad")}), 400, metav1.StatusReasonBadRequest},
		{"unknown resource", &informer.UnknownResourceError{Name: "nope"}, 404, metav1.StatusReasonNotFound},
		{"expired", fmt.Errorf("x: %w", informer.ErrExpired), 410, metav1.StatusReasonExpired},
		{"bad rv", fmt.Errorf("x: %w", informer.ErrInvalidResourceVersion), 400, metav1.StatusReasonBadRequest},
		{"gateway forbidden", &informer.GatewayForbiddenError{GVR: schema.GroupVersionResource{Resource: "secrets"}, Verb: "list"}, 503, metav1.StatusReasonServiceUnavailable},
		{"internal", secret, 500, metav1.StatusReasonInternalError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := FromError(tc.err)
			if st.Code != tc.code || st.Reason != tc.reason || st.Status != metav1.StatusFailure {
				t.Fatalf("FromError = %d %s %s, want %d %s Failure", st.Code, st.Reason, st.Status, tc.code, tc.reason)
			}
			if tc.err == secret && st.Message == secret.Error() {
				t.Fatalf("internal error leaked to the client: %q", st.Message)
			}
		})
	}
}

func TestWrite(t *testing.T) {
	rec := httptest.NewRecorder()
	st := New(http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, "slow down")
	st.Details = &metav1.StatusDetails{RetryAfterSeconds: 3}
	Write(rec, st)
	if rec.Code != 429 || rec.Header().Get("Retry-After") != "3" || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("got %d, headers %v", rec.Code, rec.Header())
	}
	var got metav1.Status
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Kind != "Status" || got.APIVersion != "v1" || got.Message != "slow down" || got.Code != 429 {
		t.Fatalf("body = %+v", got)
	}
}
