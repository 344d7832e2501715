package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"kubegate/internal/gateway"
	"kubegate/internal/gateway/gatewaytest"
	"kubegate/internal/testenv"
)

// kubectlRunner runs kubectl against the gateway or, with the same
// arguments, against the apiserver, each with a discovery cache of its
// own.
type kubectlRunner struct {
	t          *testing.T
	bin, dir   string
	gw         string
	kubeconfig string // the apiserver's admin
	runs       int
}

func newKubectl(t *testing.T, env *testenv.Env, gw string) *kubectlRunner {
	t.Helper()
	k := &kubectlRunner{t: t, bin: env.Kubectl(t), dir: t.TempDir(), gw: gw}
	k.kubeconfig = filepath.Join(k.dir, "apiserver-kubeconfig")
	if err := env.CP.WriteKubeconfig(k.kubeconfig); err != nil {
		t.Fatal(err)
	}
	return k
}

// run runs kubectl with args against the gateway (apiserver false) or
// the apiserver, in dir, and returns its combined output and whether it
// succeeded.
func (k *kubectlRunner) run(apiserver bool, dir string, args ...string) (string, bool) {
	k.t.Helper()
	k.runs++
	kubeconfig := filepath.Join(k.dir, "none")
	base := []string{"--cache-dir", filepath.Join(k.dir, fmt.Sprintf("cache-%d", k.runs)), "--request-timeout", "30s"}
	if apiserver {
		kubeconfig = k.kubeconfig
	} else {
		base = append(base, "--server", k.gw)
	}
	ctx, cancel := context.WithTimeout(k.t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.bin, append(base, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "HOME="+k.dir)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		k.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), ctx.Err(), out)
	}
	return string(out), err == nil
}

// same runs kubectl with args against both servers and fails the test
// unless both give the same output and outcome; it returns the output.
func (k *kubectlRunner) same(dir string, args ...string) (string, bool) {
	k.t.Helper()
	want, wantOK := k.run(true, dir, args...)
	got, gotOK := k.run(false, dir, args...)
	if got != want || gotOK != wantOK {
		k.t.Fatalf("kubectl %s:\nthrough the gateway (ok %v):\n%s\nfrom the apiserver (ok %v):\n%s", strings.Join(args, " "), gotOK, got, wantOK, want)
	}
	return got, gotOK
}

// TestKubectlExplainAndValidation: kubectl explain (OpenAPI v3, and v2
// with --output=plaintext-openapiv2) and kubectl's client-side validation
// give the same output through the gateway as from the apiserver. An
// unknown field is refused where kubectl validates on the client (a kind
// whose patch takes no fieldValidation, as the OpenAPI says), and left to
// the server where the OpenAPI says the server validates fields, through
// the gateway as from the apiserver.
func TestKubectlExplainAndValidation(t *testing.T) {
	env := testenv.Get(t)
	cfg := gatewaytest.Config()
	cfg.Auth.Authn, cfg.Auth.Authz = "none", "always-allow"
	k := newKubectl(t, env, gatewaytest.Start(t, cfg, gateway.Options{}).URL())
	dir := t.TempDir()

	out, ok := k.same(dir, "explain", "pods.spec.containers")
	if !ok || !strings.Contains(out, "FIELD: containers <[]Container>") {
		t.Fatalf("explain pods.spec.containers:\n%s", out)
	}
	if out, ok := k.same(dir, "explain", "deployments.spec.strategy", "--output=plaintext-openapiv2"); !ok || !strings.Contains(out, "RESOURCE: strategy <Object>") {
		t.Fatalf("explain --output=plaintext-openapiv2:\n%s", out)
	}

	files := map[string]string{
		"tokenreview.yaml": "apiVersion: authentication.k8s.io/v1\nkind: TokenReview\nspec:\n  token: abc\n  bogus: field\n",
		"configmap.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bogus\n  namespace: default\ndata:\n  a: b\nbogus: field\n",
		"binding.yaml":     "apiVersion: v1\nkind: Binding\nmetadata:\n  name: b\n  namespace: default\ntarget:\n  name: n\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, ok = k.same(dir, "create", "--dry-run=client", "--validate=strict", "-f", "tokenreview.yaml")
	if ok || !strings.Contains(out, `unknown field "bogus" in io.k8s.api.authentication.v1.TokenReviewSpec`) {
		t.Fatalf("create --dry-run=client --validate=strict of a TokenReview with an unknown field:\n%s", out)
	}
	out, ok = k.same(dir, "apply", "--dry-run=client", "--validate=strict", "-f", "tokenreview.yaml")
	if ok || !strings.Contains(out, `unknown field "bogus"`) {
		t.Fatalf("apply --dry-run=client of a TokenReview with an unknown field:\n%s", out)
	}
	// kubectl leaves a ConfigMap's fields to the server, which validates
	// them on a real apply: the client-side dry run accepts it.
	if out, ok := k.same(dir, "apply", "--dry-run=client", "-f", "configmap.yaml"); !ok || !strings.Contains(out, "configmap/bogus created (dry run)") {
		t.Fatalf("apply --dry-run=client of a ConfigMap with an unknown field:\n%s", out)
	}
	// A kind the gateway serves nothing of still maps.
	if out, ok := k.same(dir, "create", "--dry-run=client", "-f", "binding.yaml"); !ok || !strings.Contains(out, "binding/b created (dry run)") {
		t.Fatalf("create --dry-run=client of a Binding:\n%s", out)
	}
}

// TestKubectlExplainNewCRD: a CRD created while the gateway serves (its
// OpenAPI already read) is explained through the gateway as the
// apiserver explains it, once the apiserver publishes its schema and the
// gateway's documents have been revalidated.
func TestKubectlExplainNewCRD(t *testing.T) {
	env := testenv.Get(t)
	cfg := gatewaytest.Config()
	cfg.Auth.Authn, cfg.Auth.Authz = "none", "always-allow"
	k := newKubectl(t, env, gatewaytest.Start(t, cfg, gateway.Options{}).URL())
	dir := t.TempDir()
	if _, ok := k.run(false, dir, "explain", "pods"); !ok {
		t.Fatal("explain pods failed")
	}
	group := fmt.Sprintf("explain%d.kubegate.test", time.Now().UnixNano())
	crd := testenv.NewCRD(group, "widgets", "Widget")
	crd.Object["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any)["schema"] = map[string]any{
		"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{
			"spec": map[string]any{"type": "object", "description": "What a widget is.", "properties": map[string]any{
				"color": map[string]any{"type": "string", "description": "The widget's color, as a word."},
			}},
		}},
	}
	env.CreateCRD(t, crd)
	var apiserver, gw string
	testenv.Eventually(t, "kubectl explain widgets.spec through the gateway as from the apiserver", func() bool {
		var okA, okG bool
		apiserver, okA = k.run(true, dir, "explain", "widgets.spec")
		gw, okG = k.run(false, dir, "explain", "widgets.spec")
		return okA && okG && gw == apiserver
	})
	if !strings.Contains(gw, "The widget's color, as a word.") {
		t.Fatalf("explain widgets.spec:\n%s", gw)
	}
}

// TestOpenAPIIsTheAPIServers: the gateway's OpenAPI documents are the
// apiserver's, to the byte and with its ETag, in JSON and protobuf; an
// If-None-Match naming the ETag gets 304, as from the apiserver; and a
// document asked for by the hash the index lists is served with
// kube-apiserver's headers for an immutable answer.
func TestOpenAPIIsTheAPIServers(t *testing.T) {
	env := testenv.Get(t)
	cfg := gatewaytest.Config()
	cfg.Auth.Authn, cfg.Auth.Authz = "none", "always-allow"
	g := gatewaytest.Start(t, cfg, gateway.Options{})
	hc, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		code                         int
		etag, contentType, cacheCtrl string
		body                         []byte
	}
	fetch := func(c *http.Client, url, accept, inm string) answer {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
		req.Header.Set("User-Agent", "kubegate-test")
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		if inm != "" {
			req.Header.Set("If-None-Match", inm)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		if _, err := b.ReadFrom(resp.Body); err != nil {
			t.Fatal(err)
		}
		return answer{resp.StatusCode, resp.Header.Get("ETag"), resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"), b.Bytes()}
	}
	index := fetch(hc, env.Config.Host+"/openapi/v3", "", "")
	m := regexp.MustCompile(`"(/openapi/v3/api/v1\?hash=[0-9A-F]+)"`).FindSubmatch(index.body)
	if m == nil {
		t.Fatalf("the apiserver's /openapi/v3 lists no api/v1: %.300s", index.body)
	}
	for _, tc := range []struct{ path, accept string }{
		{"/openapi/v2", "application/json"},
		{"/openapi/v2", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"},
		{"/openapi/v3", ""},
		{string(m[1]), "application/json"},
		{string(m[1]), "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"},
	} {
		// Other tests' CRDs change the documents; both servers agree
		// once the apiserver has published them and the gateway
		// revalidated its copy.
		var want, got answer
		testenv.EventuallyShowing(t, tc.path+" "+tc.accept+" as the apiserver's", func() bool {
			want, got = fetch(hc, env.Config.Host+tc.path, tc.accept, ""), fetch(http.DefaultClient, g.URL()+tc.path, tc.accept, "")
			return want.code == 200 && got.code == 200 && bytes.Equal(got.body, want.body) && got.etag == want.etag &&
				got.contentType == want.contentType && got.cacheCtrl == want.cacheCtrl
		}, func() string {
			return fmt.Sprintf("gateway: %d %s %q %q %d bytes; apiserver: %d %s %q %q %d bytes", got.code, got.etag, got.contentType, got.cacheCtrl, len(got.body),
				want.code, want.etag, want.contentType, want.cacheCtrl, len(want.body))
		})
		if got.etag == "" {
			if tc.path == "/openapi/v3" {
				continue // the index has no ETag
			}
			t.Fatalf("%s: no ETag", tc.path)
		}
		if a := fetch(hc, env.Config.Host+tc.path, tc.accept, got.etag); a.code != http.StatusNotModified {
			t.Fatalf("%s from the apiserver with If-None-Match: %d", tc.path, a.code)
		}
		if a := fetch(http.DefaultClient, g.URL()+tc.path, tc.accept, got.etag); a.code != http.StatusNotModified || len(a.body) != 0 || a.etag != got.etag {
			t.Fatalf("%s through the gateway with If-None-Match: %d %q %d bytes, want 304", tc.path, a.code, a.etag, len(a.body))
		}
	}
	if got := testenv.Metric(t, g.Registry(), "kubegate_openapi_cache_bytes"); got <= 0 {
		t.Fatalf("kubegate_openapi_cache_bytes %v", got)
	}
}

// TestOpenAPIForEveryAuthenticatedUser: through a gateway that checks
// tokens with TokenReview and access with SubjectAccessReview, a
// ServiceAccount that no role names reads the OpenAPI documents, as
// kube-apiserver's system:discovery ClusterRole lets every authenticated
// user; a request without a token gets 401.
func TestOpenAPIForEveryAuthenticatedUser(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	g := gatewaytest.Start(t, gatewaytest.Config(), gateway.Options{})
	if _, err := env.Client.CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := env.Client.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), "nobody", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bindings, err := env.Client.RbacV1().ClusterRoleBindings().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bindings.Items {
		for _, s := range b.Subjects {
			if s.Kind == rbacv1.ServiceAccountKind && s.Namespace == ns {
				t.Fatalf("binding %s names the test's ServiceAccount", b.Name)
			}
		}
	}
	for _, path := range []string{"/openapi/v2", "/openapi/v3", "/openapi/v3/api/v1"} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, g.URL()+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok.Status.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s as a ServiceAccount without roles: %s", path, resp.Status)
		}
		if r := do(t, "GET", g.URL()+path); r.code != http.StatusUnauthorized {
			t.Fatalf("%s without a token: %d %s", path, r.code, r.body)
		}
	}
}
