package informer

import (
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The package's errors implement apierrors.APIStatus: each knows the
// Status a client gets for it, so the layers that answer clients
// (apistatus.FromError) complete it without importing this package, and
// apierrors' predicates (IsResourceExpired, IsBadRequest, ...) recognise
// them through any wrapping.
var (
	_ apierrors.APIStatus = (*SentinelError)(nil)
	_ apierrors.APIStatus = (*InvalidFilterError)(nil)
	_ apierrors.APIStatus = (*UnknownResourceError)(nil)
	_ apierrors.APIStatus = (*GatewayForbiddenError)(nil)
	_ apierrors.APIStatus = (*ResourceGoneError)(nil)
)

// SentinelError is the type of the package's sentinel errors. Callers
// match them with errors.Is; errors.As finds their Status through any
// wrapping.
//
// A sentinel is usually wrapped with what it is about ("configmaps:
// resume from 5, history starts after 9: resourceVersion is too old"),
// and that whole message is the one for the client. So the Status has no
// message unless the sentinel has one of its own for clients:
// apistatus.FromError gives a Status without one the wrapping error's
// text.
type SentinelError struct {
	text   string // Error()
	code   int32
	reason metav1.StatusReason
	// message, when set, is what clients read instead of the wrapping
	// error's text (which is then for the log only).
	message string
}

func (e *SentinelError) Error() string { return e.text }

// Status implements apierrors.APIStatus.
func (e *SentinelError) Status() metav1.Status {
	return failure(e.code, e.reason, e.message)
}

var (
	// ErrExpired is returned by AddListener when the requested resume
	// version is older than the resource's history. Like the apiserver's
	// 410 Gone, the caller should start over with a snapshot.
	ErrExpired = &SentinelError{text: "resourceVersion is too old",
		code: http.StatusGone, reason: metav1.StatusReasonExpired}

	// ErrInvalidResourceVersion is wrapped by errors for malformed
	// versions.
	ErrInvalidResourceVersion = &SentinelError{text: "invalid resourceVersion",
		code: http.StatusBadRequest, reason: metav1.StatusReasonBadRequest}

	// ErrNotWatchable is wrapped by errors for resources without list and
	// watch.
	ErrNotWatchable = &SentinelError{text: "resource does not support list and watch",
		code: http.StatusMethodNotAllowed, reason: metav1.StatusReasonMethodNotAllowed}

	// ErrStopped is returned once the manager has shut down.
	ErrStopped = &SentinelError{text: "informer manager stopped",
		code: http.StatusServiceUnavailable, reason: metav1.StatusReasonServiceUnavailable,
		message: "the gateway is shutting down"}
)

// InvalidFilterError reports a selector that cannot be parsed or names a
// field the resource does not support.
type InvalidFilterError struct {
	Param string // "labelSelector" or "fieldSelector"
	Err   error
}

func (e *InvalidFilterError) Error() string { return fmt.Sprintf("invalid %s: %v", e.Param, e.Err) }
func (e *InvalidFilterError) Unwrap() error { return e.Err }

// Status implements apierrors.APIStatus: 400, as the apiserver answers a
// bad selector.
func (e *InvalidFilterError) Status() metav1.Status {
	return failure(http.StatusBadRequest, metav1.StatusReasonBadRequest, e.Error())
}

// UnknownResourceError reports a name that matches no served resource.
type UnknownResourceError struct {
	Name string
	Err  error
}

func (e *UnknownResourceError) Error() string {
	return fmt.Sprintf("the server doesn't have a resource type %q", e.Name)
}
func (e *UnknownResourceError) Unwrap() error { return e.Err }

// Status implements apierrors.APIStatus: 404, with the message kubectl
// prints for an unknown resource type.
func (e *UnknownResourceError) Status() metav1.Status {
	return failure(http.StatusNotFound, metav1.StatusReasonNotFound, e.Error())
}

// GatewayForbiddenError reports that the gateway's own identity may not
// read a resource, so it cannot serve it to anyone.
type GatewayForbiddenError struct {
	GVR    schema.GroupVersionResource
	Verb   string
	Reason string
}

func (e *GatewayForbiddenError) Error() string {
	return fmt.Sprintf("the gateway's service account may not %s %s cluster-wide; grant it in the gateway's ClusterRole", e.Verb, e.GVR.GroupResource())
}

// Status implements apierrors.APIStatus: 503, not 403. The caller is not
// at fault: the gateway cannot serve this resource to anyone until its
// ClusterRole is fixed.
func (e *GatewayForbiddenError) Status() metav1.Status {
	return failure(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, e.Error())
}

// ResourceGoneError reports that the apiserver no longer serves a
// resource the gateway had started: its lists and watches answer 404 and
// discovery no longer lists it (its CustomResourceDefinition was deleted,
// the version stopped being served, or its aggregated API was removed).
// Err is the 404 that led to the check.
type ResourceGoneError struct {
	GVR schema.GroupVersionResource
	Err error
}

func (e *ResourceGoneError) Error() string {
	return fmt.Sprintf("%s is no longer served by the apiserver (%s)", e.GVR.GroupResource(), e.GVR.GroupVersion())
}
func (e *ResourceGoneError) Unwrap() error { return e.Err }

// Status implements apierrors.APIStatus: 404 NotFound, what kube-apiserver
// answers every request for the resource from then on. 410 Gone would
// tell a Kubernetes client that its resourceVersion expired and that it
// should list again, which would only get the 404.
func (e *ResourceGoneError) Status() metav1.Status {
	st := failure(http.StatusNotFound, metav1.StatusReasonNotFound, e.Error())
	st.Details = &metav1.StatusDetails{Group: e.GVR.Group, Kind: e.GVR.Resource}
	return st
}

func failure(code int32, reason metav1.StatusReason, message string) metav1.Status {
	return metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Code:     code,
		Reason:   reason,
		Message:  message,
	}
}
