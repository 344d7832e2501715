package abuse

// Isolation: no user, authenticated or not, can take what the gateway's
// users share from the others (docs/reliability.md, "Isolation"). Each
// test attacks one shared part as a user of the test apiserver would,
// with real TokenReviews and SubjectAccessReviews, and checks what a
// well-behaved user gets meanwhile and what the attacker gets.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubegate/internal/config"
	"kubegate/internal/testenv"
)

// answer is one HTTP answer, its body decoded as a Status when it is one.
type answer struct {
	code       int
	retryAfter string
	status     metav1.Status
	body       string
	took       time.Duration
}

func (a answer) String() string {
	if a.status.Kind == "Status" {
		return fmt.Sprintf("%d %s (Retry-After %q)", a.code, a.status.Message, a.retryAfter)
	}
	return fmt.Sprintf("%d %.200s", a.code, a.body)
}

// limited reports whether a is a complete 429 Status with Retry-After.
func (a answer) limited() bool {
	return a.code == http.StatusTooManyRequests && a.retryAfter != "" &&
		isStatus(&a.status, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, "")
}

// httpClient returns a client whose connections come from the loopback
// address local (127.0.0.1, 127.0.0.2...): the gateway sees another
// client address for each.
func httpClient(local string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	return &http.Client{
		Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 100},
		Timeout:   time.Minute, // a failure bound
	}
}

// do sends a request to the gateway and reads the answer. hdr may set
// Host.
func (g *gateway) do(t testing.TB, c *http.Client, method, path, token string, hdr http.Header, body string) answer {
	t.Helper()
	a, err := g.try(c, method, path, token, hdr, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return a
}

// try is do without failing the test, for goroutines.
func (g *gateway) try(c *http.Client, method, path, token string, hdr http.Header, body string) (answer, error) {
	var rb io.Reader
	if body != "" {
		rb = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+g.addr+path, rb)
	if err != nil {
		return answer{}, err
	}
	for k, vs := range hdr {
		if k == "Host" {
			req.Host = vs[0]
			continue
		}
		req.Header[k] = vs
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	a := answer{code: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: string(b), took: time.Since(start)}
	_ = json.Unmarshal(b, &a.status)
	return a, nil
}

func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// tally counts answers by kind, from many goroutines.
type tally struct {
	mu     sync.Mutex
	counts map[string]int
	first  map[string]string // an example of each kind
}

func (c *tally) add(kind, example string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts, c.first = map[string]int{}, map[string]string{}
	}
	c.counts[kind]++
	if _, ok := c.first[kind]; !ok {
		c.first[kind] = example
	}
}

func (c *tally) get(kind string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[kind]
}

func (c *tally) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("%v, examples %v", c.counts, c.first)
}

// TestBogusTokenFlood (issue 30, finding 1): 50 connections from one client
// address send API requests with fresh random bearer tokens as fast as
// they can, against a gateway whose client makes 5 reviews a second. A
// user on another address keeps reading with its token (valid, and
// cached for 2s at a time, so it is reviewed again during the flood) and
// a second user arrives with a token the gateway has never seen: both
// are served, the new token within seconds. The flood's refusals are
// 429s with Retry-After and a complete Status, and its failed reviews
// cost a few log lines, not one per request. Once it has ended, the
// gateway's goroutines and heap come back to what they were (the cache
// of rejected tokens keeps at most 10,000 hashes).
func TestBogusTokenFlood(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	createCM(t, ns, "cm", nil)
	core, logs := observer.New(zapcore.WarnLevel)
	g := startGateway(t, gatewayOptions{logger: zap.New(core), config: func(c *config.Config) {
		c.APIServer.QPS, c.APIServer.Burst = 5, 5
		c.Auth.TokenSuccessTTL = config.Duration(2 * time.Second)
	}})
	path := "/api/v1/namespaces/" + ns + "/configmaps"
	victim := httpClient("127.0.0.2")
	if a := g.do(t, victim, http.MethodGet, path, g.tokens[bystand], nil, ""); a.code != http.StatusOK {
		t.Fatalf("before the flood: %v", a)
	}
	warned := len(logs.All())
	base := measure()
	peak := startSampler()

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	flooder := httpClient("127.0.0.1")
	var flood tally
	var started atomic.Int64
	var floods sync.WaitGroup
	for range 50 {
		floods.Go(func() {
			for ctx.Err() == nil {
				started.Add(1)
				a, err := g.try(flooder, http.MethodGet, path, randomToken(), nil, "")
				switch {
				case err != nil:
					flood.add("error", err.Error())
				case a.limited():
					flood.add("429", a.String())
				default:
					flood.add(fmt.Sprint(a.code), a.String())
				}
			}
		})
	}
	testenv.Eventually(t, "the flood to be under way", func() bool { return started.Load() >= 100 })

	// The known user reads every 100ms for 4s: its token leaves the
	// cache twice meanwhile.
	var victimAnswers []answer
	newcomerDone := make(chan answer, 1)
	go func() {
		a, err := g.try(victim, http.MethodGet, path, g.tokens[newcomer], nil, "")
		if err != nil {
			a = answer{body: err.Error()}
		}
		newcomerDone <- a
	}()
	for range 40 {
		victimAnswers = append(victimAnswers, g.do(t, victim, http.MethodGet, path, g.tokens[bystand], nil, ""))
		time.Sleep(100 * time.Millisecond) // the victim's pace, not a synchronisation
	}
	first := <-newcomerDone
	stop()
	floods.Wait()
	during, top := measure(), peak.stop()
	flooder.CloseIdleConnections()
	victim.CloseIdleConnections()
	report(t, base, during, top, settle(t, base, afterTolerance))

	t.Logf("flood: %d requests: %v", started.Load(), &flood)
	t.Logf("a never-seen valid token during the flood: %v in %v", first.code, first.took.Round(time.Millisecond))
	if first.code != http.StatusOK || first.took > 5*time.Second {
		t.Errorf("a never-seen valid token during the flood: %v after %v, want 200 within 5s", first, first.took)
	}
	var worst time.Duration
	for i, a := range victimAnswers {
		worst = max(worst, a.took)
		if a.code != http.StatusOK {
			t.Errorf("the known user's request %d during the flood: %v", i, a)
		}
	}
	t.Logf("the known user's slowest request during the flood: %v", worst.Round(time.Millisecond))
	if flood.get("429") == 0 || flood.get("error") > 0 {
		t.Errorf("the flood got no 429 with Retry-After and a Status, or errors: %v", &flood)
	}
	for kind := range flood.counts {
		if kind != "401" && kind != "429" {
			t.Errorf("the flood got answers other than 401 and 429: %v", &flood)
			break
		}
	}
	reviews := g.metric(t, "kubegate_auth_reviews_total", "kind", "tokenreview")
	t.Logf("%v TokenReviews in all", reviews)
	if reviews > 200 {
		t.Errorf("%v TokenReviews for the flood; a client address's failures should bound them", reviews)
	}
	lines := logs.All()[warned:]
	t.Logf("%d warnings logged during the flood", len(lines))
	if len(lines) > 10 {
		t.Errorf("%d warnings logged during the flood, first %q; want a few lines, not one per request", len(lines), lines[0].Message)
	}
}

// TestNamedListFlood (issue 30, finding 4): a user who may read ConfigMaps in one
// namespace of 30 lists ConfigMaps cluster-wide by random names, from 16
// connections, against a gateway whose client makes 10 reviews a second.
// Another user's reads, each needing a review of its own (1s allow
// cache, a new namespace each time), stay fast; the attacker's lists cost
// about no review each, since no object has those names.
func TestNamedListFlood(t *testing.T) {
	env := testenv.Get(t)
	grantReaders(t)
	var nss []string
	for range 30 {
		nss = append(nss, env.Namespace(t))
	}
	bindNamespaceReader(t, nss[0], narrowed)
	g := startGateway(t, gatewayOptions{config: func(c *config.Config) {
		c.APIServer.QPS, c.APIServer.Burst = 10, 10
		c.Auth.AllowTTL, c.Auth.DenyTTL = config.Duration(time.Second), config.Duration(time.Second)
	}})
	victim, attacker := httpClient("127.0.0.2"), httpClient("127.0.0.1")
	for _, w := range []struct{ user, path string }{
		{bystand, "/api/v1/namespaces/" + nss[1] + "/configmaps"},
		{narrowed, "/api/v1/configmaps"}, // narrowed to nss[0]
	} {
		if a := g.do(t, victim, http.MethodGet, w.path, g.tokens[w.user], nil, ""); a.code != http.StatusOK {
			t.Fatalf("%s before the flood: %v", w.user, a)
		}
	}
	reviews := func() float64 { return g.metric(t, "kubegate_auth_reviews_total", "kind", "subjectaccessreview") }
	before := reviews()

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var flood tally
	var sent atomic.Int64
	var floods sync.WaitGroup
	for range 16 {
		floods.Go(func() {
			for ctx.Err() == nil {
				a, err := g.try(attacker, http.MethodGet, "/api/v1/configmaps?fieldSelector=metadata.name%3D"+randomToken()[:20], g.tokens[narrowed], nil, "")
				sent.Add(1)
				switch {
				case err != nil:
					flood.add("error", err.Error())
				case a.limited():
					flood.add("429", a.String())
				default:
					flood.add(fmt.Sprint(a.code), a.String())
				}
			}
		})
	}
	testenv.Eventually(t, "the flood to be under way", func() bool { return sent.Load() >= 100 })
	var answers []answer
	for i := range 20 {
		answers = append(answers, g.do(t, victim, http.MethodGet, "/api/v1/namespaces/"+nss[2+i%28]+"/configmaps", g.tokens[bystand], nil, ""))
		time.Sleep(200 * time.Millisecond) // the victim's pace
	}
	stop()
	floods.Wait()
	spent := reviews() - before

	var worst time.Duration
	for i, a := range answers {
		worst = max(worst, a.took)
		if a.code != http.StatusOK || a.took > 3*time.Second {
			t.Errorf("the other user's read %d during the flood: %v after %v, want 200 within 3s", i, a, a.took)
		}
	}
	t.Logf("flood: %d lists: %v; %v SubjectAccessReviews in all; the other user's slowest read %v",
		sent.Load(), &flood, spent, worst.Round(time.Millisecond))
	if flood.get("error") > 0 || flood.get("200")+flood.get("429") != int(sent.Load()) {
		t.Errorf("the attacker got answers other than 200 (an empty list) and 429: %v", &flood)
	}
	// The other user's 20 reads cost a review each; the attacker's lists
	// far less than one each (30 each before they were narrowed by what
	// exists).
	if limit := float64(sent.Load())/4 + 40; spent > limit {
		t.Errorf("%v reviews for %d lists of random names: more than %v", spent, sent.Load(), limit)
	}
}

// bindNamespaceReader lets user read ConfigMaps in ns only.
func bindNamespaceReader(t *testing.T, ns, user string) {
	t.Helper()
	rbac := testenv.Get(t).Client.RbacV1()
	if _, err := rbac.Roles(ns).Create(t.Context(), &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "cm-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings(ns).Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "cm-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "cm-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAllowed(t, authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{
		Namespace: ns, Verb: "list", Resource: "configmaps"}})
}

// waitAllowed waits until the apiserver's RBAC allows spec, which a new
// binding does once the apiserver's informers have it.
func waitAllowed(t *testing.T, spec authorizationv1.SubjectAccessReviewSpec) {
	t.Helper()
	sar := testenv.Get(t).Client.AuthorizationV1().SubjectAccessReviews()
	testenv.Eventually(t, "the apiserver to apply a new binding", func() bool {
		r, err := sar.Create(t.Context(), &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		return err == nil && r.Status.Allowed
	})
}

// TestLoginBehindProxy (issue 30, finding 7): behind a trusted proxy every login
// comes from the proxy's address, with the client's in X-Forwarded-For.
// Bogus logins from one client do not refuse a valid login of another;
// the bogus ones are refused once their own address's budget is spent
// (429 with Retry-After). A client not behind the proxy cannot spend
// another's budget by claiming its address, and logins of one user are
// limited whatever their addresses.
func TestLoginBehindProxy(t *testing.T) {
	g := startGateway(t, gatewayOptions{config: func(c *config.Config) {
		c.TrustedProxies = []string{"127.0.0.1/32"}
		c.Auth.FailedAuthQPS, c.Auth.FailedAuthBurst = 1, 5
	}})
	proxy, direct := httpClient("127.0.0.1"), httpClient("127.0.0.2")
	login := func(c *http.Client, tok, client string) answer {
		hdr := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
		if client != "" {
			hdr.Set("X-Forwarded-For", client)
		}
		return g.do(t, c, http.MethodPost, "/login", "", hdr, url.Values{"token": {tok}}.Encode())
	}
	var attacker, victim []answer
	for range 10 {
		for range 3 {
			attacker = append(attacker, login(proxy, randomToken(), "203.0.113.5"))
		}
		victim = append(victim, login(proxy, g.tokens[bystand], "198.51.100.7"))
	}
	for i, a := range victim {
		if a.code != http.StatusOK {
			t.Errorf("valid login %d behind the proxy, among bogus ones from another client: %v", i, a)
		}
	}
	var refused int
	for _, a := range attacker {
		switch {
		case a.limited():
			refused++
		case a.code != http.StatusUnauthorized:
			t.Errorf("bogus login: %v, want 401 or 429 with Retry-After", a)
		}
	}
	if refused < 30-5-10 {
		t.Errorf("%d of 30 bogus logins refused with 429; the budget is 5 at once, 1 a second", refused)
	}
	// A direct client claiming the victim's address spends its own.
	for range 10 {
		login(direct, randomToken(), "198.51.100.7")
	}
	if a := login(proxy, randomToken(), "198.51.100.7"); a.code != http.StatusUnauthorized {
		t.Errorf("a bogus login forwarded for the victim after a direct client claimed its address: %v, want 401", a)
	}
	// The victim logged in 10 times: the 11th, from anywhere, is one too
	// many for that user at once.
	if a := login(proxy, g.tokens[bystand], "192.0.2.77"); !a.limited() || !strings.Contains(a.status.Message, "rate limit") {
		t.Errorf("%s's 11th login at once: %v, want 429", bystand, a)
	}
}
