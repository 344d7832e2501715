package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"kubegate/internal/testenv"
)

// TestMetricsReaderRole: the shipped kubegate-metrics-reader ClusterRole
// grants exactly get on /metrics, and a ServiceAccount bound to it
// scrapes a gateway that runs the shipped auth modes, while one without
// it gets 403 and a request without a token 401.
func TestMetricsReaderRole(t *testing.T) {
	env := testenv.Get(t)
	for _, dir := range append([]string{"../deploy"}, overlays...) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			role := convert[rbacv1.ClusterRole](t, findNamed(t, render(t, dir), "ClusterRole", "kubegate-metrics-reader"))
			want := []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}
			if diff := cmp.Diff(want, role.Rules); diff != "" {
				t.Fatalf("rules (-want +got):\n%s", diff)
			}
		})
	}

	objs := render(t, "../deploy")
	if cfg := shippedConfig(t, objs); cfg.Auth.Metrics != "rbac" {
		t.Fatalf("the shipped config serves /metrics with auth.metrics %q, want rbac", cfg.Auth.Metrics)
	}
	role := convert[rbacv1.ClusterRole](t, findNamed(t, objs, "ClusterRole", "kubegate-metrics-reader"))
	ns := env.Namespace(t)
	ctx := t.Context()
	// A copy under a name of the test's own, so that it does not depend on
	// TestManifestsApply.
	role.Name = "kubegate-metrics-reader-" + ns
	role.ResourceVersion = ""
	if _, err := env.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = env.Client.RbacV1().ClusterRoleBindings().Delete(ctx, role.Name, metav1.DeleteOptions{})
		_ = env.Client.RbacV1().ClusterRoles().Delete(ctx, role.Name, metav1.DeleteOptions{})
	})
	prometheus, stranger := saToken(t, env, ns, "prometheus"), saToken(t, env, ns, "stranger")
	gw := startGateway(t, env.Config, gatewayOptions{RBAC: true})

	scrape := func(token string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, gw.url+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	// The binding is in force once the apiserver's RBAC cache has it.
	var code int
	var body string
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		code, body = scrape(prometheus)
		return code == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("prometheus: %d %.300s", code, body)
	}
	code, body = scrape(stranger)
	var st metav1.Status
	_ = json.Unmarshal([]byte(body), &st)
	if want := fmt.Sprintf(`forbidden: User "system:serviceaccount:%s:stranger" cannot get path "/metrics"`, ns); code != http.StatusForbidden || st.Message != want {
		t.Errorf("stranger: %d %s, want 403 %q", code, body, want)
	}
	if code, body := scrape(""); code != http.StatusUnauthorized {
		t.Errorf("no token: %d %s", code, body)
	}
}

// saToken creates a ServiceAccount in ns and returns a token for it.
func saToken(t *testing.T, env *testenv.Env, ns, name string) string {
	t.Helper()
	ctx := t.Context()
	if _, err := env.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := env.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Status.Token
}
