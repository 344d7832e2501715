package informer

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"kubegate/internal/apistatus"
)

// TestAccessCheck checks the pre-check's verdicts and, above all, that a
// status the upstream gave the review never becomes the client's answer:
// the review is the gateway's request, not the client's.
func TestAccessCheck(t *testing.T) {
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	gr := schema.GroupResource{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}
	for _, tc := range []struct {
		name string
		// answer is the upstream's answer to every review: an error, or
		// allowed.
		answer  error
		allowed bool
		// code is the status a client gets for the check's error; 0 for
		// none.
		code     int32
		reason   metav1.StatusReason
		wantErr  any // the error type canList returns, nil for none
		skipped  bool
		reviews2 int // reviews made for the second resource
	}{
		{name: "allowed", allowed: true, reviews2: 2},
		{name: "denied", allowed: false, code: http.StatusServiceUnavailable, reason: metav1.StatusReasonServiceUnavailable,
			wantErr: &GatewayForbiddenError{}, reviews2: 1},
		// Another kubegate: POST is not allowed there.
		{name: "upstream kubegate (405)", answer: apierrors.NewMethodNotSupported(gr, "create"), skipped: true},
		{name: "no authorization API (404)", answer: apierrors.NewNotFound(gr, ""), skipped: true},
		// Failures of the review itself are not the client's.
		{name: "review forbidden", answer: apierrors.NewForbidden(gr, "", errors.New("no")),
			code: http.StatusServiceUnavailable, reason: metav1.StatusReasonServiceUnavailable, wantErr: &AccessCheckError{}, reviews2: 1},
		{name: "review unauthorized", answer: apierrors.NewUnauthorized("bad token"),
			code: http.StatusServiceUnavailable, reason: metav1.StatusReasonServiceUnavailable, wantErr: &AccessCheckError{}, reviews2: 1},
		{name: "review failed", answer: apierrors.NewInternalError(errors.New("etcd")),
			code: http.StatusServiceUnavailable, reason: metav1.StatusReasonServiceUnavailable, wantErr: &AccessCheckError{}, reviews2: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset()
			reviews := 0
			cs.PrependReactor("create", "selfsubjectaccessreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
				reviews++
				if tc.answer != nil {
					return true, nil, tc.answer
				}
				return true, &authorizationv1.SelfSubjectAccessReview{Status: authorizationv1.SubjectAccessReviewStatus{Allowed: tc.allowed}}, nil
			})
			core, logs := observer.New(zap.InfoLevel)
			c := newAccessCheck(cs.AuthorizationV1().SelfSubjectAccessReviews(), zap.New(core), "http://upstream")

			err := c.canList(context.Background(), cms)
			switch want := tc.wantErr.(type) {
			case nil:
				if err != nil {
					t.Fatalf("canList = %v, want nil", err)
				}
			case *GatewayForbiddenError:
				if !errors.As(err, &want) {
					t.Fatalf("canList = %v, want a GatewayForbiddenError", err)
				}
			case *AccessCheckError:
				if !errors.As(err, &want) {
					t.Fatalf("canList = %v, want an AccessCheckError", err)
				}
				if !errors.Is(err, tc.answer) {
					t.Errorf("canList = %v does not wrap the review's error %v", err, tc.answer)
				}
			}
			if tc.code != 0 {
				if st := apistatus.FromError(err); st.Code != tc.code || st.Reason != tc.reason {
					t.Errorf("client status %d %s (%s), want %d %s", st.Code, st.Reason, st.Message, tc.code, tc.reason)
				}
			}

			// A second resource: the check is off once the upstream has
			// shown it has no reviews, and that is logged once.
			before := reviews
			_ = c.canList(context.Background(), secrets)
			if tc.skipped {
				if err := c.canList(context.Background(), secrets); err != nil {
					t.Fatalf("canList after the upstream showed no reviews = %v", err)
				}
				if reviews != 1 {
					t.Errorf("%d reviews, want 1: the check must stop asking", reviews)
				}
				if n := logs.FilterMessageSnippet("does not serve SelfSubjectAccessReview").Len(); n != 1 {
					t.Errorf("%d log lines about the missing reviews, want 1:\n%v", n, logs.All())
				}
				return
			}
			if got := reviews - before; got != tc.reviews2 {
				t.Errorf("%d reviews for the second resource, want %d", got, tc.reviews2)
			}
			if n := logs.Len(); n != 0 {
				t.Errorf("logged %v", logs.All())
			}
		})
	}
}
