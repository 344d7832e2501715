package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubegate/internal/auth"
	"kubegate/internal/informer"
	"kubegate/internal/livequery/wire"
	"kubegate/internal/testenv"
)

// pathAuthorizer allows non-resource requests to the users in allowed,
// records what it was asked, and answers 503 while unavailable.
type pathAuthorizer struct {
	auth.AlwaysAllow // resource requests
	mu               sync.Mutex
	allowed          map[string]bool
	unavailable      bool
	asked            []string // "user verb path"
}

func (a *pathAuthorizer) AuthorizeNonResource(_ context.Context, u *auth.User, verb, path string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, u.Name+" "+verb+" "+path)
	if a.unavailable {
		return apierrors.NewServiceUnavailable("authorization is unavailable")
	}
	if !a.allowed[u.Name] {
		return apierrors.NewForbidden(schema.GroupResource{}, "", errors.New("User \""+u.Name+"\" cannot "+verb+" path \""+path+"\""))
	}
	return nil
}

// TestMetricsNeedAuthentication: /metrics is authenticated like the API
// and authorized as the non-resource URL /metrics with the request's
// verb; the health endpoints stay open.
func TestMetricsNeedAuthentication(t *testing.T) {
	tokens, err := auth.ParseTokenFile(strings.NewReader("scraper-token,scraper,u1\nreader-token,reader,u2\n"))
	if err != nil {
		t.Fatal(err)
	}
	bearer, err := auth.NewBearer(auth.BearerOptions{Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	az := &pathAuthorizer{allowed: map[string]bool{"scraper": true}}
	gw := startGateway(t, func(o *Options) { o.Authenticator, o.Authorizer = bearer, az })

	r := do(t, "GET", gw+"/metrics")
	if st := r.status(t); r.code != http.StatusUnauthorized || st.Reason != metav1.StatusReasonUnauthorized {
		t.Errorf("no token: %d %s", r.code, r.body)
	}
	if got := r.hdr.Get("WWW-Authenticate"); got != `Bearer realm="kubegate"` {
		t.Errorf("no token: WWW-Authenticate %q", got)
	}
	if r := do(t, "GET", gw+"/metrics", "Authorization", "Bearer wrong"); r.code != http.StatusUnauthorized {
		t.Errorf("bad token: %d %s", r.code, r.body)
	}
	r = do(t, "GET", gw+"/metrics", "Authorization", "Bearer reader-token")
	if st := r.status(t); r.code != http.StatusForbidden || st.Message != `forbidden: User "reader" cannot get path "/metrics"` {
		t.Errorf("reader: %d %s", r.code, r.body)
	}
	r = do(t, "GET", gw+"/metrics", "Authorization", "Bearer scraper-token")
	if r.code != http.StatusOK || !strings.Contains(string(r.body), "kubegate_http_requests_in_flight") {
		t.Errorf("scraper: %d %.200s", r.code, r.body)
	}
	if r := do(t, "POST", gw+"/metrics", "Authorization", "Bearer reader-token"); r.code != http.StatusForbidden {
		t.Errorf("reader POST: %d %s", r.code, r.body)
	}
	az.mu.Lock()
	az.unavailable = true
	az.mu.Unlock()
	r = do(t, "GET", gw+"/metrics", "Authorization", "Bearer scraper-token")
	if st := r.status(t); r.code != http.StatusServiceUnavailable || st.Reason != metav1.StatusReasonServiceUnavailable {
		t.Errorf("authorizer unavailable: %d %s", r.code, r.body)
	}

	az.mu.Lock()
	asked := strings.Join(az.asked, "\n")
	az.mu.Unlock()
	if want := "reader get /metrics\nscraper get /metrics\nreader post /metrics\nscraper get /metrics"; asked != want {
		t.Errorf("asked:\n%s\nwant:\n%s", asked, want)
	}
	for _, p := range []string{"/healthz", "/livez", "/readyz"} {
		if r := do(t, "GET", gw+p); r.code != http.StatusOK {
			t.Errorf("%s without a token: %d %s", p, r.code, r.body)
		}
	}
}

// TestOpenMetrics: with OpenMetrics, /metrics answers without a token,
// and the authorizer need not know non-resource URLs.
func TestOpenMetrics(t *testing.T) {
	tokens, err := auth.ParseTokenFile(strings.NewReader("t,someone,u1\n"))
	if err != nil {
		t.Fatal(err)
	}
	bearer, err := auth.NewBearer(auth.BearerOptions{Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	gw := startGateway(t, func(o *Options) {
		o.Authenticator, o.Authorizer, o.OpenMetrics = bearer, &switchAuthorizer{}, true
	})
	if r := do(t, "GET", gw+"/metrics"); r.code != http.StatusOK || !strings.Contains(string(r.body), "kubegate_http_requests_in_flight") {
		t.Errorf("open metrics: %d %.200s", r.code, r.body)
	}
	if r := do(t, "GET", gw+"/api/v1/configmaps"); r.code != http.StatusUnauthorized {
		t.Errorf("the API is still authenticated: %d %s", r.code, r.body)
	}
}

// An authorizer that cannot answer for /metrics is refused at New rather
// than leaving /metrics open or shut by surprise.
func TestMetricsNeedANonResourceAuthorizer(t *testing.T) {
	mgr, err := informer.New(informer.Options{Config: &rest.Config{Host: "http://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(Options{Manager: mgr, Tables: wire.NewTables(mgr, zap.NewNop(), wire.ViewLimits{}), Authorizer: resourceOnly{}, Listener: nopListener{}})
	if err == nil || !strings.Contains(err.Error(), "cannot authorize /metrics") {
		t.Fatalf("err = %v", err)
	}
}

type resourceOnly struct{}

func (resourceOnly) Authorize(context.Context, *auth.User, auth.Request) (auth.Decision, error) {
	return auth.Decision{}, nil
}

// TestMetricsRBAC runs /metrics against the real apiserver's TokenReview
// and SubjectAccessReview: a ServiceAccount granted get on the
// nonResourceURL /metrics gets the metrics, one without gets
// kube-apiserver's 403, and no token gets 401.
func TestMetricsRBAC(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ctx := t.Context()
	cs := env.Client
	reader := "kubegate-test-metrics-reader-" + ns
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: reader},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: reader},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "scraper", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = cs.RbacV1().ClusterRoleBindings().Delete(ctx, reader, metav1.DeleteOptions{})
		_ = cs.RbacV1().ClusterRoles().Delete(ctx, reader, metav1.DeleteOptions{})
	})
	scraper, other := serviceAccountToken(t, cs, ns, "scraper"), serviceAccountToken(t, cs, ns, "other")

	tr, err := auth.NewTokenReview(auth.TokenReviewOptions{Client: cs, SuccessTTL: -1, FailureTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	bearer, err := auth.NewBearer(auth.BearerOptions{Tokens: tr})
	if err != nil {
		t.Fatal(err)
	}
	gw := startGateway(t, func(o *Options) {
		sar, err := auth.NewSubjectAccessReview(auth.SubjectAccessReviewOptions{Client: cs, AllowTTL: -1, DenyTTL: -1,
			Logger: zaptest.NewLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		o.Authenticator, o.Authorizer = bearer, sar
	})

	// The binding takes effect when the apiserver's RBAC cache has it.
	var last response
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		last = do(t, "GET", gw+"/metrics", "Authorization", "Bearer "+scraper)
		return last.code == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("scraper: %d %.300s", last.code, last.body)
	}
	if !strings.Contains(string(last.body), "kubegate_http_requests_in_flight") {
		t.Errorf("scraper got no metrics: %.300s", last.body)
	}
	r := do(t, "GET", gw+"/metrics", "Authorization", "Bearer "+other)
	want := `forbidden: User "system:serviceaccount:` + ns + `:other" cannot get path "/metrics"`
	if st := r.status(t); r.code != http.StatusForbidden || st.Reason != metav1.StatusReasonForbidden || st.Message != want {
		t.Errorf("other: %d %s, want 403 %q", r.code, r.body, want)
	}
	if r := do(t, "GET", gw+"/metrics"); r.code != http.StatusUnauthorized {
		t.Errorf("no token: %d %s", r.code, r.body)
	}
}

// serviceAccountToken creates a ServiceAccount in ns and returns a token
// for it.
func serviceAccountToken(t *testing.T, cs kubernetes.Interface, ns, name string) string {
	t.Helper()
	ctx := t.Context()
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Status.Token
}
