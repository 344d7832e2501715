package ws

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"kubegate/internal/informer"
	"kubegate/internal/livequery/wire"
	"kubegate/internal/rows"
	"kubegate/internal/testenv"
)

// wireOp is one operation of a WINDOW frame.
type wireOp struct {
	Op     string          `json:"op"`
	Pos    int             `json:"pos"`
	To     int             `json:"to"`
	Row    json.RawMessage `json:"row"`
	Count  int             `json:"count"`
	Offset int             `json:"offset"`
	Reason string          `json:"reason"`
}

// winCopy is a client's copy of a window, kept by applying WINDOW frames
// as docs/protocol.md says.
type winCopy struct {
	t      testing.TB
	id     string
	rows   []wireRow
	count  int
	offset int
	rv     uint64
	cursor string
	resets []string // reasons of the resets applied
	frames int
}

func (w *winCopy) apply(f frame) {
	w.t.Helper()
	if f.Type != "WINDOW" || f.ID != w.id {
		w.t.Fatalf("got %v, want a WINDOW frame for %q", f, w.id)
	}
	rv, err := strconv.ParseUint(f.RV, 10, 64)
	if err != nil || rv < w.rv {
		w.t.Fatalf("WINDOW rv %q after %d", f.RV, w.rv)
	}
	w.rv = rv
	w.frames++
	if f.Cursor != "" {
		w.cursor = f.Cursor
	}
	row := func(op wireOp) wireRow {
		var r wireRow
		if err := json.Unmarshal(op.Row, &r); err != nil || r.Name == "" {
			w.t.Fatalf("op %+v: row %s: %v", op, op.Row, err)
		}
		return r
	}
	for _, op := range f.Ops {
		switch op.Op {
		case "insert":
			if op.Pos < 0 || op.Pos > len(w.rows) {
				w.t.Fatalf("insert at %d into %d rows", op.Pos, len(w.rows))
			}
			w.rows = slices.Insert(w.rows, op.Pos, row(op))
		case "remove":
			if op.Pos < 0 || op.Pos >= len(w.rows) {
				w.t.Fatalf("remove at %d of %d rows", op.Pos, len(w.rows))
			}
			w.rows = slices.Delete(w.rows, op.Pos, op.Pos+1)
		case "move":
			if op.Pos < 0 || op.Pos >= len(w.rows) || op.To < 0 || op.To >= len(w.rows) {
				w.t.Fatalf("move %d→%d in %d rows", op.Pos, op.To, len(w.rows))
			}
			w.rows = slices.Delete(w.rows, op.Pos, op.Pos+1)
			w.rows = slices.Insert(w.rows, op.To, row(op))
		case "update":
			if op.Pos < 0 || op.Pos >= len(w.rows) {
				w.t.Fatalf("update at %d of %d rows", op.Pos, len(w.rows))
			}
			w.rows[op.Pos] = row(op)
		case "count":
			w.count, w.offset = op.Count, op.Offset
		case "reset":
			w.rows = w.rows[:0]
			w.resets = append(w.resets, op.Reason)
		default:
			w.t.Fatalf("unknown op %+v", op)
		}
	}
}

func (w *winCopy) names() []string {
	out := make([]string, len(w.rows))
	for i, r := range w.rows {
		out[i] = r.Namespace + "/" + r.Name
	}
	return out
}

// readWindows reads frames, applying each WINDOW to its copy, until done
// holds; other frames fail the test.
func readWindows(t *testing.T, c *client, copies map[string]*winCopy, done func() bool) {
	t.Helper()
	for !done() {
		f := c.next()
		w := copies[f.ID]
		if w == nil || f.Type != "WINDOW" {
			t.Fatalf("unexpected frame %v", f)
		}
		w.apply(f)
	}
}

// cmKey is what the windows of the test sort and filter ConfigMaps by.
type cmKey struct {
	ns, name string
	data     int
	created  time.Time
	labels   map[string]string
}

// cmKeys returns what windows sort and filter cms by.
func cmKeys(cms []corev1.ConfigMap) []cmKey {
	keys := make([]cmKey, len(cms))
	for i, cm := range cms {
		keys[i] = cmKey{ns: cm.Namespace, name: cm.Name, data: len(cm.Data) + len(cm.BinaryData),
			created: cm.CreationTimestamp.Time, labels: cm.Labels}
	}
	return keys
}

// windowSpec is one window of the randomized test and how the test
// computes it from the apiserver's list.
type windowSpec struct {
	id      string
	sub     map[string]any // subscribe fields beyond type, id, resource
	cmp     func(a, b cmKey) int
	match   func(k cmKey) bool
	offset  int
	limit   int
	anchor  *cmKey // a cursor window's anchor
	anchorT string
}

func tiebreak(a, b cmKey) int {
	return cmp.Or(cmp.Compare(a.ns, b.ns), cmp.Compare(a.name, b.name))
}

// expected is "filter, sort, slice" of the apiserver's list, and the
// count and offset the window must report.
func (s *windowSpec) expected(all []cmKey) (names []string, count, offset int) {
	var m []cmKey
	for _, k := range all {
		if s.match(k) {
			m = append(m, k)
		}
	}
	slices.SortFunc(m, func(a, b cmKey) int { return cmp.Or(s.cmp(a, b), tiebreak(a, b)) })
	offset = s.offset
	if s.anchor != nil {
		offset = len(m)
		for i, k := range m {
			if cmp.Or(s.cmp(k, *s.anchor), tiebreak(k, *s.anchor)) >= 0 {
				offset = i
				break
			}
		}
	}
	for i := offset; i < len(m) && i < offset+s.limit; i++ {
		names = append(names, m[i].ns+"/"+m[i].name)
	}
	return names, len(m), offset
}

// TestWindowsStayEqualToTheSortedList runs a randomized workload against
// the real apiserver and checks, after every change, that each window's
// copy equals "sort the apiserver's list, filter, slice", with its count
// and offset: a numeric column descending, the name with a text filter,
// the age column (youngest first), and a cursor window.
func TestWindowsStayEqualToTheSortedList(t *testing.T) { windowsVsSortedList(t, 0) }

// TestWindowsStayEqualWhileViewsChurn is the same workload and the same
// checks while other clients open new views on the table all along (see
// churn): view builds, their catch-up and their swap-in race with the
// workload's changes and with their clients leaving.
func TestWindowsStayEqualWhileViewsChurn(t *testing.T) { windowsVsSortedList(t, 4) }

// windowsVsSortedList runs the randomized workload and its checks, with
// churners clients opening new views meanwhile (0: none).
func windowsVsSortedList(t *testing.T, churners int) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	cms := env.Client.CoreV1().ConfigMaps(ns)
	rng := rand.New(rand.NewPCG(20, 11))
	name := func() string {
		const letters = "abxyz"
		b := make([]byte, 3)
		for i := range b {
			b[i] = letters[rng.IntN(len(letters))]
		}
		return string(b)
	}
	data := func() map[string]string {
		m := map[string]string{}
		for i := range rng.IntN(5) {
			m["k"+strconv.Itoa(i)] = "v"
		}
		return m
	}
	labels := map[string]string{"lq": "1"}
	for range 30 {
		_, _ = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name(), Labels: labels}, Data: data()}, metav1.CreateOptions{})
	}
	list := func() ([]cmKey, uint64) {
		l, err := cms.List(ctx, metav1.ListOptions{LabelSelector: "lq=1"})
		if err != nil {
			t.Fatal(err)
		}
		rv, _ := strconv.ParseUint(l.ResourceVersion, 10, 64)
		return cmKeys(l.Items), rv
	}

	all := func(cmKey) bool { return true }
	specs := []*windowSpec{
		{id: "by-data", sub: map[string]any{"sort": "data", "order": "desc", "offset": 2, "limit": 6},
			cmp: func(a, b cmKey) int { return cmp.Compare(b.data, a.data) }, match: all, offset: 2, limit: 6},
		{id: "x-by-name", sub: map[string]any{"sort": ".metadata.name", "filter": "X", "limit": 5},
			cmp: func(a, b cmKey) int { return cmp.Compare(a.name, b.name) }, match: func(k cmKey) bool { return strings.Contains(k.name, "x") }, limit: 5},
		{id: "youngest", sub: map[string]any{"sort": "Age", "limit": 4},
			cmp: func(a, b cmKey) int { return b.created.Compare(a.created) }, match: all, limit: 4},
		{id: "from-cursor", sub: map[string]any{"sort": "metadata.name", "order": "desc", "limit": 5},
			cmp: func(a, b cmKey) int { return cmp.Compare(b.name, a.name) }, match: all, limit: 5},
	}
	m := startManager(t, env.Config, nil)
	// The tables' view builds pass a gate that churn arms (see
	// buildGate); until then, and without churners, it lets them by.
	gate := newBuildGate()
	tables := wire.NewTables(m, zaptest.NewLogger(t).Named("livequery"), wire.ViewLimits{BuildHook: gate.hold})
	t.Cleanup(tables.Run())
	t.Cleanup(gate.disarm) // before the tables stop: they wait for their builds
	ts := startServer(t, m, func(o *Options) { o.Tables = tables })
	c := dial(t, ts)
	copies := map[string]*winCopy{}
	for _, s := range specs {
		copies[s.id] = &winCopy{t: t, id: s.id}
		c.subscribe(s.id, "configmaps", ns, func(m map[string]any) {
			m["labelSelector"] = "lq=1"
			for k, v := range s.sub {
				m[k] = v
			}
		})
		ack := c.expect("ack", s.id)
		if len(ack.Columns) != 3 || ack.Columns[1].Name != "Data" || ack.Sort == "" || ack.Order == "" {
			t.Fatalf("ack %+v: columns %v, sort %q %q", ack, ack.Columns, ack.Sort, ack.Order)
		}
		readWindows(t, c, copies, func() bool { return copies[s.id].frames > 0 })
	}
	// The cursor window: anchored at the 3rd row of its sort, through the
	// cursor its first frame gave after moving there.
	fc := copies["from-cursor"]
	c.send(map[string]any{"type": "window", "id": "from-cursor", "offset": 2})
	readWindows(t, c, copies, func() bool { return fc.frames > 1 })
	if fc.cursor == "" || fc.offset != 2 {
		t.Fatalf("after a move to offset 2: cursor %q, offset %d", fc.cursor, fc.offset)
	}
	keys, _ := list()
	specs[3].offset = 2
	want, _, _ := specs[3].expected(keys)
	anchorName := strings.TrimPrefix(want[0], ns+"/")
	for _, k := range keys {
		if k.name == anchorName {
			specs[3].anchor = &k
		}
	}
	specs[3].anchorT = fc.cursor
	c.send(map[string]any{"type": "window", "id": "from-cursor", "cursor": fc.cursor})
	readWindows(t, c, copies, func() bool { return fc.frames > 2 })

	// The windows are compared with the list once they reflect the
	// step's change. The list's resourceVersion cannot tell when: it may
	// be a later write to another resource (the apiserver renews its
	// leases every 10s; the secret below stands for that, every step),
	// which a table of ConfigMaps reaches only with its next change. A
	// fence does: a ConfigMap outside the windows' selector, updated after
	// the step's change, at a version the test knows. Nothing but the
	// test changes the listed ConfigMaps, so a window at the fence's
	// version or later holds what the list holds.
	fence := createCM(t, ns, "fence", map[string]string{"lq": "fence"})
	secrets := env.Client.CoreV1().Secrets(ns)
	if _, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	check := func(step int, what string) {
		t.Helper()
		fence = updateCM(t, fence, strconv.Itoa(step))
		rv, _ := strconv.ParseUint(fence.ResourceVersion, 10, 64)
		if _, err := secrets.Update(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"},
			StringData: map[string]string{"step": strconv.Itoa(step)}}, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		keys, _ := list()
		for _, s := range specs {
			w := copies[s.id]
			// A move to where the window is answers at once with what it
			// holds and the table's version: repeat until that version
			// includes the fence.
			move := map[string]any{"type": "window", "id": s.id, "offset": s.offset}
			if s.anchor != nil {
				move = map[string]any{"type": "window", "id": s.id, "cursor": s.anchorT}
			}
			deadline := time.Now().Add(time.Minute) // a failure bound, not a period
			for w.rv < rv {
				if time.Now().After(deadline) {
					t.Fatalf("step %d (%s): window %s still at rv %d a minute after the fence's change at %d", step, what, s.id, w.rv, rv)
				}
				before := w.frames
				c.send(move)
				readWindows(t, c, copies, func() bool { return w.frames > before })
			}
			names, count, offset := s.expected(keys)
			if !slices.Equal(w.names(), names) || w.count != count || w.offset != offset {
				t.Fatalf("step %d (%s), window %s at rv %d:\n got %v count %d offset %d\nwant %v count %d offset %d",
					step, what, s.id, w.rv, w.names(), w.count, w.offset, names, count, offset)
			}
		}
	}
	check(0, "start")
	var ch *churn
	if churners > 0 {
		ch = startChurn(t, ts, m, ns, gate, churners)
	}
	for step := 1; step <= 120; step++ {
		l, _ := cms.List(ctx, metav1.ListOptions{LabelSelector: "lq=1"})
		var what string
		switch op := rng.IntN(10); {
		case op < 3 || len(l.Items) == 0:
			n := name()
			what = "create " + n
			_, _ = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: labels}, Data: data()}, metav1.CreateOptions{})
		case op < 7:
			cm := l.Items[rng.IntN(len(l.Items))]
			cm.Data = data()
			what = fmt.Sprintf("update %s to %d keys", cm.Name, len(cm.Data))
			if _, err := cms.Update(ctx, &cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		case op < 9:
			cm := l.Items[rng.IntN(len(l.Items))]
			what = "delete " + cm.Name
			if err := cms.Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		default:
			// Out of the label selector: the row leaves every window.
			cm := l.Items[rng.IntN(len(l.Items))]
			cm.Labels = map[string]string{"lq": "0"}
			what = "relabel " + cm.Name
			if _, err := cms.Update(ctx, &cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		check(step, what)
		gate.stepped()
	}
	if ch != nil {
		ch.stopAndReport()
	}

	// Reopened at its cursor on another socket, a window starts where
	// the first one is.
	c2 := dial(t, ts)
	reopened := &winCopy{t: t, id: "again"}
	c2.subscribe("again", "configmaps", ns, func(m map[string]any) {
		m["labelSelector"] = "lq=1"
		m["sort"], m["order"], m["limit"], m["cursor"] = "metadata.name", "desc", 5, fc.cursor
	})
	c2.expect("ack", "again")
	readWindows(t, c2, map[string]*winCopy{"again": reopened}, func() bool { return reopened.frames > 0 })
	if !slices.Equal(reopened.names(), fc.names()) {
		t.Fatalf("reopened at the cursor: %v, want %v", reopened.names(), fc.names())
	}
}

// TestWindowCursorFollowsItsFirstRowsSortValue: an update that changes
// the sort value of a window's first row, without moving it, changes the
// cursor of the window's first row; the WINDOW frame carries the new one,
// and a window reopened at it starts where this one is.
func TestWindowCursorFollowsItsFirstRowsSortValue(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	cms := env.Client.CoreV1().ConfigMaps(ns)
	for name, keys := range map[string]int{"x": 1, "y": 2} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{}}
		for i := range keys {
			cm.Data["k"+strconv.Itoa(i)] = "v"
		}
		if _, err := cms.Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ts := startServer(t, startManager(t, env.Config, nil), nil)
	c := dial(t, ts)
	sub := func(c *client, id, cursor string) *winCopy {
		t.Helper()
		c.subscribe(id, "configmaps", ns, func(m map[string]any) {
			m["sort"], m["order"], m["limit"] = "DATA", "desc", 2
			if cursor != "" {
				m["cursor"] = cursor
			}
		})
		c.expect("ack", id)
		w := &winCopy{t: t, id: id}
		readWindows(t, c, map[string]*winCopy{id: w}, func() bool { return w.frames > 0 })
		return w
	}
	w := sub(c, "w", "")
	if want := []string{ns + "/y", ns + "/x"}; !slices.Equal(w.names(), want) || w.cursor == "" {
		t.Fatalf("window %v, cursor %q; want %v and a cursor", w.names(), w.cursor, want)
	}
	first := w.cursor

	patch := []byte(`{"data":{"k2":"v","k3":"v","k4":"v"}}`)
	y, err := cms.Patch(context.Background(), "y", types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	readWindows(t, c, map[string]*winCopy{"w": w}, func() bool {
		return len(w.rows) > 0 && w.rows[0].ResourceVersion == y.ResourceVersion
	})
	if w.cursor == first {
		t.Fatalf("y went from 2 keys to 5 at the top of the window: the window's cursor is still the one of y with 2 keys")
	}
	// Reopened at the last cursor, the window starts where this one is.
	again := sub(dial(t, ts), "again", w.cursor)
	if !slices.Equal(again.names(), w.names()) || again.offset != w.offset {
		t.Fatalf("reopened at the last cursor: %v at offset %d; want %v at offset %d", again.names(), again.offset, w.names(), w.offset)
	}
}

// TestWindowOrdersValuesByType: windows on a CRD's printer columns sort
// quantities held as text numerically, and a date column by the age it
// shows, youngest first; rows without a value come last ascending and
// first descending, in both.
func TestWindowOrdersValuesByType(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	gvr := schema.GroupVersionResource{Group: "typed.ws.kubegate.test", Version: "v1", Resource: "widgets"}
	crd := testenv.NewCRD(gvr.Group, gvr.Resource, "Widget")
	crd.Object["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any)["additionalPrinterColumns"] = []any{
		map[string]any{"name": "Size", "type": "string", "jsonPath": ".spec.size"},
		map[string]any{"name": "Seen", "type": "date", "jsonPath": ".spec.seen"},
	}
	env.CreateCRD(t, crd)
	now := time.Now().UTC().Truncate(time.Second)
	// name: size, seen hours ago (0: unset).
	for _, w := range []struct {
		name, size string
		seen       int
	}{{"a", "100Mi", 3}, {"b", "1", 0}, {"c", "2Gi", 1}, {"d", "500m", 0}, {"e", "1.5", 2}, {"f", "3k", 5}, {"g", "", 4}} {
		spec := map[string]any{}
		if w.size != "" {
			spec["size"] = w.size
		}
		if w.seen != 0 {
			spec["seen"] = now.Add(-time.Duration(w.seen) * time.Hour).Format(time.RFC3339)
		}
		o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": gvr.GroupVersion().String(), "kind": "Widget",
			"metadata": map[string]any{"name": w.name}, "spec": spec}}
		if _, err := env.Dynamic.Resource(gvr).Namespace(ns).Create(context.Background(), o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ts := startServer(t, startManager(t, env.Config, nil), nil)
	c := dial(t, ts)
	for i, tc := range []struct {
		sort, order string
		want        []string
	}{
		// 500m, 1, 1.5, 3k, 100Mi, 2Gi, then no size.
		{"Size", "asc", []string{"d", "b", "e", "f", "a", "c", "g"}},
		{"Size", "desc", []string{"g", "c", "a", "f", "e", "b", "d"}},
		// Seen 1h ago, 2h, 3h, 4h, 5h, then never.
		{"Seen", "asc", []string{"c", "e", "a", "g", "f", "b", "d"}},
		{"Seen", "desc", []string{"b", "d", "f", "g", "a", "e", "c"}},
	} {
		id := "w" + strconv.Itoa(i)
		c.subscribe(id, gvr.Resource+"."+gvr.Group, ns, func(m map[string]any) {
			m["sort"], m["order"], m["limit"] = tc.sort, tc.order, 10
		})
		c.expect("ack", id)
		w := &winCopy{t: t, id: id}
		readWindows(t, c, map[string]*winCopy{id: w}, func() bool { return w.frames > 0 })
		var got []string
		for _, r := range w.rows {
			got = append(got, r.Name)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s %s: %v, want %v", tc.sort, tc.order, got, tc.want)
		}
	}
}

// TestWindowIsNarrowedAndReopenedByAuthorization: a cluster-wide window
// holds only the namespaces the caller may read, and one whose set
// widens is reopened behind a reset (Reauthorized).
func TestWindowIsNarrowedAndReopenedByAuthorization(t *testing.T) {
	env := testenv.Get(t)
	ns1, ns2 := env.Namespace(t), env.Namespace(t)
	lbl := map[string]string{"lqauth": ns1}
	createCM(t, ns1, "a", lbl)
	createCM(t, ns2, "b", lbl)
	authz := &fakeAuthorizer{decide: onlyNamespaces(ns1)}
	clk := &fakeClock{FakeClock: clocktesting.NewFakeClock(time.Now()), realDelays: true}
	ts := startServer(t, startManager(t, env.Config, nil), func(o *Options) {
		o.Authorizer = authz
		o.clock = clk
		o.PingInterval = time.Hour
	})
	c := dialAs(t, ts, "alice")
	c.subscribe("w", "configmaps", "", func(m map[string]any) {
		m["labelSelector"], m["limit"] = "lqauth="+ns1, 10
	})
	ack := c.expect("ack", "w")
	if !slices.Equal(ack.Namespaces, []string{ns1}) {
		t.Fatalf("ack namespaces %v, want [%s]", ack.Namespaces, ns1)
	}
	w := &winCopy{t: t, id: "w"}
	copies := map[string]*winCopy{"w": w}
	readWindows(t, c, copies, func() bool { return w.frames > 0 })
	if got := w.names(); !slices.Equal(got, []string{ns1 + "/a"}) || w.count != 1 {
		t.Fatalf("narrowed window %v count %d; want only %s/a", got, w.count, ns1)
	}
	authz.set(onlyNamespaces(ns1, ns2))
	clk.stepArmed(t, 2, ts.opts.RecheckInterval)
	readWindows(t, c, copies, func() bool { return len(w.resets) > 0 && w.count == 2 })
	want := []string{ns1 + "/a", ns2 + "/b"}
	slices.Sort(want) // the default sort: namespace, then name
	if !slices.Equal(w.resets, []string{"Reauthorized"}) || !slices.Equal(w.names(), want) {
		t.Fatalf("after widening: resets %v, rows %v", w.resets, w.names())
	}
}

// TestWindowRequestsRefused: bad window subscriptions and moves get an
// error frame naming the problem, and the socket and its windows go on.
func TestWindowRequestsRefused(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	createCM(t, ns, "a", nil)
	ts := startServer(t, startManager(t, env.Config, nil), nil)
	c := dial(t, ts)
	subscribeCases := []struct {
		name  string
		extra map[string]any
		code  int32
		msg   string
	}{
		{"sort without limit", map[string]any{"sort": "metadata.name"}, 400, `"sort" applies to windows only`},
		{"offset without limit", map[string]any{"offset": 3}, 400, `"offset" applies to windows only`},
		{"limit 0", map[string]any{"limit": 0}, 400, `"limit" 0 is not between 1 and 1000`},
		{"limit too large", map[string]any{"limit": 1001}, 400, `between 1 and 1000`},
		{"limit not a number", map[string]any{"limit": "50"}, 400, `field "limit" must be an integer, not string`},
		{"negative offset", map[string]any{"limit": 5, "offset": -1}, 400, `"offset" -1 is negative`},
		{"offset and cursor", map[string]any{"limit": 5, "offset": 1, "cursor": "abc"}, 400, `exclude each other`},
		{"bad order", map[string]any{"limit": 5, "order": "up"}, 400, `"order" "up" is neither`},
		{"resume", map[string]any{"limit": 5, "resourceVersion": "10"}, 400, `does not resume`},
		{"resync", map[string]any{"limit": 5, "resyncPeriod": "1m"}, 400, `"resyncPeriod" does not apply`},
		{"initial events", map[string]any{"limit": 5, "sendInitialEvents": false}, 400, `"sendInitialEvents" does not apply`},
		{"objects", map[string]any{"limit": 5, "as": "Object"}, 400, `"as" "Object" is not a form`},
		{"unknown sort", map[string]any{"limit": 5, "sort": "restarts"}, 400, `"restarts" is not a sort key of configmaps; sort by a column (Name, Data, Age)`},
		{"bad cursor", map[string]any{"limit": 5, "cursor": "!!"}, 400, `not a cursor this gateway issued`},
		{"text too long", map[string]any{"limit": 5, "filter": strings.Repeat("x", 257)}, 400, `"filter" is longer than 256 bytes`},
	}
	for i, tc := range subscribeCases {
		id := "bad-" + strconv.Itoa(i)
		c.subscribe(id, "configmaps", ns, func(m map[string]any) {
			for k, v := range tc.extra {
				m[k] = v
			}
		})
		f := c.expect("error", id)
		if f.Status == nil || f.Status.Code != tc.code || f.Status.Kind != "Status" || f.Status.Status != "Failure" ||
			f.Request != "subscribe" || !strings.Contains(f.Status.Message, tc.msg) {
			t.Errorf("%s: got %+v (status %+v), want %d containing %q", tc.name, f, f.Status, tc.code, tc.msg)
		}
	}

	// A window, a cursor of another sort, and moves refused.
	c.subscribe("w", "configmaps", ns, func(m map[string]any) { m["limit"], m["sort"] = 5, "metadata.name" })
	c.expect("ack", "w")
	w := &winCopy{t: t, id: "w"}
	readWindows(t, c, map[string]*winCopy{"w": w}, func() bool { return w.frames > 0 })
	if w.cursor == "" {
		t.Fatal("the first WINDOW frame carries no cursor")
	}
	c.subscribe("other-sort", "configmaps", ns, func(m map[string]any) { m["limit"], m["sort"], m["cursor"] = 5, "data", w.cursor })
	if f := c.expect("error", "other-sort"); f.Status.Code != 400 || !strings.Contains(f.Status.Message, "belongs to another sort (metadata.name ascending)") {
		t.Errorf("cursor of another sort: %v", f)
	}
	c.subscribe("plain", "configmaps", ns, func(m map[string]any) { m["sendInitialEvents"] = false })
	c.expect("ack", "plain")
	moveCases := []struct {
		move map[string]any
		code int32
		msg  string
	}{
		{map[string]any{"id": "nope", "offset": 1}, 404, `no subscription "nope"`},
		{map[string]any{"id": "plain", "offset": 1}, 400, `"plain" is not a window`},
		{map[string]any{"id": "w", "offset": -2}, 400, `"offset" -2 is negative`},
		{map[string]any{"id": "w", "limit": 0}, 400, `"limit" 0 is not between`},
		{map[string]any{"id": "w", "sort": "data"}, 400, `unknown field "sort"`},
		{map[string]any{"id": "w", "cursor": "eyJrIjoiZGF0YSIsIm4iOiJhIn0"}, 400, `belongs to another sort (data ascending)`},
	}
	for _, tc := range moveCases {
		tc.move["type"] = "window"
		c.send(tc.move)
		f := c.next()
		if f.Type != "error" || f.Status == nil || f.Status.Code != tc.code || f.Request != "window" || !strings.Contains(f.Status.Message, tc.msg) {
			t.Errorf("move %v: got %v, want %d containing %q", tc.move, f, tc.code, tc.msg)
		}
	}
	// The window goes on: a change reaches it.
	c.send(map[string]any{"type": "unsubscribe", "id": "plain"})
	c.expect("ack", "plain")
	createCM(t, ns, "b", nil)
	readWindows(t, c, map[string]*winCopy{"w": w}, func() bool { return w.count == 2 })
	if !slices.Equal(w.names(), []string{ns + "/a", ns + "/b"}) {
		t.Fatalf("window after refusals: %v", w.names())
	}
}

// TestWindowRowsEncodedOncePerChange: windows on several sockets, sorted
// differently, send the same bytes for a row, encoded once per object
// version however many windows show it.
func TestWindowRowsEncodedOncePerChange(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	for _, n := range []string{"a", "b", "c"} {
		createCM(t, ns, n, map[string]string{"once": ns})
	}
	m := startManager(t, env.Config, nil)
	ts := startServer(t, m, nil)
	res, err := m.Resource(t.Context(), "configmaps")
	if err != nil {
		t.Fatal(err)
	}
	printer := rows.ForResource(t.Context(), m, res) // the one the server prints with
	before := printer.Encodes()
	rowsSeen := map[string]string{} // name@rv → row bytes
	type socketCopies struct {
		c      *client
		copies map[string]*winCopy
	}
	record := func(f frame) {
		t.Helper()
		for _, op := range f.Ops {
			if op.Row == nil {
				continue
			}
			var r wireRow
			_ = json.Unmarshal(op.Row, &r)
			k := r.Name + "@" + r.ResourceVersion
			if prev, ok := rowsSeen[k]; ok && prev != string(op.Row) {
				t.Fatalf("%s: rows differ between windows:\n%s\n%s", k, prev, op.Row)
			}
			rowsSeen[k] = string(op.Row)
		}
	}
	var all []socketCopies
	for range 2 {
		sc := socketCopies{c: dial(t, ts), copies: map[string]*winCopy{}}
		for _, sort := range []string{"metadata.name", "data"} {
			sc.copies[sort] = &winCopy{t: t, id: sort}
			sc.c.subscribe(sort, "configmaps", ns, func(m map[string]any) { m["sort"], m["limit"], m["labelSelector"] = sort, 10, "once="+ns })
			sc.c.expect("ack", sort)
			for sc.copies[sort].frames == 0 {
				f := sc.c.next()
				sc.copies[f.ID].apply(f)
				record(f)
			}
		}
		all = append(all, sc)
	}
	read := func(done func(w *winCopy) bool) {
		t.Helper()
		for _, sc := range all {
			for !done(sc.copies["metadata.name"]) || !done(sc.copies["data"]) {
				f := sc.c.next()
				sc.copies[f.ID].apply(f)
				record(f)
			}
		}
	}
	read(func(w *winCopy) bool { return w.count == 3 })
	// The table's feeder encoded every row as it built them; the windows
	// encoded none.
	if n := printer.Encodes() - before; n < 3 {
		t.Fatalf("%d rows encoded for a table of at least 3", n)
	}
	before = printer.Encodes()
	cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm = updateCM(t, cm, "1")
	read(func(w *winCopy) bool {
		return slices.ContainsFunc(w.rows, func(r wireRow) bool { return r.ResourceVersion == cm.ResourceVersion })
	})
	// One change, shown in 4 windows on 2 sockets: encoded once.
	if n := printer.Encodes() - before; n != 1 {
		t.Errorf("%d rows encoded for one object version shown in 4 windows", n)
	}
	if len(rowsSeen) != 4 {
		t.Errorf("%d distinct rows, want 4: %v", len(rowsSeen), rowsSeen)
	}
}

// TestWindowEndsWhenItsResourceGoes deletes the CRD of a window's
// resource: the window's rows are removed, then the window ends with an
// error frame marked ended (404), and the socket goes on.
func TestWindowEndsWhenItsResourceGoes(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	gvr := schema.GroupVersionResource{Group: "gonewin.kubegate.test", Version: "v1", Resource: "wobbles"}
	env.CreateCRD(t, testenv.NewCRD(gvr.Group, gvr.Resource, "Wobble"))
	for _, n := range []string{"w1", "w2"} {
		o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": gvr.GroupVersion().String(), "kind": "Wobble",
			"metadata": map[string]any{"name": n}}}
		if _, err := env.Dynamic.Resource(gvr).Namespace(ns).Create(context.Background(), o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	m := startManager(t, env.Config, func(o *informer.Options) { o.DiscoveryRefreshInterval = 100 * time.Millisecond })
	ts := startServer(t, m, nil)
	c := dial(t, ts)
	c.subscribe("w", "wobbles."+gvr.Group, ns, func(m map[string]any) { m["limit"] = 10 })
	c.expect("ack", "w")
	w := &winCopy{t: t, id: "w"}
	readWindows(t, c, map[string]*winCopy{"w": w}, func() bool { return w.frames > 0 })
	if w.count != 2 {
		t.Fatalf("window of %d rows, want 2", w.count)
	}
	c.subscribe("cms", "configmaps", ns, func(m map[string]any) { m["sendInitialEvents"] = false })
	c.expect("ack", "cms")

	env.DeleteCRD(t, gvr.GroupResource().String())
	f := c.next()
	for ; f.Type == "WINDOW"; f = c.next() {
		w.apply(f)
	}
	if f.Type != "error" || f.ID != "w" || !f.Ended || f.Status == nil || f.Status.Code != 404 ||
		!strings.Contains(f.Status.Message, "is no longer served") {
		t.Fatalf("after the CRD's deletion: %v (ended %v), want an ended 404", f, f.Ended)
	}
	if w.count != 0 || len(w.rows) != 0 {
		t.Fatalf("the window ended holding %v (count %d)", w.names(), w.count)
	}
	c.send(map[string]any{"type": "window", "id": "w", "offset": 1})
	if f := c.expect("error", "w"); f.Status.Code != 404 {
		t.Fatalf("a move of the ended window: %v", f)
	}
	createCM(t, ns, "after", nil)
	if f := c.expect("ADDED", "cms"); f.name() != "after" {
		t.Fatalf("got %v", f)
	}
}
