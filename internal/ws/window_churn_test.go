package ws

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"kubegate/internal/informer"
	"kubegate/internal/livequery"
	"kubegate/internal/livequery/feed"
	"kubegate/internal/livequery/wire"
	"kubegate/internal/rows"
	"kubegate/internal/testenv"
)

// churnBound bounds every wait of a churner: a failure bound for a
// loaded machine, not a period anything waits for.
const churnBound = time.Minute

// goT is a testing.TB for a goroutine other than the test's: Fatal
// reports the failure and ends that goroutine (runtime.Goexit runs its
// defers), as FailNow may end only the test's own goroutine.
type goT struct{ testing.TB }

func (g goT) Fatal(args ...any) {
	g.TB.Helper()
	g.TB.Error(args...)
	runtime.Goexit()
}

func (g goT) Fatalf(format string, args ...any) {
	g.TB.Helper()
	g.TB.Errorf(format, args...)
	runtime.Goexit()
}

// buildGate is the tables' view build hook. Once armed, it holds every
// other build between its scan of the rows and its catch-up until the
// workload's next step has changed the table (and the checked windows
// have seen it), so those builds catch up with changes made while they
// ran, whatever the machine's timing; and their clients can leave while
// they are held. Disarmed, it holds nothing.
type buildGate struct {
	mu    sync.Mutex
	armed bool
	seen  int           // builds that passed while armed
	next  chan struct{} // closed by stepped
	done  chan struct{} // closed by disarm
	// holding receives a value when a build is held, if someone waits
	// for one then.
	holding chan struct{}
	held    atomic.Int64
}

func newBuildGate() *buildGate {
	return &buildGate{next: make(chan struct{}), done: make(chan struct{}), holding: make(chan struct{})}
}

func (g *buildGate) hold() {
	g.mu.Lock()
	if !g.armed {
		g.mu.Unlock()
		return
	}
	g.seen++
	if g.seen%2 == 0 {
		g.mu.Unlock()
		return
	}
	next := g.next
	g.mu.Unlock()
	g.held.Add(1)
	select {
	case g.holding <- struct{}{}:
	default:
	}
	select {
	case <-next:
	case <-g.done:
	}
}

func (g *buildGate) arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.done:
	default:
		g.armed = true
	}
}

// stepped lets the held builds go on: the table has changed.
func (g *buildGate) stepped() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.next)
	g.next = make(chan struct{})
}

// disarm lets every build go, now and from now on. Safe to call more
// than once.
func (g *buildGate) disarm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed = false
	select {
	case <-g.done:
	default:
		close(g.done)
	}
}

// churnSpec is a churner's view: a window spec with the parameters that
// ask for it.
type churnSpec struct {
	windowSpec
	sort, order, text, labelSel, fieldSel string
}

func (s *churnSpec) String() string {
	return fmt.Sprintf("sort=%s order=%s filter=%q labelSelector=%q fieldSelector=%q offset=%d limit=%d",
		s.sort, s.order, s.text, s.labelSel, s.fieldSel, s.offset, s.limit)
}

// randomChurnSpec returns a view of a sort, order, text filter, label and
// field selectors and range drawn from rng: mostly views no window has.
// Its expected rows are computed from every ConfigMap of the namespace.
func randomChurnSpec(rng *rand.Rand) *churnSpec {
	sorts := []struct {
		key string
		cmp func(a, b cmKey) int
	}{
		{"data", func(a, b cmKey) int { return cmp.Compare(a.data, b.data) }},
		{"NAME", func(a, b cmKey) int { return cmp.Compare(a.name, b.name) }},
		{".metadata.name", func(a, b cmKey) int { return cmp.Compare(a.name, b.name) }},
		{"Age", func(a, b cmKey) int { return b.created.Compare(a.created) }}, // youngest first
		{"metadata.creationTimestamp", func(a, b cmKey) int { return a.created.Compare(b.created) }},
		{"metadata.namespace", func(a, b cmKey) int { return cmp.Compare(a.ns, b.ns) }},
	}
	sort := sorts[rng.IntN(len(sorts))]
	s := &churnSpec{sort: sort.key, order: []string{"asc", "desc"}[rng.IntN(2)]}
	s.cmp = sort.cmp
	if s.order == "desc" {
		s.cmp = func(a, b cmKey) int { return sort.cmp(b, a) } // the tiebreak stays ascending
	}
	// Letters no cell of a ConfigMap holds (Data is a count, Age an RFC
	// 3339 time), so that the text filter is on the name.
	s.text = []string{"", "", "a", "b", "x", "y", "ab", "xy", "ya", "B"}[rng.IntN(10)]
	s.labelSel = []string{"lq=1", "lq=1", "lq in (0,1)", "lq!=fence", "lq", ""}[rng.IntN(6)]
	if rng.IntN(3) == 0 {
		s.fieldSel = "metadata.name!=" + string("abxyz"[rng.IntN(5)]) + string("abxyz"[rng.IntN(5)]) + string("abxyz"[rng.IntN(5)])
	}
	lsel, err := labels.Parse(s.labelSel)
	if err != nil {
		panic(err)
	}
	fsel, err := fields.ParseSelector(s.fieldSel)
	if err != nil {
		panic(err)
	}
	text := strings.ToLower(s.text)
	s.match = func(k cmKey) bool {
		return lsel.Matches(labels.Set(k.labels)) && fsel.Matches(fields.Set{"metadata.name": k.name, "metadata.namespace": k.ns}) &&
			strings.Contains(k.name, text)
	}
	s.offset, s.limit = rng.IntN(4), 1+rng.IntN(8)
	s.sub = map[string]any{"sort": s.sort, "order": s.order, "filter": s.text, "labelSelector": s.labelSel,
		"fieldSelector": s.fieldSel, "offset": s.offset, "limit": s.limit}
	return s
}

// churn is clients opening new views on the ConfigMaps' table while the
// workload runs, each in a loop of its own, one view at a time, in four
// ways drawn at random:
//
//   - a WebSocket window followed to its first WINDOW frame, which must
//     equal the sorted list at the version it reports (the apiserver's
//     list at exactly that resourceVersion), then the socket closed;
//   - a WebSocket window whose socket closes right after it subscribes,
//     before or while its view is built;
//   - a sorted list's read as the REST handler does it (a window opened,
//     its snapshot taken, closed), checked like the first;
//   - such a read whose request is cancelled once a view build is held
//     (see buildGate): its own, mostly, which then stops.
//
// (Package ws cannot start the REST server: the gateway wires the parts,
// and tests of a part may build only that part, see package gateway's
// TestLayering. So the list is read through the live tables the REST
// handler reads, with the calls it makes.)
type churn struct {
	t      *testing.T
	ts     *testServer
	res    *informer.Resource
	tables *feed.Tables
	cols   []rows.Column
	ns     string
	cms    corev1client.ConfigMapInterface
	gate   *buildGate
	quit   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once

	// What the churners did, by way.
	followed, abandoned, listed, cancelled, builtAnyway atomic.Int64
}

// startChurn arms gate and starts n churners; they stop when the test
// ends, or at stopAndReport.
func startChurn(t *testing.T, ts *testServer, m *informer.Manager, ns string, gate *buildGate, n int) *churn {
	t.Helper()
	res, err := m.Resource(t.Context(), "configmaps")
	if err != nil {
		t.Fatal(err)
	}
	c := &churn{t: t, ts: ts, res: res, tables: ts.opts.Tables, cols: rows.ForResource(t.Context(), m, res).Columns(), ns: ns,
		cms: testenv.Get(t).Client.CoreV1().ConfigMaps(ns), gate: gate, quit: make(chan struct{})}
	gate.arm()
	for i := range n {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.run(rand.New(rand.NewPCG(uint64(i), 29)))
		}()
	}
	t.Cleanup(c.stop) // first, if the test fails before stopAndReport
	return c
}

// stop ends the churners and waits for them, bounded.
func (c *churn) stop() {
	c.once.Do(func() {
		close(c.quit)
		c.gate.disarm()
	})
	done := make(chan struct{})
	go func() {
		c.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(churnBound):
		c.t.Errorf("churners still running %s after they were told to stop", churnBound)
	}
}

// stopAndReport stops the churners and checks that they did what the
// test is for: views checked, and builds left by their clients.
func (c *churn) stopAndReport() {
	c.t.Helper()
	c.stop()
	c.t.Logf("churn: %d windows followed, %d abandoned, %d lists read, %d cancelled while building (%d built first); %d builds held",
		c.followed.Load(), c.abandoned.Load(), c.listed.Load(), c.cancelled.Load(), c.builtAnyway.Load(), c.gate.held.Load())
	if c.followed.Load() < 10 || c.listed.Load() < 10 {
		c.t.Errorf("churners checked %d windows and %d lists: too few for the test to mean anything", c.followed.Load(), c.listed.Load())
	}
	if c.cancelled.Load() == 0 {
		c.t.Error("no list was cancelled while its view was being built")
	}
	if c.gate.held.Load() == 0 {
		c.t.Error("no view build was held until the table changed")
	}
}

func (c *churn) run(rng *rand.Rand) {
	gt := goT{c.t}
	for {
		select {
		case <-c.quit:
			return
		default:
		}
		s := randomChurnSpec(rng)
		switch rng.IntN(4) {
		case 0:
			c.follow(gt, s)
		case 1:
			c.abandon(gt, s)
		case 2:
			c.list(gt, s)
		default:
			c.cancel(gt, s)
		}
	}
}

// dial opens a socket of the churner's own.
func (c *churn) dial(gt goT) *client {
	conn, _, err := dialOpts(gt, c.ts, nil)
	if err != nil {
		gt.Fatalf("churner's dial: %v", err)
	}
	conn.SetReadLimit(-1)
	return &client{t: gt, c: conn}
}

func (c *churn) subscribe(cl *client, s *churnSpec) {
	cl.subscribe("churn", "configmaps", c.ns, func(m map[string]any) {
		for k, v := range s.sub {
			m[k] = v
		}
	})
}

// follow subscribes to a window of s, and checks its first WINDOW frame.
func (c *churn) follow(gt goT, s *churnSpec) {
	cl := c.dial(gt)
	defer cl.c.CloseNow()
	c.subscribe(cl, s)
	if f := cl.next(); f.Type != "ack" || f.ID != "churn" {
		gt.Fatalf("window %s: got %v, want its ack", s, f)
	}
	w := &winCopy{t: gt, id: "churn"}
	w.apply(cl.next())
	c.check(gt, s, "window", w.names(), w.count, w.offset, w.rv)
	c.followed.Add(1)
}

// abandon subscribes to a window of s and closes the socket at once.
func (c *churn) abandon(gt goT, s *churnSpec) {
	cl := c.dial(gt)
	c.subscribe(cl, s)
	_ = cl.c.CloseNow()
	c.abandoned.Add(1)
}

// query is the livequery query of a sorted list of s, as the REST
// handler makes it.
func (c *churn) query(gt goT, s *churnSpec) livequery.Query {
	filter, err := informer.ParseFilter(c.res.Info, c.ns, s.labelSel, s.fieldSel)
	if err != nil {
		gt.Fatalf("%s: %v", s, err)
	}
	spec, err := wire.Params{Sort: s.sort, Order: s.order, Filter: s.text}.Resolve(c.res.Info, c.cols)
	if err != nil {
		gt.Fatalf("%s: %v", s, err)
	}
	return livequery.Query{Sort: spec.Sort, Filter: wire.Filter(filter, spec.Text),
		Range: livequery.Range{Offset: s.offset, Limit: s.limit}, Owner: "lister"}
}

// list reads a page of s, as a sorted list does, and checks it.
func (c *churn) list(gt goT, s *churnSpec) {
	ctx, cancel := context.WithTimeout(context.Background(), churnBound)
	defer cancel()
	fw, err := c.tables.Open(ctx, c.res, c.query(gt, s))
	if err != nil {
		gt.Fatalf("list %s: %v", s, err)
	}
	c.checkSnapshot(gt, s, fw)
	c.listed.Add(1)
}

// cancel starts reading a page of s and cancels the read once a build is
// held, or once it has returned.
func (c *churn) cancel(gt goT, s *churnSpec) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		fw  *feed.Window
		err error
	}
	res := make(chan result, 1)
	q := c.query(gt, s)
	go func() {
		fw, err := c.tables.Open(ctx, c.res, q)
		res <- result{fw, err}
	}()
	var r result
	select {
	case <-c.gate.holding:
		cancel()
		r = <-res
	case r = <-res:
	case <-c.quit:
		cancel()
		r = <-res
	case <-time.After(churnBound):
		gt.Fatalf("list %s: neither answered nor building after %s", s, churnBound)
	}
	switch {
	case errors.Is(r.err, context.Canceled):
		c.cancelled.Add(1)
	case r.err != nil:
		gt.Fatalf("cancelled list %s: %v", s, r.err)
	default:
		c.checkSnapshot(gt, s, r.fw)
		c.builtAnyway.Add(1)
	}
}

// checkSnapshot checks fw's snapshot against s, then closes fw.
func (c *churn) checkSnapshot(gt goT, s *churnSpec, fw *feed.Window) {
	snap, err := fw.Snapshot()
	fw.Close()
	if err != nil {
		gt.Fatalf("list %s: %v", s, err)
	}
	names := make([]string, len(snap.Rows))
	for i, r := range snap.Rows {
		names[i] = r.Namespace + "/" + r.Name
	}
	c.check(gt, s, "list", names, snap.Count, snap.Offset, snap.Version)
}

// check compares a view's first rows, count and offset with the sorted
// list at rv: the apiserver's list of the namespace at exactly rv.
func (c *churn) check(gt goT, s *churnSpec, what string, names []string, count, offset int, rv uint64) {
	gt.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), churnBound)
	defer cancel()
	l, err := c.cms.List(ctx, metav1.ListOptions{ResourceVersion: strconv.FormatUint(rv, 10),
		ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	if err != nil {
		gt.Fatalf("%s %s: list at its rv %d: %v", what, s, rv, err)
	}
	wantNames, wantCount, wantOffset := s.expected(cmKeys(l.Items))
	if !slices.Equal(names, wantNames) || count != wantCount || offset != wantOffset {
		gt.Fatalf("new %s %s at rv %d:\n got %v count %d offset %d\nwant %v count %d offset %d",
			what, s, rv, names, count, offset, wantNames, wantCount, wantOffset)
	}
}
