package ws

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	clocktesting "k8s.io/utils/clock/testing"

	"kubegate/internal/auth"
	"kubegate/internal/namespaces"
	"kubegate/internal/testenv"
)

// fakeAuthorizer answers with a decision the test changes while streams
// run, and records the requests it saw.
type fakeAuthorizer struct {
	mu       sync.Mutex
	decide   func(u *auth.User, req auth.Request) (auth.Decision, error)
	requests []auth.Request
}

func (f *fakeAuthorizer) Authorize(_ context.Context, u *auth.User, req auth.Request) (auth.Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, req)
	return f.decide(u, req)
}

func (f *fakeAuthorizer) set(decide func(u *auth.User, req auth.Request) (auth.Decision, error)) {
	f.mu.Lock()
	f.decide = decide
	f.mu.Unlock()
}

func onlyNamespaces(ns ...string) func(*auth.User, auth.Request) (auth.Decision, error) {
	return func(u *auth.User, req auth.Request) (auth.Decision, error) {
		if u.Name != "alice" || req.Verb != "watch" || req.Resource.Resource != "configmaps" {
			return auth.Decision{}, apierrors.NewForbidden(req.Resource.GroupResource(), "", errForbidden)
		}
		if req.Namespace != "" {
			if slices.Contains(ns, req.Namespace) {
				return auth.Decision{}, nil
			}
			return auth.Decision{}, apierrors.NewForbidden(req.Resource.GroupResource(), "", errForbidden)
		}
		return auth.Decision{Namespaces: sets.New(ns...)}, nil
	}
}

var (
	errForbidden = forbiddenError("RBAC: access denied")
	ackGR        = schema.GroupResource{Resource: "configmaps"}
)

type forbiddenError string

func (e forbiddenError) Error() string { return string(e) }

func TestAuthorizationNarrowsAndIsRechecked(t *testing.T) {
	env := testenv.Get(t)
	ns1, ns2 := env.Namespace(t), env.Namespace(t)
	createCM(t, ns1, "in-1", nil)
	createCM(t, ns2, "in-2", nil)
	authz := &fakeAuthorizer{decide: onlyNamespaces(ns1)}
	clk := &fakeClock{FakeClock: clocktesting.NewFakeClock(time.Now()), realDelays: true}
	ts := startServer(t, startManager(t, env.Config, nil), func(o *Options) {
		o.Authorizer = authz
		o.clock = clk
		o.PingInterval = time.Hour
	})
	c := dialAs(t, ts, "alice")
	// One socket: its ping and re-authorization timers are armed when no
	// re-authorization pass runs.
	recheck := func() { clk.stepArmed(t, 2, ts.opts.RecheckInterval) }

	// Denied outright: another resource.
	c.subscribe("secrets", "secrets", "")
	if f := c.expect("error", "secrets"); f.Status.Code != 403 || f.Request != "subscribe" || f.Ended {
		t.Fatalf("got %v", f)
	}
	// Denied in a namespace alice may not read.
	c.subscribe("other", "configmaps", ns2)
	if f := c.expect("error", "other"); f.Status.Code != 403 {
		t.Fatalf("got %v", f)
	}

	// Cluster-wide: narrowed to ns1, and the ack says so.
	c.subscribe("all", "configmaps", "", func(m map[string]any) { m["labelSelector"] = "!unrelated" })
	ack := c.expect("ack", "all")
	if !slices.Equal(ack.Namespaces, []string{ns1}) {
		t.Fatalf("ack namespaces = %v, want [%s]", ack.Namespaces, ns1)
	}
	names, _ := c.snapshotBody("all")
	if !slices.Equal(names, []string{"in-1"}) {
		t.Fatalf("snapshot = %v, want only ns1's object", names)
	}
	createCM(t, ns2, "hidden", nil)
	createCM(t, ns1, "visible", nil)
	if f := c.expect("ADDED", "all"); f.name() != "visible" {
		t.Fatalf("got %v; an object of ns2 leaked", f)
	}

	// The decision widens: RESET and a snapshot under the new set.
	authz.set(onlyNamespaces(ns1, ns2))
	recheck()
	if f := c.expect("RESET", "all"); f.Reason != "Reauthorized" {
		t.Fatalf("RESET reason %q", f.Reason)
	}
	names, _ = c.snapshotBody("all")
	slices.Sort(names)
	if !slices.Equal(names, []string{"hidden", "in-1", "in-2", "visible"}) {
		t.Fatalf("snapshot after widening = %v", names)
	}

	// Revoked: the subscription ends with 403, the socket stays.
	authz.set(func(*auth.User, auth.Request) (auth.Decision, error) {
		return auth.Decision{}, apierrors.NewForbidden(ackGR, "", errForbidden)
	})
	recheck()
	if f := c.expect("error", "all"); !f.Ended || f.Status.Code != 403 || f.Request != "" {
		t.Fatalf("got %v (ended=%v)", f, f.Ended)
	}
	authz.set(onlyNamespaces(ns1))
	c.subscribe("again", "configmaps", ns1, func(m map[string]any) { m["sendInitialEvents"] = false })
	c.expect("ack", "again")
	createCM(t, ns1, "next", nil)
	if f := c.expect("ADDED", "again"); f.name() != "next" {
		t.Fatalf("got %v", f)
	}

	authz.mu.Lock()
	defer authz.mu.Unlock()
	for _, r := range authz.requests {
		if r.Verb != "watch" || !r.Namespaced {
			t.Fatalf("authorized %+v, want verb watch on a namespaced resource", r)
		}
	}
}

// TestRBACThroughSubjectAccessReview runs subscriptions through the real
// authorizer and the apiserver's RBAC: a user allowed in one namespace
// sees only it, gains a namespace when granted one (RESET and snapshot),
// and loses the subscription when access is revoked.
func TestRBACThroughSubjectAccessReview(t *testing.T) {
	env := testenv.Get(t)
	ns1, ns2 := env.Namespace(t), env.Namespace(t)
	createCM(t, ns1, "one", nil)
	createCM(t, ns2, "two", nil)
	// Namespaces are never emptied in the test apiserver, so each run
	// gets a user of its own.
	user := "user-" + ns1
	t.Cleanup(func() { revokeAll(t, ns1); revokeAll(t, ns2) })
	grant(t, ns1, user)

	m := startManager(t, env.Config, nil)
	sar, err := auth.NewSubjectAccessReview(auth.SubjectAccessReviewOptions{
		Client: env.Client, Namespaces: namespaces.FromInformer(m),
		AllowTTL: -1, DenyTTL: -1, ScanTTL: -1, // every re-check asks the apiserver
	})
	if err != nil {
		t.Fatal(err)
	}
	clk := &fakeClock{FakeClock: clocktesting.NewFakeClock(time.Now()), realDelays: true}
	ts := startServer(t, m, func(o *Options) {
		o.Authorizer = sar
		o.clock = clk
		o.PingInterval = time.Hour
	})
	c := dialAs(t, ts, user)
	// recheck runs a re-authorization pass once the apiserver's RBAC
	// decides as expected: it applies role bindings asynchronously, and
	// a pass that runs too early would see no change.
	recheck := func(ns string, allowed bool) {
		t.Helper()
		testenv.Eventually(t, fmt.Sprintf("RBAC to allow=%t %s in %s", allowed, user, ns), func() bool {
			return canWatch(t, user, ns) == allowed
		})
		clk.stepArmed(t, 2, ts.opts.RecheckInterval)
	}

	c.subscribe("ns2", "configmaps", ns2)
	if f := c.expect("error", "ns2"); f.Status.Code != 403 || f.Status.Reason != "Forbidden" {
		t.Fatalf("got %v", f)
	}
	c.subscribe("all", "configmaps", "")
	if ack := c.expect("ack", "all"); !slices.Equal(ack.Namespaces, []string{ns1}) {
		t.Fatalf("ack namespaces %v, want [%s]", ack.Namespaces, ns1)
	}
	if names, _ := c.snapshotBody("all"); !slices.Equal(names, []string{"one"}) {
		t.Fatalf("snapshot %v", names)
	}

	revoke2 := grant(t, ns2, user)
	recheck(ns2, true)
	if f := c.expect("RESET", "all"); f.Reason != "Reauthorized" {
		t.Fatalf("got %v", f)
	}
	names, _ := c.snapshotBody("all")
	slices.Sort(names)
	if !slices.Equal(names, []string{"one", "two"}) {
		t.Fatalf("snapshot after grant %v", names)
	}

	revoke2()
	recheck(ns2, false)
	if f := c.expect("RESET", "all"); f.Reason != "Reauthorized" {
		t.Fatalf("got %v", f)
	}
	if names, _ := c.snapshotBody("all"); !slices.Equal(names, []string{"one"}) {
		t.Fatalf("snapshot after revoking ns2 %v", names)
	}
	revokeAll(t, ns1)
	recheck(ns1, false)
	if f := c.expect("error", "all"); !f.Ended || f.Status.Code != 403 {
		t.Fatalf("got %v", f)
	}
}

// grant lets user list and watch configmaps in ns and returns a func that
// revokes it.
func grant(t *testing.T, ns, user string) func() {
	t.Helper()
	ctx := context.Background()
	rbac := testenv.Get(t).Client.RbacV1()
	_, err := rbac.Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "cm-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = rbac.RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "cm-reader-" + user},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "cm-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: user}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return func() { revokeAll(t, ns) }
}

// canWatch asks the apiserver whether user may watch configmaps in ns.
func canWatch(t *testing.T, user, ns string) bool {
	t.Helper()
	r, err := testenv.Get(t).Client.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: "watch", Resource: "configmaps",
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r.Status.Allowed
}

func revokeAll(t *testing.T, ns string) {
	t.Helper()
	err := testenv.Get(t).Client.RbacV1().RoleBindings(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// A re-check that cannot be made (the apiserver is unreachable: 503)
// does not end a subscription within RecheckGrace; a denial still does,
// and past the grace the subscription ends with the 503.
func TestRecheckRidesOutAnUnavailableAuthorizer(t *testing.T) {
	env := testenv.Get(t)
	m := startManager(t, env.Config, nil)
	unavailable := func(*auth.User, auth.Request) (auth.Decision, error) {
		return auth.Decision{}, apierrors.NewServiceUnavailable("authorization is unavailable: the apiserver could not be asked; try again")
	}
	requests := func(a *fakeAuthorizer) int {
		a.mu.Lock()
		defer a.mu.Unlock()
		return len(a.requests)
	}
	const interval = time.Second

	// subscribed returns a socket subscribed ("s") to config maps in a new
	// namespace, whose re-checks fail from now on, and its clock.
	subscribed := func(t *testing.T, grace time.Duration) (*client, *fakeAuthorizer, string, *fakeClock) {
		t.Helper()
		ns := env.Namespace(t)
		authz := &fakeAuthorizer{decide: onlyNamespaces(ns)}
		clk := &fakeClock{FakeClock: clocktesting.NewFakeClock(time.Now()), realDelays: true}
		ts := startServer(t, m, func(o *Options) {
			o.Authorizer = authz
			o.clock = clk
			o.PingInterval = time.Hour
			o.RecheckInterval = interval
			o.RecheckGrace = grace
		})
		c := dialAs(t, ts, "alice")
		c.subscribe("s", "configmaps", ns)
		c.snapshot("s")
		authz.set(unavailable)
		return c, authz, ns, clk
	}

	t.Run("within grace", func(t *testing.T) {
		c, authz, ns, clk := subscribed(t, time.Minute)
		before := requests(authz)
		for range 5 {
			clk.stepArmed(t, 2, interval)
		}
		clk.waitArmed(t, 2) // the fifth pass is done
		if n := requests(authz) - before; n != 5 {
			t.Fatalf("%d re-authorizations in 5 intervals, want 5", n)
		}
		createCM(t, ns, "during-outage", nil)
		if f := c.expect("ADDED", "s"); f.name() != "during-outage" {
			t.Fatalf("got %v", f)
		}
		authz.set(func(*auth.User, auth.Request) (auth.Decision, error) {
			return auth.Decision{}, apierrors.NewForbidden(ackGR, "", errForbidden)
		})
		clk.stepArmed(t, 2, interval)
		if f := c.expect("error", "s"); !f.Ended || f.Status.Code != 403 {
			t.Fatalf("got %v, want the denial to end the subscription", f)
		}
	})

	t.Run("past grace", func(t *testing.T) {
		c, _, ns, clk := subscribed(t, time.Minute)
		clk.stepArmed(t, 2, time.Minute-time.Nanosecond) // just within the grace
		clk.waitArmed(t, 2)
		createCM(t, ns, "within-grace", nil)
		if f := c.expect("ADDED", "s"); f.name() != "within-grace" {
			t.Fatalf("got %v, want the subscription to live until the grace has passed", f)
		}
		clk.stepArmed(t, 2, interval)
		if f := c.expect("error", "s"); !f.Ended || f.Status.Code != 503 {
			t.Fatalf("got %v, want the subscription to end with 503 after the grace", f)
		}
	})
}

// TestResourceNamesThroughSubjectAccessReview: a user whose Role lists
// one config map by name (resourceNames) subscribes to it with a
// metadata.name field selector, as kube-apiserver lets them watch it, and
// keeps the subscription through re-checks; another name, no name, or
// metadata.name!= is refused with the apiserver's 403.
func TestResourceNamesThroughSubjectAccessReview(t *testing.T) {
	env := testenv.Get(t)
	ns1, ns2 := env.Namespace(t), env.Namespace(t)
	cm1 := createCM(t, ns1, "cm-1", nil)
	cm2 := createCM(t, ns1, "cm-2", nil)
	createCM(t, ns2, "cm-1", nil)
	user := "named-" + ns1 // bindings outlive a run: a user of its own
	t.Cleanup(func() { revokeAll(t, ns1) })
	rbac := env.Client.RbacV1()
	if _, err := rbac.Roles(ns1).Create(t.Context(), &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "cm-1-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"},
			ResourceNames: []string{"cm-1"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings(ns1).Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "cm-1-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "cm-1-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: user}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "RBAC to let "+user+" watch cm-1", func() bool {
		r, err := env.Client.AuthorizationV1().SubjectAccessReviews().Create(t.Context(), &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns1, Verb: "watch", Resource: "configmaps", Name: "cm-1"}},
		}, metav1.CreateOptions{})
		return err == nil && r.Status.Allowed
	})

	m := startManager(t, env.Config, nil)
	sar, err := auth.NewSubjectAccessReview(auth.SubjectAccessReviewOptions{
		Client: env.Client, Namespaces: namespaces.FromInformer(m),
		AllowTTL: -1, DenyTTL: -1, ScanTTL: -1, // every re-check asks the apiserver
	})
	if err != nil {
		t.Fatal(err)
	}
	clk := &fakeClock{FakeClock: clocktesting.NewFakeClock(time.Now()), realDelays: true}
	ts := startServer(t, m, func(o *Options) {
		o.Authorizer = sar
		o.clock = clk
		o.PingInterval = time.Hour
	})
	c := dialAs(t, ts, user)
	name := func(sel string) func(map[string]any) {
		return func(m map[string]any) { m["fieldSelector"] = sel }
	}

	for _, tc := range []struct{ id, selector, name string }{
		{"cm-2", "metadata.name=cm-2", "cm-2"},
		{"unnamed", "", ""},
		{"not-cm-2", "metadata.name!=cm-2", ""},
	} {
		c.subscribe(tc.id, "configmaps", ns1, name(tc.selector))
		f := c.expect("error", tc.id)
		want := &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
			Code: 403, Reason: metav1.StatusReasonForbidden,
			Message: fmt.Sprintf(`User %q cannot watch resource "configmaps" in API group "" in the namespace %q`, user, ns1),
			Details: &metav1.StatusDetails{Name: tc.name, Kind: "configmaps"}}
		if tc.name != "" {
			want.Message = fmt.Sprintf("configmaps %q is forbidden: %s", tc.name, want.Message)
		} else {
			want.Message = "configmaps is forbidden: " + want.Message
		}
		if diff := cmp.Diff(want, f.Status); diff != "" {
			t.Errorf("%s: Status (-want +got):\n%s", tc.id, diff)
		}
	}

	c.subscribe("named", "configmaps", ns1, name("metadata.name=cm-1"))
	if names, _ := c.snapshot("named"); !slices.Equal(names, []string{"cm-1"}) {
		t.Fatalf("snapshot %v, want cm-1", names)
	}
	// Cluster-wide, narrowed to the namespace where the name is granted.
	c.subscribe("everywhere", "configmaps", "", name("metadata.name==cm-1"))
	if ack := c.expect("ack", "everywhere"); !slices.Equal(ack.Namespaces, []string{ns1}) {
		t.Fatalf("ack namespaces %v, want [%s]", ack.Namespaces, ns1)
	}
	if names, _ := c.snapshotBody("everywhere"); !slices.Equal(names, []string{"cm-1"}) {
		t.Fatalf("snapshot %v, want ns1's cm-1 only", names)
	}

	// Re-checked with the name: both go on.
	clk.stepArmed(t, 2, ts.opts.RecheckInterval)
	clk.waitArmed(t, 2) // the pass is done
	updateCM(t, cm2, "unseen")
	updateCM(t, cm1, "seen")
	got := map[string]string{}
	for range 2 {
		f := c.next()
		if f.Type != "MODIFIED" {
			t.Fatalf("got %v, want MODIFIED cm-1 for each subscription", f)
		}
		got[f.ID] = f.name()
	}
	if want := map[string]string{"named": "cm-1", "everywhere": "cm-1"}; !maps.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}
