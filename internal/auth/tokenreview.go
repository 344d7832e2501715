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
	// MaxEntries bounds the cache. Default 10000.
	MaxEntries int
	// Metrics, when set, counts cache hits and reviews.
	Metrics *Metrics
	// Logger. Default: no logging. Tokens are never logged.
	Logger *zap.Logger

	clock clock.PassiveClock // test hook
}

// TokenReview authenticates bearer tokens with the apiserver's
// TokenReview API (authentication.k8s.io/v1). Results are cached under the
// token's SHA-256, never the token itself, and concurrent lookups of one
// uncached token share a single review (singleflight). A shared review
// runs on a context detached from any one caller, bounded by Timeout, so
// one caller giving up does not fail the others; each caller still
// returns as soon as its own context ends.
type TokenReview struct {
	opts   TokenReviewOptions
	log    *zap.Logger
	cache  *expiringCache[*User] // nil value: token rejected
	flight singleflight.Group
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
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.clock == nil {
		opts.clock = clock.RealClock{}
	}
	return &TokenReview{opts: opts, log: opts.Logger, cache: newExpiringCache[*User](opts.clock, opts.MaxEntries)}, nil
}

// AuthenticateToken implements TokenAuthenticator.
func (a *TokenReview) AuthenticateToken(ctx context.Context, token string) (*User, error) {
	sum := sha256.Sum256([]byte(token))
	key := string(sum[:])
	u, hit := a.cache.get(key)
	a.opts.Metrics.cacheLookup("token", hit)
	if !hit {
		ch := a.flight.DoChan(key, func() (any, error) { return a.review(ctx, key, token) })
		select {
		case res := <-ch:
			if res.Err != nil {
				return nil, res.Err
			}
			u = res.Val.(*User)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if u == nil {
		return nil, unauthorized("invalid bearer token")
	}
	return u, nil
}

// review asks the apiserver and caches the answer (not an error). It runs
// once per key at a time, under singleflight.
func (a *TokenReview) review(ctx context.Context, key, token string) (*User, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.opts.Timeout)
	defer cancel()
	rev, err := a.opts.Client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: a.opts.Audiences},
	}, metav1.CreateOptions{})
	a.opts.Metrics.review("tokenreview", err)
	if err != nil {
		a.log.Warn("TokenReview failed; refusing the request", zap.Error(err))
		return nil, reviewFailed("TokenReview", err)
	}
	st := rev.Status
	if !st.Authenticated || !audienceOK(a.opts.Audiences, st.Audiences) {
		// st.Error may quote the token's claims but never the token.
		a.log.Debug("token rejected", zap.String("reason", st.Error))
		a.cache.set(key, nil, a.opts.FailureTTL)
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
	a.cache.set(key, u, a.opts.SuccessTTL)
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
