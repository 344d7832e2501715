package informer

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// servedPodFile is one of the load tool's Pods (bench/workload NewPod) as
// kube-apiserver v1.37 served it, managedFields included: 15.6 KB, what
// the upstream receives for every change of such a Pod.
const servedPodFile = "testdata/bench/pod-served.json"

// servedConfigMapFile is a small ConfigMap (one key, one label) as
// kube-apiserver v1.37 served it, managedFields included.
const servedConfigMapFile = "testdata/bench/configmap-served.json"

// The identity in the served files that servedObjects replaces (the
// name's prefix is the file's own).
var (
	servedNS  = []byte(`"namespace":"bench-000"`)
	servedUID = []byte(`"uid":"7532b62f-2c13-4da4-bfd3-18a4b8937316"`)
	servedRV  = []byte(`"resourceVersion":"213"`)
)

// servedPods returns a function that renders servedPodFile as Pod i in
// namespace ns at resourceVersion rv.
func servedPods(tb testing.TB) func(ns string, i int, rv uint64) []byte {
	return servedObjects(tb, servedPodFile, "web")
}

// servedObjects returns a function that renders the served object in
// file, named prefix-00000, as object prefix-i in namespace ns at
// resourceVersion rv.
func servedObjects(tb testing.TB, file, prefix string) func(ns string, i int, rv uint64) []byte {
	tb.Helper()
	tmpl, err := os.ReadFile(file)
	if err != nil {
		tb.Fatal(err)
	}
	servedName := fmt.Appendf(nil, `"name":"%s-00000"`, prefix)
	for _, s := range [][]byte{servedName, servedNS, servedUID, servedRV} {
		if bytes.Count(tmpl, s) != 1 {
			tb.Fatalf("%s: want %s exactly once", file, s)
		}
	}
	return func(ns string, i int, rv uint64) []byte {
		b := bytes.Replace(bytes.TrimSpace(tmpl), servedName, fmt.Appendf(nil, `"name":"%s-%05d"`, prefix, i), 1)
		b = bytes.Replace(b, servedNS, fmt.Appendf(nil, `"namespace":%q`, ns), 1)
		b = bytes.Replace(b, servedUID, fmt.Appendf(nil, `"uid":"7532b62f-2c13-4da4-bfd3-%012d"`, i), 1)
		return bytes.Replace(b, servedRV, fmt.Appendf(nil, `"resourceVersion":"%d"`, rv), 1)
	}
}

// podDecoder decodes Pods as the manager configures the upstream for them.
func podDecoder() *objectDecoder {
	return newFieldDecoder(podGVK, false, builtinFieldSet(schema.GroupResource{Resource: "pods"}).fields)
}

// BenchmarkUpstreamUpdate is what one upstream update of a served Pod
// costs the gateway with nobody subscribed: decoding the watch event's
// object and processing the Updated delta (cache, history). Each
// iteration updates one of 100 cached Pods to a new resourceVersion. The
// watch stream's framing and client-go's queue are not included; copying
// the 15.6 KB input (about 1 µs) is.
func BenchmarkUpstreamUpdate(b *testing.B) {
	render := servedPods(b)
	dec := podDecoder()
	const n = 100
	p, _ := testProc(&testing.T{}, nil)
	objs := make([]*Object, n)
	for i := range objs {
		o, err := dec.decode(render("bench-"+strconv.Itoa(i%10), i, uint64(i+1)))
		if err != nil {
			b.Fatal(err)
		}
		objs[i] = o
	}
	relist(b, p, n, objs...)
	// Each update is a fresh copy of its Pod's JSON, as the upstream reads
	// each event into a new buffer, with a new resourceVersion written in
	// place: ten digits, so every one has the same length.
	const rv0 = 1_000_000_000
	tmpls := make([][]byte, n)
	offs := make([]int, n)
	for i := range tmpls {
		tmpls[i] = render("bench-"+strconv.Itoa(i%10), i, rv0)
		offs[i] = bytes.Index(tmpls[i], []byte(`"resourceVersion":"`)) + len(`"resourceVersion":"`)
	}
	b.SetBytes(int64(len(tmpls[0])))
	rv := uint64(rv0)
	for b.Loop() {
		i := int(rv % n)
		rv++
		raw := bytes.Clone(tmpls[i])
		strconv.AppendUint(raw[offs[i]:offs[i]], rv, 10)
		o, err := dec.decode(raw)
		if err != nil {
			b.Fatal(err)
		}
		update(b, p, o)
	}
	if p.lastRV <= rv0 {
		b.Fatal("updates did not reach the processor")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/update")
}

// BenchmarkCacheMemory reports the heap held by the cache per object and
// its ratio to the cached objects' JSON size (goal: ≤ 1.3), after a
// collection. The objects come from served Pod JSON through the upstream's
// decoder, so the cache holds what production holds. It builds the cache
// once per iteration, so run it with -benchtime=1x.
func BenchmarkCacheMemory(b *testing.B) {
	render := servedPods(b)
	dec := podDecoder()
	for _, n := range []int{10000} {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			var perObj, ratio float64
			for b.Loop() {
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				p, _ := testProc(&testing.T{}, nil)
				objs := make([]*Object, n)
				for i := range objs {
					o, err := dec.decode(render("bench-"+strconv.Itoa(i%100), i, uint64(i+1)))
					if err != nil {
						b.Fatal(err)
					}
					objs[i] = o
				}
				relist(b, p, uint64(n), objs...)
				objs = nil
				runtime.GC()
				runtime.ReadMemStats(&after)
				var jsonBytes int
				listed, _ := p.list(&Filter{})
				for _, o := range listed {
					jsonBytes += len(o.Raw)
				}
				heap := float64(after.HeapAlloc) - float64(before.HeapAlloc)
				perObj = heap / float64(n)
				ratio = heap / float64(jsonBytes)
				runtime.KeepAlive(p)
			}
			b.ReportMetric(perObj, "bytes/object")
			b.ReportMetric(ratio, "heap/json")
		})
	}
}

// BenchmarkCacheMemoryCells reports what kube-apiserver's Table rows add
// to the cache: the heap per cached object after a collection, read as
// plain JSON (form=json) and as Table rows (form=table, Object.Cells in
// Raw's allocation), for served Pods and small ConfigMaps. The rows are
// those kube-apiserver v1.37 printed for these objects (ages vary in
// length; "5m" here). Each object gets a label of 0 to 255 bytes, so that
// objects spread over the allocator's size classes as real ones do: with
// equal objects the cells would fit, or not, in every object's size class
// at once. Run it with -benchtime=1x.
func BenchmarkCacheMemoryCells(b *testing.B) {
	for _, res := range []struct {
		name   string
		gvk    schema.GroupVersionKind
		render func(ns string, i int, rv uint64) []byte
		cells  func(i int) string
	}{
		{"pods", podGVK, servedPods(b), func(i int) string {
			return fmt.Sprintf(`["web-%05d","0/3","Pending","0","5m","<none>","<none>","<none>","<none>"]`, i)
		}},
		{"configmaps", schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, servedObjects(b, servedConfigMapFile, "cm"),
			func(i int) string { return fmt.Sprintf(`["cm-%05d",1,"5m"]`, i) }},
	} {
		dec := newObjectDecoder(res.gvk, false, nil)
		const n = 10000
		var perObj [2]float64
		for form, name := range []string{"json", "table"} {
			b.Run(fmt.Sprintf("resource=%s/form=%s/objects=%d", res.name, name, n), func(b *testing.B) {
				var cells int
				for b.Loop() {
					runtime.GC()
					var before, after runtime.MemStats
					runtime.ReadMemStats(&before)
					p, _ := testProc(&testing.T{}, nil)
					objs := make([]*Object, n)
					for i := range objs {
						raw := bytes.Replace(res.render("bench-"+strconv.Itoa(i%100), i, uint64(i+1)),
							[]byte(`"labels":{`), fmt.Appendf(nil, `"labels":{"pad":"%s",`, strings.Repeat("x", i%256)), 1)
						if form == 0 {
							o, err := dec.decode(raw)
							if err != nil {
								b.Fatal(err)
							}
							objs[i] = o
							continue
						}
						body := fmt.Sprintf(`{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"1"},"columnDefinitions":[],"rows":[{"cells":%s,"object":%s}]}`, res.cells(i), raw)
						l, err := dec.decodeList(strings.NewReader(body))
						if err != nil || len(l.Items) != 1 || l.Items[0].Cells == nil {
							b.Fatalf("decode the row: %v", err)
						}
						objs[i] = l.Items[0]
					}
					relist(b, p, uint64(n), objs...)
					objs = nil
					runtime.GC()
					runtime.ReadMemStats(&after)
					listed, _ := p.list(&Filter{})
					cells = 0
					for _, o := range listed {
						cells += len(o.Cells)
					}
					perObj[form] = (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / n
					runtime.KeepAlive(p)
				}
				b.ReportMetric(perObj[form], "bytes/object")
				b.ReportMetric(float64(cells)/n, "cells-bytes/object")
				if form == 1 {
					b.ReportMetric(perObj[1]-perObj[0], "added-bytes/object")
				}
			})
		}
	}
}
