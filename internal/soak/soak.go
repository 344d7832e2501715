package soak

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubegate/bench/harness"
	"kubegate/internal/config"
	"kubegate/internal/controlplane"
	"kubegate/internal/webhook"
)

// Options configures Run. Zero fields get the defaults in their comments.
type Options struct {
	// Gateway is the gateway binary to run (see BuildGateway). Required.
	Gateway string
	// Duration is how long the load runs. Default 60s.
	Duration time.Duration
	// Interval is the sampling period. Default Duration/15, within [2s, 30s].
	Interval time.Duration
	// RestartEvery is the kube-apiserver restart period. Default
	// min(Duration/2, 3m): one restart in a short run.
	RestartEvery time.Duration
	// RBACEvery is how often the viewer's RoleBinding in the flipped
	// namespace is revoked or granted. Default 10s.
	RBACEvery time.Duration
	// WebhookFailEvery and WebhookFailFor: every WebhookFailEvery the
	// webhook receiver answers 503 for WebhookFailFor. Defaults 20s, 6s.
	WebhookFailEvery time.Duration
	WebhookFailFor   time.Duration
	// ChurnEvery is how often subscribers leave and join. Default 2s.
	ChurnEvery time.Duration
	// OpsPerSecond paces the workload. Default 20.
	OpsPerSecond int
	// Namespaces and ObjectsPerNamespace size the workload. Defaults 4, 25.
	Namespaces          int
	ObjectsPerNamespace int
	// SlowReadBytes is the read rate of the crawling slow subscribers;
	// the lagging ones read 16 times faster. Default 1024 bytes/s.
	SlowReadBytes int
	// ConvergeTimeout bounds the final wait for every view to equal the
	// apiserver's state. Default 90s.
	ConvergeTimeout time.Duration
	// Out receives the table rows as they are sampled. Default io.Discard.
	Out io.Writer
	// Logf receives progress messages. Default: none.
	Logf func(format string, args ...any)
}

func (o Options) withDefaults() Options {
	if o.Duration <= 0 {
		o.Duration = 60 * time.Second
	}
	if o.Interval <= 0 {
		o.Interval = min(max(o.Duration/15, 2*time.Second), 30*time.Second)
	}
	if o.RestartEvery <= 0 {
		o.RestartEvery = min(o.Duration/2, 3*time.Minute)
	}
	if o.RBACEvery <= 0 {
		o.RBACEvery = 10 * time.Second
	}
	if o.WebhookFailEvery <= 0 {
		o.WebhookFailEvery = 20 * time.Second
	}
	if o.WebhookFailFor <= 0 {
		o.WebhookFailFor = 6 * time.Second
	}
	if o.ChurnEvery <= 0 {
		o.ChurnEvery = 2 * time.Second
	}
	if o.OpsPerSecond <= 0 {
		o.OpsPerSecond = 20
	}
	if o.Namespaces < 2 {
		o.Namespaces = 4
	}
	if o.ObjectsPerNamespace <= 0 {
		o.ObjectsPerNamespace = 25
	}
	if o.SlowReadBytes <= 0 {
		o.SlowReadBytes = 1024
	}
	if o.ConvergeTimeout <= 0 {
		o.ConvergeTimeout = 90 * time.Second
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o
}

const (
	managedBy = "app.kubernetes.io/managed-by=kubegate-soak"
	viewer    = "soak-viewer"
	// The viewer may always read namespace 0; its grant in namespace 1
	// flips every RBACEvery.
	roleName = "soak-read"
)

// run is the state of one Run. Fields are set before the load starts and
// read-only afterwards, except where noted.
//
// During the load, Run's errgroup runs one goroutine per activity
// (workload, churn, flipRBAC, flapWebhook, restartAPIServer, sample); all
// return when the load's context ends. Subscriber reader goroutines are
// tracked in wg and end when their connection closes (closeAll waits for
// them). The webhook receiver is served by an http.Server that Run closes
// on return.
type run struct {
	opts       Options
	cp         *controlplane.ControlPlane
	cs         kubernetes.Interface
	gw         *harness.Gateway
	rcv        *receiver
	c          counters
	namespaces []string
	adminTok   string
	viewerTok  string
	wsURL      string
	start      time.Time
	wg         sync.WaitGroup // subscriber reader goroutines

	// subs is owned by the churn goroutine during the load and by Run
	// before and after it.
	subs   []*subscriber
	nextID int
	rng    *mrand.Rand
	// granted is whether the viewer's flipped RoleBinding exists; owned
	// by the RBAC goroutine during the load.
	granted bool
}

// Run starts a control plane and the gateway, runs the load for
// opts.Duration, checks the pass conditions and returns the report. An
// error means the run could not be carried out; failed pass conditions are
// Report.Problems.
func Run(ctx context.Context, opts Options) (rep *Report, err error) {
	o := opts.withDefaults()
	if o.Gateway == "" {
		return nil, errors.New("soak: Options.Gateway is required")
	}
	r := &run{opts: o, rng: mrand.New(mrand.NewPCG(1, 2))}

	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	r.cp, err = controlplane.Start(startCtx, controlplane.Options{Users: []controlplane.User{{Name: viewer}}})
	if err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	defer func() {
		if stopErr := r.cp.Stop(); stopErr != nil && err == nil {
			err = fmt.Errorf("stop control plane: %w", stopErr)
		}
	}()
	admin := r.cp.AdminConfig()
	r.adminTok = admin.BearerToken
	for _, u := range r.cp.Users() {
		if u.Name == viewer {
			r.viewerTok = u.Token
		}
	}
	kc, err := rest.HTTPClientFor(admin)
	if err != nil {
		return nil, err
	}
	defer kc.CloseIdleConnections()
	if r.cs, err = kubernetes.NewForConfigAndClient(admin, kc); err != nil {
		return nil, err
	}
	if err := r.setupCluster(startCtx); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kubegate-soak-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	// The webhook receiver.
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	r.rcv = newReceiver([][]byte{secret}, &r.c)
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: r.rcv, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(hl) }()
	defer hs.Close()

	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := r.cp.WriteKubeconfig(kubeconfig); err != nil {
		return nil, err
	}
	cfg, err := gatewayConfig(dir, kubeconfig, secret, "http://"+hl.Addr().String()+"/hook")
	if err != nil {
		return nil, err
	}
	warnings := &warnLines{max: 1000}
	r.gw, err = harness.StartGateway(startCtx, harness.GatewayOptions{Binary: o.Gateway, Config: cfg, Dir: dir, ReadyTimeout: time.Minute, Output: warnings})
	if err != nil {
		return nil, err
	}
	defer func() {
		if rep != nil {
			rep.GatewayWarnings, rep.WarningsDropped = warnings.get()
		}
	}()
	r.wsURL = "ws" + strings.TrimPrefix(r.gw.URL, "http") + "/ws"
	defer func() {
		if stopErr := r.gw.Stop(); stopErr != nil && rep != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("gateway shutdown: %v\n%s", stopErr, r.gw.Tail(64<<10)))
		}
	}()

	rep = &Report{Duration: o.Duration}
	if rep.IdleGoroutines, err = r.warmUp(ctx); err != nil {
		return nil, err
	}
	r.start = time.Now()
	rep.Start = r.start
	o.Logf("soak: gateway ready (%d goroutines idle); load for %s, sample every %s, apiserver restart every %s",
		rep.IdleGoroutines, o.Duration, o.Interval, o.RestartEvery)
	fmt.Fprintln(o.Out, tableHeader)

	r.populate()
	loadCtx, stopLoad := context.WithTimeout(ctx, o.Duration)
	defer stopLoad()
	g, gctx := errgroup.WithContext(loadCtx)
	g.Go(func() error { return r.workload(gctx) })
	g.Go(func() error { return r.churn(gctx) })
	g.Go(func() error { return r.flipRBAC(gctx) })
	g.Go(func() error { return r.flapWebhook(gctx) })
	g.Go(func() error { return r.restartAPIServer(gctx, ctx) })
	g.Go(func() error { return r.sample(gctx, rep) })
	if err := g.Wait(); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		r.closeAll()
		return rep, err
	}
	if ctx.Err() != nil {
		r.closeAll()
		return rep, ctx.Err()
	}

	r.finish(ctx, rep)
	r.closeAll()
	r.checkIdle(ctx, rep)
	r.checkFlat(rep)
	rep.Totals = Totals{
		ResetOverflow: r.c.resetOverflow.Load(), ResetExpired: r.c.resetExpired.Load(), ResetReauthorized: r.c.resetReauth.Load(),
		Ended401: r.c.ended401.Load(), Ended403: r.c.ended403.Load(), Ended503: r.c.ended503.Load(), EndedOther: r.c.endedOther.Load(),
		Refused:            r.c.refused.Load(),
		SlowConsumerCloses: r.c.slowCloses.Load(),
		WebhookDelivered:   r.c.webhookOK.Load(), WebhookFailed: r.c.webhookFailed.Load(), WebhookBadSig: r.c.webhookBadSig.Load(),
		ProtocolErrors: r.c.protocolErrors.Load(),
	}
	r.c.mu.Lock()
	for code, n := range r.c.otherCodes {
		if rep.Totals.EndedOtherCodes == nil {
			rep.Totals.EndedOtherCodes = map[int]int64{}
		}
		rep.Totals.EndedOtherCodes[code] = n
	}
	r.c.mu.Unlock()
	if n := r.c.webhookBadSig.Load(); n > 0 {
		rep.Problems = append(rep.Problems, fmt.Sprintf("%d webhook requests had a bad signature", n))
	}
	if n := r.c.protocolErrors.Load(); n > 0 {
		rep.Problems = append(rep.Problems, fmt.Sprintf("%d frames or webhook bodies could not be understood", n))
	}
	return rep, nil
}

// warmUp subscribes once as each user and leaves again, so that what
// the first client starts for good (connections to the apiserver for
// reviews, the namespace scan) exists, then returns the gateway's
// goroutine count once it is steady: the idle count that goroutines must
// return to at the end.
func (r *run) warmUp(ctx context.Context) (int64, error) {
	warm := []*subscriber{
		newSubscriber("warm-admin", kindAll, r.adminTok, "", managedBy, &r.c),
		newSubscriber("warm-viewer", kindViewerAll, r.viewerTok, "", managedBy, &r.c),
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		done := true
		for _, s := range warm {
			if !s.connected() {
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_ = s.connect(cctx, r.wsURL, &r.wg)
				cancel()
			}
			_, complete := s.view()
			done = done && complete
		}
		return done, nil
	})
	for _, s := range warm {
		s.leave()
	}
	r.wg.Wait()
	if err != nil {
		return 0, fmt.Errorf("warm-up subscriptions: %w: %s; %s", err, warm[0].status(), warm[1].status())
	}
	var last []int64
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		m, err := r.gw.Metrics(ctx)
		if err != nil {
			return false, nil
		}
		last = append(last, int64(get(m, "go_goroutines")))
		n := len(last)
		return n >= 4 && last[n-1] == last[n-2] && last[n-2] == last[n-3] && last[n-3] == last[n-4], nil
	})
	if err != nil {
		return 0, fmt.Errorf("gateway goroutines not steady after the warm-up: %v", last)
	}
	return last[len(last)-1], nil
}

// setupCluster creates the namespaces and the viewer's Role and
// RoleBindings.
func (r *run) setupCluster(ctx context.Context) error {
	rbac := r.cs.RbacV1()
	for i := range r.opts.Namespaces {
		ns := fmt.Sprintf("soak-%d", i)
		r.namespaces = append(r.namespaces, ns)
		if _, err := r.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		if i > 1 {
			continue
		}
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: roleName}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"},
		}}}
		if _, err := rbac.Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
			return err
		}
		if err := r.grant(ctx, ns); err != nil {
			return err
		}
	}
	r.granted = true
	return nil
}

func (r *run) grant(ctx context.Context, ns string) error {
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: roleName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: roleName},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: viewer}},
	}
	_, err := r.cs.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func (r *run) revoke(ctx context.Context, ns string) error {
	err := r.cs.RbacV1().RoleBindings(ns).Delete(ctx, roleName, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// gatewayConfig is the gateway's configuration: config.Default() with
// intervals shorter than the defaults, so that a short run exercises
// re-checks, keepalive and overflow many times, and a webhook to the
// receiver at hookURL, its secret written into dir.
func gatewayConfig(dir, kubeconfig string, secret []byte, hookURL string) (config.Config, error) {
	secretFile := filepath.Join(dir, "webhook.secret")
	if err := os.WriteFile(secretFile, []byte("whsec_"+base64.StdEncoding.EncodeToString(secret)+"\n"), 0o600); err != nil {
		return config.Config{}, err
	}
	sec := func(d time.Duration) config.Duration { return config.Duration(d) }
	c := config.Default()
	c.Kubeconfig = kubeconfig
	c.Listen = "" // a free loopback port, chosen by harness.StartGateway
	c.ShutdownTimeout = sec(10 * time.Second)
	c.Log = config.Log{Level: "info", Format: "json"}
	c.Cache.Resources = []string{"configmaps", "namespaces"}
	c.Cache.ListenerMaxEvents = 64
	c.WebSocket.PingInterval, c.WebSocket.PongTimeout, c.WebSocket.WriteTimeout = sec(5*time.Second), sec(5*time.Second), sec(10*time.Second)
	a := &c.Auth
	a.Authn, a.Authz = "kubernetes", "rbac"
	// The soak samples /metrics through apiserver restarts, when a scrape
	// that needs a SubjectAccessReview could not be authorized.
	a.Metrics = "none"
	a.RecheckInterval, a.RecheckGrace = sec(time.Second), sec(2*time.Second)
	a.AllowTTL, a.DenyTTL, a.NamespaceScanTTL = sec(time.Second), sec(time.Second), sec(3*time.Second)
	c.Webhooks = []webhook.Spec{{
		Name:           "soak",
		URL:            hookURL,
		Resources:      []webhook.Resource{{Resource: "configmaps", LabelSelector: managedBy}},
		EventTypes:     []string{"added", "modified", "deleted"},
		SecretFile:     secretFile,
		Format:         "watch",
		Timeout:        metav1.Duration{Duration: 5 * time.Second},
		AllowAddresses: []string{"127.0.0.0/8"},
		Retry: webhook.Retry{MaxAttempts: 100000, MaxAge: metav1.Duration{Duration: time.Hour},
			InitialBackoff: metav1.Duration{Duration: 200 * time.Millisecond}, MaxBackoff: metav1.Duration{Duration: 2 * time.Second}},
	}}
	return c, nil
}

// The subscriber population: counts per kind, kept constant by churn.
var population = []struct {
	kind kind
	n    int
}{
	{kindAll, 2}, {kindNamespace, 2}, {kindSelector, 2}, {kindResume, 2},
	{kindViewerAll, 1}, {kindViewerNS, 1}, {kindSlow, 2}, {kindStuck, 2},
}

func (r *run) newSub(k kind) *subscriber {
	r.nextID++
	name := fmt.Sprintf("%s-%d", k, r.nextID)
	tok, ns, sel := r.adminTok, "", managedBy
	switch k {
	case kindNamespace:
		ns = r.namespaces[r.nextID%len(r.namespaces)]
	case kindSelector:
		sel += ",tier=a"
	case kindViewerAll:
		tok = r.viewerTok
	case kindViewerNS:
		tok, ns = r.viewerTok, r.namespaces[1]
	}
	s := newSubscriber(name, k, tok, ns, sel, &r.c)
	if k == kindSlow {
		// Alternately a crawling reader, which can never keep up, and a
		// lagging one (16x faster), which falls behind in bursts.
		bps := r.opts.SlowReadBytes
		if r.nextID%2 == 0 {
			bps *= 16
		}
		s.limiter = rate.NewLimiter(rate.Limit(bps), 1024)
	}
	r.c.joins.Add(1)
	return s
}

func (r *run) populate() {
	for _, p := range population {
		for range p.n {
			r.subs = append(r.subs, r.newSub(p.kind))
		}
	}
}

// reconnect (re)connects subscribers without a connection and
// resubscribes those whose subscription ended or was refused. Failures
// (the apiserver is down, the gateway refuses) are retried on the next
// call.
func (r *run) reconnect(ctx context.Context) {
	for _, s := range r.subs {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if !s.connected() {
			if s.resumable() {
				r.c.reconnects.Add(1)
			}
			_ = s.connect(cctx, r.wsURL, &r.wg)
		} else {
			_ = s.resubscribe(cctx)
		}
		cancel()
	}
}

// churn makes subscribers leave and join every ChurnEvery: one fresh
// subscriber is replaced by a new one (new snapshot), one resuming
// subscriber disconnects (and resumes on the next tick with its
// resourceVersion), the never-reading ones are replaced every third tick,
// and everyone who lost a connection or subscription comes back.
func (r *run) churn(ctx context.Context) error {
	r.reconnect(ctx)
	t := time.NewTicker(r.opts.ChurnEvery)
	defer t.Stop()
	for tick := 1; ; tick++ {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		var fresh, resume []int
		for i, s := range r.subs {
			switch s.kind {
			case kindAll, kindNamespace, kindSelector:
				fresh = append(fresh, i)
			case kindResume:
				resume = append(resume, i)
			case kindStuck:
				if tick%3 == 0 {
					s.leave()
					r.c.leaves.Add(1)
					r.subs[i] = r.newSub(kindStuck)
				}
			}
		}
		i := fresh[r.rng.IntN(len(fresh))]
		r.subs[i].leave()
		r.c.leaves.Add(1)
		r.subs[i] = r.newSub(r.subs[i].kind)
		r.subs[resume[r.rng.IntN(len(resume))]].leave()
		r.reconnect(ctx)
	}
}

func (r *run) closeAll() {
	for _, s := range r.subs {
		s.leave()
	}
	r.wg.Wait()
}

// workload creates, updates and deletes ConfigMaps at OpsPerSecond.
// Errors (the apiserver restarting) are counted and the operation is
// simply not done.
func (r *run) workload(ctx context.Context) error {
	rng := mrand.New(mrand.NewPCG(3, 4))
	exists := map[string]bool{}
	t := time.NewTicker(time.Second / time.Duration(r.opts.OpsPerSecond))
	defer t.Stop()
	tiers := []string{"a", "b"}
	payload := func() string {
		b := make([]byte, 100+rng.IntN(1900))
		for i := range b {
			b[i] = 'a' + byte(rng.IntN(26))
		}
		return string(b)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		ns := r.namespaces[rng.IntN(len(r.namespaces))]
		name := fmt.Sprintf("cm-%03d", rng.IntN(r.opts.ObjectsPerNamespace))
		k := key(ns, name)
		cms := r.cs.CoreV1().ConfigMaps(ns)
		octx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var err error
		switch {
		case !exists[k]:
			cm := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
					"app.kubernetes.io/managed-by": "kubegate-soak", "tier": tiers[rng.IntN(2)]}},
				Data: map[string]string{"v": payload()},
			}
			_, err = cms.Create(octx, cm, metav1.CreateOptions{})
			if err == nil || apierrors.IsAlreadyExists(err) {
				exists[k] = true
			}
		case rng.IntN(10) < 7:
			patch := fmt.Sprintf(`{"data":{"v":%q}}`, payload())
			if rng.IntN(10) < 3 {
				patch = fmt.Sprintf(`{"metadata":{"labels":{"tier":%q}},"data":{"v":%q}}`, tiers[rng.IntN(2)], payload())
			}
			_, err = cms.Patch(octx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			if apierrors.IsNotFound(err) {
				exists[k] = false
			}
		default:
			err = cms.Delete(octx, name, metav1.DeleteOptions{})
			if err == nil || apierrors.IsNotFound(err) {
				exists[k] = false
			}
		}
		cancel()
		r.c.ops.Add(1)
		if err != nil && ctx.Err() == nil {
			r.c.opErrors.Add(1)
		}
	}
}

// flipRBAC revokes and grants the viewer's RoleBinding in namespace 1.
func (r *run) flipRBAC(ctx context.Context) error {
	t := time.NewTicker(r.opts.RBACEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		var err error
		if r.granted {
			err = r.revoke(ctx, r.namespaces[1])
		} else {
			err = r.grant(ctx, r.namespaces[1])
		}
		if err != nil {
			r.c.opErrors.Add(1) // the apiserver is restarting; try again next tick
			continue
		}
		r.granted = !r.granted
		r.c.rbacFlips.Add(1)
	}
}

// flapWebhook makes the receiver fail for WebhookFailFor every
// WebhookFailEvery.
func (r *run) flapWebhook(ctx context.Context) error {
	t := time.NewTicker(r.opts.WebhookFailEvery)
	defer t.Stop()
	defer r.rcv.failing.Store(false)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		r.rcv.failing.Store(true)
		recover := time.NewTimer(r.opts.WebhookFailFor)
		select {
		case <-ctx.Done():
			recover.Stop()
			return nil
		case <-recover.C:
		}
		r.rcv.failing.Store(false)
	}
}

// restartAPIServer stops and starts kube-apiserver every RestartEvery. A
// restart under way finishes (on runCtx) even if the load ends meanwhile.
func (r *run) restartAPIServer(ctx, runCtx context.Context) error {
	t := time.NewTicker(r.opts.RestartEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if time.Since(r.start) > r.opts.Duration-5*time.Second {
			return nil // too close to the end to matter
		}
		began := time.Now()
		if err := r.cp.StopAPIServer(); err != nil {
			return fmt.Errorf("stop kube-apiserver: %w", err)
		}
		sctx, cancel := context.WithTimeout(runCtx, 2*time.Minute)
		err := r.cp.StartAPIServer(sctx)
		cancel()
		if err != nil {
			return fmt.Errorf("start kube-apiserver: %w", err)
		}
		r.c.restarts.Add(1)
		r.opts.Logf("soak: kube-apiserver restarted at %s (down %s)", began.Sub(r.start).Truncate(time.Second), time.Since(began).Truncate(100*time.Millisecond))
	}
}

// sample records a Sample every Interval (and one at once).
func (r *run) sample(ctx context.Context, rep *Report) error {
	t := time.NewTicker(r.opts.Interval)
	defer t.Stop()
	for {
		s, err := r.takeSample(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		rep.Samples = append(rep.Samples, s)
		fmt.Fprintln(r.opts.Out, s.row())
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (r *run) takeSample(ctx context.Context) (Sample, error) {
	if r.gw.Exited() {
		return Sample{}, fmt.Errorf("gateway exited: %v\n%s", r.gw.Err(), r.gw.Tail(64<<10))
	}
	m, err := r.gw.Metrics(ctx)
	if err != nil {
		return Sample{}, err
	}
	st, err := harness.ReadProc(r.gw.PID)
	if err != nil {
		return Sample{}, err
	}
	i := func(v float64) int64 { return int64(v) }
	return Sample{
		Elapsed: time.Since(r.start), RSS: st.RSS,
		HeapAlloc: i(get(m, "go_memstats_heap_alloc_bytes")), HeapGoal: i(get(m, "go_memstats_next_gc_bytes")),
		Goroutines: i(get(m, "go_goroutines")), Sockets: i(get(m, "kubegate_ws_sockets")), Subs: i(get(m, "kubegate_ws_subscriptions")),
		Frames: i(get(m, "kubegate_ws_frames_sent_total")), Overflows: i(get(m, "kubegate_listener_overflows_total")),
		WSResets: i(get(m, "kubegate_ws_resets_total")), WSErrors: i(get(m, "kubegate_ws_error_frames_total")),
		HookOK:    i(get(m, "kubegate_webhook_deliveries_total", "outcome", "delivered")),
		HookRetry: i(get(m, "kubegate_webhook_attempts_total", "result", "5xx") + get(m, "kubegate_webhook_attempts_total", "result", "error")),
		HookQueue: i(get(m, "kubegate_webhook_queue_length")),
		Ready:     r.gw.CheckReady(ctx) == nil,
		Ops:       r.c.ops.Load(), OpErrors: r.c.opErrors.Load(), Events: r.c.events.Load(),
		Joins: r.c.joins.Load(), Leaves: r.c.leaves.Load(),
		Resets: r.c.resetOverflow.Load() + r.c.resetExpired.Load() + r.c.resetReauth.Load(),
		Ended:  r.c.ended401.Load() + r.c.ended403.Load() + r.c.ended503.Load() + r.c.endedOther.Load(),
		Closes: r.c.serverCloses.Load(), DialErrors: r.c.dialErrors.Load(),
		Restarts: r.c.restarts.Load(), RBACFlips: r.c.rbacFlips.Load(),
	}, nil
}

// truth lists the managed ConfigMaps from the apiserver: in ns (all
// namespaces when ""), matching selector.
func (r *run) truth(ctx context.Context, ns, selector string) (map[string]string, error) {
	l, err := r.cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(l.Items))
	for _, cm := range l.Items {
		out[key(cm.Namespace, cm.Name)] = cm.ResourceVersion
	}
	return out, nil
}

func (r *run) truthFor(ctx context.Context, s *subscriber) (map[string]string, error) {
	if s.kind != kindViewerAll {
		return r.truth(ctx, s.namespace, s.selector)
	}
	// The viewer may read namespaces 0 and 1 (granted again at the end).
	out := map[string]string{}
	for _, ns := range r.namespaces[:2] {
		m, err := r.truth(ctx, ns, s.selector)
		if err != nil {
			return nil, err
		}
		maps.Copy(out, m)
	}
	return out, nil
}

// finish ends the disturbances (receiver healthy, viewer granted, slow
// readers fast, never-readers gone) and waits until every live
// subscriber's view and the webhook receiver's state equal the
// apiserver's.
func (r *run) finish(ctx context.Context, rep *Report) {
	began := time.Now()
	r.rcv.failing.Store(false)
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return r.grant(ctx, r.namespaces[1]) == nil, nil
	}); err != nil {
		rep.Problems = append(rep.Problems, fmt.Sprintf("could not grant the viewer again: %v", err))
		return
	}
	live := r.subs[:0:0]
	for _, s := range r.subs {
		if s.kind == kindStuck {
			s.leave()
			continue
		}
		if s.limiter != nil {
			s.limiter.SetLimit(rate.Inf)
		}
		live = append(live, s)
	}

	var hookWant map[string]string
	wants := map[*subscriber]map[string]string{}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		if hookWant, err = r.truth(ctx, "", managedBy); err != nil {
			return false, nil
		}
		for _, s := range live {
			if wants[s], err = r.truthFor(ctx, s); err != nil {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		rep.Problems = append(rep.Problems, fmt.Sprintf("could not list the apiserver's state: %v", err))
		return
	}

	var pending []string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, r.opts.ConvergeTimeout, true, func(ctx context.Context) (bool, error) {
		r.reconnect(ctx)
		pending = pending[:0]
		for _, s := range live {
			got, complete := s.view()
			if !complete || !maps.Equal(got, wants[s]) {
				pending = append(pending, s.status()+": "+diff(got, wants[s]))
			}
		}
		if got := r.rcv.view(); !maps.Equal(got, hookWant) {
			pending = append(pending, "webhook receiver: "+diff(got, hookWant))
		}
		return len(pending) == 0, nil
	})
	rep.ConvergedAfter = time.Since(began)
	if err != nil {
		rep.Problems = append(rep.Problems, fmt.Sprintf("lost final state: after %s these views still differ from the apiserver:\n  %s",
			r.opts.ConvergeTimeout, strings.Join(pending, "\n  ")))
		return
	}
	r.opts.Logf("soak: %d subscribers and the webhook receiver equal the apiserver's %d objects %s after the load stopped",
		len(live), len(hookWant), rep.ConvergedAfter.Truncate(100*time.Millisecond))
}

// diff summarises how got differs from want.
func diff(got, want map[string]string) string {
	var missing, extra, stale []string
	for k, v := range want {
		g, ok := got[k]
		switch {
		case !ok:
			missing = append(missing, k)
		case g != v:
			stale = append(stale, fmt.Sprintf("%s@%s want %s", k, g, v))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			extra = append(extra, k)
		}
	}
	short := func(s []string) string {
		slices.Sort(s)
		if len(s) > 3 {
			return fmt.Sprintf("%v… (%d)", s[:3], len(s))
		}
		return fmt.Sprint(s)
	}
	return fmt.Sprintf("%d objects, want %d; missing %s, deleted but kept %s, stale %s",
		len(got), len(want), short(missing), short(extra), short(stale))
}

// checkIdle waits until the gateway's goroutines return to their idle
// count (plus a small slack for connections to the apiserver and the
// metrics scraper) once every client has left.
func (r *run) checkIdle(ctx context.Context, rep *Report) {
	const slack = 15
	var last int64
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		m, err := r.gw.Metrics(ctx)
		if err != nil {
			return false, nil
		}
		last = int64(get(m, "go_goroutines"))
		return last <= rep.IdleGoroutines+slack, nil
	})
	rep.FinalGoroutines = last
	if err != nil {
		rep.Problems = append(rep.Problems, fmt.Sprintf("goroutines did not return to idle after every client left: %d, idle %d (+%d allowed)",
			last, rep.IdleGoroutines, slack))
	}
	if s, err := r.takeSample(ctx); err == nil {
		rep.Samples = append(rep.Samples, s)
		fmt.Fprintln(r.opts.Out, s.row()+"  (after every client left)")
	}
}

// checkFlat applies the flatness bounds to the samples taken under load.
func (r *run) checkFlat(rep *Report) {
	var load []Sample
	for _, s := range rep.Samples {
		if s.Elapsed <= r.opts.Duration {
			load = append(load, s)
		}
	}
	series := func(f func(Sample) int64) []float64 {
		out := make([]float64, len(load))
		for i, s := range load {
			out[i] = float64(f(s))
		}
		return out
	}
	for _, c := range []struct {
		what string
		f    func(Sample) int64
		b    Bound
	}{
		{"goroutines", func(s Sample) int64 { return s.Goroutines }, GoroutineBound},
		{"RSS", func(s Sample) int64 { return s.RSS }, RSSBound},
		{"heap goal", func(s Sample) int64 { return s.HeapGoal }, HeapGoalBound},
	} {
		first, last, p := checkFlat(c.what, series(c.f), c.b)
		r.opts.Logf("soak: %s: max of first third %.0f, of last third %.0f", c.what, first, last)
		if p != "" {
			rep.Problems = append(rep.Problems, p)
		}
	}
}

// get is the sum of the samples of a metric (with the given labels, as
// name, value pairs), 0 when there is none.
func get(m harness.Metrics, name string, labels ...string) float64 {
	v, _ := m.Get(name, labels...)
	return v
}
