package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"kubegate/internal/auth"
	"kubegate/internal/config"
	"kubegate/internal/gateway"
	"kubegate/internal/gateway/gatewaytest"
	"kubegate/internal/testenv"
)

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {tier: %s}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: registry.k8s.io/pause:3.10}]
`

// TestPassThroughWrites: kubectl's writes through the gateway reach
// kube-apiserver as the user who sent them: create, apply (client- and
// server-side), patch, label, scale and delete work for a user RBAC
// allows, and a user it does not gets kube-apiserver's own refusal, the
// same words as when asking it directly.
func TestPassThroughWrites(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	grantEdit(t, ns, ptWriter)
	g := startPassGateway(t, nil, gateway.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	as := func(args ...string) ran {
		t.Helper()
		r := g.kubectl(t, "gw-"+ptWriter, "", append([]string{"-n", ns}, args...)...)
		if r.code != 0 {
			t.Fatalf("kubectl %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
		return r
	}
	// kubectl validates what it applies against the gateway's OpenAPI
	// documents (kube-apiserver's), then writes through pass-through.
	applyDeployment := func(tier string, args ...string) ran {
		t.Helper()
		r := g.kubectl(t, "gw-"+ptWriter, strings.Replace(deployment, "%s", tier, 1), append([]string{"-n", ns, "apply", "-f", "-"}, args...)...)
		if r.code != 0 {
			t.Fatalf("kubectl apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		return r
	}

	if r := as("create", "configmap", "cm", "--from-literal=a=1"); r.stdout != "configmap/cm created\n" {
		t.Errorf("create: %q", r.stdout)
	}
	if r := as("patch", "configmap", "cm", "-p", `{"data":{"a":"2"}}`); r.stdout != "configmap/cm patched\n" {
		t.Errorf("patch: %q", r.stdout)
	}
	if r := as("label", "configmap", "cm", "x=y"); r.stdout != "configmap/cm labeled\n" {
		t.Errorf("label: %q", r.stdout)
	}
	cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "cm", metav1.GetOptions{})
	if err != nil || cm.Data["a"] != "2" || cm.Labels["x"] != "y" {
		t.Fatalf("kube-apiserver holds %+v, %v", cm, err)
	}
	if r := applyDeployment("one"); r.stdout != "deployment.apps/web created\n" {
		t.Errorf("apply: %q", r.stdout)
	}
	if r := applyDeployment("two"); r.stdout != "deployment.apps/web configured\n" {
		t.Errorf("apply again: %q", r.stdout)
	}
	if r := applyDeployment("three", "--server-side"); r.stdout != "deployment.apps/web serverside-applied\n" {
		t.Errorf("server-side apply: %q", r.stdout)
	}
	if r := as("scale", "deployment", "web", "--replicas=3"); r.stdout != "deployment.apps/web scaled\n" {
		t.Errorf("scale: %q", r.stdout)
	}
	d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil || *d.Spec.Replicas != 3 || d.Labels["tier"] != "three" {
		t.Fatalf("kube-apiserver holds %+v, %v", d, err)
	}
	// The server-side apply's field manager is kubectl's, not the
	// gateway's: the request is the user's own.
	managers := map[string]bool{}
	for _, f := range d.ManagedFields {
		managers[f.Manager] = true
	}
	if !managers["kubectl"] || managers["kubegate"] {
		t.Errorf("field managers %v: want kubectl's", managers)
	}
	if r := as("delete", "configmap", "cm"); r.stdout != "configmap \"cm\" deleted from "+ns+" namespace\n" && r.stdout != "configmap \"cm\" deleted\n" {
		t.Errorf("delete: %q", r.stdout)
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "cm", metav1.GetOptions{}); err == nil {
		t.Fatal("the ConfigMap is still there")
	}

	// A user without RBAC: kube-apiserver's 403, word for word.
	for _, args := range [][]string{
		{"create", "configmap", "denied", "--from-literal=a=1"},
		{"delete", "deployment", "web"},
		{"scale", "deployment", "web", "--replicas=1"},
		{"patch", "deployment", "web", "-p", `{"spec":{"replicas":2}}`},
	} {
		r := g.both(t, ptNobody, "", append([]string{"-n", ns}, args...)...)
		if r.code == 0 || !strings.Contains(r.stderr, `User "`+ptNobody+`" cannot`) {
			t.Errorf("kubectl %v as %s: exit %d %s", args, ptNobody, r.code, r.stderr)
		}
	}
	d, err = env.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil || *d.Spec.Replicas != 3 {
		t.Fatalf("after the refused writes kube-apiserver holds %+v, %v", d, err)
	}
}

// TestPassThroughSelfReviews: kubectl auth can-i (SelfSubjectAccessReview,
// and SelfSubjectRulesReview for --list) and auth whoami
// (SelfSubjectReview) answer through the gateway exactly as
// kube-apiserver answers them directly: about the caller, never about
// the gateway's own identity (system:masters here). Impersonation headers
// go on, and kube-apiserver authorizes them against the caller.
func TestPassThroughSelfReviews(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	grantEdit(t, ns, ptWriter)
	g := startPassGateway(t, nil, gateway.Options{})
	admin := "kubegate-admin"
	for _, tc := range []struct {
		user string
		args []string
		want string // in stdout
		code int
	}{
		{ptWriter, []string{"auth", "can-i", "create", "configmaps", "-n", ns}, "yes", 0},
		{ptWriter, []string{"auth", "can-i", "create", "pods/exec", "-n", ns}, "yes", 0},
		{ptWriter, []string{"auth", "can-i", "delete", "nodes"}, "no", 1},
		{ptNobody, []string{"auth", "can-i", "create", "configmaps", "-n", ns}, "no", 1},
		{ptWriter, []string{"auth", "can-i", "--list", "-n", ns}, "deployments.apps/scale", 0},
		{ptWriter, []string{"auth", "whoami"}, ptWriter, 0},
		{ptNobody, []string{"auth", "whoami", "-o", "json"}, `"username": "` + ptNobody + `"`, 0},
		{admin, []string{"auth", "whoami", "--as", ptNobody}, ptNobody, 0},
		{admin, []string{"auth", "can-i", "create", "configmaps", "-n", ns, "--as", ptNobody}, "no", 1},
		{ptWriter, []string{"auth", "whoami", "--as", ptNobody}, "", 1},
	} {
		r := g.both(t, tc.user, "", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stdout, tc.want) {
			t.Errorf("kubectl %s as %s: exit %d %q %q, want exit %d with %q", strings.Join(tc.args, " "), tc.user, r.code, r.stdout, r.stderr, tc.code, tc.want)
		}
	}
	// Whoever asks, the answer is never the gateway's identity.
	if r := g.kubectl(t, "gw-"+ptNobody, "", "auth", "whoami"); strings.Contains(r.stdout, admin) || strings.Contains(r.stdout, "system:masters") {
		t.Errorf("whoami through the gateway names the gateway's identity: %s", r.stdout)
	}
}

// TestPassThroughDiscovery: with pass-through, discovery is
// kube-apiserver's, to the byte, but for the proxy subresources, which
// are never passed, the storageVersionHash of the legacy lists (the
// gateway keeps the aggregated form, which has none) and the address in
// /api: every resource keeps its verbs and subresources, all of which are
// served. kubectl api-resources prints what it prints against
// kube-apiserver.
func TestPassThroughDiscovery(t *testing.T) {
	env := testenv.Get(t)
	gw := gatewaytest.Start(t, gatewaytest.Config(), gateway.Options{DiscoveryRefreshInterval: time.Millisecond}).URL()
	hc, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	api := env.Config.Host
	noProxy := func(l *metav1.APIResourceList) {
		rs := []metav1.APIResource{}
		for _, r := range l.APIResources {
			if !strings.HasSuffix(r.Name, "/proxy") {
				r.StorageVersionHash = ""
				rs = append(rs, r)
			}
		}
		l.APIResources = rs
	}
	want := map[string][]byte{}
	for _, path := range []string{"/api", "/apis"} {
		var l apidiscoveryv2.APIGroupDiscoveryList
		exactJSON(t, path+" aggregated", get(t, hc, api+path, aggregatedAccept), &l)
		for i := range l.Items {
			for j := range l.Items[i].Versions {
				rs := l.Items[i].Versions[j].Resources
				for k := range rs {
					rs[k].Subresources = slices.DeleteFunc(rs[k].Subresources, func(s apidiscoveryv2.APISubresourceDiscovery) bool { return s.Subresource == "proxy" })
					if len(rs[k].Subresources) == 0 {
						rs[k].Subresources = nil
					}
				}
			}
		}
		want[path+" aggregated"] = marshalLine(&l)
	}
	var core metav1.APIResourceList
	exactJSON(t, "/api/v1", get(t, hc, api+"/api/v1", ""), &core)
	noProxy(&core)
	want["/api/v1"] = marshalLine(&core)
	var groups metav1.APIGroupList
	exactJSON(t, "/apis", get(t, hc, api+"/apis", ""), &groups)
	for _, g := range groups.Groups {
		for _, v := range g.Versions {
			var l metav1.APIResourceList
			path := "/apis/" + v.GroupVersion
			exactJSON(t, path, get(t, hc, api+path, ""), &l)
			noProxy(&l)
			want[path] = marshalLine(&l)
		}
	}
	if !bytes.Contains(want["/apis/apps/v1"], []byte(`"name":"deployments/scale"`)) || !bytes.Contains(want["/api/v1"], []byte(`"name":"pods/log"`)) ||
		bytes.Contains(want["/api/v1"], []byte(`"name":"pods/proxy"`)) {
		t.Fatalf("the lists to compare lack subresources, or keep proxy: %s", want["/api/v1"])
	}
	token := env.CP.AdminConfig().BearerToken
	for key, w := range want {
		path, accept, _ := strings.Cut(key, " ")
		if accept == "aggregated" {
			accept = aggregatedAccept
		}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, gw+path, nil)
		req.Header.Set("Accept", accept)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Equal(got, w) {
			t.Errorf("%s differs from kube-apiserver's:\ngateway:        %s\nkube-apiserver: %s", key, got, w)
		}
	}

	g := startPassGateway(t, nil, gateway.Options{})
	g.both(t, ptWriter, "", "api-resources", "-o", "wide", "--sort-by", "name")
}

// gatewayOnlyTokens accepts one token that kube-apiserver does not know:
// what a gateway holding a credential of its own would need to hide.
type gatewayOnlyTokens struct{}

const gatewayOnlyToken = "known-to-the-gateway-only"

func (gatewayOnlyTokens) AuthenticateToken(_ context.Context, tok string) (*auth.User, error) {
	if tok == gatewayOnlyToken {
		return &auth.User{Name: "mallory", Groups: []string{"system:authenticated"}}, nil
	}
	return nil, apierrors.NewUnauthorized("unknown token")
}

// TestPassThroughIsTheCaller: a passed request carries the caller's token
// and nothing of the gateway's (system:masters here). A token the gateway
// accepted but kube-apiserver does not is kube-apiserver's 401; a request
// without a token never leaves the gateway. Answers from kube-apiserver
// carry its Audit-Id, the gateway's own never do.
func TestPassThroughIsTheCaller(t *testing.T) {
	env := testenv.Get(t)
	g := startPassGateway(t, func(c *config.Config) { c.Auth.Authz = "always-allow" }, gateway.Options{TokenAuthenticator: gatewayOnlyTokens{}})
	tg := g.targets(t)[0]
	review := func(token string) answer {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, tg.url+"/apis/authentication.k8s.io/v1/selfsubjectreviews",
			strings.NewReader(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := tg.client(t).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, resp.Header.Get("Content-Type"), string(b), resp.Header.Get("Audit-Id") != ""}
	}
	if a := review(gatewayOnlyToken); a.code != http.StatusUnauthorized || !a.audited {
		t.Errorf("a token only the gateway accepts: %+v, want kube-apiserver's 401", a)
	}
	if a := review(""); a.code != http.StatusUnauthorized || a.audited {
		t.Errorf("no token: %+v, want the gateway's 401", a)
	}
	if a := review(env.CP.UserConfig(ptNobody).BearerToken); a.code != http.StatusUnauthorized || a.audited {
		t.Errorf("a cluster token the gateway's authenticator refuses: %+v, want the gateway's 401", a)
	}
}

// TestPassThroughCookie: the dashboard's login cookie is passed on as the
// caller's bearer token, and keeps its guard against cross-site request
// forgery: a request that changes something must come from the gateway's
// own origin (or an allowed one), in Origin.
func TestPassThroughCookie(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	grantEdit(t, ns, ptWriter)
	g := startPassGateway(t, nil, gateway.Options{})
	tg := g.targets(t)[0]
	hc := tg.client(t)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, g.url+"/login", strings.NewReader("token="+env.CP.UserConfig(ptWriter).BearerToken))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", g.url)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(resp.Cookies()) != 1 {
		t.Fatalf("login: %s", resp.Status)
	}
	cookie := resp.Cookies()[0]
	send := func(method, path, origin, body string) answer {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, g.url+path, strings.NewReader(body))
		req.AddCookie(cookie)
		req.Header.Set("Content-Type", "application/json")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, resp.Header.Get("Content-Type"), string(b), resp.Header.Get("Audit-Id") != ""}
	}
	cms := "/api/v1/namespaces/" + ns + "/configmaps"
	cm := func(name string) string {
		return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `"}}`
	}
	for _, tc := range []struct {
		name, method, path, origin, body string
		code                             int
		audited                          bool
	}{
		{"create, same origin", http.MethodPost, cms, g.url, cm("from-the-dashboard"), http.StatusCreated, true},
		{"create, foreign origin", http.MethodPost, cms, "https://evil.example", cm("forged"), http.StatusForbidden, false},
		{"create, no origin", http.MethodPost, cms, "", cm("forged-too"), http.StatusForbidden, false},
		{"delete, no origin", http.MethodDelete, cms + "/from-the-dashboard", "", "", http.StatusForbidden, false},
		{"delete, same origin", http.MethodDelete, cms + "/from-the-dashboard", g.url, "", http.StatusOK, true},
		{"read a subresource, no origin", http.MethodGet, "/api/v1/namespaces/" + ns + "/pods/missing/log", "", "", http.StatusNotFound, true},
	} {
		if a := send(tc.method, tc.path, tc.origin, tc.body); a.code != tc.code || a.audited != tc.audited {
			t.Errorf("%s: %+v, want %d (from kube-apiserver: %v)", tc.name, a, tc.code, tc.audited)
		}
	}
	list, err := env.Client.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list.Items {
		if strings.HasPrefix(c.Name, "forged") {
			t.Errorf("a refused request created %s", c.Name)
		}
	}
}

// TestPassThroughRefused: where a caller's credential cannot be passed on
// (authn token-file or none) or pass-through is turned off, writes are
// 405 and subresources 404, as the gateway has always answered them, with
// a Status saying why; nothing reaches kube-apiserver.
func TestPassThroughRefused(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	grantEdit(t, ns, ptWriter)
	token := env.CP.UserConfig(ptWriter).BearerToken
	tokens := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(tokens, []byte(token+","+ptWriter+",u-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*config.Config)
		why    string
	}{
		{"token-file", func(c *config.Config) {
			c.Auth.Authn, c.Auth.TokenFile, c.Auth.Authz = "token-file", tokens, "always-allow"
		}, "needs --authn=kubernetes: with token-file"},
		{"none", func(c *config.Config) { c.Auth.Authn, c.Auth.Authz = "none", "always-allow" }, "needs --authn=kubernetes: with authn none"},
		{"off", func(c *config.Config) { c.PassThrough.Enabled = false }, "turned off (passThrough.enabled: false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := startPassGateway(t, tc.mutate, gateway.Options{})
			tg := g.targets(t)[0]
			for _, rq := range []struct {
				method, path string
				code         int
				reason       metav1.StatusReason
			}{
				{http.MethodPost, "/api/v1/namespaces/" + ns + "/configmaps", http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed},
				{http.MethodDelete, "/apis/apps/v1/namespaces/" + ns + "/deployments/web", http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed},
				{http.MethodPost, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed},
				{http.MethodGet, "/api/v1/namespaces/" + ns + "/pods/p/log", http.StatusNotFound, metav1.StatusReasonNotFound},
			} {
				a := tg.do(t, rq.method, rq.path, token)
				var st metav1.Status
				_ = json.Unmarshal([]byte(a.body), &st)
				if a.code != rq.code || st.Reason != rq.reason || !strings.Contains(st.Message, tc.why) || a.audited {
					t.Errorf("%s %s: %+v, want the gateway's %d %s saying %q", rq.method, rq.path, a, rq.code, rq.reason, tc.why)
				}
			}
			r := g.kubectl(t, "gw-"+ptWriter, "", "-n", ns, "create", "configmap", "refused")
			if r.code == 0 || !strings.Contains(r.stderr, tc.why) {
				t.Errorf("kubectl create: exit %d %s", r.code, r.stderr)
			}
		})
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(t.Context(), "refused", metav1.GetOptions{}); err == nil {
		t.Error("a refused create reached kube-apiserver")
	}
}

// TestPassThroughBodyLimit: a body over passThrough.maxBodyBytes is
// refused by the gateway with 413 and never reaches kube-apiserver; by
// default the bound is kube-apiserver's own, so that the gateway refuses
// what kube-apiserver would.
func TestPassThroughBodyLimit(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	grantEdit(t, ns, ptWriter)
	token := env.CP.UserConfig(ptWriter).BearerToken
	small := startPassGateway(t, func(c *config.Config) { c.PassThrough.MaxBodyBytes = 64 << 10 }, gateway.Options{})
	byDefault := startPassGateway(t, nil, gateway.Options{})
	post := func(tg target, name string, size int) answer {
		t.Helper()
		body := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `"},"data":{"a":"` + strings.Repeat("x", size) + `"}}`
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, tg.url+"/api/v1/namespaces/"+ns+"/configmaps", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := tg.client(t).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, resp.Header.Get("Content-Type"), string(b), resp.Header.Get("Audit-Id") != ""}
	}
	if a := post(small.targets(t)[0], "small", 32<<10); a.code != http.StatusCreated {
		t.Errorf("32 KiB under a 64 KiB bound: %+v", a)
	}
	if a := post(small.targets(t)[0], "large", 100<<10); a.code != http.StatusRequestEntityTooLarge || a.audited || !strings.Contains(a.body, "65536 bytes") {
		t.Errorf("100 KiB over a 64 KiB bound: %+v, want the gateway's 413", a)
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(t.Context(), "large", metav1.GetOptions{}); err == nil {
		t.Error("the refused ConfigMap reached kube-apiserver")
	}
	tgs := byDefault.targets(t)
	viaGW, direct := post(tgs[0], "huge", 4<<20), post(tgs[1], "huge", 4<<20)
	if viaGW.code != http.StatusRequestEntityTooLarge || direct.code != http.StatusRequestEntityTooLarge || viaGW.audited {
		t.Errorf("4 MiB: through the gateway %+v, from kube-apiserver %+v; want 413 from each, the gateway's own", viaGW, direct)
	}
}

// TestPassThroughReads: reads of resources the cache serves are the
// cache's, even with a parameter it refuses (its 400, not
// kube-apiserver's answer); reads of resources without list and watch,
// which it cannot hold, are kube-apiserver's, as kube-apiserver answers
// them.
func TestPassThroughReads(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	grantEdit(t, ns, ptWriter)
	g := startPassGateway(t, nil, gateway.Options{})
	tgs := g.targets(t)
	admin := env.CP.AdminConfig().BearerToken
	for _, path := range []string{
		"/api/v1/namespaces/" + ns + "/configmaps",
		"/api/v1/namespaces/" + ns + "/configmaps?fieldSelector=data.k%3Dv",
	} {
		if a := tgs[0].do(t, http.MethodGet, path, admin); a.audited {
			t.Errorf("GET %s went to kube-apiserver: %+v", path, a)
		}
	}
	for _, path := range []string{
		"/apis/authentication.k8s.io/v1/selfsubjectreviews", // create only
		"/apis/authorization.k8s.io/v1/namespaces/" + ns + "/localsubjectaccessreviews",
	} {
		viaGW, direct := tgs[0].do(t, http.MethodGet, path, admin), tgs[1].do(t, http.MethodGet, path, admin)
		if viaGW != direct || !viaGW.audited {
			t.Errorf("GET %s:\nthrough the gateway %+v\nfrom kube-apiserver %+v", path, viaGW, direct)
		}
	}
}
