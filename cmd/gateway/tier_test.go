package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"kubegate/internal/auth"
	"kubegate/internal/testenv"
)

// tierUser is the second tier's identity towards the first: a static
// user of the apiserver, which the first tier authenticates with
// TokenReview and authorizes with SubjectAccessReview like any reader.
const tierUser = "tier-b"

// grantTier lets tierUser list and watch the resources of group (and
// namespaces) cluster-wide, as a second tier's identity must be allowed
// to.
func grantTier(t *testing.T, env *testenv.Env, group string, resources ...string) {
	t.Helper()
	ctx := context.Background()
	rbac := env.Client.RbacV1()
	role, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "kubegate-tier-"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{group}, Resources: resources, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list", "watch"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	binding, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: tierUser}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = rbac.ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
		_ = rbac.ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
}

func tierToken(t *testing.T, env *testenv.Env) string {
	t.Helper()
	for _, u := range env.CP.Users() {
		if u.Name == tierUser {
			return u.Token
		}
	}
	t.Fatalf("no static user %s: TestMain must add it", tierUser)
	return ""
}

// gatewayKubeconfig writes a kubeconfig that reads from the server at
// url (with CA certificate ca) with token.
func gatewayKubeconfig(t *testing.T, url string, ca []byte, token string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["upstream"] = &clientcmdapi.Cluster{Server: url, CertificateAuthorityData: ca}
	cfg.AuthInfos["tier"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["upstream"] = &clientcmdapi.Context{Cluster: "upstream", AuthInfo: "tier"}
	cfg.CurrentContext = "upstream"
	path := filepath.Join(t.TempDir(), "upstream-kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitReady waits for g, serving at base, to be ready; it fails at once
// if g exits.
func waitReady(t *testing.T, ctx context.Context, g *gatewayProcess, base string) {
	t.Helper()
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		select {
		case err := <-g.done:
			g.done <- err // for Cleanup
			return false, fmt.Errorf("exited: %v", err)
		default:
		}
		code, _, err := get(ctx, base+"/readyz")
		return err == nil && code == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("gateway at %s never became ready: %v", base, err)
	}
}

// switchProxy serves a gateway of the first tier over HTTPS, as an
// ingress or a service mesh would: client-go sends a kubeconfig's
// credentials only to an https server. A test can hold requests (they
// wait until released) and point the proxy at another gateway, as a
// Service does while its Pods are replaced.
type switchProxy struct {
	srv *httptest.Server
	ca  []byte // PEM
	// mu guards target, open and requests.
	mu     sync.Mutex
	target *url.URL
	open   chan struct{} // closed while requests pass
	// requests are the URLs requested, in order.
	requests []string
}

func newSwitchProxy(t *testing.T, base string) *switchProxy {
	t.Helper()
	p := &switchProxy{open: make(chan struct{})}
	close(p.open)
	p.point(t, base)
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			p.mu.Lock()
			defer p.mu.Unlock()
			r.SetURL(p.target)
		},
		// Streams cut by a test are not news.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		open := p.open
		p.requests = append(p.requests, r.URL.String())
		p.mu.Unlock()
		select {
		case <-open:
		case <-r.Context().Done():
			return
		}
		rp.ServeHTTP(w, r)
	}))
	p.srv.StartTLS()
	t.Cleanup(func() {
		p.release()
		p.srv.CloseClientConnections() // watches would hold Close up
		p.srv.Close()
	})
	p.ca = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.srv.Certificate().Raw})
	return p
}

// point sends requests to the gateway at base from now on.
func (p *switchProxy) point(t *testing.T, base string) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = u
}

func (p *switchProxy) requested() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.requests...)
}

// hold makes new requests wait until release.
func (p *switchProxy) hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		p.open = make(chan struct{})
	default:
	}
}

func (p *switchProxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
	default:
		close(p.open)
	}
}

// chain is a two-tier deployment: the first tier reads the apiserver
// with the admin's kubeconfig and checks its callers with TokenReview
// and SubjectAccessReview; the second reads the first, through a TLS
// proxy, as tierUser.
type chain struct {
	apiserverKubeconfig string // the admin's
	first, second       *gatewayProcess
	proxy               *switchProxy // in front of first
	firstBase           string
	secondBase          string
	// upstreamKubeconfig reads from the first tier as tierUser.
	upstreamKubeconfig string
	// firstArgs are the first tier's flags besides its kubeconfig, listen
	// address, resources and log format.
	firstArgs []string
}

// startFirstTier starts the first tier with args, waits for it to be
// ready, and returns the chain for a second tier to be started on.
func startFirstTier(t *testing.T, ctx context.Context, env *testenv.Env, args ...string) *chain {
	t.Helper()
	c := &chain{apiserverKubeconfig: filepath.Join(t.TempDir(), "kubeconfig"), firstArgs: args}
	if err := env.CP.WriteKubeconfig(c.apiserverKubeconfig); err != nil {
		t.Fatal(err)
	}
	c.first, c.firstBase = c.startFirst(t, ctx)
	c.proxy = newSwitchProxy(t, c.firstBase)
	c.upstreamKubeconfig = gatewayKubeconfig(t, c.proxy.srv.URL, c.proxy.ca, tierToken(t, env))
	return c
}

// startFirst starts a gateway of the first tier and waits for it to be
// ready.
func (c *chain) startFirst(t *testing.T, ctx context.Context) (*gatewayProcess, string) {
	t.Helper()
	addr := freeAddr(t)
	g := startGateway(t, gatewayBinary(t), append([]string{"--kubeconfig", c.apiserverKubeconfig, "--listen", addr,
		"--resources", "configmaps", "--log-format", "json"}, c.firstArgs...)...)
	waitReady(t, ctx, g, "http://"+addr)
	return g, "http://" + addr
}

// startSecondTier starts a gateway reading from the first tier with args
// added, and waits for it to be ready.
func (c *chain) startSecondTier(t *testing.T, ctx context.Context, args ...string) {
	t.Helper()
	addr := freeAddr(t)
	c.secondBase = "http://" + addr
	c.second = startGateway(t, gatewayBinary(t), append([]string{"--kubeconfig", c.upstreamKubeconfig, "--listen", addr,
		"--log-format", "json"}, args...)...)
	waitReady(t, ctx, c.second, c.secondBase)
}

// TestTierUpstreamWithoutAuthorizationAPI: a gateway whose upstream is
// another kubegate that passes nothing through (so serves no
// SelfSubjectAccessReview: POST is not allowed there) serves lists,
// instead of answering every one with the upstream's 405 to its access
// check. A resource the first tier does not let the second read is the
// second tier's problem (503 naming its identity's RBAC), not a 403 or
// 405 for the caller. The missing reviews are logged once, not per
// resource.
func TestTierUpstreamWithoutAuthorizationAPI(t *testing.T) {
	env := testenv.Get(t)
	grantTier(t, env, "", "configmaps")
	ns := env.Namespace(t)
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(context.Background(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "through-two-tiers"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := startFirstTier(t, ctx, env, "--pass-through=false")
	tokens := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(tokens, []byte("second-tier-reader,reader,reader-1,\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Resources start on first use, so the access check runs for the
	// reader's requests.
	c.startSecondTier(t, ctx, "--authn=token-file", "--token-file", tokens, "--authz=always-allow")

	read := func(path string) (int, metav1.Status, []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.secondBase+path, nil)
		req.Header.Set("Authorization", "Bearer second-tier-reader")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		var st metav1.Status
		_ = json.Unmarshal(buf.Bytes(), &st)
		return resp.StatusCode, st, buf.Bytes()
	}
	code, _, body := read("/api/v1/namespaces/" + ns + "/configmaps")
	if code != http.StatusOK || !strings.Contains(string(body), `"name":"through-two-tiers"`) {
		t.Fatalf("list through two tiers: %d %s", code, body)
	}
	code, st, body := read("/api/v1/secrets")
	if code != http.StatusServiceUnavailable || st.Reason != metav1.StatusReasonServiceUnavailable ||
		!strings.Contains(st.Message, "may not list secrets cluster-wide") {
		t.Fatalf("list of a resource the first tier refuses the second: %d %s, want 503 naming the gateway's access", code, body)
	}
	if n := strings.Count(c.second.out.String(), "does not serve SelfSubjectAccessReview"); n != 1 {
		t.Fatalf("%d log lines about the upstream's missing SelfSubjectAccessReview, want 1:\n%s", n, c.second.out.String())
	}
}

// TestTierReviewsNeedTheAPIServer: a second tier whose token or access
// reviews would go to a first tier that passes nothing through (so
// serves only reads) does not start: every caller would be refused. The
// error names the flag to set. Nor does one whose upstream is plain
// HTTP, to which client-go sends no credentials: the error says so.
func TestTierReviewsNeedTheAPIServer(t *testing.T) {
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := startFirstTier(t, ctx, env, "--pass-through=false")
	tokens := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(tokens, []byte("t,reader,reader-1,\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	plain := gatewayKubeconfig(t, c.firstBase, nil, tierToken(t, env))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		// Not a review, but the first thing a second tier meets: its
		// upstream must be https for the kubeconfig's token to be sent.
		{"plain HTTP upstream", []string{"--kubeconfig", plain}, "serve the upstream over https"},
		{"token reviews", nil, "point --authentication-kubeconfig at the kube-apiserver"},
		{"access reviews", []string{"--authn=token-file", "--token-file", tokens}, "point --authorization-kubeconfig at the kube-apiserver"},
		{"access reviews, token reviews elsewhere", []string{"--authentication-kubeconfig", c.apiserverKubeconfig},
			"point --authorization-kubeconfig at the kube-apiserver"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, gatewayBinary(t), append([]string{"--kubeconfig", c.upstreamKubeconfig,
				"--listen", freeAddr(t)}, tc.args...)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			_ = cmd.Run()
			if ctx.Err() != nil {
				t.Fatalf("the gateway started with its reviews pointed at a kubegate:\n%s", stderr.String())
			}
			if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(lastLine(stderr.String()), tc.want) {
				t.Fatalf("exit %d, last line %q, want 1 and %q", code, lastLine(stderr.String()), tc.want)
			}
		})
	}
}

// TestTierReviewsThroughPassThrough: with pass-through (the default),
// the first tier passes the second tier's TokenReviews,
// SubjectAccessReviews and access checks on to kube-apiserver with the
// second tier's own token: a second tier needs no kubeconfig of the
// apiserver's for them, only the rights to make them (what
// system:auth-delegator grants), and its access check is kube-apiserver's
// answer for its identity instead of being skipped.
func TestTierReviewsThroughPassThrough(t *testing.T) {
	env := testenv.Get(t)
	grantTier(t, env, "", "configmaps")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	binding, err := env.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "kubegate-tier-reviews-"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: tierUser}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	ns := env.Namespace(t)
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(ctx,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "reviewed-through-two-tiers"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := startFirstTier(t, ctx, env)
	c.startSecondTier(t, ctx) // authn kubernetes, authz rbac, no review kubeconfigs
	get := func(path, token string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.secondBase+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	token := tierToken(t, env)
	if code, body := get("/api/v1/namespaces/"+ns+"/configmaps", token); code != http.StatusOK || !strings.Contains(string(body), "reviewed-through-two-tiers") {
		t.Fatalf("list through two tiers, reviewed through the first: %d %s", code, body)
	}
	if code, body := get("/api/v1/namespaces/"+ns+"/configmaps", "not-a-token"); code != http.StatusUnauthorized {
		t.Fatalf("a bad token: %d %s", code, body)
	}
	if strings.Contains(c.second.out.String(), "does not serve SelfSubjectAccessReview") {
		t.Fatalf("the second tier skipped its access check:\n%s", c.second.out.String())
	}
}

// event is one change as a watcher saw it.
type event struct {
	Type, Name, RV string
}

func (e event) String() string { return e.Type + " " + e.Name + "@" + e.RV }

// recorder gathers one watcher's events.
type recorder struct {
	mu     sync.Mutex
	events []event
}

func (r *recorder) add(e event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) get() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.events...)
}

// waitEvents waits until r holds n events (or more).
func waitEvents(t *testing.T, ctx context.Context, what string, r *recorder, n int) {
	t.Helper()
	if err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
		return len(r.get()) >= n, nil
	}); err != nil {
		got := r.get()
		t.Fatalf("%s: %d events, want %d: %v", what, len(got), n, got)
	}
}

// perObject groups events by object, in the order they came.
func perObject(events []event) map[string][]event {
	out := map[string][]event{}
	for _, e := range events {
		out[e.Name] = append(out[e.Name], e)
	}
	return out
}

// sameEvents fails the test unless got holds exactly want's events, in
// want's order for each object.
func sameEvents(t *testing.T, what string, want, got []event) {
	t.Helper()
	w, g := perObject(want), perObject(got)
	for name, we := range w {
		if fmt.Sprint(we) != fmt.Sprint(g[name]) {
			t.Errorf("%s: %s: got %v, want %v", what, name, g[name], we)
		}
	}
	for name, ge := range g {
		if _, ok := w[name]; !ok {
			t.Errorf("%s: unexpected events %v", what, ge)
		}
	}
}

func watchEvent(ev watch.Event) (event, error) {
	if ev.Type == watch.Error {
		return event{}, apierrors.FromObject(ev.Object)
	}
	cm, ok := ev.Object.(*corev1.ConfigMap)
	if !ok {
		return event{}, fmt.Errorf("%s event of a %T", ev.Type, ev.Object)
	}
	return event{Type: string(ev.Type), Name: cm.Name, RV: cm.ResourceVersion}, nil
}

// recordWatch records w's object events until it ends.
func recordWatch(w watch.Interface, r *recorder, done chan<- error) {
	for ev := range w.ResultChan() {
		if ev.Type == watch.Bookmark {
			continue
		}
		e, err := watchEvent(ev)
		if err != nil {
			done <- err
			return
		}
		r.add(e)
	}
	done <- nil
}

// wsSubscriber is a WebSocket subscription to config maps of one
// namespace.
type wsSubscriber struct {
	c    *websocket.Conn
	rec  *recorder
	done chan error
	// last is the rv of the last change frame, the resume point.
	mu   sync.Mutex
	last string
}

func subscribeWS(t *testing.T, ctx context.Context, base, token, ns, rv string) *wsSubscriber {
	t.Helper()
	c, _, err := websocket.Dial(ctx, strings.Replace(base, "http://", "ws://", 1)+"/ws", &websocket.DialOptions{
		Subprotocols: []string{auth.BearerProtocolPrefix + base64.RawURLEncoding.EncodeToString([]byte(token)), "kubegate.v1"},
	})
	if err != nil {
		t.Fatalf("dial /ws: %v", err)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	c.SetReadLimit(-1)
	sub, _ := json.Marshal(map[string]any{"type": "subscribe", "id": "cms", "resource": "configmaps", "namespace": ns, "resourceVersion": rv})
	if err := c.Write(ctx, websocket.MessageText, sub); err != nil {
		t.Fatal(err)
	}
	s := &wsSubscriber{c: c, rec: &recorder{}, done: make(chan error, 1), last: rv}
	acked := make(chan struct{})
	go func() {
		defer close(s.done)
		ackOnce := sync.OnceFunc(func() { close(acked) })
		for {
			_, data, err := c.Read(ctx)
			if err != nil {
				s.done <- err
				return
			}
			var f struct {
				Type   string            `json:"type"`
				Events []json.RawMessage `json:"events"`
			}
			frames := []json.RawMessage{data}
			if json.Unmarshal(data, &f) == nil && f.Type == "batch" {
				frames = f.Events
			}
			for _, raw := range frames {
				var fr struct {
					Type   string          `json:"type"`
					RV     string          `json:"rv"`
					Status json.RawMessage `json:"status"`
					Object struct {
						Metadata struct{ Name, ResourceVersion string } `json:"metadata"`
					} `json:"object"`
				}
				if err := json.Unmarshal(raw, &fr); err != nil {
					s.done <- err
					return
				}
				switch fr.Type {
				case "ack":
					ackOnce()
				case "error", "RESET":
					s.done <- fmt.Errorf("frame %s", raw)
					return
				case "ADDED", "MODIFIED", "DELETED":
					if fr.RV != fr.Object.Metadata.ResourceVersion {
						s.done <- fmt.Errorf("frame rv %s, object's %s", fr.RV, fr.Object.Metadata.ResourceVersion)
						return
					}
					s.rec.add(event{Type: fr.Type, Name: fr.Object.Metadata.Name, RV: fr.RV})
					fallthrough
				case "END_OF_SNAPSHOT":
					s.mu.Lock()
					s.last = fr.RV
					s.mu.Unlock()
				}
			}
		}
	}()
	select {
	case <-acked:
	case err := <-s.done:
		t.Fatalf("subscribe: %v", err)
	case <-ctx.Done():
		t.Fatal("subscribe: no ack")
	}
	return s
}

func (s *wsSubscriber) lastRV() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// TestTierZeroLoss runs apiserver → gateway A → gateway B. A burst of
// creates, updates and deletes on the apiserver reaches, complete and in
// order for each object, a client-go watch, a client-go informer (a
// watch-list, client-go's default) and a WebSocket subscription on B,
// exactly as the apiserver's own watch saw it. Then a WebSocket client
// and a watch on B that went away while more changed resume from their
// last resourceVersion and get exactly the changes they missed; a resume
// from before B's history is 410 Gone.
func TestTierZeroLoss(t *testing.T) {
	const objects = 30
	env := testenv.Get(t)
	grantTier(t, env, "", "configmaps")
	ns := env.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := startFirstTier(t, ctx, env)
	// B checks its callers with the apiserver, not with A.
	c.startSecondTier(t, ctx, "--resources", "configmaps",
		"--authentication-kubeconfig", c.apiserverKubeconfig, "--authorization-kubeconfig", c.apiserverKubeconfig)

	token := env.Config.BearerToken
	b, err := kubernetes.NewForConfig(&rest.Config{Host: c.secondBase, BearerToken: token})
	if err != nil {
		t.Fatal(err)
	}
	cms := env.Client.CoreV1().ConfigMaps(ns)
	bcms := b.CoreV1().ConfigMaps(ns)

	// The reference: the apiserver's own watch.
	start, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	refW, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: start.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer refW.Stop()
	ref, refDone := &recorder{}, make(chan error, 1)
	go recordWatch(refW, ref, refDone)

	// A client-go watch on B, from a list on B.
	list, err := bcms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	restW, err := bcms.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer restW.Stop()
	watched, watchedDone := &recorder{}, make(chan error, 1)
	go recordWatch(restW, watched, watchedDone)

	// A client-go informer on B. client-go v0.37 syncs with a watch-list
	// (WatchListClient is on by default): B must serve
	// sendInitialEvents=true and end it with the initial-events-end
	// bookmark, or the informer lists instead, which is counted.
	if !clientfeatures.FeatureGates().Enabled(clientfeatures.WatchListClient) {
		t.Fatal("client-go's WatchListClient is off: this test expects client-go's default to be a watch-list")
	}
	var lists int
	var listsMu sync.Mutex
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			listsMu.Lock()
			lists++
			listsMu.Unlock()
			return bcms.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return bcms.Watch(ctx, o) },
	}, &corev1.ConfigMap{}, 0, cache.Indexers{})
	informed := &recorder{}
	record := func(typ string) func(any) {
		return func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			cm := obj.(*corev1.ConfigMap)
			informed.add(event{Type: typ, Name: cm.Name, RV: cm.ResourceVersion})
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    record("ADDED"),
		UpdateFunc: func(_, obj any) { record("MODIFIED")(obj) },
		DeleteFunc: record("DELETED"),
	}); err != nil {
		t.Fatal(err)
	}
	infCtx, stopInf := context.WithCancel(ctx)
	var infWG sync.WaitGroup
	infWG.Add(1)
	go func() { defer infWG.Done(); inf.RunWithContext(infCtx) }()
	defer func() { stopInf(); infWG.Wait() }()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the informer on B never synced")
	}
	listsMu.Lock()
	if lists != 0 {
		t.Errorf("the informer on B listed %d times: B did not serve its watch-list", lists)
	}
	listsMu.Unlock()

	ws := subscribeWS(t, ctx, c.secondBase, token, ns, "")

	// The burst: every object is created, updated twice and deleted,
	// five writers at once.
	var writers sync.WaitGroup
	errs := make(chan error, objects)
	for w := range 5 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := w; i < objects; i += 5 {
				name := fmt.Sprintf("burst-%02d", i)
				cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
				for v := 1; err == nil && v <= 2; v++ {
					cm.Data = map[string]string{"v": strconv.Itoa(v)}
					cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
				}
				if err == nil {
					err = cms.Delete(ctx, name, metav1.DeleteOptions{})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	writers.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	total := objects * 4
	waitEvents(t, ctx, "the apiserver's watch", ref, total)
	want := ref.get()
	for _, s := range []struct {
		what string
		r    *recorder
	}{{"watch on B", watched}, {"informer on B", informed}, {"WebSocket on B", ws.rec}} {
		waitEvents(t, ctx, s.what, s.r, total)
		sameEvents(t, s.what, want, s.r.get())
	}
	if t.Failed() {
		return
	}

	// Resume across tiers: the WebSocket client and the watch go away,
	// more changes, then both come back from their last version.
	wsLast := ws.lastRV()
	_ = ws.c.Close(websocket.StatusNormalClosure, "")
	<-ws.done
	restW.Stop()
	if err := <-watchedDone; err != nil {
		t.Fatalf("watch on B: %v", err)
	}
	restLast := watched.get()[total-1].RV
	if wsLast != want[total-1].RV || restLast != want[total-1].RV {
		t.Fatalf("resume points: WebSocket %s, watch %s, want the burst's last version %s", wsLast, restLast, want[total-1].RV)
	}
	missed, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "missed"}}, metav1.CreateOptions{})
	if err == nil {
		missed.Data = map[string]string{"v": "1"}
		_, err = cms.Update(ctx, missed, metav1.UpdateOptions{})
	}
	if err == nil {
		_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "missed-gone"}}, metav1.CreateOptions{})
	}
	if err == nil {
		err = cms.Delete(ctx, "missed-gone", metav1.DeleteOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	ws = subscribeWS(t, ctx, c.secondBase, token, ns, wsLast)
	restW, err = bcms.Watch(ctx, metav1.ListOptions{ResourceVersion: restLast})
	if err != nil {
		t.Fatal(err)
	}
	defer restW.Stop()
	watched, watchedDone = &recorder{}, make(chan error, 1)
	go recordWatch(restW, watched, watchedDone)
	// A change after the resumes, so that anything extra delivered
	// between the missed changes and it shows.
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-resume"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEvents(t, ctx, "the apiserver's watch", ref, total+5)
	want = ref.get()[total:]
	for _, s := range []struct {
		what string
		r    *recorder
	}{{"resumed watch on B", watched}, {"resumed WebSocket on B", ws.rec}} {
		waitEvents(t, ctx, s.what, s.r, len(want))
		if got := s.r.get(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: got %v, want exactly the missed changes and the next: %v", s.what, got, want)
		}
	}

	// A resume from before B's history (which starts at its first list
	// of A): 410 Gone, as from the apiserver.
	oldW, err := bcms.Watch(ctx, metav1.ListOptions{ResourceVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	defer oldW.Stop()
	select {
	case ev := <-oldW.ResultChan():
		if _, err := watchEvent(ev); !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
			t.Errorf("watch on B from 1, before its history: %v %v, want 410 Gone", ev.Type, err)
		}
	case <-ctx.Done():
		t.Fatal("no answer to a watch from before B's history")
	}
}

// TestTierSeesNewCRDs: a CRD created while both tiers run becomes
// readable through the second tier, whose only discovery is the first
// tier's. The first tier's discovery must not stay as it was at its
// first request: the second tier would never learn of the new resource,
// and would never ask the first tier for it.
func TestTierSeesNewCRDs(t *testing.T) {
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	group := fmt.Sprintf("t%d.tier.kubegate.test", time.Now().UnixNano())
	grantTier(t, env, group, "sprockets")
	c := startFirstTier(t, ctx, env)
	c.startSecondTier(t, ctx,
		"--authentication-kubeconfig", c.apiserverKubeconfig, "--authorization-kubeconfig", c.apiserverKubeconfig)
	readB := func(path string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.secondBase+path, nil)
		req.Header.Set("Authorization", "Bearer "+env.Config.BearerToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		return resp.StatusCode, buf.String()
	}
	// Both tiers have served discovery before the CRD exists.
	if code, body := readB("/apis"); code != http.StatusOK || strings.Contains(body, group) {
		t.Fatalf("/apis on B: %d %s", code, body)
	}

	env.CreateCRD(t, testenv.NewCRD(group, "sprockets", "Sprocket"))

	// Discovery is refreshed at most every 5s per tier (informer
	// Options.DiscoveryRefreshInterval); a minute is ample.
	var code int
	var body string
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		code, body = readB("/apis/" + group + "/v1/sprockets")
		return code == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("the new CRD never became readable through the second tier: last answer %d %s", code, body)
	}
	if !strings.Contains(body, `"kind":"SprocketList"`) {
		t.Fatalf("list of the new CRD on B: %s", body)
	}
}

// state applies events to the objects they leave, name to version.
func state(events []event) map[string]string {
	out := map[string]string{}
	for _, e := range events {
		if e.Type == "DELETED" {
			delete(out, e.Name)
		} else {
			out[e.Name] = e.RV
		}
	}
	return out
}

// TestTierFirstTierReplaced: the first tier is replaced (as a rolling
// update behind a Service replaces it) while the apiserver changes. The
// old one ends the second tier's watch cleanly at its shutdown; the
// second tier resumes on the new one from a version older than the new
// one's history, gets 410 Gone, relists from it and converges. Its
// clients, a watch and a WebSocket subscription that stay connected to
// it throughout, see the relist's net effect and end with the apiserver's
// state; a resume on the second tier from before its relist is 410, as
// its history restarted there.
func TestTierFirstTierReplaced(t *testing.T) {
	env := testenv.Get(t)
	grantTier(t, env, "", "configmaps")
	ns := env.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cms := env.Client.CoreV1().ConfigMaps(ns)
	for i := range 4 {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c := startFirstTier(t, ctx, env)
	c.startSecondTier(t, ctx, "--resources", "configmaps",
		"--authentication-kubeconfig", c.apiserverKubeconfig, "--authorization-kubeconfig", c.apiserverKubeconfig)
	token := env.Config.BearerToken
	b, err := kubernetes.NewForConfig(&rest.Config{Host: c.secondBase, BearerToken: token})
	if err != nil {
		t.Fatal(err)
	}
	bcms := b.CoreV1().ConfigMaps(ns)
	apiserverState := func() map[string]string {
		t.Helper()
		l, err := cms.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, cm := range l.Items {
			out[cm.Name] = cm.ResourceVersion
		}
		return out
	}

	before, err := bcms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	initial := make([]event, 0, len(before.Items))
	for _, cm := range before.Items {
		initial = append(initial, event{Type: "ADDED", Name: cm.Name, RV: cm.ResourceVersion})
	}
	w, err := bcms.Watch(ctx, metav1.ListOptions{ResourceVersion: before.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	watched, watchedDone := &recorder{}, make(chan error, 1)
	go recordWatch(w, watched, watchedDone)
	ws := subscribeWS(t, ctx, c.secondBase, token, ns, "")
	// A change the second tier's watch of the first carries, so that its
	// end at the first tier's shutdown is a normal one.
	if _, err := cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-0"}, Data: map[string]string{"v": "1"}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEvents(t, ctx, "watch on B", watched, 1)

	// The old first tier goes; requests to the Service wait for the new.
	c.proxy.hold()
	if err := c.first.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-c.first.done:
		c.first.done <- err // for Cleanup
		if err != nil {
			t.Fatalf("first tier exited with %v after SIGTERM", err)
		}
	case <-ctx.Done():
		t.Fatal("first tier did not exit after SIGTERM")
	}
	if _, err := cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-1"}, Data: map[string]string{"v": "1"}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "cm-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-new"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The new first tier lists after those changes: its history starts
	// after everything the second tier has seen.
	next, nextBase := c.startFirst(t, ctx)
	c.proxy.point(t, nextBase)
	c.proxy.release()

	want := apiserverState()
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		l, err := bcms.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		got := map[string]string{}
		for _, cm := range l.Items {
			got[cm.Name] = cm.ResourceVersion
		}
		return fmt.Sprint(got) == fmt.Sprint(want), nil
	}); err != nil {
		t.Fatalf("the second tier never reached the apiserver's state %v", want)
	}
	for _, s := range []struct {
		what   string
		events func() []event
	}{
		{"watch on B", func() []event { return append(append([]event(nil), initial...), watched.get()...) }},
		{"WebSocket on B", ws.rec.get},
	} {
		if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
			return fmt.Sprint(state(s.events())) == fmt.Sprint(want), nil
		}); err != nil {
			t.Errorf("%s: its events lead to %v, want the apiserver's %v", s.what, state(s.events()), want)
		}
	}
	if n := strings.Count(c.second.out.String(), `"msg":"relisted"`); n != 1 {
		t.Errorf("the second tier relisted %d times, want once:\n%s", n, c.second.out.String())
	}
	if !strings.Contains(next.out.String(), "cache synced") {
		t.Errorf("the new first tier never synced:\n%s", next.out.String())
	}

	oldW, err := bcms.Watch(ctx, metav1.ListOptions{ResourceVersion: before.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer oldW.Stop()
	select {
	case ev := <-oldW.ResultChan():
		if _, err := watchEvent(ev); !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
			t.Errorf("watch on B from before its relist: %v %v, want 410 Gone", ev.Type, err)
		}
	case <-ctx.Done():
		t.Fatal("no answer to a watch from before the relist")
	}
}

// TestTierPagedList: the second tier's first list of the first is paged
// (client-go's reflector asks for 500 objects at a time, and a kubegate,
// unlike kube-apiserver's watch cache, honours the limit), and the pages
// add up to the whole.
func TestTierPagedList(t *testing.T) {
	const objects = 1100
	env := testenv.Get(t)
	grantTier(t, env, "", "configmaps")
	ns := env.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cms := env.Client.CoreV1().ConfigMaps(ns)
	var writers sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := w; i < objects; i += 4 {
				if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%04d", i)}}, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	writers.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	c := startFirstTier(t, ctx, env)
	c.startSecondTier(t, ctx, "--resources", "configmaps",
		"--authentication-kubeconfig", c.apiserverKubeconfig, "--authorization-kubeconfig", c.apiserverKubeconfig)

	paged := false
	for _, u := range c.proxy.requested() {
		paged = paged || strings.HasPrefix(u, "/api/v1/configmaps?") && strings.Contains(u, "continue=")
	}
	if !paged {
		t.Errorf("the second tier's list of the first was not paged: %v", c.proxy.requested())
	}
	b, err := kubernetes.NewForConfig(&rest.Config{Host: c.secondBase, BearerToken: env.Config.BearerToken})
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	versions := func(l *corev1.ConfigMapList) map[string]string {
		out := map[string]string{}
		for _, cm := range l.Items {
			out[cm.Name] = cm.ResourceVersion
		}
		return out
	}
	if len(got.Items) != objects || fmt.Sprint(versions(got)) != fmt.Sprint(versions(want)) {
		t.Fatalf("the second tier holds %d config maps, want the apiserver's %d", len(got.Items), len(want.Items))
	}
}
