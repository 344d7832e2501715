package abuse

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubegate/internal/config"
	kgateway "kubegate/internal/gateway"
	"kubegate/internal/gateway/gatewaytest"
	"kubegate/internal/testenv"
)

// window is a window subscription on the test namespace's ConfigMaps.
func window(id, namespace, filter string) map[string]any {
	return map[string]any{"type": "subscribe", "id": id, "resource": "configmaps", "namespace": namespace,
		"limit": 5, "sort": "metadata.name", "filter": filter}
}

// answer waits for id's answer to a subscribe: its ack, or an error.
func (c *client) answer(t *testing.T, id string) frame {
	t.Helper()
	for {
		f, err := c.next(context.Background())
		if err != nil {
			t.Fatalf("waiting for the answer to %s: %v", id, err)
		}
		if f.ID == id && (f.Type == "ack" || f.Type == "error") {
			return f
		}
	}
}

// Finding 3: one user cannot hold all of a table's views. mallory asks
// for 64 windows with distinct filters, the table's whole cap; she gets
// her share, and alice still gets new windows and sorted lists.
func TestViewShares(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	createCM(t, ns, "a", nil)
	g := startGateway(t, gatewayOptions{})
	ctx := context.Background()

	acks, refused := 0, 0
	for s := range 4 { // 16 a socket: within a socket's subscribe burst
		conn, _, err := g.dial(ctx, abuser)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.CloseNow()
		c := &client{c: conn}
		for i := range 16 {
			id := fmt.Sprintf("w%d-%d", s, i)
			if err := c.send(ctx, window(id, ns, fmt.Sprintf("filter-%d-%d", s, i))); err != nil {
				t.Fatal(err)
			}
			switch f := c.answer(t, id); {
			case f.Type == "ack":
				acks++
			case isStatus(f.Status, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, "you hold too many distinct sorts and filters"):
				if f.Status.Details == nil || f.Status.Details.RetryAfterSeconds < 1 {
					t.Errorf("refusal without retryAfterSeconds: %+v", f.Status)
				}
				refused++
			default:
				t.Fatalf("window %s: %v", id, f)
			}
		}
	}
	if acks != 16 || refused != 48 {
		t.Fatalf("mallory got %d windows and %d refusals, want her share of 16 and 48 refusals", acks, refused)
	}

	conn, _, err := g.dial(ctx, bystand)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	alice := &client{c: conn}
	if err := alice.send(ctx, window("mine", ns, "a")); err != nil {
		t.Fatal(err)
	}
	if f := alice.answer(t, "mine"); f.Type != "ack" {
		t.Fatalf("alice's window while mallory holds her share: %v", f)
	}
	resp := g.do(t, httpClient(""), http.MethodGet, "/api/v1/namespaces/"+ns+"/configmaps?sort=metadata.name&filter=zzz&limit=5",
		g.tokens[bystand], nil, "")
	if resp.code != http.StatusOK {
		t.Fatalf("alice's sorted list while mallory holds her share: %v", resp)
	}
}

// Finding 2: a new view is built without holding up anyone: while one is
// being built (held, for the test, before it is installed), another
// user's windows and object subscriptions get their updates, and so does
// the socket that waits for the new view, on its other subscriptions.
func TestViewBuildsHoldNobodyUp(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	createCM(t, ns, "a", map[string]string{"v": "0"})
	createCM(t, ns, "b", nil)

	var (
		mu       sync.Mutex
		armed    bool
		building = make(chan struct{}, 8)
		release  = make(chan struct{})
	)
	hook := func() {
		mu.Lock()
		hold := armed
		mu.Unlock()
		if hold {
			building <- struct{}{}
			<-release
		}
	}
	cfg := gatewaytest.Config()
	gw := gatewaytest.Start(t, cfg, kgateway.Options{ViewBuildHook: hook})
	grantReaders(t)
	g := &gateway{addr: gw.Addr().String(), reg: gw.Registry(), ws: gw.WebSocket(), tokens: map[string]string{}}
	for _, u := range []string{abuser, bystand} {
		g.tokens[u] = token(t, u)
	}
	ctx := context.Background()
	conn, _, err := g.dial(ctx, bystand)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	alice := &client{c: conn}
	for _, sub := range []map[string]any{window("win", ns, ""), subscribe("objs", ns)} {
		if err := alice.send(ctx, sub); err != nil {
			t.Fatal(err)
		}
	}
	// Both are live once the window has its rows and the subscription
	// its snapshot.
	for rows, snapshot := false, false; !rows || !snapshot; {
		f, err := alice.next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rows = rows || f.Type == "WINDOW" && f.ID == "win"
		snapshot = snapshot || f.Type == "END_OF_SNAPSHOT" && f.ID == "objs"
	}
	// Every view built from now on is held until released.
	mu.Lock()
	armed = true
	mu.Unlock()
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()

	// mallory's sorted list needs a new view: its build is held.
	type result struct {
		a   answer
		err error
	}
	listed := make(chan result, 1)
	go func() {
		a, err := g.try(httpClient(""), http.MethodGet, "/api/v1/namespaces/"+ns+"/configmaps?sort=metadata.name&filter="+
			url.QueryEscape("b")+"&limit=5", g.tokens[abuser], nil, "")
		listed <- result{a, err}
	}()
	held := func(what string) {
		t.Helper()
		select {
		case <-building:
		case <-time.After(testenv.WaitLimit):
			t.Fatalf("%s: no view build held within %s", what, testenv.WaitLimit)
		}
	}
	held("mallory's sorted list")
	// alice's own socket opens a window that needs a new view too.
	if err := alice.send(ctx, window("new", ns, "a")); err != nil {
		t.Fatal(err)
	}
	held("alice's new window")

	// Meanwhile a change reaches alice's window and subscription.
	cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{"v": "1"}
	if cm, err = env.Client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(testenv.WaitLimit)
	var sawWindow, sawObject bool
	for !sawWindow || !sawObject {
		if time.Now().After(deadline) {
			t.Fatalf("a change during two view builds: window update %v, object event %v, not within %s", sawWindow, sawObject, testenv.WaitLimit)
		}
		f, err := alice.next(ctx)
		if err != nil {
			t.Fatalf("alice's socket during two view builds: %v", err)
		}
		switch {
		case f.Type == "WINDOW" && f.ID == "win" && f.RV == cm.ResourceVersion:
			sawWindow = true
		case f.Type == "MODIFIED" && f.ID == "objs" && f.Object != nil && f.Object.ResourceVersion == cm.ResourceVersion:
			sawObject = true
		case f.ID == "new" && f.Type != "ack":
			t.Fatalf("the held window answered before its view was built: %v", f)
		}
	}
	released = true
	close(release)
	if f := alice.answer(t, "new"); f.Type != "ack" {
		t.Fatalf("the window whose view was held: %v", f)
	}
	if r := <-listed; r.err != nil || r.a.code != http.StatusOK || !strings.Contains(r.a.body, `"name":"b"`) {
		t.Fatalf("mallory's sorted list once its view was built: %v, %v", r.a, r.err)
	}
}

// Finding 1, the share: one user opening new sorts and filters one after
// another is held to a share of a CPU (windows.userBuildShare), and the
// build slot goes to the others' new views meanwhile. With a share so
// small that one build leaves mallory owing minutes, her next new sorted
// list waits for a slot (kubegate_view_builds_waiting) though none is
// taken; alice's new sorted list is answered meanwhile; and mallory's,
// given up, leaves the queue.
func TestViewBuildsHeldToAShare(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	for i := range 20 {
		createCM(t, ns, fmt.Sprintf("cm-%02d", i), nil)
	}
	g := startGateway(t, gatewayOptions{config: func(c *config.Config) {
		c.Windows.UserBuildShare, c.Windows.UserBuildBurst = 1e-9, config.Duration(time.Nanosecond)
	}})
	sorted := func(selector string) string {
		return "/api/v1/namespaces/" + ns + "/configmaps?sort=metadata.name&limit=5&labelSelector=" + url.QueryEscape(selector)
	}
	if a := g.do(t, httpClient(""), http.MethodGet, sorted("!first"), g.tokens[abuser], nil, ""); a.code != http.StatusOK {
		t.Fatalf("mallory's first new sorted list: %v", a)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+g.addr+sorted("!second"), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+g.tokens[abuser])
	second := make(chan error, 1)
	go func() {
		resp, err := httpClient("").Do(req)
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("answered %d while she owes minutes of building", resp.StatusCode)
		}
		second <- err
	}()
	testenv.Eventually(t, "mallory's second build to wait for a slot", func() bool {
		return g.metric(t, "kubegate_view_builds_waiting") == 1
	})
	if a := g.do(t, httpClient(""), http.MethodGet, sorted("!alice"), g.tokens[bystand], nil, ""); a.code != http.StatusOK {
		t.Fatalf("alice's new sorted list while mallory's build waits: %v", a)
	}
	if g.metric(t, "kubegate_view_builds_waiting") != 1 {
		t.Fatal("mallory's build left the queue before she gave up")
	}
	cancel()
	if err := <-second; !errors.Is(err, context.Canceled) {
		t.Fatalf("mallory's second list: %v, want it waiting until she gave up", err)
	}
	testenv.Eventually(t, "mallory's build to leave the queue", func() bool {
		return g.metric(t, "kubegate_view_builds_waiting") == 0
	})
}
