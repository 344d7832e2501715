package auth_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubegate/internal/auth"
	"kubegate/internal/testenv"
)

// allowCounter counts the requests its Authorizer allowed, so a test can
// wait for a stream's re-checks to have passed.
type allowCounter struct {
	auth.Authorizer
	mu      sync.Mutex
	allowed map[auth.Request]int
}

func (a *allowCounter) Authorize(ctx context.Context, u *auth.User, req auth.Request) (auth.Decision, error) {
	d, err := a.Authorizer.Authorize(ctx, u, req)
	if err == nil {
		a.mu.Lock()
		a.allowed[req]++
		a.mu.Unlock()
	}
	return d, err
}

// AuthorizeNonResource passes non-resource paths (/metrics, /openapi) on
// to the authorizer it counts for.
func (a *allowCounter) AuthorizeNonResource(ctx context.Context, u *auth.User, verb, path string) error {
	return a.Authorizer.(auth.NonResourceAuthorizer).AuthorizeNonResource(ctx, u, verb, path)
}

func (a *allowCounter) count(req auth.Request) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.allowed[req]
}

// TestEndToEndResourceNames: a ServiceAccount whose Role grants get, list
// and watch on one config map by name (resourceNames) lists, watches and
// subscribes to it with a metadata.name field selector through the
// gateway, as kube-apiserver lets it, and its streams outlive their
// re-checks; every request the apiserver refuses, the gateway refuses
// with the same Status.
func TestEndToEndResourceNames(t *testing.T) {
	t.Parallel() // waits for re-checks
	env := testenv.Get(t)
	counter := &allowCounter{allowed: map[auth.Request]int{}}
	g := startGatewayWith(t, gatewayOptions{log: zaptest.NewLogger(t),
		authorizer: func(a auth.Authorizer) auth.Authorizer { counter.Authorizer = a; return counter }})
	ns, other := env.Namespace(t), env.Namespace(t)
	ctx := t.Context()
	cms := env.Client.CoreV1().ConfigMaps(ns)
	for _, name := range []string{"cm-1", "cm-2"} {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := env.Client.CoreV1().ConfigMaps(other).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sa, err := env.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "named"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	user := "system:serviceaccount:" + ns + ":" + sa.Name
	rbac := env.Client.RbacV1()
	if _, err := rbac.Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "cm-1-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"},
			ResourceNames: []string{"cm-1"}, Verbs: []string{"get", "list", "watch"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	subject := rbacv1.Subject{Kind: "ServiceAccount", Name: sa.Name, Namespace: ns}
	for _, rb := range []*rbacv1.RoleBinding{
		{ObjectMeta: metav1.ObjectMeta{Name: "cm-1-reader"}, Subjects: []rbacv1.Subject{subject},
			RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "cm-1-reader"}},
		// A binding to a missing Role: RBAC gives a reason with every
		// denial in ns, which the apiserver appends to its 403 message.
		{ObjectMeta: metav1.ObjectMeta{Name: "dangling"}, Subjects: []rbacv1.Subject{subject},
			RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "missing"}},
	} {
		if _, err := rbac.RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, "RBAC to allow watching cm-1", func() bool {
		ctx := t.Context()
		rev, err := env.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Verb: "watch", Resource: "configmaps", Name: "cm-1"}}}, metav1.CreateOptions{})
		return err == nil && rev.Status.Allowed
	})
	tr, err := env.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tok := tr.Status.Token

	apiserverCfg := rest.AnonymousClientConfig(env.Config)
	apiserverCfg.BearerToken = tok
	apiserver, err := rest.HTTPClientFor(apiserverCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(apiserver.CloseIdleConnections)
	get := func(c *http.Client, base, path string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, body
	}
	status := func(body []byte) *metav1.Status {
		t.Helper()
		var st metav1.Status
		if err := json.Unmarshal(body, &st); err != nil || st.Kind != "Status" {
			t.Fatalf("not a Status: %s", body)
		}
		return &st
	}
	itemNames := func(body []byte) []string {
		t.Helper()
		var l corev1.ConfigMapList
		if err := json.Unmarshal(body, &l); err != nil {
			t.Fatalf("not a list: %s", body)
		}
		var out []string
		for _, cm := range l.Items {
			out = append(out, cm.Namespace+"/"+cm.Name)
		}
		return out
	}

	cmPath := "/api/v1/namespaces/" + ns + "/configmaps"
	var watchDenied *metav1.Status // the apiserver's answer to a watch of cm-2
	for _, tc := range []struct {
		name, path string
		code       int
		items      []string // for 200
	}{
		{"named", cmPath + "?fieldSelector=metadata.name%3Dcm-1", 200, []string{ns + "/cm-1"}},
		{"named with ==", cmPath + "?fieldSelector=metadata.name%3D%3Dcm-1", 200, []string{ns + "/cm-1"}},
		{"another name", cmPath + "?fieldSelector=metadata.name%3Dcm-2", 403, nil},
		{"another name, watched", cmPath + "?watch=true&fieldSelector=metadata.name%3Dcm-2", 403, nil},
		{"no name", cmPath, 403, nil},
		{"not another name", cmPath + "?fieldSelector=metadata.name!%3Dcm-2", 403, nil},
		{"malformed selector", cmPath + "?fieldSelector=metadata.name", 403, nil},
		{"malformed limit drops the name", cmPath + "?fieldSelector=metadata.name%3Dcm-1&limit=x", 403, nil},
		{"another name cluster-wide", "/api/v1/configmaps?fieldSelector=metadata.name%3Dcm-2", 403, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(http.DefaultClient, g.base, tc.path)
			wantCode, wantBody := get(apiserver, env.Config.Host, tc.path)
			if code != tc.code || wantCode != tc.code {
				t.Fatalf("gateway %d %s\napiserver %d %s\nwant %d from both", code, body, wantCode, wantBody, tc.code)
			}
			if code == 200 {
				if got, want := itemNames(body), itemNames(wantBody); !slices.Equal(got, tc.items) || !slices.Equal(want, tc.items) {
					t.Fatalf("gateway listed %v, apiserver %v; want %v", got, want, tc.items)
				}
				return
			}
			want := status(wantBody)
			if diff := cmp.Diff(want, status(body)); diff != "" {
				t.Fatalf("Status (-apiserver +gateway):\n%s", diff)
			}
			if tc.name == "another name, watched" {
				watchDenied = want
			}
		})
	}
	t.Run("cluster-wide named list is narrowed to the granting namespace", func(t *testing.T) {
		// The apiserver refuses this (403); the gateway narrows
		// cluster-wide requests to the namespaces that allow them.
		code, body := get(http.DefaultClient, g.base, "/api/v1/configmaps?fieldSelector=metadata.name%3Dcm-1")
		if code != 200 {
			t.Fatalf("%d %s", code, body)
		}
		if got := itemNames(body); !slices.Equal(got, []string{ns + "/cm-1"}) {
			t.Fatalf("listed %v, want %s/cm-1 only", got, ns)
		}
	})

	watchCM1 := auth.Request{Verb: "watch", Resource: corev1.SchemeGroupVersion.WithResource("configmaps"),
		Namespaced: true, Namespace: ns, Name: "cm-1"}
	// rechecked waits until two more watches of cm-1 were allowed: a
	// stream's re-checks, each after the last one's verdict was acted on.
	rechecked := func(from int) {
		t.Helper()
		testenv.Eventually(t, "two re-checks of the watch of cm-1 to be allowed", func() bool {
			return counter.count(watchCM1) >= from+2
		})
	}
	update := func(name, value string) {
		t.Helper()
		if _, err := cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": value}},
			metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("watch", func(t *testing.T) {
		cs, err := kubernetes.NewForConfig(&rest.Config{Host: g.base, BearerToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		before := counter.count(watchCM1)
		w, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=cm-1"})
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		defer w.Stop()
		next := func() (watch.EventType, string) {
			t.Helper()
			e, ok := <-w.ResultChan()
			if !ok {
				t.Fatal("the watch ended")
			}
			if e.Type == watch.Error {
				t.Fatalf("ERROR event: %v", apierrors.FromObject(e.Object))
			}
			return e.Type, e.Object.(*corev1.ConfigMap).Name
		}
		if typ, name := next(); typ != watch.Added || name != "cm-1" {
			t.Fatalf("got %s %s, want ADDED cm-1", typ, name)
		}
		rechecked(before + 1)
		update("cm-2", "watch")
		update("cm-1", "watch")
		if typ, name := next(); typ != watch.Modified || name != "cm-1" {
			t.Fatalf("got %s %s, want MODIFIED cm-1", typ, name)
		}
		// Its re-checks must not count for the subscription's below.
		w.Stop()
		testenv.Eventually(t, "the gateway to end the watch", func() bool {
			_, body := get(http.DefaultClient, g.base, "/metrics")
			return strings.Contains(string(body), `kubegate_rest_watches{resource="configmaps"} 0`)
		})
	})

	t.Run("websocket", func(t *testing.T) {
		c, _, err := g.dial(t, nil, bearerProtocol(tok))
		if err != nil {
			t.Fatal(err)
		}
		c.send(map[string]any{"type": "subscribe", "id": "cm-2", "resource": "configmaps", "namespace": ns,
			"fieldSelector": "metadata.name=cm-2"})
		f := c.next(30 * time.Second)
		if f.Type != "error" || f.ID != "cm-2" {
			t.Fatalf("got %+v, want an error frame", f)
		}
		if diff := cmp.Diff(watchDenied, f.Status); watchDenied == nil || diff != "" {
			t.Fatalf("error frame's Status (-apiserver's watch +gateway):\n%s", diff)
		}

		before := counter.count(watchCM1)
		c.send(map[string]any{"type": "subscribe", "id": "cm-1", "resource": "configmaps", "namespace": ns,
			"fieldSelector": "metadata.name=cm-1"})
		var seen []string
		for f := c.next(30 * time.Second); f.Type != "END_OF_SNAPSHOT"; f = c.next(30 * time.Second) {
			switch f.Type {
			case "ack":
			case "ADDED":
				seen = append(seen, objectName(t, f.Object))
			default:
				t.Fatalf("got %+v, want the ack and a snapshot", f)
			}
		}
		if !slices.Equal(seen, []string{"cm-1"}) {
			t.Fatalf("snapshot %v, want cm-1", seen)
		}
		rechecked(before + 1)
		update("cm-2", "ws")
		update("cm-1", "ws")
		if f := c.next(30 * time.Second); f.Type != "MODIFIED" || objectName(t, f.Object) != "cm-1" {
			t.Fatalf("got %+v, want MODIFIED cm-1", f)
		}
	})
}

func objectName(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var o metav1.PartialObjectMetadata
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatal(fmt.Errorf("object %s: %w", raw, err))
	}
	return o.Name
}
