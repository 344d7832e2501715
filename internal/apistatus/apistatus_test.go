package apistatus

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The client-go watch in TestWatchClientSeesErrorStatus runs a goroutine
// that must end with the test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"))
}

func TestFromError(t *testing.T) {
	secret := errors.New("dial tcp 10.0.0.1:443: secret detail")
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "x", errors.New("no"))
	for _, tc := range []struct {
		name   string
		err    error
		code   int32
		reason metav1.StatusReason
		msg    string
	}{
		{"status error", forbidden, 403, metav1.StatusReasonForbidden, forbidden.Error()},
		// A Status with a message keeps it, however the error was wrapped.
		{"wrapped status error", fmt.Errorf("recheck: %w", forbidden), 403, metav1.StatusReasonForbidden, forbidden.Error()},
		// One without takes the text of the whole error, as a sentinel
		// wrapped with its context wants.
		{"wrapped sentinel", fmt.Errorf("pods: resume from 5: %w", errGoneSentinel), 410, metav1.StatusReasonExpired, "pods: resume from 5: gone"},
		{"internal", secret, 500, metav1.StatusReasonInternalError, "internal error; see the gateway's log"},
		{"internal wrapping no status", fmt.Errorf("x: %w", secret), 500, metav1.StatusReasonInternalError, "internal error; see the gateway's log"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := FromError(tc.err)
			if st.Code != tc.code || st.Reason != tc.reason || st.Message != tc.msg {
				t.Fatalf("FromError = %d %s %q, want %d %s %q", st.Code, st.Reason, st.Message, tc.code, tc.reason, tc.msg)
			}
			checkComplete(t, st)
		})
	}
	if FromError(nil) != nil {
		t.Fatal("FromError(nil) != nil")
	}
}

// sentinel is an error value with a Status but no message, as the
// informer's sentinel errors are.
type sentinel struct{ st metav1.Status }

func (s *sentinel) Error() string { return "gone" }

// Status implements apierrors.APIStatus.
func (s *sentinel) Status() metav1.Status { return s.st }

var errGoneSentinel = &sentinel{metav1.Status{Code: 410, Reason: metav1.StatusReasonExpired}}

// checkComplete fails unless st is a Status a Kubernetes client decodes
// as one: a client-go watch refuses an ERROR event without a kind.
func checkComplete(t *testing.T, st *metav1.Status) {
	t.Helper()
	if st.Kind != "Status" || st.APIVersion != "v1" || st.Status != metav1.StatusFailure || st.Code == 0 {
		t.Fatalf("incomplete Status: kind %q, apiVersion %q, status %q, code %d", st.Kind, st.APIVersion, st.Status, st.Code)
	}
}

// TestFromErrorCompletesAPIStatus checks that a Status taken from an
// error is completed whatever the error left out, and keeps what it set.
func TestFromErrorCompletesAPIStatus(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("no"))
	for _, tc := range []struct {
		name string
		err  error
		want metav1.Status
	}{
		{"apierrors constructor", forbidden, forbidden.ErrStatus},
		{"wrapped", fmt.Errorf("recheck: %w", forbidden), forbidden.ErrStatus},
		{"no code", &apierrors.StatusError{ErrStatus: metav1.Status{Message: "m"}}, metav1.Status{Code: 500, Message: "m"}},
		{"retry after kept", &apierrors.StatusError{ErrStatus: metav1.Status{
			Code: 503, Reason: metav1.StatusReasonServiceUnavailable, Message: "later", Details: &metav1.StatusDetails{RetryAfterSeconds: 1},
		}}, metav1.Status{Code: 503, Reason: metav1.StatusReasonServiceUnavailable, Message: "later", Details: &metav1.StatusDetails{RetryAfterSeconds: 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := FromError(tc.err)
			checkComplete(t, st)
			tc.want.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
			tc.want.Status = metav1.StatusFailure
			if diff := cmp.Diff(&tc.want, st); diff != "" {
				t.Fatalf("FromError (-want +got):\n%s", diff)
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

func TestWriteCompletes(t *testing.T) {
	rec := httptest.NewRecorder()
	Write(rec, &metav1.Status{Message: "bare"})
	var got metav1.Status
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	checkComplete(t, &got)
	if rec.Code != int(got.Code) {
		t.Fatalf("HTTP status %d, body code %d", rec.Code, got.Code)
	}
}

// TestWatchClientSeesErrorStatus sends FromError's Status as a watch ERROR
// event to a real client-go watch: the client must see the 403, not fail
// to decode the event.
func TestWatchClientSeesErrorStatus(t *testing.T) {
	st := FromError(fmt.Errorf("recheck: %w", apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("no"))))
	obj, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`{"type":"ERROR","object":%s}`+"\n", obj)
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: "http://gateway.invalid", Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Request: r, Body: io.NopCloser(strings.NewReader(body)),
			Header: http.Header{"Content-Type": {"application/json"}}}, nil
	})})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cs.CoreV1().Pods("").Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ev := <-w.ResultChan()
	got, ok := ev.Object.(*metav1.Status)
	if ev.Type != watch.Error || !ok {
		t.Fatalf("event %s %T, want ERROR *metav1.Status", ev.Type, ev.Object)
	}
	if !apierrors.IsForbidden(apierrors.FromObject(got)) {
		t.Fatalf("client saw %d %s %q, want 403 Forbidden", got.Code, got.Reason, got.Message)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
