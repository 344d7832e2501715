package auth_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubegate/internal/auth"
	"kubegate/internal/config"
	kgateway "kubegate/internal/gateway"
	"kubegate/internal/gateway/gatewaytest"
	"kubegate/internal/testenv"
	"kubegate/internal/ws"
)

// gateway is the whole serving stack as main wires it: TokenReview,
// SubjectAccessReview narrowed by the namespaces informer, /login, the
// WebSocket server and the HTTP server, against the test apiserver.
type gateway struct {
	base string // http://127.0.0.1:port
}

const (
	e2eRecheck  = 500 * time.Millisecond
	e2eAllowTTL = time.Second
	e2eTokenTTL = time.Second
)

func startGateway(t *testing.T) *gateway {
	t.Helper()
	return startGatewayWith(t, gatewayOptions{log: zaptest.NewLogger(t)})
}

// gatewayOptions varies startGatewayWith; the zero value is the
// end-to-end tests' setup.
type gatewayOptions struct {
	log *zap.Logger
	// tokens replaces TokenReview as the authenticator.
	tokens auth.TokenAuthenticator
	// alwaysAllow replaces SubjectAccessReview as the authorizer.
	alwaysAllow bool
	// recheck is the re-authorization period. Default e2eRecheck.
	recheck time.Duration
	// authorizer, when set, wraps the authorizer.
	authorizer func(auth.Authorizer) auth.Authorizer
}

func startGatewayWith(t testing.TB, o gatewayOptions) *gateway {
	t.Helper()
	cfg := gatewaytest.Config()
	cfg.Auth.RecheckInterval = config.Duration(e2eRecheck)
	if o.recheck != 0 {
		cfg.Auth.RecheckInterval = config.Duration(o.recheck)
	}
	cfg.Auth.TokenSuccessTTL = config.Duration(e2eTokenTTL)
	cfg.Auth.AllowTTL = config.Duration(e2eAllowTTL)
	cfg.Auth.DenyTTL = config.Duration(200 * time.Millisecond)
	if o.alwaysAllow {
		cfg.Auth.Authz = "always-allow"
	}
	// Tests here read /metrics to see streams end; its own authorization
	// is tested in internal/http.
	cfg.Auth.Metrics = "none"
	cfg.WebSocket.MaxSocketsPerClient = 10000
	g := gatewaytest.Start(t, cfg, kgateway.Options{
		Logger: o.log, TokenAuthenticator: o.tokens, WrapAuthorizer: o.authorizer,
	})
	return &gateway{base: g.URL()}
}

type frame struct {
	Type       string          `json:"type"`
	ID         string          `json:"id"`
	Request    string          `json:"request"`
	Ended      bool            `json:"ended"`
	Namespaces []string        `json:"namespaces"`
	Status     *metav1.Status  `json:"status"`
	Object     json.RawMessage `json:"object"`
	Events     []frame         `json:"events"`
}

func (f frame) namespace() string {
	var o struct {
		Metadata struct{ Namespace string } `json:"metadata"`
	}
	_ = json.Unmarshal(f.Object, &o)
	return o.Metadata.Namespace
}

type wsClient struct {
	t       testing.TB
	c       *websocket.Conn
	pending []frame
}

func (g *gateway) dial(t testing.TB, h http.Header, protocols ...string) (*wsClient, *http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(g.base, "http")+"/ws",
		&websocket.DialOptions{Subprotocols: append([]string{ws.Subprotocol}, protocols...), HTTPHeader: h})
	if err != nil {
		return nil, resp, err
	}
	c.SetReadLimit(-1)
	t.Cleanup(func() { c.CloseNow() })
	return &wsClient{t: t, c: c}, resp, nil
}

func bearerProtocol(tok string) string {
	return auth.BearerProtocolPrefix + base64.RawURLEncoding.EncodeToString([]byte(tok))
}

func (c *wsClient) send(v any) {
	c.t.Helper()
	b, _ := json.Marshal(v)
	if err := c.c.Write(c.t.Context(), websocket.MessageText, b); err != nil {
		c.t.Fatal(err)
	}
}

// next returns the next frame (batches unpacked) or fails after timeout.
func (c *wsClient) next(timeout time.Duration) frame {
	c.t.Helper()
	for len(c.pending) == 0 {
		ctx, cancel := context.WithTimeout(c.t.Context(), timeout)
		_, b, err := c.c.Read(ctx)
		cancel()
		if err != nil {
			c.t.Fatalf("read: %v", err)
		}
		var f frame
		if err := json.Unmarshal(b, &f); err != nil {
			c.t.Fatalf("frame %s: %v", b, err)
		}
		if f.Type == "batch" {
			c.pending = append(c.pending, f.Events...)
		} else {
			c.pending = append(c.pending, f)
		}
	}
	f := c.pending[0]
	c.pending = c.pending[1:]
	return f
}

// subscribe subscribes and returns the ack and the snapshot's namespaces.
func (c *wsClient) subscribe(id, resource string) (ack frame, namespaces []string) {
	c.t.Helper()
	c.send(map[string]any{"type": "subscribe", "id": id, "resource": resource})
	ack = c.next(30 * time.Second)
	if ack.Type != "ack" {
		return ack, nil
	}
	for {
		f := c.next(30 * time.Second)
		switch f.Type {
		case "ADDED":
			namespaces = append(namespaces, f.namespace())
		case "END_OF_SNAPSHOT":
			return ack, namespaces
		default:
			c.t.Fatalf("unexpected %s frame in the snapshot", f.Type)
		}
	}
}

func createPod(t *testing.T, ns, name string) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
	if _, err := testenv.Get(t).Client.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func bindPodReader(t *testing.T, ns, user string) string {
	t.Helper()
	return bindPodReaderTo(t, ns, "pod-reader-"+user, rbacv1.Subject{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user})
}

func bindPodReaderTo(t *testing.T, ns, name string, subject rbacv1.Subject) string {
	t.Helper()
	cs := testenv.Get(t).Client
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}}}
	if _, err := cs.RbacV1().Roles(ns).Create(t.Context(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "pod-reader"},
		Subjects: []rbacv1.Subject{subject}}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(t.Context(), rb, metav1.CreateOptions{}); err != nil {
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

func userToken(t *testing.T, name string) string {
	t.Helper()
	return testenv.Get(t).CP.UserConfig(name).BearerToken
}

// waitRBAC waits until the apiserver's authorizer lets user list pods in
// ns: RoleBindings reach it through its informers, a moment after they
// are written.
func waitRBAC(t *testing.T, user, ns string) {
	t.Helper()
	cs := testenv.Get(t).Client
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		rev, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: "watch", Resource: "pods", Namespace: ns}}}, metav1.CreateOptions{})
		return err == nil && rev.Status.Allowed, nil
	})
	if err != nil {
		t.Fatalf("RBAC never allowed %s in %s: %v", user, ns, err)
	}
}

func TestEndToEndWebSocket(t *testing.T) {
	env := testenv.Get(t)
	g := startGateway(t)
	nsA, nsB := env.Namespace(t), env.Namespace(t)
	createPod(t, nsA, "mine")
	createPod(t, nsB, "theirs")
	bindPodReader(t, nsA, "dave")
	waitRBAC(t, "dave", nsA)

	dave, _, err := g.dial(t, nil, bearerProtocol(userToken(t, "dave")))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("cluster-wide pods are only his namespace's", func(t *testing.T) {
		ack, nss := dave.subscribe("pods", "pods")
		if ack.Type != "ack" || !slices.Equal(ack.Namespaces, []string{nsA}) {
			t.Fatalf("ack %+v, want namespaces [%s]", ack, nsA)
		}
		if !slices.Equal(nss, []string{nsA}) {
			t.Fatalf("snapshot objects from namespaces %v, want only %s", nss, nsA)
		}
	})
	t.Run("secrets are forbidden", func(t *testing.T) {
		f, _ := dave.subscribe("secrets", "secrets")
		if f.Type != "error" || f.Status == nil || f.Status.Code != http.StatusForbidden {
			t.Fatalf("frame %+v, want a 403 error", f)
		}
	})

	for _, tc := range []struct {
		name      string
		header    http.Header
		protocols []string
		code      int
	}{
		{"invalid token", http.Header{"Authorization": {"Bearer nope"}}, nil, http.StatusUnauthorized},
		{"malformed subprotocol token", nil, []string{auth.BearerProtocolPrefix + "%%%"}, http.StatusUnauthorized},
		{"duplicate subprotocol tokens", nil, []string{bearerProtocol("a"), bearerProtocol("b")}, http.StatusUnauthorized},
		{"no credentials", nil, nil, http.StatusUnauthorized},
		{"cookie from a foreign origin", http.Header{"Cookie": {auth.CookieName + "=" + userToken(t, "dave")}, "Origin": {"https://evil.example"}}, nil, http.StatusForbidden},
	} {
		t.Run(tc.name+" is refused before the upgrade", func(t *testing.T) {
			_, resp, err := g.dial(t, tc.header, tc.protocols...)
			if err == nil || resp == nil || resp.StatusCode != tc.code {
				t.Fatalf("err %v, response %v; want HTTP %d", err, resp, tc.code)
			}
		})
	}

	t.Run("cookie from login, same origin", func(t *testing.T) {
		resp, err := http.Post(g.base+"/login", "application/x-www-form-urlencoded", strings.NewReader("token="+userToken(t, "dave")))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(resp.Cookies()) != 1 {
			t.Fatalf("login: %d %v", resp.StatusCode, resp.Cookies())
		}
		c, _, err := g.dial(t, http.Header{"Cookie": {resp.Cookies()[0].String()}, "Origin": {g.base}})
		if err != nil {
			t.Fatal(err)
		}
		if ack, _ := c.subscribe("pods", "pods"); ack.Type != "ack" || !slices.Equal(ack.Namespaces, []string{nsA}) {
			t.Fatalf("ack %+v", ack)
		}
	})

	t.Run("token in the URL", func(t *testing.T) {
		resp, err := http.Get(g.base + "/ws?access_token=" + userToken(t, "dave"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("status %d, want 400", resp.StatusCode)
		}
	})
}

// TestEndToEndRevocation deletes a RoleBinding under a live subscription:
// it must end with a 403 within RecheckInterval + AllowTTL (plus the
// apiserver's own RBAC informer lag), and no event may follow.
func TestEndToEndRevocation(t *testing.T) {
	t.Parallel() // slow: waits on the apiserver's caches
	env := testenv.Get(t)
	g := startGateway(t)
	ns := env.Namespace(t)
	rb := bindPodReader(t, ns, "erin")
	waitRBAC(t, "erin", ns)
	erin, _, err := g.dial(t, http.Header{"Authorization": {"Bearer " + userToken(t, "erin")}})
	if err != nil {
		t.Fatal(err)
	}
	if ack, _ := erin.subscribe("pods", "pods"); ack.Type != "ack" || !slices.Equal(ack.Namespaces, []string{ns}) {
		t.Fatalf("ack %+v, want namespaces [%s]", ack, ns)
	}
	createPod(t, ns, "live")
	for f := erin.next(30 * time.Second); f.Type != "ADDED"; f = erin.next(30 * time.Second) {
	}

	revoked := time.Now()
	if err := env.Client.RbacV1().RoleBindings(ns).Delete(t.Context(), rb, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	const bound = e2eRecheck + e2eAllowTTL + 2*time.Second
	f := erin.next(bound + 5*time.Second)
	for f.Type == "MODIFIED" || f.Type == "ADDED" || f.Type == "SYNC" {
		f = erin.next(bound + 5*time.Second) // events from before the revocation
	}
	took := time.Since(revoked)
	if f.Type != "error" || !f.Ended || f.Status == nil || f.Status.Code != http.StatusForbidden {
		t.Fatalf("frame %+v, want an ended 403 error", f)
	}
	if st := f.Status; st.Kind != "Status" || st.APIVersion != "v1" || st.Reason != metav1.StatusReasonForbidden {
		t.Fatalf("error frame's Status %+v, want a complete Status (kind, apiVersion, reason Forbidden)", st)
	}
	if took > bound {
		t.Fatalf("subscription ended %v after the revocation, want at most %v", took, bound)
	}
	t.Logf("revocation took %v", took)

	// No event for the ended subscription follows.
	createPod(t, ns, "after")
	erin.send(map[string]any{"type": "unsubscribe", "id": "nothing"})
	for {
		f := erin.next(10 * time.Second)
		if f.Type == "error" && f.Request == "unsubscribe" {
			break // the socket answered, in order, with nothing in between
		}
		if f.Object != nil {
			t.Fatalf("event after revocation: %+v", f)
		}
	}
}

// TestEndToEndTokenRevoked deletes the ServiceAccount behind a live
// subscription's token: RBAC still allows the account's name, but the
// token is no longer valid, so the subscription must end with 401 once
// the apiserver's token cache (10s) and ours (e2eTokenTTL) let go.
func TestEndToEndTokenRevoked(t *testing.T) {
	t.Parallel() // slow: waits on the apiserver's token cache
	env := testenv.Get(t)
	g := startGateway(t)
	ns := env.Namespace(t)
	ctx := t.Context()
	sa, err := env.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "dash"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bindPodReaderTo(t, ns, "pod-reader-dash", rbacv1.Subject{Kind: "ServiceAccount", Name: sa.Name, Namespace: ns})
	waitRBAC(t, "system:serviceaccount:"+ns+":dash", ns)
	tr, err := env.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := g.dial(t, nil, bearerProtocol(tr.Status.Token))
	if err != nil {
		t.Fatal(err)
	}
	if ack, _ := c.subscribe("pods", "pods"); ack.Type != "ack" || !slices.Equal(ack.Namespaces, []string{ns}) {
		t.Fatalf("ack %+v, want namespaces [%s]", ack, ns)
	}
	if err := env.Client.CoreV1().ServiceAccounts(ns).Delete(ctx, sa.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	const bound = 10*time.Second + e2eTokenTTL + e2eRecheck + 3*time.Second
	deleted := time.Now()
	f := c.next(bound)
	took := time.Since(deleted)
	if f.Type != "error" || !f.Ended || f.Status == nil || f.Status.Code != http.StatusUnauthorized {
		t.Fatalf("frame %+v, want an ended 401 error", f)
	}
	if st := f.Status; st.Kind != "Status" || st.APIVersion != "v1" || st.Reason != metav1.StatusReasonUnauthorized {
		t.Fatalf("error frame's Status %+v, want a complete Status (kind, apiVersion, reason Unauthorized)", st)
	}
	t.Logf("subscription ended %v after the service account was deleted", took)
}

// TestEndToEndREST lists and gets through the REST layer as a user bound
// to one namespace: a cluster-wide list holds that namespace's objects
// only, a Secret is 403, another namespace's pod is 403 whether it exists
// or not, and bad credentials are 401.
func TestEndToEndREST(t *testing.T) {
	env := testenv.Get(t)
	g := startGateway(t)
	nsA, nsB := env.Namespace(t), env.Namespace(t)
	createPod(t, nsA, "mine")
	createPod(t, nsB, "theirs")
	if _, err := env.Client.CoreV1().Secrets(nsA).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bindPodReader(t, nsA, "frank")
	waitRBAC(t, "frank", nsA)
	tok := userToken(t, "frank")

	get := func(path, token string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, g.base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}

	t.Run("cluster-wide list holds his namespace only", func(t *testing.T) {
		code, body := get("/api/v1/pods", tok)
		if code != http.StatusOK {
			t.Fatalf("%d %s", code, body)
		}
		var list corev1.PodList
		if err := json.Unmarshal(body, &list); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range list.Items {
			got = append(got, p.Namespace+"/"+p.Name)
		}
		if !slices.Equal(got, []string{nsA + "/mine"}) {
			t.Fatalf("pods %v, want only %s/mine", got, nsA)
		}
	})
	for _, tc := range []struct {
		name, path, token string
		code              int
	}{
		{"secret in his namespace", "/api/v1/namespaces/" + nsA + "/secrets/db", tok, http.StatusForbidden},
		{"secrets cluster-wide", "/api/v1/secrets", tok, http.StatusForbidden},
		{"pod in another namespace", "/api/v1/namespaces/" + nsB + "/pods/theirs", tok, http.StatusForbidden},
		{"missing pod in another namespace", "/api/v1/namespaces/" + nsB + "/pods/nothing", tok, http.StatusForbidden},
		{"his pod", "/api/v1/namespaces/" + nsA + "/pods/mine", tok, http.StatusOK},
		{"invalid token", "/api/v1/pods", "nope", http.StatusUnauthorized},
		{"no token", "/api/v1/pods", "", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(tc.path, tc.token)
			if code != tc.code {
				t.Fatalf("%d %s, want %d", code, body, tc.code)
			}
			if code != http.StatusOK {
				var st metav1.Status
				if err := json.Unmarshal(body, &st); err != nil || st.Kind != "Status" || int(st.Code) != code {
					t.Fatalf("body is not a matching Status: %s", body)
				}
			}
		})
	}
}

// TestEndToEndRESTWatchRevoked: a REST watch ends with an ERROR event
// carrying 403, then closes, once the watcher's RoleBinding is deleted.
// It watches with client-go, which decodes the ERROR event's object as a
// Status: one without kind and apiVersion reaches it as a 500 "Object
// 'Kind' is missing", not as the 403 it is.
func TestEndToEndRESTWatchRevoked(t *testing.T) {
	t.Parallel() // waits for the re-check
	env := testenv.Get(t)
	g := startGateway(t)
	ns := env.Namespace(t)
	rb := bindPodReader(t, ns, "gina")
	waitRBAC(t, "gina", ns)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: g.base, BearerToken: userToken(t, "gina")})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cs.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()
	createPod(t, ns, "seen")
	for e := range w.ResultChan() {
		if e.Type == watch.Error {
			t.Fatalf("before the revocation: %v", apierrors.FromObject(e.Object))
		}
		if e.Type == watch.Added {
			break
		}
	}
	revoked := time.Now()
	if err := env.Client.RbacV1().RoleBindings(ns).Delete(t.Context(), rb, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var got error
	for e := range w.ResultChan() {
		if e.Type == watch.Error {
			got = apierrors.FromObject(e.Object)
			break
		}
		// events from before the revocation
	}
	if !apierrors.IsForbidden(got) {
		t.Fatalf("watch ended with %v (reason %q), want 403 Forbidden", got, apierrors.ReasonForError(got))
	}
	if took, bound := time.Since(revoked), e2eRecheck+e2eAllowTTL+2*time.Second; took > bound {
		t.Fatalf("watch ended %v after the revocation, want at most %v", took, bound)
	}
	if e, ok := <-w.ResultChan(); ok {
		t.Fatalf("event after the ERROR: %v %T", e.Type, e.Object)
	}
}
