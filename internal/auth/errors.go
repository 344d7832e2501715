package auth

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// RefusedError is a request refused for how it presents credentials
// rather than for the credentials themselves: a token in the URL (400) or
// a cookie sent from a foreign Origin (403). The HTTP server answers it
// with its Status as is, without WWW-Authenticate.
type RefusedError struct {
	status metav1.Status
}

func refused(code int, reason metav1.StatusReason, msg string) *RefusedError {
	return &RefusedError{status: metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg,
	}}
}

func (e *RefusedError) Error() string { return e.status.Message }

// Status implements apierrors.APIStatus, so apistatus.FromError keeps the
// code and message.
func (e *RefusedError) Status() metav1.Status { return e.status }

// ErrReviewFailed is wrapped by errors from TokenReview and
// SubjectAccessReview calls that could not be made or answered. Callers
// treat them as a refusal; the message names the cause for the log, and
// the underlying apiserver error is deliberately not unwrappable so that
// its status code never reaches the caller.
var ErrReviewFailed = errors.New("review by the apiserver failed")

func reviewFailed(kind string, err error) error {
	return fmt.Errorf("%w: %s: %v", ErrReviewFailed, kind, err)
}

func unauthorized(msg string) error {
	return apierrors.NewUnauthorized(msg)
}

// forbidden builds the 403 kube-apiserver sends for req, denied for
// reason (the authorizer's, often ""): its
// responsewriters.ForbiddenStatusError, message and details (the name,
// from the path or the field selector, and the resource) alike.
func forbidden(u *User, req Request, reason string) error {
	scope := "at the cluster scope"
	if req.Namespace != "" {
		scope = fmt.Sprintf("in the namespace %q", req.Namespace)
	}
	msg := htmlSanitizer.Replace(fmt.Sprintf("User %q cannot %s resource %q in API group %q %s",
		u.Name, req.Verb, req.Resource.Resource, req.Resource.Group, scope))
	if reason != "" {
		msg += ": " + reason
	}
	gr := schema.GroupResource{Group: req.Resource.Group, Resource: req.Resource.Resource}
	return apierrors.NewForbidden(gr, req.Name, errors.New(msg))
}

// htmlSanitizer keeps a message from looking like HTML, as the
// apiserver's does (a user name may hold anything).
var htmlSanitizer = strings.NewReplacer(`&`, "&amp;", `<`, "&lt;", `>`, "&gt;")

// unavailable is what callers see when a decision could not be made.
func unavailable(what string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusServiceUnavailable,
		Reason:  metav1.StatusReasonServiceUnavailable,
		Message: what + " is unavailable: the apiserver could not be asked; try again",
		Details: &metav1.StatusDetails{RetryAfterSeconds: 1},
	}}
}
