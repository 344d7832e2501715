package auth

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
// caller's user, UID, groups and extra, decided as resource requests are
// (cached for AllowTTL or DenyTTL, errors never; concurrent identical
// reviews share one call). Unlike Authorize it does not
// re-validate the caller's credential: a non-resource request is one
// short request, authenticated just before.
func (a *SubjectAccessReview) AuthorizeNonResource(ctx context.Context, u *User, verb, path string) error {
	if u == nil {
		return unauthorized("no user")
	}
	key := "path\x00" + identityKey(u) + "\x00" + verb + "\x00" + path
	ans, err := a.decide(ctx, u, key, func(spec *authorizationv1.SubjectAccessReviewSpec) {
		spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: path, Verb: verb}
	}, zap.String("path", path))
	if err != nil {
		a.opts.Metrics.authzResult(verb, "error")
		return err
	}
	if !ans.allowed {
		a.opts.Metrics.authzResult(verb, "deny")
		return forbiddenPath(u, verb, path, ans.reason)
	}
	a.opts.Metrics.authzResult(verb, "allow")
	return nil
}

// forbiddenPath builds the 403 kube-apiserver sends for a non-resource
// URL: `forbidden: User "alice" cannot get path "/metrics"`, with the
// authorizer's reason after it when there is one, as forbidden does.
func forbiddenPath(u *User, verb, path, reason string) error {
	msg := htmlSanitizer.Replace(fmt.Sprintf("User %q cannot %s path %q", u.Name, verb, path))
	if reason != "" {
		msg += ": " + reason
	}
	return apierrors.NewForbidden(schema.GroupResource{}, "", errors.New(msg))
}

var (
	_ NonResourceAuthorizer = AlwaysAllow{}
	_ NonResourceAuthorizer = (*SubjectAccessReview)(nil)
)
