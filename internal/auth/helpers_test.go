package auth

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// reviewServer is a fake apiserver for TokenReviews and
// SubjectAccessReviews that counts what it is asked.
type reviewServer struct {
	client *fake.Clientset

	tokenReviews  atomic.Int64
	accessReviews atomic.Int64

	// mu guards the fields below.
	mu sync.Mutex
	// tokens maps valid tokens to users.
	tokens map[string]authenticationv1.UserInfo
	// allow decides SubjectAccessReviews.
	allow func(authorizationv1.SubjectAccessReviewSpec) bool
	// reason is every review's Status.Reason.
	reason string
	// fail, when set, is returned for every review.
	fail error
	// gate, when set, blocks every review until it is closed.
	gate chan struct{}
	// specs are the SubjectAccessReview specs received.
	specs []authorizationv1.SubjectAccessReviewSpec
}

func newReviewServer() *reviewServer {
	s := &reviewServer{client: fake.NewClientset(), tokens: map[string]authenticationv1.UserInfo{}}
	s.client.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s.tokenReviews.Add(1)
		rev := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		s.mu.Lock()
		gate, fail := s.gate, s.fail
		ui, ok := s.tokens[rev.Spec.Token]
		s.mu.Unlock()
		if gate != nil {
			<-gate
		}
		if fail != nil {
			return true, nil, fail
		}
		rev.Status = authenticationv1.TokenReviewStatus{Authenticated: ok, User: ui}
		if !ok {
			rev.Status.Error = "invalid bearer token"
		}
		return true, rev, nil
	})
	s.client.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s.accessReviews.Add(1)
		rev := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		s.mu.Lock()
		s.specs = append(s.specs, rev.Spec)
		gate, fail, allow, reason := s.gate, s.fail, s.allow, s.reason
		s.mu.Unlock()
		if gate != nil {
			<-gate
		}
		if fail != nil {
			return true, nil, fail
		}
		rev.Status.Allowed = allow != nil && allow(rev.Spec)
		rev.Status.Reason = reason
		return true, rev, nil
	})
	return s
}

func (s *reviewServer) set(f func(s *reviewServer)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

var errUnavailable = apierrors.NewServiceUnavailable("etcd is sad")

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func fakeClock() *clocktesting.FakeClock { return clocktesting.NewFakeClock(t0) }

var _ = context.Background
