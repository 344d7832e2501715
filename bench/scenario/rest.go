package scenario

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"kubegate/bench/harness"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
)

// ScenarioREST is the scenario name of RunREST's figures.
const ScenarioREST = "rest"

// The REST arms. The gateway serves resourceVersion "" and "0" alike (its
// cache's current state, docs/rest.md), so it is measured once, without
// the parameter. kube-apiserver treats them differently: unset is a
// consistent read (the current revision is confirmed with etcd before the
// answer), "0" is "any version", served from its watch cache as it is.
const (
	ArmAPIServerRVUnset = ArmAPIServer + " rv=unset"
	ArmAPIServerRV0     = ArmAPIServer + " rv=0"
)

// RESTOptions configures RunREST. The zero value is usable.
type RESTOptions struct {
	// Reps is how many times each case is listed on each arm. Default 20.
	Reps int
	// CaseBudget ends a case's repetitions on one arm early, once at least
	// 3 have run and this much time has passed since the first, so the
	// slow arm (kube-apiserver takes seconds to list 10k Pods) does not
	// stretch the run. Default 4s.
	CaseBudget time.Duration
	// Concurrency is how many lists of a case are in flight at once.
	// Default 1: sequential, so a latency is one list's own.
	Concurrency int
	// PageSize is the limit of the paging case. Default 500.
	PageSize int
	// RequestTimeout bounds one list, all pages included. Default 2m.
	RequestTimeout time.Duration
	// VerifyTimeout bounds the wait for the gateway's cache to agree with
	// kube-apiserver before a case is measured. Default 30s.
	VerifyTimeout time.Duration
	// Log receives one line per case and arm, and the goals. Default none.
	Log io.Writer
}

func (o RESTOptions) withDefaults() RESTOptions {
	if o.Reps <= 0 {
		o.Reps = 20
	}
	if o.CaseBudget <= 0 {
		o.CaseBudget = 4 * time.Second
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 1
	}
	if o.PageSize <= 0 {
		o.PageSize = 500
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 2 * time.Minute
	}
	if o.VerifyTimeout <= 0 {
		o.VerifyTimeout = 30 * time.Second
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return o
}

// restMinReps is how many repetitions a case runs on an arm even past
// CaseBudget.
const restMinReps = 3

// restCase is one list request, the same on every arm.
type restCase struct {
	// name prefixes the case's metrics: "list all", ...
	name  string
	path  string
	query url.Values
	// paged lists with limit=PageSize and follows continue to the end.
	paged bool
	// accept is the Accept header; "" asks for JSON.
	accept string
	// gatewayOnly lists on the gateway's arm alone.
	gatewayOnly bool
	// consistentOnly lists on the gateway's arm and kube-apiserver's
	// with resourceVersion unset: at "0" the watch cache ignores limit
	// and answers every object.
	consistentOnly bool
}

// tableAccept asks for a meta.k8s.io/v1 Table, as kubectl does.
const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io"

// restCases are the lists RunREST measures: every Pod, one namespace's,
// one label-selected shard, and every Pod in pages.
func restCases(env *Env, pageSize int) []restCase {
	return []restCase{
		{name: "list all", path: "/api/v1/pods"},
		{name: "list namespace", path: "/api/v1/namespaces/" + url.PathEscape(env.Namespaces[0]) + "/pods"},
		{name: "list selector", path: "/api/v1/pods", query: url.Values{"labelSelector": {env.Selector}}},
		{name: "list all limit=" + strconv.Itoa(pageSize), path: "/api/v1/pods", paged: true},
	}
}

// restArm is a server and how to ask it.
type restArm struct {
	name   string
	base   string
	client *http.Client
	token  string
	// rv is the resourceVersion sent with the first page; "" sends none.
	rv string
	// pid is the serving process; etcdPID, when not 0, is etcd behind it.
	pid, etcdPID int
}

// RunREST measures the gateway's REST lists against kube-apiserver's on
// the same Pods: for each case (all Pods, one namespace, a label selector,
// all Pods in pages of PageSize) and each arm (gateway; kube-apiserver with
// resourceVersion unset and "0") it reports latency p50 and p99 over the
// repetitions, bytes per list, the serving process's CPU time per list
// (and etcd's, for kube-apiserver), items and, for paging, pages per list;
// and this process's CPU time per list, to show the client was not the
// limit.
//
// The client reads each answer into io.Discard, decoding only the list's
// metadata for the continue token, so it stays cheap next to the servers.
// Neither side is asked for gzip (client-go asks by default; on loopback it
// costs the server CPU and saves nothing). Before measuring a case, it
// checks once that every arm returns the same set of Pods, and fails
// otherwise.
func RunREST(ctx context.Context, env *Env, o RESTOptions) ([]Figure, error) {
	o = o.withDefaults()
	if len(env.Namespaces) == 0 || env.Selector == "" {
		return nil, errors.New("rest: the environment has no namespaces or selector")
	}
	figs, err := runRESTCases(ctx, env, ScenarioREST, restCases(env, o.PageSize), o)
	if err != nil {
		return figs, err
	}
	for _, line := range goalLines(RESTGoals(figs)) {
		fmt.Fprintln(o.Log, line)
	}
	return figs, nil
}

// runRESTCases measures cases on every arm (the gateway's alone for a
// case that says so), as figures of scenario.
func runRESTCases(ctx context.Context, env *Env, scenario string, cases []restCase, o RESTOptions) ([]Figure, error) {
	arms, closeArms, err := restArms(env, o.Concurrency)
	if err != nil {
		return nil, err
	}
	defer closeArms()

	var figs []Figure
	for _, c := range cases {
		as := arms
		switch {
		case c.gatewayOnly:
			as = arms[:1]
		case c.consistentOnly:
			as = arms[:2]
		}
		n, err := verifyREST(ctx, as, c, o)
		if err != nil {
			return figs, err
		}
		fmt.Fprintf(o.Log, "%s: %s: %d items, the same on every arm\n", scenario, c.name, n)
		for _, a := range as {
			r, err := measureREST(ctx, a, c, o)
			if err != nil {
				return figs, err
			}
			fmt.Fprintf(o.Log, "%s: %s: %-18s %3d reps  p50 %8.2f ms  p99 %8.2f ms  %9.0f KiB  CPU %7.2f ms/list\n",
				scenario, c.name, a.name, r.reps, Milliseconds(r.p50), Milliseconds(r.p99), float64(r.bytes)/1024, Milliseconds(r.cpu))
			figs = append(figs, r.figures(scenario, a, c, n)...)
		}
	}
	return figs, nil
}

// restArms builds the three arms, in this order: the gateway's on a
// client that keeps concurrency+1 idle connections, kube-apiserver's
// with resourceVersion unset and "0" on one client-go HTTP client (TLS,
// HTTP/2). The returned func closes idle connections.
func restArms(env *Env, concurrency int) ([]*restArm, func(), error) {
	gw := &http.Client{Transport: &http.Transport{
		DisableCompression:  true,
		MaxIdleConnsPerHost: concurrency + 1,
	}}
	cfg := rest.CopyConfig(env.APIServer)
	cfg.DisableCompression = true
	api, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("rest: apiserver client: %w", err)
	}
	etcdPID := 0
	if cp := env.ControlPlane(); cp != nil {
		etcdPID = cp.EtcdPID()
	}
	arms := []*restArm{
		{name: ArmGateway, base: env.GatewayURL, client: gw, token: env.GatewayToken, pid: env.GatewayPID},
		{name: ArmAPIServerRVUnset, base: cfg.Host, client: api, pid: env.APIServerPID, etcdPID: etcdPID},
		{name: ArmAPIServerRV0, base: cfg.Host, client: api, rv: "0", pid: env.APIServerPID, etcdPID: etcdPID},
	}
	return arms, func() { gw.CloseIdleConnections(); api.CloseIdleConnections() }, nil
}

// list runs case c once on arm a, every page, and hands each page's body to
// page, which returns that page's continue token.
func (a *restArm) list(ctx context.Context, c restCase, pageSize int, page func(io.Reader) (string, error)) (pages int, err error) {
	cont := ""
	for {
		q := url.Values{}
		maps.Copy(q, c.query)
		if c.paged {
			q.Set("limit", strconv.Itoa(pageSize))
		}
		if cont != "" {
			q.Set("continue", cont)
		} else if a.rv != "" {
			q.Set("resourceVersion", a.rv)
		}
		u := strings.TrimSuffix(a.base, "/") + c.path
		if len(q) > 0 {
			u += "?" + q.Encode()
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return pages, err
		}
		req.Header.Set("Accept", cmp.Or(c.accept, "application/json"))
		// Set, so that Go's transport does not ask for gzip on its own.
		req.Header.Set("Accept-Encoding", "identity")
		if a.token != "" {
			req.Header.Set("Authorization", "Bearer "+a.token)
		}
		resp, err := a.client.Do(req)
		if err != nil {
			return pages, fmt.Errorf("%s: GET %s: %w", a.name, u, err)
		}
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
			resp.Body.Close()
			return pages, fmt.Errorf("%s: GET %s: %s: %s", a.name, u, resp.Status, bytes.TrimSpace(b))
		}
		cont, err = page(resp.Body)
		resp.Body.Close()
		pages++
		if err != nil {
			return pages, fmt.Errorf("%s: GET %s: %w", a.name, u, err)
		}
		if cont == "" || !c.paged {
			return pages, nil
		}
		if pages > 1_000_000 {
			return pages, fmt.Errorf("%s: GET %s: more than a million pages", a.name, u)
		}
	}
}

// restResult is one case on one arm.
type restResult struct {
	reps     int
	p50, p99 time.Duration
	bytes    int64 // per list
	pages    int   // per list
	// CPU time per list of the serving process, etcd and this process.
	cpu, etcdCPU, clientCPU time.Duration
}

func (r restResult) figures(scenario string, a *restArm, c restCase, items int) []Figure {
	fig := func(metric, unit string, v float64) Figure {
		return Figure{Scenario: scenario, Arm: a.name, Metric: c.name + " " + metric, Unit: unit, Value: v}
	}
	figs := []Figure{
		fig("p50", "ms", Milliseconds(r.p50)),
		fig("p99", "ms", Milliseconds(r.p99)),
		fig("size", "KiB", float64(r.bytes)/1024),
		fig("CPU/list", "ms", Milliseconds(r.cpu)),
		fig("items", "count", float64(items)),
	}
	if a.etcdPID != 0 {
		figs = append(figs, fig("etcd CPU/list", "ms", Milliseconds(r.etcdCPU)))
	}
	if c.paged {
		figs = append(figs, fig("pages", "count", float64(r.pages)))
	}
	// The client's own cost, so a reader can tell it was not the limit.
	figs = append(figs, Figure{Scenario: scenario, Arm: ArmBench + " (" + a.name + ")",
		Metric: c.name + " client CPU/list", Unit: "ms", Value: Milliseconds(r.clientCPU)})
	return figs
}

// measureREST lists c on a up to o.Reps times (fewer past o.CaseBudget),
// o.Concurrency at a time, and reads the serving processes' CPU time before
// and after.
func measureREST(ctx context.Context, a *restArm, c restCase, o RESTOptions) (restResult, error) {
	var r restResult
	cpu0, err := harness.ReadCPU(a.pid)
	if err != nil {
		return r, err
	}
	etcd0, err := harness.ReadCPU(a.etcdPID)
	if err != nil {
		return r, err
	}
	self0, err := harness.ReadCPU(os.Getpid())
	if err != nil {
		return r, err
	}
	var (
		mu      sync.Mutex // guards lat, total and pages
		lat     []time.Duration
		total   int64
		pages   int
		next    atomic.Int64
		started = time.Now()
	)
	g, gctx := errgroup.WithContext(ctx)
	for range o.Concurrency {
		g.Go(func() error {
			buf := make([]byte, 256<<10)
			for {
				i := next.Add(1)
				if i > int64(o.Reps) || (i > restMinReps && time.Since(started) > o.CaseBudget) {
					return nil
				}
				lctx, cancel := context.WithTimeout(gctx, o.RequestTimeout)
				var n int64
				t0 := time.Now()
				p, err := a.list(lctx, c, o.PageSize, func(body io.Reader) (string, error) {
					w := headWriter{head: make([]byte, 0, 4096)}
					if _, err := io.CopyBuffer(&w, body, buf); err != nil {
						return "", err
					}
					n += w.n
					return listContinue(w.head)
				})
				d := time.Since(t0)
				cancel()
				if err != nil {
					return fmt.Errorf("rest: %s: %w", c.name, err)
				}
				mu.Lock()
				lat = append(lat, d)
				total += n
				pages += p
				mu.Unlock()
			}
		})
	}
	if err := g.Wait(); err != nil {
		return r, err
	}
	cpu1, err := harness.ReadCPU(a.pid)
	if err != nil {
		return r, err
	}
	etcd1, err := harness.ReadCPU(a.etcdPID)
	if err != nil {
		return r, err
	}
	self1, err := harness.ReadCPU(os.Getpid())
	if err != nil {
		return r, err
	}
	r.reps = len(lat)
	r.bytes = total / int64(r.reps)
	r.pages = pages / r.reps
	r.cpu = cpu1.Since(cpu0) / time.Duration(r.reps)
	r.etcdCPU = etcd1.Since(etcd0) / time.Duration(r.reps)
	r.clientCPU = self1.Since(self0) / time.Duration(r.reps)
	r.p50 = Percentile(lat, 0.50)
	r.p99 = Percentile(lat, 0.99)
	return r, nil
}

// headWriter counts what is written to it and keeps the first cap(head)
// bytes.
type headWriter struct {
	head []byte
	n    int64
}

func (w *headWriter) Write(p []byte) (int, error) {
	if room := cap(w.head) - len(w.head); room > 0 {
		w.head = append(w.head, p[:min(room, len(p))]...)
	}
	w.n += int64(len(p))
	return len(p), nil
}

// listContinue returns the continue token of a list whose JSON starts with
// head. Both servers write metadata before items, so the token is in the
// first bytes and the items are never decoded.
func listContinue(head []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(head))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", fmt.Errorf("answer is not a JSON object: %.40q", head)
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", fmt.Errorf("list metadata not within the first %d bytes: %w", len(head), err)
		}
		switch t {
		case "metadata":
			var m struct {
				Continue string `json:"continue"`
			}
			if err := dec.Decode(&m); err != nil {
				return "", fmt.Errorf("list metadata not within the first %d bytes: %w", len(head), err)
			}
			return m.Continue, nil
		case "items":
			return "", errors.New("list items come before its metadata")
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return "", fmt.Errorf("list metadata not within the first %d bytes: %w", len(head), err)
			}
		}
	}
	return "", errors.New("list has no metadata")
}

// listPage is what verification decodes of a list: the names only, of
// its items or, for a Table, of its rows' objects (includeObject=Metadata,
// the default, gives each row its object's metadata).
type listPage struct {
	Metadata struct {
		Continue string `json:"continue"`
	} `json:"metadata"`
	Items []listItem `json:"items"`
	Rows  []struct {
		Object listItem `json:"object"`
	} `json:"rows"`
}

type listItem struct {
	Metadata struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"metadata"`
}

// listNames runs c once on a and returns the items' namespace/name in the
// order served.
func listNames(ctx context.Context, a *restArm, c restCase, pageSize int) ([]string, error) {
	var names []string
	_, err := a.list(ctx, c, pageSize, func(body io.Reader) (string, error) {
		var p listPage
		if err := json.NewDecoder(body).Decode(&p); err != nil {
			return "", err
		}
		for _, r := range p.Rows {
			p.Items = append(p.Items, r.Object)
		}
		// kube-apiserver may answer resourceVersion=0 from its watch
		// cache in one page whatever the limit; the gateway must page.
		if c.paged && a.name == ArmGateway && len(p.Items) > pageSize {
			return "", fmt.Errorf("page of %d items with limit=%d", len(p.Items), pageSize)
		}
		for _, it := range p.Items {
			names = append(names, it.Metadata.Namespace+"/"+it.Metadata.Name)
		}
		return p.Metadata.Continue, nil
	})
	return names, err
}

// verifyREST lists c on every arm, and also on the gateway with
// resourceVersion=0, until all return the same Pods (the gateway's cache
// may trail kube-apiserver by the informer's delay) or o.VerifyTimeout
// passes. It returns the number of Pods.
func verifyREST(ctx context.Context, arms []*restArm, c restCase, o RESTOptions) (int, error) {
	gw0 := *arms[0]
	gw0.name, gw0.rv = arms[0].name+" rv=0", "0"
	all := append([]*restArm{&gw0}, arms...)
	var mismatch error
	n := 0
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, o.VerifyTimeout, true, func(ctx context.Context) (bool, error) {
		lists := make([][]string, len(all))
		for i, a := range all {
			lctx, cancel := context.WithTimeout(ctx, o.RequestTimeout)
			names, err := listNames(lctx, a, c, o.PageSize)
			cancel()
			if err != nil {
				return false, fmt.Errorf("rest: %s: %w", c.name, err)
			}
			lists[i] = names
		}
		mismatch = nil
		for i := 1; i < len(all); i++ {
			if err := sameNames(all[i].name, lists[i], all[0].name, lists[0]); err != nil {
				mismatch = err
				return false, nil
			}
		}
		n = len(lists[0])
		return true, nil
	})
	if mismatch != nil {
		return 0, fmt.Errorf("rest: %s: arms disagree after %v: %w", c.name, o.VerifyTimeout, mismatch)
	}
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, fmt.Errorf("rest: %s: no Pods listed", c.name)
	}
	return n, nil
}

// sameNames reports how the lists a and b (named an and bn) differ: in
// length, duplicates, or members.
func sameNames(an string, a []string, bn string, b []string) error {
	sa, sb := nameSet(a), nameSet(b)
	var problems []string
	if len(a) != len(b) {
		problems = append(problems, fmt.Sprintf("%s has %d items, %s %d", an, len(a), bn, len(b)))
	}
	if len(sa) != len(a) {
		problems = append(problems, fmt.Sprintf("%s lists %d items more than once", an, len(a)-len(sa)))
	}
	if len(sb) != len(b) {
		problems = append(problems, fmt.Sprintf("%s lists %d items more than once", bn, len(b)-len(sb)))
	}
	if only := setMinus(sa, sb); len(only) > 0 {
		problems = append(problems, fmt.Sprintf("only %s has %d: %s", an, len(only), sample(only)))
	}
	if only := setMinus(sb, sa); len(only) > 0 {
		problems = append(problems, fmt.Sprintf("only %s has %d: %s", bn, len(only), sample(only)))
	}
	if len(problems) == 0 {
		return nil
	}
	return errors.New(strings.Join(problems, "; "))
}

func nameSet(names []string) map[string]struct{} {
	s := make(map[string]struct{}, len(names))
	for _, n := range names {
		s[n] = struct{}{}
	}
	return s
}

func setMinus(a, b map[string]struct{}) []string {
	var out []string
	for n := range a {
		if _, ok := b[n]; !ok {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

func sample(names []string) string {
	if len(names) > 5 {
		return strings.Join(names[:5], ", ") + ", ..."
	}
	return strings.Join(names, ", ")
}

// The performance goals for the full list of Pods.
const (
	restGoalSpeedup = 10.0
	restGoalP99     = 50.0 // ms
)

// RESTGoals states the list goals against RunREST's figures: the full
// list at least 10× faster than kube-apiserver's (by p50, against each
// apiserver arm, with the ratio of CPU per list beside it) and its p99 at
// most 50 ms. It returns nothing without those figures.
func RESTGoals(figs []Figure) []Goal {
	get := func(arm, metric string) (float64, bool) {
		for _, f := range figs {
			if f.Scenario == ScenarioREST && f.Arm == arm && f.Metric == metric {
				return f.Value, true
			}
		}
		return 0, false
	}
	gw50, ok1 := get(ArmGateway, "list all p50")
	gw99, ok2 := get(ArmGateway, "list all p99")
	items, _ := get(ArmGateway, "list all items")
	if !ok1 || !ok2 || gw50 <= 0 {
		return nil
	}
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	var lines []Goal
	for _, arm := range []string{ArmAPIServerRVUnset, ArmAPIServerRV0} {
		api50, ok := get(arm, "list all p50")
		if !ok {
			continue
		}
		x := api50 / gw50
		g := Goal{Goal: fmt.Sprintf("list of all %.0f Pods >= %.0fx faster than %s", items, restGoalSpeedup, arm),
			Figure:  fmt.Sprintf("gateway p50 %.1f ms, %s p50 %.1f ms: %.1fx", gw50, arm, api50, x),
			Verdict: verdict(x >= restGoalSpeedup)}
		// Latency on a busy machine is mostly waiting for a core; the CPU
		// ratio does not depend on the machine's load.
		gwCPU, ok1 := get(ArmGateway, "list all CPU/list")
		apiCPU, ok2 := get(arm, "list all CPU/list")
		if ok1 && ok2 && gwCPU > 0 {
			g.After = fmt.Sprintf(" (CPU per list %.1f ms vs %.1f ms: %.1fx)", gwCPU, apiCPU, apiCPU/gwCPU)
		}
		lines = append(lines, g)
	}
	lines = append(lines, Goal{Goal: fmt.Sprintf("list of all %.0f Pods p99 <= %.0f ms", items, restGoalP99),
		Figure: fmt.Sprintf("gateway p99 %.1f ms", gw99), Verdict: verdict(gw99 <= restGoalP99)})
	return lines
}
