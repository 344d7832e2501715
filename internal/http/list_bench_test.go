package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubegate/internal/informer"
	"kubegate/internal/rows"
	"kubegate/internal/rows/rowstest"
)

// benchPods returns n cached pods of realistic size.
func benchPods(b *testing.B, n int) []*informer.Object {
	b.Helper()
	out := make([]*informer.Object, n)
	for i := range out {
		p := &corev1.Pod{
			TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%05d", i), Namespace: fmt.Sprintf("ns-%02d", i%50),
				Labels: map[string]string{"app": fmt.Sprintf("app-%d", i%20)}, ResourceVersion: fmt.Sprint(i + 1)},
			Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10",
				Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"},
		}
		raw, err := json.Marshal(p)
		if err != nil {
			b.Fatal(err)
		}
		out[i] = &informer.Object{ObjectMeta: p.ObjectMeta, RV: uint64(i + 1), Raw: append(raw, '\n'),
			Cells: rowstest.PodCells(p.Name, "1/1", "Running", "0", "5m", "10.0.0.1", "node-1"), Columns: podColumns}
	}
	return out
}

// podColumns are the pods' columns as kube-apiserver prints them.
var podColumns = rowstest.MustRead("pods").Columns

// BenchmarkListEnvelope measures building a list answer from cached
// objects: sorting and copying their stored JSON into the envelope. It
// excludes the network and the cache scan.
func BenchmarkListEnvelope(b *testing.B) {
	for _, n := range []int{500, 10000} {
		pods := benchPods(b, n)
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			var buf bytes.Buffer
			b.ReportAllocs()
			for b.Loop() {
				page := slices.Clone(pods)
				slices.SortFunc(page, compareObjects)
				buf.Reset()
				appendList(&buf, "PodList", "v1", 1, "", 0, "", page)
			}
			b.SetBytes(int64(buf.Len()))
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/object")
		})
	}
}

// BenchmarkListForms compares the answer forms of one page of cached
// pods: the stored JSON (copied), PartialObjectMetadataList (metadata
// sliced out of each object's JSON) and a Table with the pod columns
// (each object's cached row, its age rendered).
func BenchmarkListForms(b *testing.B) {
	const n = 500
	pods := benchPods(b, n)
	slices.SortFunc(pods, compareObjects)
	printer := rows.NewPrinter(corev1.SchemeGroupVersion.WithResource("pods").GroupResource(), podColumns, nil)
	opts := &tableOptions{version: "v1", includeObject: metav1.IncludeMetadata}
	now := time.Now()
	for _, form := range []string{"json", "metadata", "table"} {
		b.Run("form="+form, func(b *testing.B) {
			var buf bytes.Buffer
			b.ReportAllocs()
			for b.Loop() {
				buf.Reset()
				switch form {
				case "json":
					appendList(&buf, "PodList", "v1", 1, "", 0, "", pods)
				case "metadata":
					if err := appendMetadataList(&buf, "v1", 1, "", 0, pods); err != nil {
						b.Fatal(err)
					}
				case "table":
					buf.Write(appendTable(buf.AvailableBuffer(), printer, pods, opts, true, now,
						func(b []byte) []byte { return append(b, `{"resourceVersion":"1"}`...) }))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/object")
		})
	}
}

// discardWriter is an http.ResponseWriter that drops the body, so the
// streaming benchmark measures only the gateway's side of a list.
type discardWriter struct{ h http.Header }

func (d discardWriter) Header() http.Header         { return d.h }
func (d discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d discardWriter) WriteHeader(int)             {}

// BenchmarkListWrite compares the two ways a list answer reaches the
// connection: mode=buffer builds the whole answer (appendList) and writes
// it once, as pretty and metadata answers still do; mode=stream is
// writeList, which copies stored JSON through a fixed buffer.
func BenchmarkListWrite(b *testing.B) {
	const n = 10000
	pods := benchPods(b, n)
	slices.SortFunc(pods, compareObjects)
	r := httptest.NewRequest(http.MethodGet, "/api/v1/pods", nil)
	for _, mode := range []string{"buffer", "stream"} {
		b.Run("mode="+mode+",objects=10000", func(b *testing.B) {
			w := discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				if mode == "stream" {
					writeList(w, r, "PodList", "v1", 1, "", 0, "", pods)
					continue
				}
				var buf bytes.Buffer
				appendList(&buf, "PodList", "v1", 1, "", 0, "", pods)
				writeJSON(w, r, http.StatusOK, buf.Bytes(), false)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/object")
		})
	}
}
