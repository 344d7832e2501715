package auth

import (
	"fmt"
	"math"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
)

// Defaults of FailureBudgetOptions.
const (
	DefaultFailedAuthQPS   = 5
	DefaultFailedAuthBurst = 50
	// DefaultFailureSources bounds the client addresses a FailureBudget
	// keeps apart; more share one budget until some are forgotten.
	DefaultFailureSources = 100000
)

// FailureBudgetOptions configures NewFailureBudget.
type FailureBudgetOptions struct {
	// QPS is the sustained rate of failed credentials allowed per client
	// address (see SourceKey); Burst how many may come at once. Defaults
	// DefaultFailedAuthQPS and DefaultFailedAuthBurst.
	QPS   float64
	Burst int
	// MaxSources bounds the addresses tracked. Default
	// DefaultFailureSources.
	MaxSources int
	// Metrics, when set, counts refusals (limit "failed_credentials").
	Metrics *Metrics

	clock clock.PassiveClock // test hook
}

// FailureBudget limits, per client address, the requests whose
// credentials fail: missing, malformed, refused, or rejected by the
// authenticator. Each request that needs its credentials checked takes
// one unit of its address's budget first, and gets it back when they
// turn out valid, so the budget counts failures; a request whose valid
// token is already cached takes nothing and is never refused. An address
// whose budget is spent gets 429 with Retry-After for anything that
// would need a check, before any review is made: a flood of bogus tokens
// from one address costs the apiserver at most QPS reviews a second.
//
// Each address has a token bucket, filled at QPS up to Burst; buckets
// that are full again behave as new ones and are forgotten. When
// MaxSources addresses are tracked and none can be forgotten, the others
// share one bucket, so memory stays bounded whatever the addresses.
type FailureBudget struct {
	opts FailureBudgetOptions

	// mu guards buckets and lastSweep.
	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
}

// bucket is a token bucket: tokens as of last.
type bucket struct {
	tokens float64
	last   time.Time
}

// overflowSource is the key of the bucket addresses share once
// MaxSources are tracked.
const overflowSource = "\x00overflow"

// NewFailureBudget returns a FailureBudget.
func NewFailureBudget(opts FailureBudgetOptions) *FailureBudget {
	if opts.QPS <= 0 {
		opts.QPS = DefaultFailedAuthQPS
	}
	if opts.Burst <= 0 {
		opts.Burst = DefaultFailedAuthBurst
	}
	if opts.MaxSources <= 0 {
		opts.MaxSources = DefaultFailureSources
	}
	if opts.clock == nil {
		opts.clock = clock.RealClock{}
	}
	return &FailureBudget{opts: opts, buckets: map[string]*bucket{}, lastSweep: opts.clock.Now()}
}

// Take takes one unit of source's budget (a SourceKey) for a request
// whose credentials are about to be checked. When the budget is spent it
// returns the 429 to answer with. Otherwise refund gives the unit back:
// call it when the credentials turned out valid, or could not be checked
// for reasons of the gateway's own.
func (b *FailureBudget) Take(source string) (refund func(), st *metav1.Status) {
	if b == nil {
		return func() {}, nil
	}
	now := b.opts.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Sub(b.lastSweep) >= sweepEvery {
		b.sweepLocked(now)
	}
	k := b.keyLocked(source)
	bk := b.buckets[k]
	if bk == nil {
		bk = &bucket{tokens: float64(b.opts.Burst), last: now}
		b.buckets[k] = bk
	}
	b.refillLocked(bk, now)
	if bk.tokens < 1 {
		b.opts.Metrics.limited("failed_credentials")
		wait := time.Duration((1 - bk.tokens) / b.opts.QPS * float64(time.Second))
		return nil, tooMany(fmt.Sprintf("too many requests with missing or invalid credentials from this client address (%g per second, burst %d); retry later with valid credentials", b.opts.QPS, b.opts.Burst), wait)
	}
	bk.tokens--
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.refillLocked(bk, b.opts.clock.Now())
			bk.tokens = math.Min(bk.tokens+1, float64(b.opts.Burst))
		})
	}, nil
}

// keyLocked maps source to its bucket's key. Caller must hold mu.
func (b *FailureBudget) keyLocked(source string) string {
	if _, ok := b.buckets[source]; ok || len(b.buckets) < b.opts.MaxSources {
		return source
	}
	return overflowSource
}

// refillLocked adds the tokens earned since bk.last. Caller must hold mu.
func (b *FailureBudget) refillLocked(bk *bucket, now time.Time) {
	if d := now.Sub(bk.last); d > 0 {
		bk.tokens = math.Min(float64(b.opts.Burst), bk.tokens+d.Seconds()*b.opts.QPS)
		bk.last = now
	}
}

// sweepLocked forgets full buckets. Caller must hold mu.
func (b *FailureBudget) sweepLocked(now time.Time) {
	b.lastSweep = now
	for k, bk := range b.buckets {
		if b.refillLocked(bk, now); bk.tokens >= float64(b.opts.Burst) {
			delete(b.buckets, k)
		}
	}
}

// sources returns the buckets tracked (tests).
func (b *FailureBudget) sources() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.buckets)
}
