// Package auth decides who a caller is (authentication) and what the
// cluster's RBAC lets them read (authorization), so that one privileged
// cache never shows a user more than the apiserver would.
//
// The HTTP server runs an Authenticator once per request and stores the
// User in the request context (WithUser). REST handlers, WebSocket
// subscriptions and watch streams then ask the Authorizer before serving
// anything, and ask again periodically while a stream lives.
package auth

import (
	"context"
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
)

// User is an authenticated caller, as the apiserver's TokenReview names
// them.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string

	// revalidate, when set, checks that the credential the user was
	// authenticated with is still valid. Set by authenticators whose
	// credentials can expire or be revoked (TokenReview).
	revalidate func(ctx context.Context) error
}

// Revalidate checks that the credential u was authenticated with is
// still accepted, so that a long-lived stream ends when its token expires
// or is revoked, not only when RBAC changes. It returns nil for users
// whose credentials cannot change (token file, anonymous), a 401
// *apierrors.StatusError when the credential is no longer valid, or
// another error when it could not be checked. Authorizers that talk to
// the apiserver (SubjectAccessReview) call it on every decision, through
// the authenticator's cache.
func (u *User) Revalidate(ctx context.Context) error {
	if u == nil || u.revalidate == nil {
		return nil
	}
	return u.revalidate(ctx)
}

func (u *User) String() string {
	if u == nil {
		return "<unauthenticated>"
	}
	return u.Name
}

type userKey struct{}

// WithUser returns ctx carrying u.
func WithUser(ctx context.Context, u *User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// UserFrom returns the user stored by WithUser, or nil.
func UserFrom(ctx context.Context) *User {
	u, _ := ctx.Value(userKey{}).(*User)
	return u
}

// Authenticator identifies the caller of a request.
type Authenticator interface {
	// Authenticate returns the caller, or an error. A caller with missing
	// or bad credentials gets an *apierrors.StatusError with code 401;
	// other errors (the apiserver is unreachable) are answered as 401 too
	// but logged, never treated as success.
	Authenticate(r *http.Request) (*User, error)
}

// Request is one read a user asks for.
type Request struct {
	Verb       string // get, list or watch
	Resource   schema.GroupVersionResource
	Namespaced bool   // whether Resource is namespaced
	Namespace  string // "" for cluster-wide or cluster-scoped
	// Name is the object's name: for get and a watch of one object, the
	// path's; for a list or watch, the one its field selector requires
	// (SelectedName), as kube-apiserver authorizes it. "" for none.
	Name string
}

func (r Request) String() string {
	s := r.Verb + " " + r.Resource.GroupResource().String()
	if r.Namespace != "" {
		s += " in namespace " + r.Namespace
	}
	if r.Name != "" {
		s += " named " + r.Name
	}
	return s
}

// Decision is what an Authorizer allowed.
type Decision struct {
	// Namespaces, when non-nil, restricts a cluster-wide list or watch of
	// a namespaced resource to these namespaces: the caller may not read
	// the resource cluster-wide but may in each of them. It is never an
	// empty set (that is a Forbidden error instead). Nil means the request
	// is allowed as asked.
	Namespaces sets.Set[string]
}

// Equal reports whether d and o allow the same thing.
func (d Decision) Equal(o Decision) bool {
	if (d.Namespaces == nil) != (o.Namespaces == nil) {
		return false
	}
	return d.Namespaces.Equal(o.Namespaces)
}

// Authorizer decides whether a user may make a Request.
type Authorizer interface {
	// Authorize returns the decision for u and req, or an error: an
	// *apierrors.StatusError with code 403 when the request is denied,
	// any other error when the decision could not be made (which callers
	// treat as a denial, never as an allow).
	Authorize(ctx context.Context, u *User, req Request) (Decision, error)
}

// Anonymous authenticates every request as the same anonymous user. Use
// it only on loopback or behind something that authenticates.
type Anonymous struct{}

// AnonymousUser is the user Anonymous returns.
var AnonymousUser = &User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}

func (Anonymous) Authenticate(*http.Request) (*User, error) { return AnonymousUser, nil }

// AlwaysAllow allows every request. For development only.
type AlwaysAllow struct{}

func (AlwaysAllow) Authorize(context.Context, *User, Request) (Decision, error) {
	return Decision{}, nil
}

var (
	_ Authenticator = Anonymous{}
	_ Authorizer    = AlwaysAllow{}
	_ fmt.Stringer  = (*User)(nil)
)
