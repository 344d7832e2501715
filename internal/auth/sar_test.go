package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
)

var (
	podsGVR    = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	secretsGVR = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	alice      = &User{Name: "alice", UID: "a-1", Groups: []string{"devs", "system:authenticated"}, Extra: map[string][]string{"scopes": {"x", "y"}}}
)

// podsInNamespaces allows alice to read pods in the given namespaces.
func podsInNamespaces(ns ...string) func(authorizationv1.SubjectAccessReviewSpec) bool {
	return func(s authorizationv1.SubjectAccessReviewSpec) bool {
		ra := s.ResourceAttributes
		return s.User == "alice" && ra.Resource == "pods" && slices.Contains(ns, ra.Namespace)
	}
}

func staticNamespaces(ns ...string) NamespaceLister {
	return NamespaceListerFunc(func(context.Context) ([]string, error) { return ns, nil })
}

func newTestSAR(t *testing.T, s *reviewServer, opts SubjectAccessReviewOptions) *SubjectAccessReview {
	t.Helper()
	opts.Client = s.client
	if opts.clock == nil {
		opts.clock = fakeClock()
	}
	return must[*SubjectAccessReview](t)(NewSubjectAccessReview(opts))
}

// TestSARSendsTheWholeIdentity: a review asks about the caller's user,
// UID, groups and extra. A request of one name is first asked about for
// every name (which serves all names), then, denied, for its name.
func TestSARSendsTheWholeIdentity(t *testing.T) {
	s := newReviewServer()
	s.allow = func(spec authorizationv1.SubjectAccessReviewSpec) bool { return spec.ResourceAttributes.Name == "p" }
	a := newTestSAR(t, s, SubjectAccessReviewOptions{})
	req := Request{Verb: "get", Resource: podsGVR, Namespaced: true, Namespace: "ns-a", Name: "p"}
	if _, err := a.Authorize(context.Background(), alice, req); err != nil {
		t.Fatal(err)
	}
	want := func(name string) authorizationv1.SubjectAccessReviewSpec {
		return authorizationv1.SubjectAccessReviewSpec{
			User: "alice", UID: "a-1", Groups: []string{"devs", "system:authenticated"},
			Extra: map[string]authorizationv1.ExtraValue{"scopes": {"x", "y"}},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: "ns-a", Verb: "get", Version: "v1", Resource: "pods", Name: name,
			},
		}
	}
	if diff := cmp.Diff([]authorizationv1.SubjectAccessReviewSpec{want(""), want("p")}, s.specs); diff != "" {
		t.Fatalf("specs (-want +got):\n%s", diff)
	}
}

func TestSARCachesAllowAndDenyWithTheirTTLs(t *testing.T) {
	s := newReviewServer()
	s.allow = podsInNamespaces("ns-a")
	clk := fakeClock()
	a := newTestSAR(t, s, SubjectAccessReviewOptions{clock: clk, AllowTTL: 5 * time.Second, DenyTTL: 2 * time.Second})
	ctx := context.Background()
	allowed := Request{Verb: "list", Resource: podsGVR, Namespaced: true, Namespace: "ns-a"}
	denied := Request{Verb: "list", Resource: secretsGVR, Namespaced: true, Namespace: "ns-a"}

	for range 3 {
		if _, err := a.Authorize(ctx, alice, allowed); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Authorize(ctx, alice, denied); !isCode(err, http.StatusForbidden) {
			t.Fatalf("secrets: err = %v, want 403", err)
		}
	}
	if n := s.accessReviews.Load(); n != 2 {
		t.Fatalf("%d reviews, want 2 (one allow, one deny)", n)
	}
	clk.Step(2 * time.Second) // the denial expires, the allow does not
	_, _ = a.Authorize(ctx, alice, allowed)
	_, _ = a.Authorize(ctx, alice, denied)
	if n := s.accessReviews.Load(); n != 3 {
		t.Fatalf("%d reviews after the deny TTL, want 3", n)
	}
	// Revoke: within the allow TTL the old answer stands, then it flips.
	s.set(func(s *reviewServer) { s.allow = podsInNamespaces() })
	clk.Step(2 * time.Second)
	if _, err := a.Authorize(ctx, alice, allowed); err != nil {
		t.Fatalf("within the allow TTL: %v", err)
	}
	clk.Step(time.Second)
	if _, err := a.Authorize(ctx, alice, allowed); !isCode(err, http.StatusForbidden) {
		t.Fatalf("after the allow TTL: err = %v, want 403", err)
	}
}

func TestSARErrorDeniesAndIsNotCached(t *testing.T) {
	s := newReviewServer()
	s.allow = podsInNamespaces("ns-a")
	s.fail = errUnavailable
	a := newTestSAR(t, s, SubjectAccessReviewOptions{Namespaces: staticNamespaces("ns-a")})
	ctx := context.Background()
	for _, req := range []Request{
		{Verb: "get", Resource: podsGVR, Namespaced: true, Namespace: "ns-a", Name: "p"},
		{Verb: "list", Resource: podsGVR, Namespaced: true},
	} {
		d, err := a.Authorize(ctx, alice, req)
		if err == nil || !isCode(err, http.StatusServiceUnavailable) {
			t.Fatalf("%s: decision %+v, err %v; want a 503 error", req, d, err)
		}
	}
	s.set(func(s *reviewServer) { s.fail = nil })
	if _, err := a.Authorize(ctx, alice, Request{Verb: "get", Resource: podsGVR, Namespaced: true, Namespace: "ns-a", Name: "p"}); err != nil {
		t.Fatalf("after the apiserver recovered: %v (the error was cached?)", err)
	}
}

func TestSARNamespaceSet(t *testing.T) {
	s := newReviewServer()
	s.allow = podsInNamespaces("ns-a", "ns-c")
	clk := fakeClock()
	a := newTestSAR(t, s, SubjectAccessReviewOptions{clock: clk, Namespaces: staticNamespaces("ns-a", "ns-b", "ns-c", "ns-d")})
	ctx := context.Background()
	for _, verb := range []string{"list", "watch"} {
		d, err := a.Authorize(ctx, alice, Request{Verb: verb, Resource: podsGVR, Namespaced: true})
		if err != nil {
			t.Fatal(err)
		}
		if !d.Equal(Decision{Namespaces: sets.New("ns-a", "ns-c")}) {
			t.Fatalf("%s: namespaces %v, want ns-a and ns-c", verb, sets.List(d.Namespaces))
		}
	}
	reviews := s.accessReviews.Load() // 2 verbs × (cluster + 4 namespaces)
	if reviews != 10 {
		t.Fatalf("%d reviews, want 10", reviews)
	}
	_, _ = a.Authorize(ctx, alice, Request{Verb: "list", Resource: podsGVR, Namespaced: true})
	if n := s.accessReviews.Load(); n != reviews {
		t.Fatalf("%d reviews for a cached decision, want none", n-reviews)
	}

	t.Run("none allowed is forbidden", func(t *testing.T) {
		_, err := a.Authorize(ctx, alice, Request{Verb: "list", Resource: secretsGVR, Namespaced: true})
		if !isCode(err, http.StatusForbidden) {
			t.Fatalf("err = %v, want 403", err)
		}
	})
	t.Run("get is not narrowed", func(t *testing.T) {
		_, err := a.Authorize(ctx, alice, Request{Verb: "get", Resource: podsGVR, Namespaced: true, Namespace: "ns-b", Name: "p"})
		if !isCode(err, http.StatusForbidden) {
			t.Fatalf("err = %v, want 403", err)
		}
	})
	t.Run("cluster-scoped is not narrowed", func(t *testing.T) {
		_, err := a.Authorize(ctx, alice, Request{Verb: "list", Resource: schema.GroupVersionResource{Version: "v1", Resource: "nodes"}})
		if !isCode(err, http.StatusForbidden) {
			t.Fatalf("err = %v, want 403", err)
		}
	})
	t.Run("the set follows RBAC after the allow TTL", func(t *testing.T) {
		s.set(func(s *reviewServer) { s.allow = podsInNamespaces("ns-a") })
		clk.Step(DefaultAllowTTL)
		d, err := a.Authorize(ctx, alice, Request{Verb: "list", Resource: podsGVR, Namespaced: true})
		if err != nil || !d.Equal(Decision{Namespaces: sets.New("ns-a")}) {
			t.Fatalf("decision %v, err %v; want ns-a only", d.Namespaces, err)
		}
	})
}

func TestSARNamespaceListError(t *testing.T) {
	s := newReviewServer()
	a := newTestSAR(t, s, SubjectAccessReviewOptions{Namespaces: NamespaceListerFunc(func(context.Context) ([]string, error) {
		return nil, errors.New("informer down")
	})})
	_, err := a.Authorize(context.Background(), alice, Request{Verb: "list", Resource: podsGVR, Namespaced: true})
	if !isCode(err, http.StatusServiceUnavailable) {
		t.Fatalf("err = %v, want 503", err)
	}
}

func TestSARWithoutNamespaceListerForbidsClusterWide(t *testing.T) {
	s := newReviewServer()
	s.allow = podsInNamespaces("ns-a")
	a := newTestSAR(t, s, SubjectAccessReviewOptions{})
	_, err := a.Authorize(context.Background(), alice, Request{Verb: "list", Resource: podsGVR, Namespaced: true})
	if !isCode(err, http.StatusForbidden) {
		t.Fatalf("err = %v, want 403", err)
	}
}

func TestSARForbiddenMessage(t *testing.T) {
	s := newReviewServer()
	a := newTestSAR(t, s, SubjectAccessReviewOptions{})
	_, err := a.Authorize(context.Background(), alice, Request{Verb: "get", Resource: secretsGVR, Namespaced: true, Namespace: "ns-a", Name: "db"})
	want := `secrets "db" is forbidden: User "alice" cannot get resource "secrets" in API group "" in the namespace "ns-a"`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
	// As the apiserver's, the message never looks like HTML.
	_, err = a.Authorize(context.Background(), &User{Name: "<b>&"}, Request{Verb: "list", Resource: secretsGVR, Namespaced: true, Namespace: "ns-a"})
	want = `secrets is forbidden: User "&lt;b&gt;&amp;" cannot list resource "secrets" in API group "" in the namespace "ns-a"`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
	if _, err := a.Authorize(context.Background(), nil, Request{Verb: "get", Resource: secretsGVR}); !isCode(err, http.StatusUnauthorized) {
		t.Fatalf("nil user: err = %v, want 401", err)
	}
}

// The authorizer's reason follows the message, as the apiserver appends
// it (RBAC names a binding's missing role there), from the cache too.
func TestSARForbiddenMessageCarriesTheReason(t *testing.T) {
	s := newReviewServer()
	s.reason = `RBAC: role.rbac.authorization.k8s.io "gone" not found`
	a := newTestSAR(t, s, SubjectAccessReviewOptions{})
	want := `secrets is forbidden: User "alice" cannot list resource "secrets" in API group "" in the namespace "ns-a": ` + s.reason
	for range 2 {
		_, err := a.Authorize(context.Background(), alice, Request{Verb: "list", Resource: secretsGVR, Namespaced: true, Namespace: "ns-a"})
		if err == nil || err.Error() != want {
			t.Fatalf("err = %v\nwant %s", err, want)
		}
	}
	if n := s.accessReviews.Load(); n != 1 {
		t.Fatalf("%d reviews, want 1 (the second denial is cached)", n)
	}
}

func TestIdentityKeyDistinguishesUsers(t *testing.T) {
	users := []*User{
		{Name: "alice"},
		{Name: "alice", UID: "1"},
		{Name: "alice", Groups: []string{"a"}},
		{Name: "alice", Groups: []string{"a", "b"}},
		{Name: "alice", Groups: []string{"ab"}},
		{Name: "alice", Extra: map[string][]string{"a": {"b"}}},
		{Name: "alice", Extra: map[string][]string{"a": {"b", "c"}}},
		{Name: "alice", Extra: map[string][]string{"ab": nil}},
		{Name: "alicea"},
	}
	seen := map[string]int{}
	for i, u := range users {
		k := identityKey(u)
		if j, dup := seen[k]; dup {
			t.Fatalf("users %d and %d share a key", j, i)
		}
		seen[k] = i
	}
	// Order of groups does not matter.
	if identityKey(&User{Name: "x", Groups: []string{"a", "b"}}) != identityKey(&User{Name: "x", Groups: []string{"b", "a"}}) {
		t.Fatal("group order changes the key")
	}
}

func TestSARNamespaceScan(t *testing.T) {
	s := newReviewServer()
	s.allow = podsInNamespaces("ns-a")
	clk := fakeClock()
	a := newTestSAR(t, s, SubjectAccessReviewOptions{clock: clk, ScanTTL: 30 * time.Second,
		Namespaces: staticNamespaces("ns-a", "ns-b", "ns-c")})
	ctx := context.Background()
	list := Request{Verb: "list", Resource: podsGVR, Namespaced: true}
	decide := func() []string {
		t.Helper()
		d, err := a.Authorize(ctx, alice, list)
		if isCode(err, http.StatusForbidden) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return sets.List(d.Namespaces)
	}
	if got := decide(); !cmp.Equal(got, []string{"ns-a"}) {
		t.Fatalf("first: %v", got)
	}
	scanned := s.accessReviews.Load() // cluster + 3 namespaces

	// Between scans only the cluster scope and ns-a are asked again.
	s.set(func(s *reviewServer) { s.allow = podsInNamespaces("ns-a", "ns-b") })
	clk.Step(DefaultAllowTTL)
	if got := decide(); !cmp.Equal(got, []string{"ns-a"}) {
		t.Fatalf("a grant showed before the next scan: %v", got)
	}
	if n := s.accessReviews.Load() - scanned; n != 2 {
		t.Fatalf("%d reviews between scans, want 2 (cluster scope, ns-a)", n)
	}
	clk.Step(30*time.Second - DefaultAllowTTL)
	if got := decide(); !cmp.Equal(got, []string{"ns-a", "ns-b"}) {
		t.Fatalf("after the scan TTL: %v, want ns-a and ns-b", got)
	}

	// A revocation shows within the allow TTL, scan or not.
	s.set(func(s *reviewServer) { s.allow = podsInNamespaces("ns-b") })
	clk.Step(DefaultAllowTTL)
	if got := decide(); !cmp.Equal(got, []string{"ns-b"}) {
		t.Fatalf("after revoking ns-a: %v", got)
	}
	// Everything revoked: forbidden, and the next call scans again.
	s.set(func(s *reviewServer) { s.allow = podsInNamespaces("ns-c") })
	clk.Step(DefaultAllowTTL)
	if got := decide(); got != nil {
		t.Fatalf("all revoked: %v, want 403", got)
	}
	clk.Step(DefaultDenyTTL)
	if got := decide(); !cmp.Equal(got, []string{"ns-c"}) {
		t.Fatalf("after everything was revoked, the rescan found %v, want ns-c", got)
	}
}

// A list or watch named by its field selector is narrowed like any
// cluster-wide request, each namespace reviewed for that name: a user
// whose Role names one pod in ns-a sees it there only.
func TestSARNarrowsNamedRequests(t *testing.T) {
	s := newReviewServer()
	s.allow = func(spec authorizationv1.SubjectAccessReviewSpec) bool {
		ra := spec.ResourceAttributes
		return spec.User == "alice" && ra.Resource == "pods" && ra.Namespace == "ns-a" && ra.Name == "p-1"
	}
	a := newTestSAR(t, s, SubjectAccessReviewOptions{Namespaces: staticNamespaces("ns-a", "ns-b")})
	ctx := context.Background()
	for _, verb := range []string{"list", "watch"} {
		d, err := a.Authorize(ctx, alice, Request{Verb: verb, Resource: podsGVR, Namespaced: true, Name: "p-1"})
		if err != nil || !d.Equal(Decision{Namespaces: sets.New("ns-a")}) {
			t.Fatalf("%s p-1 cluster-wide: decision %v, err %v; want ns-a only", verb, sets.List(d.Namespaces), err)
		}
	}
	for _, spec := range s.specs {
		if ra := spec.ResourceAttributes; ra.Name != "p-1" && ra.Name != "" {
			t.Fatalf("reviewed %+v for a request named p-1", ra)
		}
	}
	_, err := a.Authorize(ctx, alice, Request{Verb: "list", Resource: podsGVR, Namespaced: true, Name: "p-2"})
	want := `pods "p-2" is forbidden: User "alice" cannot list resource "pods" in API group "" at the cluster scope`
	if !isCode(err, http.StatusForbidden) || err.Error() != want {
		t.Fatalf("p-2: err = %v\nwant %s", err, want)
	}
	if _, err := a.Authorize(ctx, alice, Request{Verb: "list", Resource: podsGVR, Namespaced: true}); !isCode(err, http.StatusForbidden) {
		t.Fatalf("unnamed: err = %v, want 403", err)
	}
}

// objectsAt is an ObjectLocator that finds every name in the namespaces
// given for it, and knows nothing of resources it is not told about.
type objectsAt map[string][]string

func (o objectsAt) NamespacesHolding(_ context.Context, _ schema.GroupVersionResource, name string) ([]string, bool) {
	return o[name], true
}

// TestSARNamedRequestsReuseWhatIsKnown: requests of one name reuse the
// decisions for every name. A user who may list pods in ns-a (all names)
// and pod p-1 in ns-b (resourceNames) lists random names cluster-wide at
// no review each: no object has those names where the user may not list
// everything. A name that exists outside ns-a costs a review where it
// exists; a watch, which may see objects appear anywhere, scans the
// namespaces outside ns-a for the name, once per name. Gets of any name
// in ns-a cost no review per name.
func TestSARNamedRequestsReuseWhatIsKnown(t *testing.T) {
	s := newReviewServer()
	var nss []string
	for i := range 30 {
		nss = append(nss, fmt.Sprintf("ns-%c", 'a'+i))
	}
	s.allow = func(spec authorizationv1.SubjectAccessReviewSpec) bool {
		ra := spec.ResourceAttributes
		return spec.User == "alice" && ra.Resource == "pods" && (ra.Namespace == "ns-a" || ra.Namespace == "ns-b" && ra.Name == "p-1")
	}
	clk := fakeClock()
	a := newTestSAR(t, s, SubjectAccessReviewOptions{clock: clk, Namespaces: staticNamespaces(nss...),
		Objects: objectsAt{"p-1": {"ns-a", "ns-b"}, "p-2": {"ns-c"}}})
	ctx := context.Background()
	named := func(verb, name string) Request {
		return Request{Verb: verb, Resource: podsGVR, Namespaced: true, Name: name}
	}
	decide := func(req Request) ([]string, error) {
		t.Helper()
		d, err := a.Authorize(ctx, alice, req)
		return sets.List(d.Namespaces), err
	}
	reviews := func() int64 { return s.accessReviews.Load() }

	if got, err := decide(named("list", "random-0")); err != nil || !cmp.Equal(got, []string{"ns-a"}) {
		t.Fatalf("random-0: %v, %v; want ns-a", got, err)
	}
	first := reviews() // the cluster scope for every name, and the scan
	if first != 1+30 {
		t.Fatalf("%d reviews for the first list, want 31", first)
	}
	for i := range 100 {
		if got, err := decide(named("list", fmt.Sprint("random-", i))); err != nil || !cmp.Equal(got, []string{"ns-a"}) {
			t.Fatalf("random-%d: %v, %v", i, got, err)
		}
	}
	if n := reviews() - first; n != 0 {
		t.Fatalf("%d reviews for 100 lists of random names, want 0", n)
	}
	// p-1 exists in ns-b too: the name is reviewed cluster-wide, then in
	// ns-b, where resourceNames allow it.
	if got, err := decide(named("list", "p-1")); err != nil || !cmp.Equal(got, []string{"ns-a", "ns-b"}) {
		t.Fatalf("p-1: %v, %v; want ns-a and ns-b", got, err)
	}
	// p-2 exists only in ns-c, where alice may not read it: she lists
	// ns-a, where it is not.
	if got, err := decide(named("list", "p-2")); err != nil || !cmp.Equal(got, []string{"ns-a"}) {
		t.Fatalf("p-2: %v, %v; want ns-a", got, err)
	}
	if n := reviews() - first; n != 4 {
		t.Fatalf("%d reviews for p-1 and p-2, want 4 (each cluster-wide and where it exists)", n)
	}
	// A watch of one name: the namespaces outside ns-a are scanned for
	// it, once.
	before := reviews()
	for range 3 {
		if got, err := decide(named("watch", "p-1")); err != nil || !cmp.Equal(got, []string{"ns-a", "ns-b"}) {
			t.Fatalf("watch p-1: %v, %v", got, err)
		}
	}
	// The first watch of any name costs the watch's own scan for every
	// name (the cluster and 30 namespaces); then the cluster scope for
	// p-1 and the 29 namespaces other than ns-a. The next ones, nothing.
	if n := reviews() - before; n != 31+1+29 {
		t.Fatalf("%d reviews for watches of p-1, want 61", n)
	}
	// Gets of any name in ns-a.
	before = reviews()
	for i := range 50 {
		if _, err := decide(Request{Verb: "get", Resource: podsGVR, Namespaced: true, Namespace: "ns-a", Name: fmt.Sprint("x-", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := reviews() - before; n != 1 {
		t.Fatalf("%d reviews for 50 gets of random names, want 1", n)
	}
	// A user who may read nothing gets 403 for a name wherever it exists,
	// or does not.
	bob := &User{Name: "bob"}
	for _, name := range []string{"p-2", "nowhere"} {
		_, err := a.Authorize(ctx, bob, named("list", name))
		want := fmt.Sprintf(`pods %q is forbidden: User "bob" cannot list resource "pods" in API group "" at the cluster scope`, name)
		if !isCode(err, http.StatusForbidden) || err.Error() != want {
			t.Fatalf("bob, %s: %v\nwant %s", name, err, want)
		}
	}
}
