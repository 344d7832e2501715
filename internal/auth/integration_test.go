package auth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubegate/internal/apistatus"
	"kubegate/internal/controlplane"
	"kubegate/internal/informer"
	"kubegate/internal/namespaces"
	"kubegate/internal/testenv"
)

// Static users of the test apiserver. Each test that changes RBAC uses a
// user of its own, so tests do not see each other's bindings.
var testUsers = []controlplane.User{
	{Name: "alice", Groups: []string{"devs"}},
	{Name: "bob"},
	{Name: "carol"},
	{Name: "dave"}, // end-to-end tests
	{Name: "erin"},
	{Name: "frank"},
	{Name: "gina"},
}

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{Users: testUsers}) }

func token(t *testing.T, name string) string {
	t.Helper()
	c := testenv.Get(t).CP.UserConfig(name)
	if c == nil {
		t.Fatalf("no static user %q", name)
	}
	return c.BearerToken
}

func userClient(t *testing.T, name string) kubernetes.Interface {
	t.Helper()
	return kubernetes.NewForConfigOrDie(testenv.Get(t).CP.UserConfig(name))
}

// startManager runs an informer manager with the admin identity until the
// test ends, for the namespace list.
func startManager(t *testing.T) *informer.Manager {
	t.Helper()
	m, err := informer.New(informer.Options{Config: testenv.Get(t).Config, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return m
}

// grantPodReader lets user get, list and watch pods in ns and returns the
// RoleBinding's name.
func grantPodReader(t *testing.T, ns, user string) string {
	t.Helper()
	cs := testenv.Get(t).Client
	ctx := t.Context()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}},
	}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-reader-" + user},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "pod-reader"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}},
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Namespaces are never really deleted without a controller-manager,
	// so a binding left behind would widen the user's access in a later
	// run (-count).
	t.Cleanup(func() {
		err := cs.RbacV1().RoleBindings(ns).Delete(context.Background(), rb.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete RoleBinding: %v", err)
		}
	})
	return rb.Name
}

func TestIntegrationTokenReview(t *testing.T) {
	t.Parallel() // slow: waits on the apiserver's caches
	env := testenv.Get(t)
	a, err := NewTokenReview(TokenReviewOptions{Client: env.Client, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewBearer(BearerOptions{Tokens: a})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("static token", func(t *testing.T) {
		r, _ := http.NewRequest(http.MethodGet, "/api/v1/pods", nil)
		r.Header.Set("Authorization", "Bearer "+token(t, "alice"))
		u, err := b.Authenticate(r)
		if err != nil {
			t.Fatal(err)
		}
		if u.Name != "alice" || !slices.Contains(u.Groups, "devs") || !slices.Contains(u.Groups, "system:authenticated") {
			t.Fatalf("user %+v", u)
		}
	})
	t.Run("subprotocol", func(t *testing.T) {
		r, _ := http.NewRequest(http.MethodGet, "/ws", nil)
		r.Header.Set("Sec-WebSocket-Protocol", "kubegate.v1, "+BearerProtocolPrefix+b64(token(t, "bob")))
		if u, err := b.Authenticate(r); err != nil || u.Name != "bob" {
			t.Fatalf("%v, %v", u, err)
		}
	})
	for name, tok := range map[string]string{
		"invalid": "not-a-token",
		"forged":  "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhZG1pbiJ9.c2lnbmF0dXJl",
	} {
		t.Run(name+" token", func(t *testing.T) {
			r, _ := http.NewRequest(http.MethodGet, "/api/v1/pods", nil)
			r.Header.Set("Authorization", "Bearer "+tok)
			if _, err := b.Authenticate(r); !isCode(err, http.StatusUnauthorized) {
				t.Fatalf("err = %v, want 401", err)
			}
		})
	}

	t.Run("service account token", func(t *testing.T) {
		ns := env.Namespace(t)
		ctx := t.Context()
		sa, err := env.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "dashboard"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tr, err := env.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u, err := a.AuthenticateToken(ctx, tr.Status.Token)
		if err != nil {
			t.Fatal(err)
		}
		if u.Name != "system:serviceaccount:"+ns+":dashboard" || u.UID != string(sa.UID) || !slices.Contains(u.Groups, "system:serviceaccounts:"+ns) {
			t.Fatalf("user %+v", u)
		}

		// A token for another audience is refused when the gateway asks
		// for its own.
		own, err := NewTokenReview(TokenReviewOptions{Client: env.Client, Audiences: []string{"kubegate"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := own.AuthenticateToken(ctx, tr.Status.Token); !isCode(err, http.StatusUnauthorized) {
			t.Fatalf("token for the apiserver's audience: err = %v, want 401", err)
		}
		kg, err := env.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"kubegate"}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if u, err := own.AuthenticateToken(ctx, kg.Status.Token); err != nil || u.Name != "system:serviceaccount:"+ns+":dashboard" {
			t.Fatalf("token for kubegate: %v, %v", u, err)
		}
	})

	t.Run("token of a deleted service account", func(t *testing.T) {
		ns := env.Namespace(t)
		ctx := t.Context()
		sa, err := env.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "gone"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tr, err := env.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uncached, err := NewTokenReview(TokenReviewOptions{Client: env.Client, SuccessTTL: -1, FailureTTL: -1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := uncached.AuthenticateToken(ctx, tr.Status.Token); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.CoreV1().ServiceAccounts(ns).Delete(ctx, sa.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// The apiserver keeps authenticated tokens in a cache of its own
		// (10s), so the refusal comes only after that.
		testenv.Eventually(t, "token refused", func() bool {
			ctx := t.Context()
			_, err := uncached.AuthenticateToken(ctx, tr.Status.Token)
			return isCode(err, http.StatusUnauthorized)
		})
	})
}

// TestIntegrationReviewsUnavailable checks that when the apiserver will
// not answer a review (here: the gateway's identity may not create them)
// requests are refused, never let through.
func TestIntegrationReviewsUnavailable(t *testing.T) {
	weak := userClient(t, "carol") // no RBAC at all
	a, err := NewTokenReview(TokenReviewOptions{Client: weak})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.AuthenticateToken(t.Context(), token(t, "alice"))
	if !errors.Is(err, ErrReviewFailed) {
		t.Fatalf("TokenReview without permission: err = %v, want ErrReviewFailed", err)
	}
	// A request whose token could not be checked is refused with 503
	// and Retry-After (the token may be fine: clients try again), and so
	// is a login.
	b := must[*Bearer](t)(NewBearer(BearerOptions{Tokens: a}))
	r, _ := http.NewRequest(http.MethodGet, "/api/v1/pods", nil)
	r.Header.Set("Authorization", "Bearer "+token(t, "alice"))
	if _, err := b.Authenticate(r); !isCode(err, http.StatusServiceUnavailable) || apistatus.FromError(err).Details.RetryAfterSeconds != 1 {
		t.Fatalf("request with a token that could not be checked: err = %v, want 503 with Retry-After 1", err)
	}
	l := must[*Login](t)(NewLogin(LoginOptions{Tokens: a}))
	w := postLogin(l, "token="+token(t, "alice"), "application/x-www-form-urlencoded", nil)
	var st metav1.Status
	if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil || w.Code != http.StatusServiceUnavailable || st.Code != http.StatusServiceUnavailable ||
		st.Kind != "Status" || st.Message == "" || w.Header().Get("Retry-After") != "1" || len(w.Result().Cookies()) != 0 {
		t.Fatalf("login with a token that could not be checked: %d %s (Retry-After %q)", w.Code, w.Body, w.Header().Get("Retry-After"))
	}
	z, err := NewSubjectAccessReview(SubjectAccessReviewOptions{Client: weak})
	if err != nil {
		t.Fatal(err)
	}
	admin := &User{Name: controlplane.AdminUser, Groups: []string{"system:masters", "system:authenticated"}}
	if _, err := z.Authorize(t.Context(), admin, Request{Verb: "list", Resource: podsGVR, Namespaced: true}); !isCode(err, http.StatusServiceUnavailable) {
		t.Fatalf("SubjectAccessReview without permission: err = %v, want 503", err)
	}

	// Nothing listening at all.
	down := kubernetes.NewForConfigOrDie(&rest.Config{Host: "http://127.0.0.1:1", Timeout: 2 * time.Second})
	z, _ = NewSubjectAccessReview(SubjectAccessReviewOptions{Client: down})
	if _, err := z.Authorize(t.Context(), admin, Request{Verb: "get", Resource: podsGVR, Namespaced: true, Namespace: "x", Name: "y"}); !isCode(err, http.StatusServiceUnavailable) {
		t.Fatalf("apiserver down: err = %v, want 503", err)
	}
}

func TestIntegrationRBAC(t *testing.T) {
	env := testenv.Get(t)
	nsA, nsB := env.Namespace(t), env.Namespace(t)
	grantPodReader(t, nsA, "alice")
	a, err := NewSubjectAccessReview(SubjectAccessReviewOptions{
		Client: env.Client, Namespaces: namespaces.FromInformer(startManager(t)),
		AllowTTL: -1, DenyTTL: -1, // see RBAC changes at once; caching has unit tests
		Logger: zaptest.NewLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := NewTokenReview(TokenReviewOptions{Client: env.Client})
	if err != nil {
		t.Fatal(err)
	}
	alice, err := tr.AuthenticateToken(t.Context(), token(t, "alice"))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("cluster-wide list is narrowed to her namespace", func(t *testing.T) {
		var last Decision
		testenv.Eventually(t, "decision {"+nsA+"}", func() bool {
			ctx := t.Context()
			d, err := a.Authorize(ctx, alice, Request{Verb: "list", Resource: podsGVR, Namespaced: true})
			last = d
			return err == nil && d.Equal(Decision{Namespaces: sets.New(nsA)})
		})
		if last.Namespaces.Has(nsB) {
			t.Fatal("nsB allowed")
		}
		d, err := a.Authorize(t.Context(), alice, Request{Verb: "watch", Resource: podsGVR, Namespaced: true})
		if err != nil || !d.Equal(Decision{Namespaces: sets.New(nsA)}) {
			t.Fatalf("watch: %v, %v", d.Namespaces, err)
		}
	})
	t.Run("her namespace is allowed as asked", func(t *testing.T) {
		d, err := a.Authorize(t.Context(), alice, Request{Verb: "list", Resource: podsGVR, Namespaced: true, Namespace: nsA})
		if err != nil || d.Namespaces != nil {
			t.Fatalf("%v, %v", d.Namespaces, err)
		}
	})
	for _, tc := range []struct {
		name string
		req  Request
	}{
		{"pods elsewhere", Request{Verb: "get", Resource: podsGVR, Namespaced: true, Namespace: nsB, Name: "p"}},
		{"secret in her namespace", Request{Verb: "get", Resource: secretsGVR, Namespaced: true, Namespace: nsA, Name: "db"}},
		{"secrets cluster-wide", Request{Verb: "list", Resource: secretsGVR, Namespaced: true}},
		{"watch secrets", Request{Verb: "watch", Resource: secretsGVR, Namespaced: true, Namespace: nsA}},
	} {
		t.Run(tc.name+" is forbidden", func(t *testing.T) {
			if _, err := a.Authorize(t.Context(), alice, tc.req); !isCode(err, http.StatusForbidden) {
				t.Fatalf("err = %v, want 403", err)
			}
		})
	}
	t.Run("the admin is not narrowed", func(t *testing.T) {
		admin, err := tr.AuthenticateToken(t.Context(), env.Config.BearerToken)
		if err != nil {
			t.Fatal(err)
		}
		d, err := a.Authorize(t.Context(), admin, Request{Verb: "list", Resource: secretsGVR, Namespaced: true})
		if err != nil || d.Namespaces != nil {
			t.Fatalf("%v, %v", d.Namespaces, err)
		}
	})
}

// TestIntegrationRevocation deletes a RoleBinding and checks the decision
// flips within the allow TTL (plus the apiserver's own RBAC cache lag).
func TestIntegrationRevocation(t *testing.T) {
	t.Parallel() // slow: waits on the apiserver's caches
	env := testenv.Get(t)
	ns := env.Namespace(t)
	rb := grantPodReader(t, ns, "bob")
	const allowTTL = 2 * time.Second
	a, err := NewSubjectAccessReview(SubjectAccessReviewOptions{
		Client: env.Client, Namespaces: namespaces.FromInformer(startManager(t)),
		AllowTTL: allowTTL, DenyTTL: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	bob := &User{Name: "bob", UID: "bob", Groups: []string{"system:authenticated"}}
	get := Request{Verb: "get", Resource: podsGVR, Namespaced: true, Namespace: ns, Name: "p"}
	list := Request{Verb: "list", Resource: podsGVR, Namespaced: true}
	testenv.Eventually(t, "bob allowed", func() bool {
		ctx := t.Context()
		_, gerr := a.Authorize(ctx, bob, get)
		d, lerr := a.Authorize(ctx, bob, list)
		return gerr == nil && lerr == nil && d.Namespaces.Has(ns)
	})

	revoked := time.Now()
	if err := env.Client.RbacV1().RoleBindings(ns).Delete(t.Context(), rb, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "bob denied", func() bool {
		ctx := t.Context()
		_, gerr := a.Authorize(ctx, bob, get)
		_, lerr := a.Authorize(ctx, bob, list)
		return isCode(gerr, http.StatusForbidden) && isCode(lerr, http.StatusForbidden)
	})
	// The apiserver's RBAC authorizer follows RoleBindings through an
	// informer; allow it a second on a busy machine.
	if took := time.Since(revoked); took > allowTTL+time.Second {
		t.Fatalf("revocation took %v, want at most the allow TTL (%v) + 1s", took, allowTTL)
	}
}
