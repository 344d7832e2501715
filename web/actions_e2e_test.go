package web_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"kubegate/internal/config"
	"kubegate/internal/testenv"
)

// grantActions lets alice, in ns, do what the dashboard's actions do.
func grantActions(t *testing.T, ns string) {
	t.Helper()
	env := testenv.Get(t)
	all := []string{"*"}
	if _, err := env.Client.RbacV1().Roles(ns).Create(t.Context(), &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "dashboard-actions"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps", "pods", "pods/log"}, Verbs: all},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments", "deployments/scale"}, Verbs: all},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.RbacV1().RoleBindings(ns).Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "dashboard-actions"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "dashboard-actions"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "alice"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// visible is the JavaScript condition "the element with this id is shown".
func visible(id string) string {
	return fmt.Sprintf(`!document.getElementById(%q).hidden`, id)
}

// objectStatus is the JavaScript condition "the object view's status line
// reads text (good or bad)".
func objectStatus(kind, text string) string {
	return fmt.Sprintf(`(() => { const s = document.getElementById("object-status"); return s.className === %q && s.textContent === %s; })()`,
		kind, strconv.Quote(text))
}

// open clicks the row of ns/name and waits for its object and actions.
func open(t *testing.T, ctx context.Context, ns, name, action string) {
	t.Helper()
	waitFor(t, ctx, 30*time.Second, "row "+name, row(ns, name)+` !== null`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#rows .row[data-key="`+ns+`/`+name+`"]`))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 10*time.Second, name+" in the object view", fmt.Sprintf(`document.getElementById("object").open &&
		document.getElementById("object-body").textContent.includes("name: %s\n") && %s`, name, visible(action)))
}

func click(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
		t.Fatalf("click %s: %v", sel, err)
	}
}

// TestDashboardActions: with pass-through (authn kubernetes), the object
// view offers what kube-apiserver allows on the resource, and does it as
// the logged-in user: delete a ConfigMap, edit one as YAML (a conflict
// shows kube-apiserver's words), scale a Deployment, read a Pod's logs
// (kube-apiserver's answer, or its error, as it gives them). Without
// pass-through the view offers none of them.
func TestDashboardActions(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	grantActions(t, ns)
	cms := env.Client.CoreV1().ConfigMaps(ns)
	for _, cm := range []*corev1.ConfigMap{configMap("doomed", nil), configMap("edited", nil)} {
		if cm.Name == "edited" {
			// Strings YAML 1.1 would read as numbers or booleans.
			cm.Data = map[string]string{"k": "v", "hex": "0x1F", "flag": "on"}
		}
		if _, err := cms.Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	labels := map[string]string{"app": "web"}
	if _, err := env.Client.AppsV1().Deployments(ns).Create(t.Context(), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.k8s.io/pause:3.10"}}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, node := range map[string]string{"unscheduled": "", "lost": "node-that-is-gone"} {
		if _, err := env.Client.CoreV1().Pods(ns).Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	base := startGateway(t, gatewayOptions{config: func(c *config.Config) { c.Auth.Authn = "kubernetes" }})
	ctx := newBrowser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/#resource=configmaps&namespace="+ns)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 10*time.Second, "token prompt", `document.getElementById("login").open`)
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(`#token`), env.CP.UserConfig("alice").BearerToken),
		chromedp.Click(chromedp.CSS(`#login-form button[type=submit]`)),
	); err != nil {
		t.Fatal(err)
	}

	// Delete.
	open(t, ctx, ns, "doomed", "act-delete")
	click(t, ctx, "#act-delete")
	click(t, ctx, "#delete-yes")
	waitFor(t, ctx, 10*time.Second, "deleted", objectStatus("good", "deleted"))
	if _, err := cms.Get(t.Context(), "doomed", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after the dashboard's delete kube-apiserver says %v", err)
	}
	click(t, ctx, "#object-close")
	waitFor(t, ctx, 5*time.Second, "deleted row gone", row(ns, "doomed")+` === null`)

	// Edit as YAML.
	open(t, ctx, ns, "edited", "act-edit")
	click(t, ctx, "#act-edit")
	waitFor(t, ctx, time.Second, "editor", visible("object-edit")+` && document.getElementById("object-edit").value.includes('hex: "0x1F"')`)
	if err := chromedp.Do(ctx, evalVoid(`(() => { const e = document.getElementById("object-edit"); e.value = e.value.replace('k: "v"', 'k: "edited in the browser"'); })()`)); err != nil {
		t.Fatal(err)
	}
	click(t, ctx, "#edit-save")
	waitFor(t, ctx, 10*time.Second, "saved", `/^saved \(resourceVersion \d+\)$/.test(document.getElementById("object-status").textContent)`)
	cm, err := cms.Get(t.Context(), "edited", metav1.GetOptions{})
	if err != nil || cm.Data["k"] != "edited in the browser" || cm.Data["hex"] != "0x1F" || cm.Data["flag"] != "on" {
		t.Fatalf("after the dashboard's edit kube-apiserver holds %v, %v", cm.Data, err)
	}
	// An edit of a version that has changed since: kube-apiserver's 409.
	click(t, ctx, "#act-edit")
	cm.Data["k"] = "changed meanwhile"
	if _, err := cms.Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	click(t, ctx, "#edit-save")
	waitFor(t, ctx, 10*time.Second, "conflict", `document.getElementById("object-status").className === "bad" &&
		document.getElementById("object-status").textContent.includes("the object has been modified; please apply your changes to the latest version and try again")`)
	click(t, ctx, "#object-close")

	// Scale.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/?view=2#resource=deployments.v1.apps&namespace="+ns)); err != nil {
		t.Fatal(err)
	}
	open(t, ctx, ns, "web", "act-scale")
	click(t, ctx, "#act-scale")
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS("#scale-replicas"), "3")); err != nil {
		t.Fatal(err)
	}
	click(t, ctx, `#scale-form button[type=submit]`)
	waitFor(t, ctx, 10*time.Second, "scaled", objectStatus("good", "scaled to 3"))
	d, err := env.Client.AppsV1().Deployments(ns).Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil || *d.Spec.Replicas != 3 {
		t.Fatalf("after the dashboard's scale kube-apiserver holds %+v, %v", d.Spec.Replicas, err)
	}
	screenshot(t, ctx, "dashboard-scale.png")
	click(t, ctx, "#object-close")

	// Logs: kube-apiserver's answers, as the user would get them from it.
	code, body := directGet(t, "/api/v1/namespaces/"+ns+"/pods/lost/log?container=app&tailLines=1000", env.CP.UserConfig("alice").BearerToken)
	t.Logf("kube-apiserver's answer: %d %s", code, body)
	want := strings.TrimSpace(body)
	var st metav1.Status
	if json.Unmarshal([]byte(body), &st) == nil && st.Message != "" {
		want = st.Message
	}
	if code < 400 || want == "" {
		t.Fatalf("kube-apiserver read the logs of a Pod on a node that does not exist: %d %q", code, body)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/?view=3#resource=pods&namespace="+ns)); err != nil {
		t.Fatal(err)
	}
	open(t, ctx, ns, "lost", "act-logs")
	click(t, ctx, "#act-logs")
	waitFor(t, ctx, 10*time.Second, "kube-apiserver's error in the log view", objectStatus("bad", want))
	screenshot(t, ctx, "dashboard-logs.png")
	click(t, ctx, "#object-close")
	open(t, ctx, ns, "unscheduled", "act-logs")
	click(t, ctx, "#act-logs")
	waitFor(t, ctx, 10*time.Second, "an empty log", objectStatus("good", "no log lines")+` && document.getElementById("object-body").textContent === ""`)

	// Without pass-through (authn none): reads only, no action offered.
	plain := startGateway(t, gatewayOptions{})
	if err := chromedp.Do(ctx, chromedp.Navigate(plain+"/#resource=configmaps&namespace="+ns)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 30*time.Second, "row edited", row(ns, "edited")+` !== null && kubegate.connection === "connected"`)
	// Discovery fills the resources the actions are read from.
	waitFor(t, ctx, 30*time.Second, "discovery", `document.getElementById("resource").options.length > 1`)
	click(t, ctx, `#rows .row[data-key="`+ns+`/edited"]`)
	waitFor(t, ctx, 10*time.Second, "the object without actions", `document.getElementById("object-body").textContent.includes("name: edited\n")`)
	for _, id := range []string{"act-delete", "act-edit", "act-scale", "act-logs"} {
		if shown, err := chromedp.Run(ctx, chromedp.Evaluate[bool](visible(id))); err != nil || shown {
			t.Errorf("%s shown without pass-through (%v)", id, err)
		}
	}
}

// directGet is kube-apiserver's answer to a GET of path with token.
func directGet(t *testing.T, path, token string) (int, string) {
	t.Helper()
	env := testenv.Get(t)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(env.CP.CAData())
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, env.CP.URL()+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
