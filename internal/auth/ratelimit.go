package auth

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"kubegate/internal/apistatus"
)

// RateLimitOptions configures NewRateLimiter. Limits apply per identity:
// an authenticated user (name and UID), or the client IP for anonymous
// callers and for /login.
type RateLimitOptions struct {
	// QPS is the sustained request rate allowed per identity. Zero or
	// negative disables the rate limit.
	QPS float64
	// Burst is how many requests may arrive at once. Default: QPS rounded
	// up, at least 1.
	Burst int
	// MaxInflight bounds the requests an identity has open at once,
	// watches and WebSockets included. Zero disables the bound.
	MaxInflight int

	clock clock.PassiveClock // test hook
}

// RateLimiter limits requests per identity with a token bucket
// (golang.org/x/time/rate) and an in-flight count, and answers refusals
// with 429 and Retry-After. Identities idle long enough for their bucket
// to refill are forgotten, so memory follows active identities.
type RateLimiter struct {
	opts    RateLimitOptions
	metrics *Metrics

	// mu guards ids and lastSweep.
	mu        sync.Mutex
	ids       map[string]*limiterEntry
	lastSweep time.Time
}

type limiterEntry struct {
	lim      *rate.Limiter // nil when QPS is disabled
	inflight int
}

// sweepEvery is how often forgotten identities are looked for.
const sweepEvery = time.Minute

// NewRateLimiter returns a RateLimiter; m may be nil.
func NewRateLimiter(opts RateLimitOptions, m *Metrics) *RateLimiter {
	if opts.QPS > 0 && opts.Burst <= 0 {
		opts.Burst = max(1, int(math.Ceil(opts.QPS)))
	}
	if opts.clock == nil {
		opts.clock = clock.RealClock{}
	}
	return &RateLimiter{opts: opts, metrics: m, ids: map[string]*limiterEntry{}, lastSweep: opts.clock.Now()}
}

// Acquire admits one request by key. When admitted, release must be called
// once the request ends; when refused, st is the 429 to answer with.
func (l *RateLimiter) Acquire(key string) (release func(), st *metav1.Status) {
	if l == nil || (l.opts.QPS <= 0 && l.opts.MaxInflight <= 0) {
		return func() {}, nil
	}
	now := l.opts.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) >= sweepEvery {
		l.sweepLocked(now)
	}
	e := l.ids[key]
	if e == nil {
		e = &limiterEntry{}
		if l.opts.QPS > 0 {
			e.lim = rate.NewLimiter(rate.Limit(l.opts.QPS), l.opts.Burst)
		}
		l.ids[key] = e
	}
	if l.opts.MaxInflight > 0 && e.inflight >= l.opts.MaxInflight {
		l.metrics.limited("inflight")
		return nil, tooMany(fmt.Sprintf("too many open requests for one client (at most %d, watches and WebSockets included); close some and retry", l.opts.MaxInflight), time.Second)
	}
	if e.lim != nil {
		r := e.lim.ReserveN(now, 1)
		if d := r.DelayFrom(now); d > 0 {
			r.CancelAt(now)
			l.metrics.limited("rate")
			return nil, tooMany(fmt.Sprintf("rate limit exceeded (%g requests per second, burst %d); retry later", l.opts.QPS, l.opts.Burst), d)
		}
	}
	e.inflight++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			e.inflight--
			l.mu.Unlock()
		})
	}, nil
}

// sweepLocked forgets identities with nothing open and a full bucket,
// which behave exactly like new ones. Caller must hold mu.
func (l *RateLimiter) sweepLocked(now time.Time) {
	l.lastSweep = now
	for k, e := range l.ids {
		if e.inflight == 0 && (e.lim == nil || e.lim.TokensAt(now) >= float64(l.opts.Burst)) {
			delete(l.ids, k)
		}
	}
}

func tooMany(msg string, retry time.Duration) *metav1.Status {
	st := apistatus.New(http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, msg)
	st.Details = &metav1.StatusDetails{RetryAfterSeconds: int32(max(1, math.Ceil(retry.Seconds())))}
	return st
}

// Middleware limits requests by their authenticated user (see UserFrom),
// or by client address for the anonymous user and unauthenticated
// requests. The reviews a request causes (SubjectAccessReviews, token
// re-validations) are charged to the same identity as they are made: see
// chargeReview.
func (l *RateLimiter) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := IdentityKey(r)
		release, st := l.Acquire(key)
		if st != nil {
			apistatus.Write(w, st)
			return
		}
		defer release()
		if l != nil && l.opts.QPS > 0 {
			r = r.WithContext(context.WithValue(r.Context(), chargeKey{}, &charger{l: l, key: key}))
		}
		next.ServeHTTP(w, r)
	})
}

// chargeKey is the context key of a request's *charger.
type chargeKey struct{}

// charger charges reviews to the identity key of a RateLimiter.
type charger struct {
	l   *RateLimiter
	key string
}

func chargeFrom(ctx context.Context) *charger {
	c, _ := ctx.Value(chargeKey{}).(*charger)
	return c
}

// chargeReview counts one review against the rate of the identity whose
// request (or stream) ctx belongs to, so that a user's rate limit counts
// the reviews it causes, not only its requests: a request that costs a
// namespace scan costs one token per review. The review is made whatever
// the bucket holds (the request has been admitted); a bucket taken below
// zero refuses the identity's next requests until it has refilled.
func chargeReview(ctx context.Context) {
	c := chargeFrom(ctx)
	if c == nil {
		return
	}
	l := c.l
	now := l.opts.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.ids[c.key]
	if e == nil {
		e = &limiterEntry{lim: rate.NewLimiter(rate.Limit(l.opts.QPS), l.opts.Burst)}
		l.ids[c.key] = e
	}
	e.lim.ReserveN(now, 1)
}

// IdentityKey is the rate-limit key of r: its user's name and UID, or its
// client address (SourceKey of the address WithSource stored, else of
// the peer) when it has none or is anonymous.
func IdentityKey(r *http.Request) string {
	if u := UserFrom(r.Context()); u != nil && u.Name != AnonymousUser.Name {
		return "user:" + strconv.Quote(u.Name) + ":" + strconv.Quote(u.UID)
	}
	return "ip:" + SourceKey(requestSource(r))
}

// flowOf names the flow the review queues file a review of u under: the
// user, or the client address for the anonymous user and callers not
// authenticated yet (u nil).
func flowOf(ctx context.Context, u *User) string {
	if u != nil && u.Name != AnonymousUser.Name {
		return "user:" + u.Name
	}
	a, _ := SourceFrom(ctx)
	return "source:" + SourceKey(a)
}
