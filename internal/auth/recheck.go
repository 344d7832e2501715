package auth

import (
	"context"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
)

// DefaultRecheckGrace is how long a live stream outlives re-checks that
// could not be made.
const DefaultRecheckGrace = 60 * time.Second

// ReauthorizeTimeout bounds one re-authorization: well above the
// authorizers' own review timeouts, so a slow answer delays a stream's
// next re-check rather than ending the stream early, while a stuck
// authorizer cannot hold it forever.
const ReauthorizeTimeout = 30 * time.Second

// Verdict is what one re-authorization means for a live stream.
type Verdict uint8

const (
	// Unchanged: allowed as before.
	Unchanged Verdict = iota
	// Deferred: the re-check could not be made and the stream goes on
	// within its grace (FirstDeferred tells when to log it).
	Deferred
	// Changed: allowed, for other namespaces than before; the stream
	// must start over under the new Decision, or end.
	Changed
	// Ended: denied, or not made past the grace; the stream ends with
	// the error's status.
	Ended
)

func (v Verdict) String() string {
	if names := [...]string{"Unchanged", "Deferred", "Changed", "Ended"}; int(v) < len(names) {
		return names[v]
	}
	return "Verdict(" + strconv.Itoa(int(v)) + ")"
}

// Recheck decides, for one long-lived stream (a watch or a WebSocket
// subscription), whether a re-authorization's outcome ends it.
//
// A denial or a failed authentication ends the stream at once. A review
// that could not be made (the apiserver is down or overloaded: the
// authorizers answer 503) says nothing about the caller, so the stream
// goes on serving the cache until Grace has passed since its last
// successful authorization: an apiserver restart does not end every
// stream. The apiserver cannot change RBAC while it is down, so this only
// delays a revocation when the gateway alone cannot reach it, and by at
// most Grace.
type Recheck struct {
	grace    time.Duration
	clock    clock.PassiveClock
	lastOK   time.Time
	deferred int // re-checks in a row that could not be made
}

// NewRecheck starts tracking a stream that was just authorized. grace 0
// means DefaultRecheckGrace; a negative grace ends the stream at the first
// failed re-check.
func NewRecheck(grace time.Duration, clk clock.PassiveClock) *Recheck {
	if grace == 0 {
		grace = DefaultRecheckGrace
	}
	return &Recheck{grace: grace, clock: clk, lastOK: clk.Now()}
}

// Ends records a re-authorization's error (nil for success) and reports
// whether the stream must end with it.
func (r *Recheck) Ends(err error) bool {
	now := r.clock.Now()
	unavailable := apierrors.IsServiceUnavailable(err) || apierrors.IsTooManyRequests(err) || apierrors.IsTimeout(err)
	switch {
	case err == nil:
		r.lastOK, r.deferred = now, 0
		return false
	case unavailable && r.grace >= 0 && now.Sub(r.lastOK) < r.grace:
		r.deferred++
		return false
	}
	r.deferred = 0
	return true
}

// FirstDeferred reports whether the last Ends let the stream go on for
// the first time since its last successful authorization: the moment to
// log it once rather than at every interval.
func (r *Recheck) FirstDeferred() bool { return r.deferred == 1 }

// Grace returns the grace in force (negative: none).
func (r *Recheck) Grace() time.Duration { return r.grace }

// Reauthorize asks a again whether u may make req, under
// ReauthorizeTimeout, and judges the answer for a stream that was
// allowed was (see Judge). It returns the new decision and the error for
// the stream's end or log.
func (r *Recheck) Reauthorize(ctx context.Context, a Authorizer, u *User, req Request, was Decision) (Decision, Verdict, error) {
	ctx, cancel := context.WithTimeout(ctx, ReauthorizeTimeout)
	defer cancel()
	dec, err := a.Authorize(ctx, u, req)
	return dec, r.Judge(was, dec, err), err
}

// Judge records a re-authorization's outcome (now, or err) and says what
// it means for a stream that was allowed was.
func (r *Recheck) Judge(was, now Decision, err error) Verdict {
	switch {
	case r.Ends(err):
		return Ended
	case err != nil:
		return Deferred
	case !now.Equal(was):
		return Changed
	}
	return Unchanged
}
