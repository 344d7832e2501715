package scenario

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"kubegate/bench/harness"
	"kubegate/bench/workload"
	"kubegate/internal/config"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The tenants scenario (issue 30): no user of the gateway, authenticated
// or not, can take it from the others. A gateway with the documented
// defaults and real authentication and authorization (auth.authn
// kubernetes: TokenReview; auth.authz rbac: SubjectAccessReview) serves a
// victim while attacks run one at a time, each in its own phase with a
// baseline before it.
//
// The users are ServiceAccounts of the benchmark's control plane, in the
// namespace tenantsNamespace, with tokens from the TokenRequest API and
// RBAC bindings: the victim may read Pods and ConfigMaps everywhere; the
// churner and the hoarder Pods in the first workload namespace only; the
// reviewer ConfigMaps there; the socket fillers nothing. Each connects
// from a loopback address of its own (see identity), as users on other
// hosts would; the token flood from one. The gateway reads /metrics
// without authorization (auth.metrics none) so that the benchmark's own
// scrapes cost no review.
//
// The victim holds one socket with TenantsVictimWindows windows (sorted by
// name, age, a column, with a filter, one namespace's) and two object
// subscriptions (the Pods of two namespaces, live changes only, as the
// dashboard has them beside its windows), and lists over REST at
// ListRate (a namespace's ConfigMaps, a page of a namespace's Pods, and a
// sorted page of every Pod). In every phase the updater patches, at Rate
// for Duration, Pods its windows show and Pods of the subscribed
// namespaces, alternately; each write's latency is from its
// acknowledgement to the WINDOW frame or event carrying its version.
//
// The attacks (TenantsAttacks), each in turn:
//
//   - token-flood: FloodConns connections send GET
//     /api/v1/namespaces/default/configmaps at FloodRate, each with a
//     fresh random bearer token; meanwhile NewTokens never-seen valid
//     tokens of the victim are minted and each is timed from its first
//     request until one is answered 200 (retrying every 100ms, for at
//     most 10s);
//   - view-churn-rest: the churner sends REST sorted lists of every Pod
//     (narrowed to its namespace) with a fresh labelSelector at ChurnRate,
//     and with a fresh 4 KiB selector at LongSelectorRate;
//   - view-churn-ws: the churner opens windows with a fresh filter and
//     selector at WSChurnRate over 4 sockets (open, first rows, close);
//   - view-hoard: the hoarder opens up to Hoard windows of distinct
//     filters on its namespace's Pods (20 per socket) and holds them;
//     meanwhile the victim opens new windows and sorted lists of fresh
//     filters, which must still be served;
//   - review-flood: the reviewer sends GET
//     /api/v1/configmaps?fieldSelector=metadata.name=<random> at
//     ReviewRate: each a cluster-wide review and, denied, one per
//     namespace;
//   - socket-fill: SocketIdentities ServiceAccounts without any RBAC
//     each open up to SocketsPerIdentity sockets and hold them; meanwhile
//     the victim connects new sockets, each to its first window.
//
// Per attack: the victim's p50 and p99 for window updates, object events
// and REST lists in the attack against its baseline, its failures
// (refused or failed requests, error frames, missed updates), the
// attacker's own answers (429s must carry Retry-After and a complete
// Status), and the gateway's memory: the live heap and stacks at the last
// collection before the attack, during it, and at the first collection
// at least Recovery after it (the gateway runs with gctrace; GCWait
// bounds each wait), and RSS. The goals (tenantsGoals): p99 within 2x of
// the baseline and no victim failure under every attack, a never-seen
// token accepted within 1s during the flood, the victim's new views and
// sockets served, no hoarder holding every view, clean 429s, and memory
// that comes back.
//
// It creates Pods up to Pods (20,000 by default): name it last.

// ScenarioTenants is the tenants scenario's name.
const ScenarioTenants = "tenants"

// The tenants scenario's attacks.
const (
	AttackTokenFlood    = "token-flood"
	AttackViewChurnREST = "view-churn-rest"
	AttackViewChurnWS   = "view-churn-ws"
	AttackViewHoard     = "view-hoard"
	AttackReviewFlood   = "review-flood"
	AttackSocketFill    = "socket-fill"
)

// TenantsAttacks are the attacks, in the order they run by default.
var TenantsAttacks = []string{AttackTokenFlood, AttackViewChurnREST, AttackViewChurnWS, AttackViewHoard, AttackReviewFlood, AttackSocketFill}

// tenantsNamespace holds the scenario's ServiceAccounts.
const tenantsNamespace = "kubegate-bench-tenants"

// TenantsSizes sizes the tenants scenario. Zero fields take
// DefaultTenantsSizes'.
type TenantsSizes struct {
	// Pods are created up to this many first.
	Pods int
	// Attacks to run, in order (TenantsAttacks).
	Attacks []string
	// Duration of each baseline and each attack phase.
	Duration time.Duration
	// Recovery is the wait after an attack before its memory is read.
	Recovery time.Duration
	// GCWait bounds each wait for the gateway's next collection.
	GCWait time.Duration
	// Rate: updates a second in every phase; ListRate: the victim's REST
	// lists a second.
	Rate, ListRate float64
	// VictimWindows: the victim's windows (on one socket, beside two
	// object subscriptions).
	VictimWindows int
	// FloodRate and FloodConns: the token flood's requests a second and
	// connections; NewTokens: the never-seen valid tokens timed during it.
	FloodRate  float64
	FloodConns int
	NewTokens  int
	// ChurnRate, LongSelectorRate, WSChurnRate: the churner's REST lists
	// with fresh selectors, with 4 KiB selectors, and new windows, a
	// second.
	ChurnRate, LongSelectorRate, WSChurnRate float64
	// Hoard: windows the hoarder tries to hold.
	Hoard int
	// ReviewRate: the reviewer's requests a second.
	ReviewRate float64
	// SocketIdentities each try to hold SocketsPerIdentity sockets.
	SocketIdentities, SocketsPerIdentity int
}

// DefaultTenantsSizes are issue 30's: 2,500 bogus tokens a second over
// 200 connections, 40 fresh selectors and 10 of 4 KiB a second, 18 new
// windows a second, 45 name-selected lists a second, 100 identities with
// 100 sockets each (the default global cap of 10,000).
var DefaultTenantsSizes = TenantsSizes{
	Pods: 20_000, Attacks: TenantsAttacks,
	Duration: 20 * time.Second, Recovery: 30 * time.Second, GCWait: 150 * time.Second,
	Rate: 20, ListRate: 10, VictimWindows: 5,
	FloodRate: 2500, FloodConns: 200, NewTokens: 10,
	ChurnRate: 40, LongSelectorRate: 10, WSChurnRate: 18,
	Hoard: 200, ReviewRate: 45, SocketIdentities: 100, SocketsPerIdentity: 100,
}

func (t TenantsSizes) withDefaults(d TenantsSizes) TenantsSizes {
	set := func(dst *int, v int) {
		if *dst <= 0 {
			*dst = v
		}
	}
	setF := func(dst *float64, v float64) {
		if *dst <= 0 {
			*dst = v
		}
	}
	setD := func(dst *time.Duration, v time.Duration) {
		if *dst <= 0 {
			*dst = v
		}
	}
	set(&t.Pods, d.Pods)
	if len(t.Attacks) == 0 {
		t.Attacks = d.Attacks
	}
	setD(&t.Duration, d.Duration)
	setD(&t.Recovery, d.Recovery)
	setD(&t.GCWait, d.GCWait)
	setF(&t.Rate, d.Rate)
	setF(&t.ListRate, d.ListRate)
	set(&t.VictimWindows, d.VictimWindows)
	setF(&t.FloodRate, d.FloodRate)
	set(&t.FloodConns, d.FloodConns)
	set(&t.NewTokens, d.NewTokens)
	setF(&t.ChurnRate, d.ChurnRate)
	setF(&t.LongSelectorRate, d.LongSelectorRate)
	setF(&t.WSChurnRate, d.WSChurnRate)
	set(&t.Hoard, d.Hoard)
	setF(&t.ReviewRate, d.ReviewRate)
	set(&t.SocketIdentities, d.SocketIdentities)
	set(&t.SocketsPerIdentity, d.SocketsPerIdentity)
	return t
}

// tenantsUsers are the scenario's identities.
type tenantsUsers struct {
	victim, churner, hoarder, reviewer identity
	fillers                            []identity
	// victimSA names the victim's ServiceAccount, for fresh tokens.
	victimSA string
}

// createTenants creates the ServiceAccounts, their RBAC and their tokens.
func createTenants(ctx context.Context, env *Env, fillers int) (tenantsUsers, error) {
	c := env.Client()
	var u tenantsUsers
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantsNamespace}}, metav1.CreateOptions{}); err != nil {
		return u, fmt.Errorf("create namespace %s: %w", tenantsNamespace, err)
	}
	read := []string{"get", "list", "watch"}
	ns0 := env.Namespaces[0]
	if _, err := c.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "kubegate-bench-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods", "configmaps"}, Verbs: read}}}, metav1.CreateOptions{}); err != nil {
		return u, err
	}
	for _, r := range []struct{ name, resource string }{{"kubegate-bench-pod-reader", "pods"}, {"kubegate-bench-configmap-reader", "configmaps"}} {
		if _, err := c.RbacV1().Roles(ns0).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: r.name},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{r.resource}, Verbs: read}}}, metav1.CreateOptions{}); err != nil {
			return u, err
		}
	}
	sa := func(name string, src byte) (identity, error) {
		if _, err := c.CoreV1().ServiceAccounts(tenantsNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			return identity{}, fmt.Errorf("create service account %s: %w", name, err)
		}
		tok, err := mintToken(ctx, env, name)
		return identity{name: name, token: tok, src: loopback(src)}, err
	}
	subject := func(name string) []rbacv1.Subject {
		return []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: tenantsNamespace}}
	}
	var err error
	if u.victim, err = sa("victim", 1); err != nil {
		return u, err
	}
	u.victimSA = "victim"
	if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "kubegate-bench-victim"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "kubegate-bench-reader"},
		Subjects: subject("victim")}, metav1.CreateOptions{}); err != nil {
		return u, err
	}
	for _, a := range []struct {
		id   *identity
		name string
		src  byte
		role string
	}{{&u.churner, "churner", 12, "kubegate-bench-pod-reader"}, {&u.hoarder, "hoarder", 13, "kubegate-bench-pod-reader"},
		{&u.reviewer, "reviewer", 14, "kubegate-bench-configmap-reader"}} {
		if *a.id, err = sa(a.name, a.src); err != nil {
			return u, err
		}
		if _, err := c.RbacV1().RoleBindings(ns0).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "kubegate-bench-" + a.name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: a.role},
			Subjects: subject(a.name)}, metav1.CreateOptions{}); err != nil {
			return u, err
		}
	}
	for i := range fillers {
		f, err := sa(fmt.Sprintf("filler-%03d", i), byte(100+i%150))
		if err != nil {
			return u, err
		}
		u.fillers = append(u.fillers, f)
	}
	return u, nil
}

// mintToken asks the TokenRequest API for a token of the ServiceAccount
// name, valid for 4 hours.
func mintToken(ctx context.Context, env *Env, name string) (string, error) {
	exp := int64(4 * 3600)
	tr, err := env.Client().CoreV1().ServiceAccounts(tenantsNamespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for %s: %w", name, err)
	}
	return tr.Status.Token, nil
}

// tenantsGatewayConfig is config.Default() with the documented defaults
// for authentication, authorization and every limit, caching Pods and
// ConfigMaps, /metrics open to the benchmark.
func tenantsGatewayConfig(env *Env) config.Config {
	c := config.Default()
	c.Kubeconfig = env.Kubeconfig
	c.Listen = ""
	c.Log = config.Log{Level: "warn", Format: "json"}
	c.Cache.Resources = []string{"pods", "configmaps"}
	c.Auth.Authn, c.Auth.Authz, c.Auth.Metrics = "kubernetes", "rbac", "none"
	return c
}

// tenantVictim is the victim: its socket of windows and subscriptions,
// the Pods the updater writes to, and its REST lists.
type tenantVictim struct {
	id    identity
	wsURL string
	base  string
	sock  *liveSocket
	keys  []workload.PodKey
	lists []string
	// failures is the socket's failure count when last checked.
	failures int
}

// openVictim opens the victim's socket, its windows and subscriptions.
func openVictim(ctx context.Context, env *Env, v *tenantVictim, windows, n int) error {
	s, err := openLiveSocket(ctx, v.id, v.wsURL)
	if err != nil {
		return err
	}
	v.sock, v.failures = s, 0
	rv, err := currentRV(ctx, env.Client())
	if err != nil {
		return err
	}
	specs := victimWindowSpecs(env, 20)
	pick := []int{0, 2, 4, 10, 15} // by name, by age, a column, a filter, one namespace
	for i := range windows {
		w := specs[pick[i%len(pick)]]
		w.ID = fmt.Sprintf("w%d", i)
		w.Offset += 4 * windowLimit * (i / len(pick))
		if err := s.window(ctx, w, rv); err != nil {
			return fmt.Errorf("victim window %+v: %w", w, err)
		}
	}
	for i := range 2 {
		if err := s.objects(ctx, fmt.Sprintf("objects-%d", i), env.Namespaces[i%len(env.Namespaces)]); err != nil {
			return fmt.Errorf("victim subscription: %w", err)
		}
	}
	// Alternately a Pod some window shows and one of a subscribed
	// namespace.
	shown := snapshotTargets([]*liveSocket{s}).pods()
	var subbed []workload.PodKey
	for i := range 2 {
		subbed = append(subbed, podsOfNamespace(env, i, n, 25)...)
	}
	v.keys = v.keys[:0]
	for i := range max(len(shown), len(subbed)) {
		v.keys = append(v.keys, shown[i%len(shown)], subbed[i%len(subbed)])
	}
	return nil
}

// ensure reopens the victim's socket when something went wrong on it
// since the last check (its failures are already counted).
func (v *tenantVictim) ensure(ctx context.Context, env *Env, windows, n int, log io.Writer) error {
	if f := v.sock.failureCount(); f == v.failures && !v.sock.ended() {
		return nil
	}
	fmt.Fprintf(log, "  victim: reopening its socket after %d failures\n", v.sock.failureCount())
	v.sock.close()
	return openVictim(ctx, env, v, windows, n)
}

// listProbe is the victim's REST lists during a phase.
type listProbe struct {
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	mu       sync.Mutex // guards lat, failed and examples
	lat      []time.Duration
	failed   int
	examples []string
}

// victimRequestTimeout bounds one of the victim's REST lists: past it the
// list counts as failed.
const victimRequestTimeout = 30 * time.Second

// startLists lists at rate until stop. A list still unanswered when the
// phase ends is waited for (up to victimRequestTimeout) and counted: one
// that an attack holds up is the victim's worst case, not one to drop.
func (v *tenantVictim) startLists(ctx context.Context, rate float64) *listProbe {
	pctx, cancel := context.WithCancel(ctx)
	p := &listProbe{cancel: cancel}
	c := v.id.client(8)
	p.wg.Go(func() {
		defer c.CloseIdleConnections()
		paced(pctx, rate, 16, func(_ context.Context, seq int) {
			rctx, rcancel := context.WithTimeout(ctx, victimRequestTimeout)
			defer rcancel()
			u := v.base + v.lists[seq%len(v.lists)]
			t0 := time.Now()
			resp, body, err := v.id.get(rctx, c, u, "")
			d := time.Since(t0)
			if ctx.Err() != nil {
				return // the run is over
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			switch {
			case err != nil:
				p.failed++
				p.examples = append(p.examples, err.Error())
			case resp.StatusCode != http.StatusOK:
				p.failed++
				p.examples = append(p.examples, fmt.Sprintf("%s: %s: %.200s", v.lists[seq%len(v.lists)], resp.Status, body))
			default:
				p.lat = append(p.lat, d)
			}
		})
	})
	return p
}

// settle waits, up to limit, until each of the victim's lists answers 200
// within a second: what an attack left queued (reviews, views) is gone,
// and the next baseline measures the gateway at rest. It returns how long
// that took.
func (v *tenantVictim) settle(ctx context.Context, limit time.Duration) (time.Duration, error) {
	c := v.id.client(1)
	defer c.CloseIdleConnections()
	t0 := time.Now()
	ok := waitForEvery(ctx, limit, 500*time.Millisecond, func() bool {
		for _, l := range v.lists {
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			resp, _, err := v.id.get(rctx, c, v.base+l, "")
			cancel()
			if err != nil || resp.StatusCode != http.StatusOK {
				return false
			}
		}
		return true
	})
	if !ok && ctx.Err() == nil {
		return time.Since(t0), fmt.Errorf("the victim's lists did not answer within a second each for %v", limit)
	}
	return time.Since(t0), ctx.Err()
}

func (p *listProbe) stop() {
	p.cancel()
	p.wg.Wait()
}

// attack is one running attack.
type attack struct {
	// during, if set, runs in the attack's phase beside the victim's
	// load until its context ends: the victim's probes of what the
	// attack takes from it.
	during func(ctx context.Context)
	// stop ends the attack and returns its figures.
	stop func() []Figure
}

// heapReading is the gateway's memory at one point.
type heapReading struct {
	gc    harness.GC
	gcOK  bool
	rss   int64
	inuse float64 // go_memstats_heap_inuse_bytes + stacks
}

// readHeap waits for a collection after the last one logged (at most
// wait; with wait 0, takes the last one logged) and reads RSS and the
// heap in use with it.
func readHeap(ctx context.Context, env *Env, g *harness.Gateway, wait time.Duration) (heapReading, error) {
	var r heapReading
	last, ok := g.LastGC()
	if wait > 0 {
		r.gc, r.gcOK = g.NextGC(ctx, last.Num, wait)
	} else {
		r.gc, r.gcOK = last, ok
	}
	st, err := harness.ReadProc(g.PID)
	if err != nil {
		return r, err
	}
	r.rss = st.RSS
	r.inuse, err = goInuse(ctx, env, ArmGateway)
	return r, err
}

func (r heapReading) live() float64 { return float64(r.gc.Live+r.gc.Stacks) / (1 << 20) }

func scenarioTenants(ctx context.Context, env *Env, z Sizes, log io.Writer) ([]Figure, error) {
	zt := z.Tenants
	for _, a := range zt.Attacks {
		if !slices.Contains(TenantsAttacks, a) {
			return nil, fmt.Errorf("unknown attack %q (known: %s)", a, strings.Join(TenantsAttacks, ", "))
		}
	}
	n, err := growPods(ctx, env, zt.Pods, log)
	if err != nil {
		return nil, err
	}
	fillers := 0
	if slices.Contains(zt.Attacks, AttackSocketFill) {
		fillers = zt.SocketIdentities
	}
	users, err := createTenants(ctx, env, fillers)
	if err != nil {
		return nil, err
	}
	g, err := env.startGateway(ctx, tenantsGatewayConfig(env), true)
	if err != nil {
		return nil, err
	}
	defer g.Stop()
	genv := *env
	genv.GatewayURL, genv.GatewayPID = g.URL, g.PID
	fmt.Fprintf(log, "  %d pods: a gateway (pid %d) with authn kubernetes, authz rbac and the default limits, ready in %v; %d service accounts\n",
		n, g.PID, g.Ready.Sub(g.Started).Round(time.Millisecond), 4+len(users.fillers))

	ns0, ns1 := env.Namespaces[0], env.Namespaces[1%len(env.Namespaces)]
	v := &tenantVictim{id: users.victim, wsURL: wsURLOf(g.URL), base: g.URL, lists: []string{
		"/api/v1/namespaces/" + ns1 + "/configmaps",
		"/api/v1/namespaces/" + ns0 + "/pods?limit=50",
		"/api/v1/pods?sort=metadata.name&limit=50",
	}}
	if err := openVictim(ctx, &genv, v, zt.VictimWindows, n); err != nil {
		return nil, err
	}
	defer func() { v.sock.close() }()
	fmt.Fprintf(log, "  victim: %d windows and 2 subscriptions; the updater writes to %d pods\n", zt.VictimWindows, len(v.keys)/2)

	var figs []Figure
	fig := func(metric, unit string, val float64) {
		figs = append(figs, Figure{ScenarioTenants, ArmGateway, metric, unit, val})
	}
	figs = append(figs, Figure{ScenarioTenants, ArmBench, "pods", "count", float64(n)})
	plan := workload.UpdatePlan{Count: int(zt.Rate * zt.Duration.Seconds()), Rate: zt.Rate}

	// phase runs the victim's load for Duration with during running; a
	// baseline starts once the gateway answers the victim promptly.
	phase := func(suffix string, baseline bool, during func(ctx context.Context)) error {
		if err := v.ensure(ctx, &genv, zt.VictimWindows, n, log); err != nil {
			return err
		}
		if baseline {
			d, err := v.settle(ctx, z.Drain)
			if err != nil {
				return err
			}
			fmt.Fprintf(log, "  victim: lists answer within a second after %v\n", d.Round(time.Millisecond))
			fig("victim: time until the gateway answers promptly"+suffix, "ms", Milliseconds(d))
		}
		f0 := v.sock.failureCount()
		t := snapshotTargets([]*liveSocket{v.sock})
		resets0 := t.resets()
		lp := v.startLists(ctx, zt.ListRate)
		cpu, err := startCPU(g.PID)
		if err != nil {
			return err
		}
		dctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		if during != nil {
			wg.Go(func() { during(dctx) })
		}
		r, err := runLivePhase(ctx, &genv, []*liveSocket{v.sock}, v.keys, plan, z.Drain)
		cancel()
		wg.Wait()
		lp.stop()
		if err != nil {
			return err
		}
		cores, err := cpu.cores()
		if err != nil {
			return err
		}
		sockFailures := v.sock.failuresSince(f0)
		v.failures = f0 + len(sockFailures)
		lp.mu.Lock()
		lat, failed, examples := lp.lat, lp.failed, lp.examples
		lp.mu.Unlock()
		fmt.Fprintf(log, "  victim%s: window updates p50 %v p99 %v (%d, %d missed); object events p50 %v p99 %v (%d, %d missed); REST lists p50 %v p99 %v (%d, %d failed); %d socket failures, %d resets; gateway %.2f cores\n",
			suffix, Percentile(r.windowLat, 0.5).Round(10*time.Microsecond), Percentile(r.windowLat, 0.99).Round(10*time.Microsecond), len(r.windowLat), r.windowMissed,
			Percentile(r.eventLat, 0.5).Round(10*time.Microsecond), Percentile(r.eventLat, 0.99).Round(10*time.Microsecond), len(r.eventLat), r.eventMissed,
			Percentile(lat, 0.5).Round(10*time.Microsecond), Percentile(lat, 0.99).Round(10*time.Microsecond), len(lat), failed,
			len(sockFailures), t.resets()-resets0, cores)
		for _, e := range append(sockFailures, examples...)[:min(5, len(sockFailures)+len(examples))] {
			fmt.Fprintf(log, "    %s\n", e)
		}
		figs = append(figs, latencyFigures(ScenarioTenants, ArmGateway, "victim window update latency", suffix, r.windowLat)...)
		figs = append(figs, latencyFigures(ScenarioTenants, ArmGateway, "victim object event latency", suffix, r.eventLat)...)
		figs = append(figs, latencyFigures(ScenarioTenants, ArmGateway, "victim REST list latency", suffix, lat)...)
		fig("victim window updates received"+suffix, "count", float64(len(r.windowLat)))
		fig("victim object events received"+suffix, "count", float64(len(r.eventLat)))
		fig("missed window updates"+suffix, "count", float64(r.windowMissed))
		fig("missed object events"+suffix, "count", float64(r.eventMissed))
		fig("victim REST lists failed"+suffix, "count", float64(failed))
		fig("victim socket failures"+suffix, "count", float64(len(sockFailures)))
		fig("victim resets"+suffix, "count", float64(t.resets()-resets0))
		fig("gateway CPU used"+suffix, "cores", cores)
		return nil
	}

	// The live heap is read at the gateway's collections (gctrace), which
	// come when they come: each wait runs beside the next baseline
	// phase, whose load is the one the reading before the attack saw.
	type heapResult struct {
		r   heapReading
		err error
	}
	hctx, hcancel := context.WithCancel(ctx)
	defer hcancel()
	nextHeap := func() <-chan heapResult {
		ch := make(chan heapResult, 1)
		go func() {
			r, err := readHeap(hctx, &genv, g, zt.GCWait)
			ch <- heapResult{r, err}
		}()
		return ch
	}
	// memory records an attack's memory once the reading after it is in.
	type memory struct {
		sfx            string
		before, during heapReading
		peakRSS        int64
	}
	record := func(m memory, after heapReading) {
		fmt.Fprintf(log, "  memory%s: live heap+stacks %s before, %s at the end, %s %v after; RSS %.0f, peak %.0f, %.0f MiB after\n", m.sfx,
			liveText(m.before), liveText(m.during), liveText(after), zt.Recovery, mib(m.before.rss), mib(m.peakRSS), mib(after.rss))
		if m.before.gcOK && after.gcOK {
			fig("live heap+stacks before"+m.sfx, "MiB", m.before.live())
			fig("live heap+stacks after"+m.sfx, "MiB", after.live())
		}
		if m.during.gcOK && m.during.gc.Num > m.before.gc.Num {
			fig("live heap+stacks during"+m.sfx, "MiB", m.during.live())
		}
		fig("RSS before"+m.sfx, "MiB", mib(m.before.rss))
		fig("RSS peak"+m.sfx, "MiB", mib(m.peakRSS))
		fig("RSS after"+m.sfx, "MiB", mib(after.rss))
	}
	pending := nextHeap()
	var last *memory
	for _, name := range zt.Attacks {
		fmt.Fprintf(log, "  attack %s\n", name)
		if err := phase(baselineSuffix(name), true, nil); err != nil {
			return figs, err
		}
		hr := <-pending
		if hr.err != nil {
			return figs, hr.err
		}
		if last != nil {
			record(*last, hr.r)
		}
		_ = harness.ResetPeak(g.PID)
		a, err := startAttack(ctx, name, &genv, users, v, zt, log)
		if err != nil {
			return figs, fmt.Errorf("%s: %w", name, err)
		}
		perr := phase(attackSuffix(name), false, a.during)
		during, herr := readHeap(ctx, &genv, g, 0)
		st, serr := harness.ReadProc(g.PID)
		figs = append(figs, a.stop()...)
		if err := firstErr(perr, herr, serr); err != nil {
			return figs, fmt.Errorf("%s: %w", name, err)
		}
		select {
		case <-time.After(zt.Recovery):
		case <-ctx.Done():
			return figs, ctx.Err()
		}
		pending = nextHeap()
		last = &memory{sfx: attackSuffix(name), before: hr.r, during: during, peakRSS: max(st.HWM, st.RSS)}
	}
	hr := <-pending
	if hr.err != nil {
		return figs, hr.err
	}
	if last != nil {
		record(*last, hr.r)
	}
	return figs, nil
}

func baselineSuffix(attack string) string { return " (before " + attack + ")" }
func attackSuffix(attack string) string   { return " (" + attack + ")" }

func liveText(r heapReading) string {
	if !r.gcOK {
		return "unknown (no collection)"
	}
	return fmt.Sprintf("%.0f MiB (gc %d)", r.live(), r.gc.Num)
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// fieldNameQuery is a query selecting a random object name.
func fieldNameQuery() string {
	return "fieldSelector=" + url.QueryEscape("metadata.name=x-"+randomToken()[:12])
}
