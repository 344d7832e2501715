package auth

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"slices"
	"sort"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/singleflight"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// Default SubjectAccessReview cache lifetimes. With the HTTP server's
// default RecheckInterval of 5s, a stream whose access is revoked ends
// within RecheckInterval + AllowTTL = 10s. Denials are cached for less, so
// a newly granted Role takes effect quickly.
const (
	DefaultAllowTTL = 5 * time.Second
	DefaultDenyTTL  = 2 * time.Second
	DefaultScanTTL  = 30 * time.Second
)

// NamespaceLister lists the cluster's namespaces, for finding the
// namespaces a user may read when they may not read cluster-wide.
type NamespaceLister interface {
	NamespaceNames(ctx context.Context) ([]string, error)
}

// NamespaceListerFunc adapts a function to NamespaceLister.
type NamespaceListerFunc func(ctx context.Context) ([]string, error)

func (f NamespaceListerFunc) NamespaceNames(ctx context.Context) ([]string, error) { return f(ctx) }

// SubjectAccessReviewOptions configures NewSubjectAccessReview.
type SubjectAccessReviewOptions struct {
	// Client sends SubjectAccessReviews with the gateway's identity, which
	// needs create on subjectaccessreviews.authorization.k8s.io. Required.
	Client kubernetes.Interface
	// Namespaces lists namespaces for cluster-wide list and watch requests
	// by users allowed only in some namespaces. Default: none, and such
	// requests are forbidden as the apiserver would forbid them.
	Namespaces NamespaceLister
	// AllowTTL is how long an allow is cached. Default DefaultAllowTTL;
	// negative disables caching.
	AllowTTL time.Duration
	// DenyTTL is how long a denial is cached. Default DefaultDenyTTL;
	// negative disables caching. Errors are never cached.
	DenyTTL time.Duration
	// ScanTTL is how often the namespaces a user may not read are asked
	// about again when narrowing a cluster-wide request; in between, only
	// the namespaces allowed at the last scan are re-checked (with the
	// TTLs above). So a revoked namespace disappears within AllowTTL and
	// a newly granted one appears within ScanTTL. Default DefaultScanTTL;
	// negative scans every time.
	ScanTTL time.Duration
	// Timeout bounds one review. Default 10s.
	Timeout time.Duration
	// MaxEntries bounds each cache. Default 100000.
	MaxEntries int
	// NamespaceConcurrency bounds the reviews in flight while one
	// namespace set is computed. Default 8.
	NamespaceConcurrency int
	// Metrics, when set, counts decisions, cache hits and reviews.
	Metrics *Metrics
	// Logger. Default: no logging.
	Logger *zap.Logger

	clock clock.PassiveClock // test hook
}

// SubjectAccessReview authorizes requests with the apiserver's
// SubjectAccessReview API (authorization.k8s.io/v1), asking about the
// caller's user, groups, UID and extra. Allows and denials are cached
// separately (AllowTTL, DenyTTL) under a hash of the user and request;
// errors are never cached and always deny. Concurrent identical reviews
// share one call.
//
// Every decision first re-validates the caller's credential
// (User.Revalidate), so a stream whose token expired or was revoked ends
// at its next re-check.
//
// A cluster-wide list or watch of a namespaced resource that the user may
// not make is narrowed instead of refused: the namespaces from
// Options.Namespaces are reviewed (see ScanTTL) for the same verb and
// name, and the Decision holds those allowed; none allowed is a 403.
type SubjectAccessReview struct {
	opts    SubjectAccessReviewOptions
	log     *zap.Logger
	answers *expiringCache[answer]
	scans   *expiringCache[[]string] // namespaces allowed at the last scan
	flight  singleflight.Group
}

// NewSubjectAccessReview returns a SubjectAccessReview authorizer.
func NewSubjectAccessReview(opts SubjectAccessReviewOptions) (*SubjectAccessReview, error) {
	if opts.Client == nil {
		return nil, errors.New("auth: SubjectAccessReviewOptions.Client is required")
	}
	if opts.AllowTTL == 0 {
		opts.AllowTTL = DefaultAllowTTL
	}
	if opts.DenyTTL == 0 {
		opts.DenyTTL = DefaultDenyTTL
	}
	if opts.ScanTTL == 0 {
		opts.ScanTTL = DefaultScanTTL
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = 100000
	}
	if opts.NamespaceConcurrency <= 0 {
		opts.NamespaceConcurrency = 8
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.clock == nil {
		opts.clock = clock.RealClock{}
	}
	return &SubjectAccessReview{
		opts:    opts,
		log:     opts.Logger,
		answers: newExpiringCache[answer](opts.clock, opts.MaxEntries),
		scans:   newExpiringCache[[]string](opts.clock, opts.MaxEntries),
	}, nil
}

// Authorize implements Authorizer.
func (a *SubjectAccessReview) Authorize(ctx context.Context, u *User, req Request) (Decision, error) {
	if u == nil {
		return Decision{}, unauthorized("no user")
	}
	if err := u.Revalidate(ctx); err != nil {
		if errors.Is(err, ErrReviewFailed) {
			// The token could not be checked, which says nothing about
			// the token: the stream ends as for any review that could
			// not be made (503), not as unauthenticated or internal.
			a.opts.Metrics.authzResult(req.Verb, "error")
			return Decision{}, unavailable("authentication")
		}
		a.opts.Metrics.authzResult(req.Verb, "unauthenticated")
		return Decision{}, err
	}
	uk := identityKey(u)
	ans, err := a.check(ctx, u, uk, req)
	if err != nil {
		a.opts.Metrics.authzResult(req.Verb, "error")
		return Decision{}, err
	}
	if ans.allowed {
		a.opts.Metrics.authzResult(req.Verb, "allow")
		return Decision{}, nil
	}
	if !narrowable(req) || a.opts.Namespaces == nil {
		a.opts.Metrics.authzResult(req.Verb, "deny")
		return Decision{}, forbidden(u, req, ans.reason)
	}
	set, err := a.namespaceSet(ctx, u, uk, req)
	if err != nil {
		a.opts.Metrics.authzResult(req.Verb, "error")
		return Decision{}, err
	}
	if set.Len() == 0 {
		// Denied as the apiserver denies the request as asked.
		a.opts.Metrics.authzResult(req.Verb, "deny")
		return Decision{}, forbidden(u, req, ans.reason)
	}
	a.opts.Metrics.authzResult(req.Verb, "restricted")
	return Decision{Namespaces: set}, nil
}

// narrowable reports whether req may be narrowed to a namespace set. A
// named list or watch (a metadata.name field selector) is too: each
// namespace is reviewed for that name, so resourceNames grants narrow it.
func narrowable(req Request) bool {
	return req.Namespaced && req.Namespace == "" && (req.Verb == "list" || req.Verb == "watch")
}

// answer is a review's outcome.
type answer struct {
	allowed bool
	// reason is the authorizer's reason, which the apiserver appends to
	// its 403 message (RBAC names a binding's missing role there).
	reason string
}

// check answers one access question, from the cache or one review.
func (a *SubjectAccessReview) check(ctx context.Context, u *User, uk string, req Request) (answer, error) {
	return a.decide(ctx, u, requestKey(uk, req), func(spec *authorizationv1.SubjectAccessReviewSpec) {
		spec.ResourceAttributes = &authorizationv1.ResourceAttributes{
			Namespace: req.Namespace, Verb: req.Verb, Name: req.Name,
			Group: req.Resource.Group, Version: req.Resource.Version, Resource: req.Resource.Resource,
		}
	}, zap.Stringer("request", req))
}

// decide answers the question attrs sets in a review of u, cached under
// key, from the cache or one review that concurrent identical questions
// share. what describes the question in the log.
func (a *SubjectAccessReview) decide(ctx context.Context, u *User, key string,
	attrs func(*authorizationv1.SubjectAccessReviewSpec), what zap.Field) (answer, error) {
	if ans, hit := a.answers.get(key); hit {
		a.opts.Metrics.cacheLookup("access", true)
		return ans, nil
	}
	a.opts.Metrics.cacheLookup("access", false)
	ch := a.flight.DoChan(key, func() (any, error) { return a.review(ctx, u, key, attrs, what) })
	select {
	case res := <-ch:
		if res.Err != nil {
			return answer{}, res.Err
		}
		return res.Val.(answer), nil
	case <-ctx.Done():
		return answer{}, ctx.Err()
	}
}

func (a *SubjectAccessReview) review(ctx context.Context, u *User, key string,
	attrs func(*authorizationv1.SubjectAccessReviewSpec), what zap.Field) (answer, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.opts.Timeout)
	defer cancel()
	spec := authorizationv1.SubjectAccessReviewSpec{User: u.Name, UID: u.UID, Groups: u.Groups}
	attrs(&spec)
	if len(u.Extra) > 0 {
		spec.Extra = make(map[string]authorizationv1.ExtraValue, len(u.Extra))
		for k, v := range u.Extra {
			spec.Extra[k] = v
		}
	}
	rev, err := a.opts.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx,
		&authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	a.opts.Metrics.review("subjectaccessreview", err)
	if err != nil {
		a.log.Warn("SubjectAccessReview failed; denying", zap.String("user", u.Name), what, zap.Error(err))
		return answer{}, unavailable("authorization")
	}
	ans := answer{allowed: rev.Status.Allowed && !rev.Status.Denied, reason: rev.Status.Reason}
	ttl := a.opts.DenyTTL
	if ans.allowed {
		ttl = a.opts.AllowTTL
	}
	a.answers.set(key, ans, ttl)
	return ans, nil
}

// namespaceSet returns the namespaces in which u may make req. It
// scans every namespace at most once per ScanTTL and remembers those
// allowed; in between it re-checks only those (each check cached as
// usual), so a revoked namespace drops out within AllowTTL while the
// denied majority is not asked again until the next scan.
func (a *SubjectAccessReview) namespaceSet(ctx context.Context, u *User, uk string, req Request) (sets.Set[string], error) {
	key := "ns\x00" + requestKey(uk, req)
	candidates, hit := a.scans.get(key)
	a.opts.Metrics.cacheLookup("namespaces", hit)
	if !hit {
		ch := a.flight.DoChan(key, func() (any, error) {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.opts.Timeout)
			defer cancel()
			names, err := a.opts.Namespaces.NamespaceNames(ctx)
			if err != nil {
				a.log.Warn("cannot list namespaces; denying the cluster-wide request", zap.String("user", u.Name), zap.Stringer("request", req), zap.Error(err))
				return nil, unavailable("the namespace list")
			}
			allowed, err := a.allowedAmong(ctx, u, uk, req, names)
			if err != nil {
				return nil, err
			}
			ttl := a.opts.ScanTTL
			if len(allowed) == 0 {
				ttl = a.opts.DenyTTL // a new grant shows soon
			}
			a.scans.set(key, allowed, ttl)
			return allowed, nil
		})
		select {
		case res := <-ch:
			if res.Err != nil {
				return nil, res.Err
			}
			return sets.New(res.Val.([]string)...), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	allowed, err := a.allowedAmong(ctx, u, uk, req, candidates)
	if err != nil {
		return nil, err
	}
	if len(allowed) == 0 {
		a.scans.delete(key) // everything revoked: look again next time
	}
	return sets.New(allowed...), nil
}

// allowedAmong returns the namespaces in which u may make req, reviewing
// (or finding cached) each one, at most NamespaceConcurrency at a time.
func (a *SubjectAccessReview) allowedAmong(ctx context.Context, u *User, uk string, req Request, namespaces []string) ([]string, error) {
	ok := make([]bool, len(namespaces))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(a.opts.NamespaceConcurrency)
	for i, ns := range namespaces {
		nreq := req
		nreq.Namespace = ns
		key := requestKey(uk, nreq)
		if ans, hit := a.answers.get(key); hit {
			// Most calls end here: no goroutine for a cached answer.
			a.opts.Metrics.cacheLookup("access", true)
			ok[i] = ans.allowed
			continue
		}
		g.Go(func() error {
			ans, err := a.check(gctx, u, uk, nreq)
			ok[i] = ans.allowed
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var out []string
	for i, ns := range namespaces {
		if ok[i] {
			out = append(out, ns)
		}
	}
	return out, nil
}

// identityKey hashes everything about u that a review depends on. Fields
// and lists are length-prefixed so that no two users share an encoding.
func identityKey(u *User) string {
	h := sha256.New()
	putLen := func(n int) {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(n))
		h.Write(b[:])
	}
	put := func(s string) {
		putLen(len(s))
		h.Write([]byte(s))
	}
	put(u.Name)
	put(u.UID)
	groups := slices.Clone(u.Groups)
	slices.Sort(groups)
	putLen(len(groups))
	for _, g := range groups {
		put(g)
	}
	keys := make([]string, 0, len(u.Extra))
	for k := range u.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	putLen(len(keys))
	for _, k := range keys {
		put(k)
		vals := slices.Clone(u.Extra[k])
		slices.Sort(vals)
		putLen(len(vals))
		for _, v := range vals {
			put(v)
		}
	}
	return string(h.Sum(nil))
}

func requestKey(uk string, req Request) string {
	return uk + "\x00" + req.Verb + "\x00" + req.Resource.Group + "\x00" + req.Resource.Version + "\x00" +
		req.Resource.Resource + "\x00" + req.Namespace + "\x00" + req.Name
}
