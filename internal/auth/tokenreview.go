package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// Default TokenReview cache lifetimes. A valid token is trusted for
// SuccessTTL after the apiserver confirmed it, so a deleted service
// account or an expired token is noticed by new requests within it. A
// rejected token is remembered for FailureTTL so that a client retrying a
// bad token does not turn into a stream of reviews.
const (
	DefaultTokenSuccessTTL = 10 * time.Second
	DefaultTokenFailureTTL = 3 * time.Second
)

// TokenReviewOptions configures NewTokenReview.
type TokenReviewOptions struct {
	// Client sends TokenReviews with the gateway's identity, which needs
	// create on tokenreviews.authentication.k8s.io. Required.
	Client kubernetes.Interface
	// Audiences, when set, are sent in each review and the token must be
	// valid for one of them. Default: the apiserver's own audiences.
	Audiences []string
	// SuccessTTL is how long a valid token's user is cached. Default
	// DefaultTokenSuccessTTL; negative disables caching.
	SuccessTTL time.Duration
	// FailureTTL is how long a rejected token is cached. Default
	// DefaultTokenFailureTTL; negative disables caching. Errors (the
	// apiserver could not answer) are never cached.
	FailureTTL time.Duration
	// Timeout bounds one review. Default 10s.
	Timeout time.Duration
	// MaxEntries bounds the cache of valid tokens. Default 10000.
	MaxEntries int
	// MaxRejectedEntries bounds the cache of rejected tokens, which is
	// kept apart so that a flood of bogus tokens can only evict other
	// bogus tokens, never a valid one. Default 10000.
	MaxRejectedEntries int
	// Queue, when set, is where reviews wait for their turn, filed under
	// the caller's flow (see ReviewQueue): the user whose token a stream
	// re-validates, else the client address. Default: no queue.
	Queue *ReviewQueue
	// Metrics, when set, counts cache hits and reviews.
	Metrics *Metrics
	// Logger. Default: no logging. Tokens are never logged.
	Logger *zap.Logger

	clock clock.PassiveClock // test hook
}

// TokenReview authenticates bearer tokens with the apiserver's
// TokenReview API (authentication.k8s.io/v1). Results are cached under the
// token's SHA-256, never the token itself: valid tokens and rejected ones
// in two caches of their own bounds, so rejected tokens never evict valid
// ones. Concurrent lookups of one uncached token share a single review
// (singleflight), which waits for its turn in Options.Queue. A shared
// review runs on a context detached from any one caller, bounded by
// Timeout, so one caller giving up does not fail the others; each caller
// still returns as soon as its own context ends.
type TokenReview struct {
	opts      TokenReviewOptions
	log       *zap.Logger
	failedLog *logThrottle
	valid     *expiringCache[*User]
	rejected  *expiringCache[struct{}]
	flight    singleflight.Group
}

// NewTokenReview returns a TokenReview authenticator.
func NewTokenReview(opts TokenReviewOptions) (*TokenReview, error) {
	if opts.Client == nil {
		return nil, errors.New("auth: TokenReviewOptions.Client is required")
	}
	if opts.SuccessTTL == 0 {
		opts.SuccessTTL = DefaultTokenSuccessTTL
	}
	if opts.FailureTTL == 0 {
		opts.FailureTTL = DefaultTokenFailureTTL
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = 10000
	}
	if opts.MaxRejectedEntries <= 0 {
		opts.MaxRejectedEntries = 10000
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.clock == nil {
		opts.clock = clock.RealClock{}
	}
	return &TokenReview{
		opts: opts, log: opts.Logger,
		failedLog: newLogThrottle(opts.Logger, "TokenReview failed; refusing the request", opts.clock, opts.Metrics),
		valid:     newExpiringCache[*User](opts.clock, opts.MaxEntries),
		rejected:  newExpiringCache[struct{}](opts.clock, opts.MaxRejectedEntries),
	}, nil
}

func tokenKey(token string) string {
	sum := sha256.Sum256([]byte(token))
	return string(sum[:])
}

// CachedToken returns the user of token when the apiserver confirmed it
// within SuccessTTL: a lookup that costs no review. It implements
// CachedTokens.
func (a *TokenReview) CachedToken(token string) (*User, bool) {
	u, ok := a.valid.get(tokenKey(token))
	return u, ok
}

// AuthenticateToken implements TokenAuthenticator.
func (a *TokenReview) AuthenticateToken(ctx context.Context, token string) (*User, error) {
	key := tokenKey(token)
	if u, hit := a.valid.get(key); hit {
		a.opts.Metrics.cacheLookup("token", true)
		return u, nil
	}
	if _, hit := a.rejected.get(key); hit {
		a.opts.Metrics.cacheLookup("token", true)
		return nil, unauthorized("invalid bearer token")
	}
	a.opts.Metrics.cacheLookup("token", false)
	ch := a.flight.DoChan(key, func() (any, error) { return a.review(ctx, key, token) })
	var u *User
	select {
	case res := <-ch:
		if res.Err != nil {
			return nil, res.Err
		}
		u = res.Val.(*User)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if u == nil {
		return nil, unauthorized("invalid bearer token")
	}
	return u, nil
}

// review asks the apiserver, once its turn has come in the queue, and
// caches the answer (not an error). It runs once per key at a time,
// under singleflight.
func (a *TokenReview) review(ctx context.Context, key, token string) (*User, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.opts.Timeout)
	defer cancel()
	release, err := a.opts.Queue.Acquire(ctx, flowOf(ctx, UserFrom(ctx)))
	if err != nil {
		if errors.Is(err, ErrReviewQueueFull) {
			return nil, err // 429 as is: the caller retries later
		}
		return nil, reviewFailed("TokenReview", err)
	}
	defer release()
	chargeReview(ctx)
	rev, err := a.opts.Client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: a.opts.Audiences},
	}, metav1.CreateOptions{})
	a.opts.Metrics.review("tokenreview", err)
	if err != nil {
		a.failedLog.Warn(zap.Error(err))
		return nil, reviewFailed("TokenReview", err)
	}
	st := rev.Status
	if !st.Authenticated || !audienceOK(a.opts.Audiences, st.Audiences) {
		// st.Error may quote the token's claims but never the token.
		a.log.Debug("token rejected", zap.String("reason", st.Error))
		a.rejected.set(key, struct{}{}, a.opts.FailureTTL)
		return nil, nil
	}
	u := &User{Name: st.User.Username, UID: st.User.UID, Groups: st.User.Groups}
	// Streams opened with this token re-check it through the cache, so
	// they end once the apiserver stops accepting it. The closure keeps
	// the token for as long as such a stream lives, as the stream's
	// connection would anyway.
	u.revalidate = func(ctx context.Context) error {
		_, err := a.AuthenticateToken(ctx, token)
		return err
	}
	if len(st.User.Extra) > 0 {
		u.Extra = make(map[string][]string, len(st.User.Extra))
		for k, v := range st.User.Extra {
			u.Extra[k] = v
		}
	}
	a.valid.set(key, u, a.opts.SuccessTTL)
	return u, nil
}

// audienceOK reports whether the reviewed token is valid for one of the
// audiences asked for (the apiserver returns the intersection).
func audienceOK(want, got []string) bool {
	if len(want) == 0 {
		return true
	}
	for _, g := range got {
		for _, w := range want {
			if g == w {
				return true
			}
		}
	}
	return false
}
