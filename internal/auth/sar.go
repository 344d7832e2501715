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
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// ObjectLocator tells, from the gateway's cache, in which namespaces an
// object of a given name exists, so that a cluster-wide list of one name
// is reviewed only in the namespaces that could answer it.
type ObjectLocator interface {
	// NamespacesHolding returns the namespaces holding an object of
	// resource named name; ok is false when it cannot tell (the resource
	// is not cached yet). It must not start caching anything.
	NamespacesHolding(ctx context.Context, resource schema.GroupVersionResource, name string) (namespaces []string, ok bool)
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
	// Objects, when set, narrows a cluster-wide list of one name (a
	// metadata.name field selector) by reviewing only the namespaces
	// that hold an object of that name, beyond those the user may list
	// whole. Default: every namespace is reviewed for the name.
	Objects ObjectLocator
	// Queue, when set, is where reviews wait for their turn, filed under
	// the user's flow (the client address for the anonymous user). See
	// ReviewQueue. Default: no queue.
	Queue *ReviewQueue
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
	opts      SubjectAccessReviewOptions
	log       *zap.Logger
	failedLog *logThrottle
	answers   *expiringCache[answer]
	scans     *expiringCache[[]string] // namespaces allowed at the last scan
	flight    singleflight.Group
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
		opts:      opts,
		log:       opts.Logger,
		failedLog: newLogThrottle(opts.Logger, "SubjectAccessReview failed; denying", opts.clock, opts.Metrics),
		answers:   newExpiringCache[answer](opts.clock, opts.MaxEntries),
		scans:     newExpiringCache[[]string](opts.clock, opts.MaxEntries),
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
	if req.Name != "" {
		// What a user may read whole, they may read one name of: the
		// answer for every name serves all names, so random names cost
		// no review each. (kube-apiserver reviews each name, and RBAC
		// allows a name wherever it allows every name.)
		unnamed := req
		unnamed.Name = ""
		ans, err := a.check(ctx, u, uk, unnamed)
		if err != nil {
			a.opts.Metrics.authzResult(req.Verb, "error")
			return Decision{}, err
		}
		if ans.allowed {
			a.opts.Metrics.authzResult(req.Verb, "allow")
			return Decision{}, nil
		}
		if req.Verb == "list" && a.narrows(req) && a.opts.Objects != nil {
			if holders, ok := a.opts.Objects.NamespacesHolding(ctx, req.Resource, req.Name); ok {
				return a.narrowNamedList(ctx, u, uk, req, holders)
			}
		}
	}
	ans, err := a.check(ctx, u, uk, req)
	if err != nil {
		a.opts.Metrics.authzResult(req.Verb, "error")
		return Decision{}, err
	}
	if ans.allowed {
		a.opts.Metrics.authzResult(req.Verb, "allow")
		return Decision{}, nil
	}
	if !a.narrows(req) {
		a.opts.Metrics.authzResult(req.Verb, "deny")
		return Decision{}, forbidden(u, req, ans.reason)
	}
	set, err := a.namespaceSet(ctx, u, uk, req)
	if err != nil {
		a.opts.Metrics.authzResult(req.Verb, "error")
		return Decision{}, err
	}
	return a.restricted(u, req, set, ans.reason)
}

// restricted is the decision for req narrowed to set: a 403, worded as
// the apiserver words the denial of req as asked (for reason), when set
// is empty.
func (a *SubjectAccessReview) restricted(u *User, req Request, set sets.Set[string], reason string) (Decision, error) {
	if set.Len() == 0 {
		a.opts.Metrics.authzResult(req.Verb, "deny")
		return Decision{}, forbidden(u, req, reason)
	}
	a.opts.Metrics.authzResult(req.Verb, "restricted")
	return Decision{Namespaces: set}, nil
}

// narrowNamedList decides a cluster-wide list of one name (req.Name)
// that the user may not make for every name, from holders, the
// namespaces where an object of that name exists. The list can only
// return objects of holders, so only those need deciding: those where
// the user may list every name (the user's namespace set for req
// without the name, which is cached) need no review; the others are
// reviewed for the name, after the cluster-wide review for the name.
// A list of a name that exists nowhere the user may read it is a 403,
// whether it exists elsewhere or not, so the answer tells nothing of
// objects the user may not read.
func (a *SubjectAccessReview) narrowNamedList(ctx context.Context, u *User, uk string, req Request, holders []string) (Decision, error) {
	unnamed := req
	unnamed.Name = ""
	base, err := a.namespaceSet(ctx, u, uk, unnamed)
	if err != nil {
		a.opts.Metrics.authzResult(req.Verb, "error")
		return Decision{}, err
	}
	var need []string
	for _, ns := range holders {
		if !base.Has(ns) {
			need = append(need, ns)
		}
	}
	if len(need) == 0 && base.Len() > 0 {
		// Every object of that name is where the user may list all.
		a.opts.Metrics.authzResult(req.Verb, "restricted")
		return Decision{Namespaces: base}, nil
	}
	ans, err := a.check(ctx, u, uk, req)
	if err != nil {
		a.opts.Metrics.authzResult(req.Verb, "error")
		return Decision{}, err
	}
	if ans.allowed {
		a.opts.Metrics.authzResult(req.Verb, "allow")
		return Decision{}, nil
	}
	extra, err := a.allowedAmong(ctx, u, uk, req, need)
	if err != nil {
		a.opts.Metrics.authzResult(req.Verb, "error")
		return Decision{}, err
	}
	return a.restricted(u, req, base.Insert(extra...), ans.reason)
}

// narrows reports whether a denied req is narrowed to the namespaces
// allowed instead of refused.
func (a *SubjectAccessReview) narrows(req Request) bool {
	return narrowable(req) && a.opts.Namespaces != nil
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
	release, err := a.opts.Queue.Acquire(ctx, flowOf(ctx, u))
	if err != nil {
		if errors.Is(err, ErrReviewQueueFull) {
			return answer{}, err // 429: the caller retries later
		}
		a.failedLog.Warn(zap.String("user", u.Name), what, zap.Error(err))
		return answer{}, unavailable("authorization")
	}
	defer release()
	chargeReview(ctx)
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
		a.failedLog.Warn(zap.String("user", u.Name), what, zap.Error(err))
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
// denied majority is not asked again until the next scan. For a request
// of one name it starts from the set for every name (cached as well),
// and scans for the name only the namespaces outside it.
func (a *SubjectAccessReview) namespaceSet(ctx context.Context, u *User, uk string, req Request) (sets.Set[string], error) {
	if req.Name == "" {
		return a.scanSet(ctx, u, uk, req, nil)
	}
	unnamed := req
	unnamed.Name = ""
	base, err := a.scanSet(ctx, u, uk, unnamed, nil)
	if err != nil {
		return nil, err
	}
	extra, err := a.scanSet(ctx, u, uk, req, base)
	if err != nil {
		return nil, err
	}
	return base.Union(extra), nil
}

// scanSet is namespaceSet for req among the namespaces not in skip.
func (a *SubjectAccessReview) scanSet(ctx context.Context, u *User, uk string, req Request, skip sets.Set[string]) (sets.Set[string], error) {
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
			if skip.Len() > 0 {
				names = slices.DeleteFunc(slices.Clone(names), skip.Has)
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
	if len(allowed) == 0 && len(candidates) > 0 {
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
