package auth

import (
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
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

// answers is an Authorizer that gives its answers in turn and records
// whether each call had a deadline within ReauthorizeTimeout.
type answers struct {
	decs     []Decision
	errs     []error
	bounded  []bool
	lastUser *User
	lastReq  Request
}

func (a *answers) Authorize(ctx context.Context, u *User, req Request) (Decision, error) {
	dl, ok := ctx.Deadline()
	a.bounded = append(a.bounded, ok && time.Until(dl) <= ReauthorizeTimeout)
	a.lastUser, a.lastReq = u, req
	i := len(a.bounded) - 1
	return a.decs[i], a.errs[i]
}

func TestReauthorize(t *testing.T) {
	ns := func(names ...string) Decision { return Decision{Namespaces: sets.New(names...)} }
	down := unavailable("authorization")
	denied := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("RBAC: access denied"))
	for _, tc := range []struct {
		name string
		was  Decision
		decs []Decision
		errs []error
		want []Verdict
	}{
		{name: "allowed as before", was: ns("a"), decs: []Decision{ns("a"), ns("a")}, errs: []error{nil, nil}, want: []Verdict{Unchanged, Unchanged}},
		{name: "allowed cluster-wide as before", decs: []Decision{{}}, errs: []error{nil}, want: []Verdict{Unchanged}},
		{name: "other namespaces", was: ns("a"), decs: []Decision{ns("a", "b")}, errs: []error{nil}, want: []Verdict{Changed}},
		{name: "narrowed from cluster-wide", decs: []Decision{ns("a")}, errs: []error{nil}, want: []Verdict{Changed}},
		{name: "denied", was: ns("a"), decs: []Decision{{}}, errs: []error{denied}, want: []Verdict{Ended}},
		{name: "unavailable, then back with other namespaces", was: ns("a"), decs: []Decision{{}, {}, ns("b")}, errs: []error{down, down, nil}, want: []Verdict{Deferred, Deferred, Changed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRecheck(time.Minute, clocktesting.NewFakePassiveClock(time.Unix(1000, 0)))
			a := &answers{decs: tc.decs, errs: tc.errs}
			u := &User{Name: "alice"}
			req := Request{Verb: "watch", Resource: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, Namespaced: true}
			for i, want := range tc.want {
				dec, v, err := r.Reauthorize(context.Background(), a, u, req, tc.was)
				if v != want || !errors.Is(err, tc.errs[i]) || !dec.Equal(tc.decs[i]) {
					t.Fatalf("re-check %d = %v, %v, %v; want %v, %v, %v", i, dec, v, err, tc.decs[i], want, tc.errs[i])
				}
			}
			if a.lastUser != u || a.lastReq != req {
				t.Errorf("authorized %v for %v, want %v for %v", a.lastReq, a.lastUser, req, u)
			}
			for i, b := range a.bounded {
				if !b {
					t.Errorf("re-check %d had no deadline within %v", i, ReauthorizeTimeout)
				}
			}
		})
	}
}
