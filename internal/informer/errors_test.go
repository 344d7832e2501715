package informer

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kubegate/internal/apistatus"
)

// TestErrorStatus checks the Status a client gets for each of the
// package's errors, wrapped as the package and its callers wrap them: the
// code and reason the apiserver would answer with, and the message
// clients saw when apistatus mapped these errors itself.
func TestErrorStatus(t *testing.T) {
	cms := schema.GroupResource{Resource: "configmaps"}
	filterErr := &InvalidFilterError{Param: "labelSelector", Err: errors.New("found '=', expected: identifier")}
	for _, tc := range []struct {
		name   string
		err    error
		is     error // a sentinel the error must still match
		code   int32
		reason metav1.StatusReason
		msg    string
	}{
		{name: "expired", err: fmt.Errorf("%s: resume from %d, history starts after %d: %w", cms, 5, 9, ErrExpired), is: ErrExpired,
			code: 410, reason: metav1.StatusReasonExpired, msg: "configmaps: resume from 5, history starts after 9: resourceVersion is too old"},
		{name: "invalid resourceVersion", err: fmt.Errorf("invalid resourceVersion %q: %w", "x", ErrInvalidResourceVersion), is: ErrInvalidResourceVersion,
			code: 400, reason: metav1.StatusReasonBadRequest, msg: `invalid resourceVersion "x": invalid resourceVersion`},
		{name: "not watchable", err: fmt.Errorf("%s: %w", cms, ErrNotWatchable), is: ErrNotWatchable,
			code: 405, reason: metav1.StatusReasonMethodNotAllowed, msg: "configmaps: resource does not support list and watch"},
		{name: "stopped", err: fmt.Errorf("subscribe: %w", ErrStopped), is: ErrStopped,
			code: 503, reason: metav1.StatusReasonServiceUnavailable, msg: "the gateway is shutting down"},
		{name: "bare sentinel", err: ErrExpired, is: ErrExpired,
			code: 410, reason: metav1.StatusReasonExpired, msg: "resourceVersion is too old"},
		// Typed errors keep their own message, not that of a wrapper.
		{name: "invalid filter", err: fmt.Errorf("subscribe: %w", filterErr),
			code: 400, reason: metav1.StatusReasonBadRequest, msg: "invalid labelSelector: found '=', expected: identifier"},
		{name: "unknown resource", err: &UnknownResourceError{Name: "nope", Err: errors.New("no matches")},
			code: 404, reason: metav1.StatusReasonNotFound, msg: `the server doesn't have a resource type "nope"`},
		{name: "gateway forbidden", err: &GatewayForbiddenError{GVR: cms.WithVersion("v1"), Verb: "watch"},
			code: 503, reason: metav1.StatusReasonServiceUnavailable,
			msg: "the gateway's service account may not watch configmaps cluster-wide; grant it in the gateway's ClusterRole"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := &metav1.Status{
				TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
				Status:   metav1.StatusFailure, Code: tc.code, Reason: tc.reason, Message: tc.msg,
			}
			if diff := cmp.Diff(want, apistatus.FromError(tc.err)); diff != "" {
				t.Errorf("apistatus.FromError (-want +got):\n%s", diff)
			}
			if tc.is != nil && !errors.Is(tc.err, tc.is) {
				t.Errorf("errors.Is(%v, %v) = false", tc.err, tc.is)
			}
			// apierrors' predicates see the reason through wrapping too.
			if got := apierrors.ReasonForError(tc.err); got != tc.reason {
				t.Errorf("apierrors.ReasonForError = %q, want %q", got, tc.reason)
			}
		})
	}
}

// TestResourceGoneStatus: a resource the apiserver stopped serving is
// 404 NotFound, as kube-apiserver answers every request for it, with the
// resource in the details as apierrors.NewNotFound gives them.
func TestResourceGoneStatus(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "test.kubegate.io", Version: "v1", Resource: "gizmos"}
	err := fmt.Errorf("subscription ended: %w", &ResourceGoneError{GVR: gvr, Err: apierrors.NewNotFound(gvr.GroupResource(), "")})
	want := &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: 404, Reason: metav1.StatusReasonNotFound,
		Message: "gizmos.test.kubegate.io is no longer served by the apiserver (test.kubegate.io/v1)",
		Details: &metav1.StatusDetails{Group: "test.kubegate.io", Kind: "gizmos"},
	}
	if diff := cmp.Diff(want, apistatus.FromError(err)); diff != "" {
		t.Fatalf("apistatus.FromError (-want +got):\n%s", diff)
	}
	if !apierrors.IsNotFound(err) {
		t.Fatal("apierrors.IsNotFound is false")
	}
}
