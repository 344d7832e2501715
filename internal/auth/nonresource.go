package auth

import (
	"context"
	"fmt"

	"go.uber.org/zap"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// NonResourceAuthorizer decides whether a user may request a URL that
// names no resource, such as GET /metrics. kube-apiserver authorizes its
// own /metrics this way: by path and verb, which RBAC grants with
// nonResourceURLs.
type NonResourceAuthorizer interface {
	// AuthorizeNonResource returns nil when u may make verb (the
	// request's method in lower case: "get") on path, a 403
	// *apierrors.StatusError when not, and any other error when the
	// decision could not be made, which callers treat as a denial.
	AuthorizeNonResource(ctx context.Context, u *User, verb, path string) error
}

// AuthorizeNonResource allows every request.
func (AlwaysAllow) AuthorizeNonResource(context.Context, *User, string, string) error { return nil }

// AuthorizeNonResource implements NonResourceAuthorizer with a
// SubjectAccessReview of NonResourceAttributes{Path, Verb} for the
// caller's user, UID, groups and extra. Decisions are cached like
// resource decisions (AllowTTL, DenyTTL; errors never), and concurrent
// identical reviews share one call. Unlike Authorize it does not
// re-validate the caller's credential: a non-resource request is one
// short request, authenticated just before.
func (a *SubjectAccessReview) AuthorizeNonResource(ctx context.Context, u *User, verb, path string) error {
	if u == nil {
		return unauthorized("no user")
	}
	key := "path\x00" + identityKey(u) + "\x00" + verb + "\x00" + path
	allowed, hit := a.allowed.get(key)
	a.opts.Metrics.cacheLookup("access", hit)
	if !hit {
		ch := a.flight.DoChan(key, func() (any, error) { return a.reviewNonResource(ctx, u, key, verb, path) })
		select {
		case res := <-ch:
			if res.Err != nil {
				a.opts.Metrics.authzResult(verb, "error")
				return res.Err
			}
			allowed = res.Val.(bool)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if !allowed {
		a.opts.Metrics.authzResult(verb, "deny")
		return forbiddenPath(u, verb, path)
	}
	a.opts.Metrics.authzResult(verb, "allow")
	return nil
}

func (a *SubjectAccessReview) reviewNonResource(ctx context.Context, u *User, key, verb, path string) (bool, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.opts.Timeout)
	defer cancel()
	spec := authorizationv1.SubjectAccessReviewSpec{
		User: u.Name, UID: u.UID, Groups: u.Groups,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}
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
		a.log.Warn("SubjectAccessReview failed; denying", zap.String("user", u.Name),
			zap.String("verb", verb), zap.String("path", path), zap.Error(err))
		return false, unavailable("authorization")
	}
	allowed := rev.Status.Allowed && !rev.Status.Denied
	ttl := a.opts.DenyTTL
	if allowed {
		ttl = a.opts.AllowTTL
	}
	a.allowed.set(key, allowed, ttl)
	return allowed, nil
}

// forbiddenPath builds the 403 kube-apiserver sends for a non-resource
// URL: `forbidden: User "alice" cannot get path "/metrics"`.
func forbiddenPath(u *User, verb, path string) error {
	return apierrors.NewForbidden(schema.GroupResource{}, "", fmt.Errorf("User %q cannot %s path %q", u.Name, verb, path))
}

var (
	_ NonResourceAuthorizer = AlwaysAllow{}
	_ NonResourceAuthorizer = (*SubjectAccessReview)(nil)
)
