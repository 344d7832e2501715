package auth

import (
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
)

// step is one re-check: after a delay, its error and whether it ends the stream.
type step struct {
	after time.Duration
	err   error
	ends  bool
}

func TestRecheck(t *testing.T) {
	down := unavailable("authorization")
	denied := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("RBAC: access denied"))
	expired := unauthorized("token expired")
	for _, tc := range []struct {
		name  string
		grace time.Duration
		steps []step
	}{
		{name: "allowed", grace: time.Minute, steps: []step{{5 * time.Second, nil, false}, {time.Hour, nil, false}}},
		{name: "denied at once", grace: time.Minute, steps: []step{{5 * time.Second, denied, true}}},
		{name: "unauthenticated at once", grace: time.Minute, steps: []step{{5 * time.Second, expired, true}}},
		{name: "unavailable within grace, then past it", grace: time.Minute, steps: []step{{5 * time.Second, down, false}, {50 * time.Second, down, false}, {5 * time.Second, down, true}}},
		{name: "a success restarts the grace", grace: time.Minute, steps: []step{{50 * time.Second, down, false}, {5 * time.Second, nil, false}, {59 * time.Second, down, false}, {time.Second, down, true}}},
		{name: "overloaded and timed out count as unavailable", grace: time.Minute, steps: []step{{5 * time.Second, apierrors.NewTooManyRequests("slow down", 1), false}, {5 * time.Second, apierrors.NewTimeoutError("slow", 1), false}}},
		{name: "a denial ends it even within grace", grace: time.Minute, steps: []step{{5 * time.Second, down, false}, {5 * time.Second, denied, true}}},
		{name: "no grace", grace: -1, steps: []step{{5 * time.Second, down, true}}},
		{name: "other errors end it", grace: time.Minute, steps: []step{{5 * time.Second, errors.New("boom"), true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
			r := NewRecheck(tc.grace, clk)
			deferred := 0
			for i, s := range tc.steps {
				clk.SetTime(clk.Now().Add(s.after))
				if got := r.Ends(s.err); got != s.ends {
					t.Fatalf("step %d (%v after, %v): Ends = %v, want %v", i, s.after, s.err, got, s.ends)
				}
				switch {
				case s.err == nil:
					deferred = 0
				case !s.ends:
					deferred++
				}
				if got, want := r.FirstDeferred(), deferred == 1 && s.err != nil && !s.ends; got != want {
					t.Fatalf("step %d: FirstDeferred = %v, want %v", i, got, want)
				}
			}
		})
	}
	if r := NewRecheck(0, clocktesting.NewFakePassiveClock(time.Unix(0, 0))); r.grace != DefaultRecheckGrace {
		t.Errorf("grace 0 = %v, want the default", r.grace)
	}
}
