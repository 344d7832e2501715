package wire_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"kubegate/internal/informer"
	"kubegate/internal/livequery"
	"kubegate/internal/livequery/feed"
	"kubegate/internal/livequery/wire"
	"kubegate/internal/rows"
	"kubegate/internal/rows/rowstest"
)

// These benchmarks measure the server's side of live windows on pods as
// the gateway serves them: rows built by the pod printer from cached
// objects of realistic size, parameters resolved as a subscribe gives
// them, and the rows of every insert, move and update encoded
// (Printer.Encoded). They leave out the WebSocket frame around the rows
// and the socket. docs/benchmarks-history.md ("Live windows") records them.

const benchLimit = 50

var podsInfo = informer.NewResourceInfo(corev1.SchemeGroupVersion.WithResource("pods"), corev1.SchemeGroupVersion.WithKind("Pod"), true)

// benchCreated is the first pod's creation time; pod j is j seconds
// younger.
var benchCreated = time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)

// webPod is the load tool's web pod (testdata/web-pod.json, from
// kubegate-bench's workload: three containers, probes, volumes; 7-8 KB of
// JSON without managedFields), read once.
var webPod = sync.OnceValues(func() (*corev1.Pod, error) {
	b, err := os.ReadFile(filepath.Join("testdata", "web-pod.json"))
	if err != nil {
		return nil, err
	}
	var p corev1.Pod
	return &p, json.Unmarshal(b, &p)
})

// benchPod returns pod j as the informer caches it: the web pod named
// web-<j> in one of 100 namespaces, with the labels the load tool gives
// it, running on one of 200 nodes with 0-6 restarts.
func benchPod(j int) *informer.Object {
	tmpl, err := webPod()
	if err != nil {
		panic(err)
	}
	p := tmpl.DeepCopy()
	p.Name, p.Namespace = fmt.Sprintf("web-%05d", j), fmt.Sprintf("bench-%03d", j%100)
	p.Labels["bench.kubegate.io/shard"] = fmt.Sprintf("shard-%d", j%10)
	p.Labels["app.kubernetes.io/instance"] = fmt.Sprintf("web-%d", j%50)
	p.Labels["pod-template-hash"] = fmt.Sprintf("%08x", j*2654435761%(1<<32))
	p.Annotations["checksum/config"] = fmt.Sprintf("%064x", j)
	p.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	p.UID = types.UID(fmt.Sprintf("%08x-0000-4000-8000-%012x", j, j))
	p.ResourceVersion = strconv.Itoa(j + 1)
	p.CreationTimestamp = metav1.NewTime(benchCreated.Add(time.Duration(j) * time.Second))
	p.Spec.NodeName = fmt.Sprintf("node-%03d", j%200)
	started := metav1.NewTime(p.CreationTimestamp.Add(3 * time.Second))
	yes := true
	p.Status = corev1.PodStatus{
		Phase:  corev1.PodRunning,
		HostIP: fmt.Sprintf("10.1.%d.%d", j%200/250, j%200%250+1), PodIP: fmt.Sprintf("10.2.%d.%d", j/250%250, j%250+1),
		PodIPs:    []corev1.PodIP{{IP: fmt.Sprintf("10.2.%d.%d", j/250%250, j%250+1)}},
		QOSClass:  corev1.PodQOSGuaranteed,
		StartTime: &p.CreationTimestamp,
	}
	for _, t := range []corev1.PodConditionType{corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: started})
	}
	for i, c := range p.Spec.Containers {
		cs := corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image + "@sha256:" + fmt.Sprintf("%064x", i),
			ContainerID: fmt.Sprintf("containerd://%064x", j*8+i), Ready: true, Started: &yes,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
		}
		if i == 0 {
			cs.RestartCount = int32(j % 7)
			if cs.RestartCount > 0 {
				cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled",
					StartedAt: p.CreationTimestamp, FinishedAt: started}
			}
		}
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, cs)
	}
	raw, err := json.Marshal(p)
	if err != nil {
		panic(err)
	}
	restarts := strconv.Itoa(j % 7)
	if j%7 > 0 {
		restarts += " (5m ago)"
	}
	return &informer.Object{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID,
		ResourceVersion: p.ResourceVersion, Labels: p.Labels, CreationTimestamp: p.CreationTimestamp}, RV: uint64(j + 1), Raw: raw,
		Cells:   rowstest.PodCells(p.Name, "2/2", "Running", restarts, "5m", p.Status.PodIP, p.Spec.NodeName),
		Columns: podColumns}
}

// podColumns are the pods' columns as kube-apiserver prints them.
var podColumns = rowstest.MustRead("pods").Columns

// fixtures are built once per test binary and shared by every benchmark
// and -count run: 100,000 pods take seconds to build.
var fixtures struct {
	mu     sync.Mutex
	objs   []*informer.Object
	tables map[int]*livequery.Table
}

// objects returns pods 0..n-1.
func objects(n int) []*informer.Object {
	fixtures.mu.Lock()
	defer fixtures.mu.Unlock()
	for j := len(fixtures.objs); j < n; j++ {
		fixtures.objs = append(fixtures.objs, benchPod(j))
	}
	return fixtures.objs[:n]
}

// podSchema is the pods' table schema as the gateway builds it.
func podSchema() (feed.Schema, *rows.Printer) {
	p := rows.NewPrinter(podsInfo.GVR.GroupResource(), podColumns, nil)
	return wire.Schema(podsInfo, p), p
}

// buildTable builds the table of objs as a feeder does: one row per
// object, then a Replace.
func buildTable(b *testing.B, sch feed.Schema, objs []*informer.Object) *livequery.Table {
	rs := make([]*livequery.Row, len(objs))
	for i, o := range objs {
		r, err := sch.Row(o)
		if err != nil {
			b.Fatal(err)
		}
		rs[i] = r
	}
	t := livequery.NewTable(sch.Table)
	t.Replace(rs, uint64(len(objs)+1))
	return t
}

// table returns the shared table of pods 0..n-1, which keeps no idle
// view. Benchmarks close the windows they open, and may upsert new
// versions of its rows.
func table(b *testing.B, n int) *livequery.Table {
	objs := objects(n)
	fixtures.mu.Lock()
	defer fixtures.mu.Unlock()
	if t := fixtures.tables[n]; t != nil {
		return t
	}
	sch, _ := podSchema()
	// No idle view is kept, so that BenchmarkFirstWindow's index=new
	// builds the index for every window, as the first window of a sort
	// order does.
	sch.Table.IdleViews = -1
	t := buildTable(b, sch, objs)
	if fixtures.tables == nil {
		fixtures.tables = map[int]*livequery.Table{}
	}
	fixtures.tables[n] = t
	return t
}

// query resolves window parameters as a subscribe carries them.
func query(b *testing.B, p *rows.Printer, params wire.Params) livequery.Query {
	w, err := params.Resolve(podsInfo, p.Columns())
	if err != nil {
		b.Fatal(err)
	}
	return livequery.Query{Sort: w.Sort, Filter: livequery.Filter{Text: w.Text}, Range: w.Range}
}

// appendRows appends the encoded row of every operation that carries one
// to buf, as a WINDOW frame holds them. fresh encodes each row as if no
// window had shown it yet: a copy of the object derives its encoding
// afresh.
func appendRows(buf []byte, p *rows.Printer, ops []livequery.Op, fresh bool) []byte {
	for _, op := range ops {
		if op.Row == nil {
			continue
		}
		o := op.Row.Object.(*informer.Object)
		if fresh {
			o = o.DeepCopyObject().(*informer.Object)
		}
		buf = append(buf, p.Encoded(o)...)
	}
	return buf
}

// checkFirst fails unless ops are a full first window of n rows: limit
// inserts, then the count.
func checkFirst(b *testing.B, ops []livequery.Op, n int) {
	b.Helper()
	if len(ops) != benchLimit+1 || ops[0].Type != livequery.OpInsert || ops[benchLimit].Type != livequery.OpCount || ops[benchLimit].Count != n {
		b.Fatalf("first Pop: %d operations (%v ... %v), want %d inserts and a count of %d", len(ops), ops[0], ops[len(ops)-1], benchLimit, n)
	}
}

// BenchmarkFirstWindow measures the server's work for a new window of 50
// rows over n pods, sorted by restarts, descending: resolving its
// parameters, opening it, popping its rows and encoding them; then it is
// closed.
//
//   - index=shared: another window keeps the sort's index and view, as
//     on a gateway where someone already looks at pods in that order.
//   - index=new: no window uses the sort, and the table keeps no idle
//     view, so Open sorts every row (the index build) under the table's
//     lock.
//   - index=new-string: as index=new, sorted by a string (the pod's IP):
//     its prefix reads the string's bytes, a load further.
//   - index=new-selector: as index=new, through a label selector every
//     pod matches (!absent), so the build also matches every row: the
//     row's Bloom filters of its labels answer it (labelBloom).
//   - index=new-selector-values: as index=new-selector, through a
//     selector every pod matches by its value (shard in (shard-0, ...,
//     shard-9)), which the filters cannot answer: the build reads every
//     row's labels.
//   - rows=shared: the rows were encoded before, for another window, so
//     encoding is a lookup.
//   - rows=fresh: each row is encoded for this window.
func BenchmarkFirstWindow(b *testing.B) {
	_, p := podSchema()
	params := wire.Params{Sort: "restarts", Order: "desc", Limit: benchLimit}
	absent, err := labels.Parse("!absent")
	if err != nil {
		b.Fatal(err)
	}
	shards, err := labels.Parse("bench.kubegate.io/shard in (shard-0,shard-1,shard-2,shard-3,shard-4,shard-5,shard-6,shard-7,shard-8,shard-9)")
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{10_000, 100_000} {
		t := table(b, n)
		for _, c := range []struct {
			index string
			fresh bool
		}{{"shared", false}, {"shared", true}, {"new", true}, {"new-string", true}, {"new-selector", true}, {"new-selector-values", true}} {
			name := map[bool]string{false: "shared", true: "fresh"}[c.fresh]
			b.Run(fmt.Sprintf("objects=%d/index=%s/rows=%s", n, c.index, name), func(b *testing.B) {
				resolve := func() livequery.Query {
					ps := params
					if c.index == "new-string" {
						ps.Sort, ps.Order = "ip", "asc"
					}
					q := query(b, p, ps)
					switch c.index {
					case "new-selector":
						q.Filter.Label = absent
					case "new-selector-values":
						q.Filter.Label = shards
					}
					return q
				}
				if c.index == "shared" {
					keep, err := t.Open(context.Background(), resolve())
					if err != nil {
						b.Fatal(err)
					}
					defer keep.Close()
					ops, _ := keep.Pop(nil)
					appendRows(nil, p, ops, false)
				}
				var (
					ops   []livequery.Op
					frame []byte
				)
				for b.Loop() {
					w, err := t.Open(context.Background(), resolve())
					if err != nil {
						b.Fatal(err)
					}
					ops, _ = w.Pop(ops[:0])
					frame = appendRows(frame[:0], p, ops, c.fresh)
					w.Close()
				}
				checkFirst(b, ops, n)
				b.ReportMetric(float64(len(frame)), "B/rows")
			})
		}
	}
}

// BenchmarkTableBuild measures what the first window on a resource waits
// for besides its own Open: the table built from n cached pods, one row
// per pod (the printer decodes each), then a Replace. The feeder does the
// same as its listener's snapshot arrives.
func BenchmarkTableBuild(b *testing.B) {
	sch, _ := podSchema()
	for _, n := range []int{10_000, 100_000} {
		objs := objects(n)
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			var t *livequery.Table
			for b.Loop() {
				t = buildTable(b, sch, objs)
			}
			if t.Len() != n {
				b.Fatalf("table of %d rows, want %d", t.Len(), n)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/object")
		})
	}
}

// BenchmarkTableMemory reports the heap a live table of n pods holds
// per pod after a collection, the pods themselves excluded: each pod's
// row as the printer computes it (kept with the object: cells, typed
// values), the table's row (its text and labels) and the rows' B-tree.
// It builds the table once per iteration, so run it with -benchtime=1x.
func BenchmarkTableMemory(b *testing.B) {
	sch, _ := podSchema()
	for _, n := range []int{10_000} {
		objs := objects(n)
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			var perPod float64
			for b.Loop() {
				// Copies, so that no row computed before is reused.
				fresh := make([]*informer.Object, n)
				for i, o := range objs {
					fresh[i] = o.DeepCopyObject().(*informer.Object)
				}
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				t := buildTable(b, sch, fresh)
				runtime.GC()
				runtime.ReadMemStats(&after)
				if t.Len() != n {
					b.Fatalf("table of %d rows, want %d", t.Len(), n)
				}
				perPod = (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(n)
				runtime.KeepAlive(t)
				runtime.KeepAlive(fresh)
			}
			b.ReportMetric(perPod, "bytes/pod")
		})
	}
}

// coveredRows bounds the ranks BenchmarkWindowUpdates' windows cover,
// and the pods it changes, whatever the table's size, so that every size
// does the same work per update but for the table itself. It changes
// pods firstUpdated..coveredRows-1, each in 5 windows.
const (
	coveredRows  = 10_000
	firstUpdated = 50
)

// BenchmarkWindowUpdates measures one pod update with W windows of 50
// rows open over n pods, sorted by name (so pod j is at rank j): the
// update's row built from the new object version by the pod printer, the
// change applied to the table, and every window it wakes popped, with the
// rows of its operations encoded (once per object version, shared by
// every window).
//
// The windows start every 10 ranks over the first 10,000 (window i at
// offset 10·i mod 10,000), so each of those rows past the first 40 is in
// 5 of 1,000 windows, and the updates go round-robin over pods 50 to
// 9,999: every update reaches 5 windows (an update operation each) at
// any table size. The
// change is a new resourceVersion, as an annotation's change, which moves
// no row. ns/op is per update. B/view is the heap the first window
// holds, which builds the sort's index and its view (n entries each);
// B/window, the heap each further window holds once its first Pop is
// applied. Both are read after a collection, encoded rows excluded.
func BenchmarkWindowUpdates(b *testing.B) {
	sch, p := podSchema()
	for _, n := range []int{10_000, 100_000} {
		t := table(b, n)
		objs := objects(n)
		for _, windows := range []int{1, 1000} {
			b.Run(fmt.Sprintf("objects=%d/windows=%d", n, windows), func(b *testing.B) {
				var woken []*livequery.Window
				ws := make([]*livequery.Window, windows)
				// The first window builds the sort's index and its view;
				// the others share them.
				heap := []uint64{heapInUse()}
				for i := range ws {
					if i == 1 {
						heap = append(heap, heapInUse())
					}
					q := query(b, p, wire.Params{Sort: "metadata.name", Limit: benchLimit, Offset: 10 * i % coveredRows})
					var w *livequery.Window
					q.Wake = func() { woken = append(woken, w) } // on this goroutine, after Upsert's unlock
					var err error
					if w, err = t.Open(context.Background(), q); err != nil {
						b.Fatal(err)
					}
					ops, _ := w.Pop(nil)
					if last := ops[len(ops)-1]; last.Type != livequery.OpCount || last.Count != n {
						b.Fatalf("first Pop of window %d ends with %v, want a count of %d", i, last, n)
					}
					ws[i] = w
				}
				heap = append(heap, heapInUse())
				defer func() {
					for _, w := range ws {
						w.Close()
					}
				}()
				var (
					buf   []livequery.Op
					frame []byte
					ops   int
					wakes int
				)
				rv := t.Version()
				j := firstUpdated
				for b.Loop() {
					o := objs[j].DeepCopyObject().(*informer.Object)
					rv++
					o.RV, o.ResourceVersion = rv, strconv.FormatUint(rv, 10)
					r, err := sch.Row(o)
					if err != nil {
						b.Fatal(err)
					}
					t.Upsert(r, rv)
					wakes += len(woken)
					for _, w := range woken {
						buf, _ = w.Pop(buf[:0])
						ops += len(buf)
						frame = appendRows(frame[:0], p, buf, false)
					}
					woken = woken[:0]
					if j++; j == coveredRows {
						j = firstUpdated
					}
				}
				if windows == 1000 && wakes != 5*b.N {
					b.Fatalf("%d windows woken by %d updates, want 5 per update", wakes, b.N)
				}
				b.ReportMetric(float64(wakes)/float64(b.N), "windows/update")
				b.ReportMetric(float64(ops)/float64(b.N), "ops/update")
				b.ReportMetric(float64(heap[1]-heap[0]), "B/view")
				if windows > 1 {
					b.ReportMetric(float64(heap[2]-heap[1])/float64(windows-1), "B/window")
				}
			})
		}
	}
}

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkNewViewUnderChurn measures index=new-selector's first window
// over 100,000 pods for a user who opens a new view now and then, while
// another opens new views over the same table one after another, each
// through a selector of its own, as kubegate-bench's viewchurn does at
// the gateway: what a user's new view waits for the build slot the
// churner holds, besides its own build. Between two of the user's views
// (untimed) the churner builds two. churner-views/s is what the churner
// got meanwhile.
func BenchmarkNewViewUnderChurn(b *testing.B) {
	const n = 100_000
	_, p := podSchema()
	t := table(b, n)
	base := query(b, p, wire.Params{Sort: "restarts", Order: "desc", Limit: benchLimit})
	open := func(ctx context.Context, owner string, i int) (*livequery.Window, error) {
		sel, err := labels.Parse(fmt.Sprintf("!%s-%d", owner, i))
		if err != nil {
			return nil, err
		}
		q := base
		q.Filter.Label, q.Owner = sel, owner
		return t.Open(ctx, q)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var (
		wg      sync.WaitGroup
		churned int
		built   = make(chan struct{}, 1)
	)
	wg.Go(func() {
		for i := 0; ; i++ {
			w, err := open(ctx, "churner", i)
			if err != nil {
				return // ctx ended
			}
			w.Close()
			churned++
			select {
			case built <- struct{}{}:
			default:
			}
		}
	})
	var ops []livequery.Op
	i := 0
	start := time.Now()
	for b.Loop() {
		b.StopTimer()
		for range 2 {
			<-built
		}
		b.StartTimer()
		w, err := open(context.Background(), "victim", i)
		if err != nil {
			b.Fatal(err)
		}
		i++
		ops, _ = w.Pop(ops[:0])
		w.Close()
	}
	wall := time.Since(start)
	cancel()
	wg.Wait()
	checkFirst(b, ops, n)
	b.ReportMetric(float64(churned)/wall.Seconds(), "churner-views/s")
}
