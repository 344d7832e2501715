package auth

import (
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
)

// DefaultRecheckGrace is how long a live stream outlives re-checks that
// could not be made.
const DefaultRecheckGrace = 60 * time.Second

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
	grace  time.Duration
	clock  clock.PassiveClock
	lastOK time.Time
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
	switch {
	case err == nil:
		r.lastOK = now
		return false
	case apierrors.IsServiceUnavailable(err) || apierrors.IsTooManyRequests(err) || apierrors.IsTimeout(err):
		return r.grace < 0 || now.Sub(r.lastOK) >= r.grace
	}
	return true
}

// Since returns how long ago the stream was last authorized.
func (r *Recheck) Since() time.Duration { return r.clock.Since(r.lastOK) }
