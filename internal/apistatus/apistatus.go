// Package apistatus turns errors into Kubernetes metav1.Status values, the
// one error shape kubegate answers with on every path (REST bodies,
// WebSocket error frames, watch ERROR events), so clients that know the
// apiserver's errors know ours.
package apistatus

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FromError maps err to a complete Status (kind, apiVersion, status,
// code). An error that knows its Status (apierrors.APIStatus, found
// through any wrapping: *apierrors.StatusError, the informer's errors)
// keeps its meaning and message; a Status without a message takes err's
// text, so a sentinel error gets the context it was wrapped with. Anything
// else is an InternalError whose message does not reveal the internal
// error, which the caller should log.
func FromError(err error) *metav1.Status {
	if err == nil {
		return nil
	}
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		return New(http.StatusInternalServerError, metav1.StatusReasonInternalError, "internal error; see the gateway's log")
	}
	st := se.Status()
	if st.Message == "" {
		st.Message = err.Error()
	}
	complete(&st)
	return &st
}

// New returns a Failure status.
func New(code int, reason metav1.StatusReason, message string) *metav1.Status {
	return &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Code:     int32(code),
		Reason:   reason,
		Message:  message,
	}
}

// Internal reports whether st hides an internal error that should be
// logged.
func Internal(st *metav1.Status) bool {
	return st.Reason == metav1.StatusReasonInternalError
}

// complete fills in what a Status taken from an error may leave out.
// apierrors' constructors (NewForbidden, ...) set neither kind nor
// apiVersion, and a client-go watch refuses an ERROR event whose object
// has no kind ("Object 'Kind' is missing") instead of reporting its code.
func complete(st *metav1.Status) {
	if st.Kind == "" {
		st.Kind = "Status"
	}
	if st.APIVersion == "" {
		st.APIVersion = "v1"
	}
	if st.Status == "" {
		st.Status = metav1.StatusFailure
	}
	if st.Code == 0 {
		st.Code = http.StatusInternalServerError
	}
}

// Write sends st as the response, with its code as the HTTP status and a
// Retry-After header when st carries RetryAfterSeconds. It completes st
// first, as FromError does.
func Write(w http.ResponseWriter, st *metav1.Status) {
	complete(st)
	code := int(st.Code)
	if st.Details != nil && st.Details.RetryAfterSeconds > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(st.Details.RetryAfterSeconds)))
	}
	body, err := json.Marshal(st)
	if err != nil {
		body = []byte(fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","status":"Failure","code":%d}`, code))
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(append(body, '\n'))
}

// WriteError writes FromError(err).
func WriteError(w http.ResponseWriter, err error) *metav1.Status {
	st := FromError(err)
	Write(w, st)
	return st
}
