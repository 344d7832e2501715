package abuse

import (
	"context"
	"net/http"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubegate/internal/config"
	"kubegate/internal/testenv"
)

// TestReadyzVerbose (issue 30, finding 8): /readyz?verbose names the cached
// resources and their states; object counts only for callers who may
// read /metrics.
func TestReadyzVerbose(t *testing.T) {
	env := testenv.Get(t)
	grantMetrics(t, scraper)
	ns := env.Namespace(t)
	createCM(t, ns, "cm", nil)
	g := startGateway(t, gatewayOptions{config: func(c *config.Config) { c.Cache.Resources = []string{"configmaps"} }})
	c := httpClient("127.0.0.1")
	testenv.Eventually(t, "the gateway to be ready", func() bool {
		return g.do(t, c, http.MethodGet, "/readyz", "", nil, "").code == http.StatusOK
	})
	for _, tc := range []struct {
		who, token string
		counts     bool
	}{
		{"anonymous", "", false},
		{"a bogus token", "bogus", false},
		{bystand + " (reads configmaps, not /metrics)", g.tokens[bystand], false},
		{scraper + " (may get /metrics)", g.tokens[scraper], true},
	} {
		a := g.do(t, c, http.MethodGet, "/readyz?verbose", tc.token, nil, "")
		if a.code != http.StatusOK || !strings.Contains(a.body, "[+]informer configmaps ok") || !strings.HasSuffix(a.body, "ok\n") {
			t.Errorf("%s: %v", tc.who, a)
		}
		if got := strings.Contains(a.body, "objects)"); got != tc.counts {
			t.Errorf("%s sees object counts: %v, want %v:\n%s", tc.who, got, tc.counts, a.body)
		}
	}
}

// grantMetrics lets user get /metrics, as deploy/'s kubegate-metrics-reader.
func grantMetrics(t *testing.T, user string) {
	t.Helper()
	rbac := testenv.Get(t).Client.RbacV1()
	name := "kubegate-abuse-metrics-" + user
	if _, err := rbac.ClusterRoles().Create(t.Context(), &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.ClusterRoleBindings().Create(t.Context(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = rbac.ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{})
		_ = rbac.ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{})
	})
	waitAllowed(t, authorizationv1.SubjectAccessReviewSpec{User: user, NonResourceAttributes: &authorizationv1.NonResourceAttributes{
		Path: "/metrics", Verb: "get"}})
}
