package informer

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// benchCapturedPod is a Pod as kube-apiserver served it (three containers,
// an init container, status, managedFields from three managers), ~14 KB.
const benchCapturedPod = "testdata/objects/pods-get.json"

// BenchmarkDecode measures what each informer update pays to turn the
// apiserver's JSON into *Object. path=unstructured is the old path:
// Unstructured.UnmarshalJSON and the transform; path=jsontext is
// objectDecoder; path=jsontext-validate-only is jsontext checking the
// bytes and nothing more, the floor for any decoder built on it.
func BenchmarkDecode(b *testing.B) {
	raw := readFile(b, benchCapturedPod)
	b.Run("path=unstructured", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		for b.Loop() {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(raw); err != nil && !runtime.IsMissingKind(err) {
				b.Fatal(err)
			}
			if _, err := oldTransform(podGVK, false, podFields, u); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("path=jsontext", func(b *testing.B) {
		d := newObjectDecoder(podGVK, false, podFields)
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := d.decode(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	// What any jsontext-based decoder pays at least: validating the bytes.
	b.Run("path=jsontext-validate-only", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		for b.Loop() {
			if !jsontext.Value(raw).IsValid() {
				b.Fatal("invalid")
			}
		}
	})
}

// BenchmarkDecodeList measures decodeList on a list of 1,000 captured Pods
// (list items, so without kind), read from a stream.
func BenchmarkDecodeList(b *testing.B) {
	const n = 1000
	item := readFile(b, "testdata/objects/pods-list-item-1.json")
	var body bytes.Buffer
	body.WriteString(`{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"12345"},"items":[`)
	for i := range n {
		if i > 0 {
			body.WriteByte(',')
		}
		body.Write(item)
	}
	body.WriteString("]}\n")
	d := newObjectDecoder(podGVK, false, podFields)
	b.SetBytes(int64(body.Len()))
	b.ReportAllocs()
	for b.Loop() {
		l, err := d.decodeList(bytes.NewReader(body.Bytes()))
		if err != nil {
			b.Fatal(err)
		}
		if len(l.Items) != n {
			b.Fatalf("decoded %d items, want %d", len(l.Items), n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/object")
}

// BenchmarkDecodeWatchEvent measures the gateway's side of reading the
// upstream as Tables: decoding one watch event of a captured Pod as
// plain JSON (form=json) and as kube-apiserver's Table of one row, with
// the row's cells and no column definitions, as every event after a
// connection's first (form=table).
func BenchmarkDecodeWatchEvent(b *testing.B) {
	raw := readFile(b, benchCapturedPod)
	const cells = `["web-00000","3/3","Running","0","5m","10.244.1.17","node-1","<none>","<none>"]`
	events := map[string][]byte{
		"json": fmt.Appendf(nil, `{"type":"MODIFIED","object":%s}`+"\n", bytes.TrimSpace(raw)),
		"table": fmt.Appendf(nil, `{"type":"MODIFIED","object":{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"1"},"columnDefinitions":null,"rows":[{"cells":%s,"object":%s}]}}`+"\n",
			cells, bytes.TrimSpace(raw)),
	}
	d := newObjectDecoder(podGVK, false, podFields)
	listed := &Columns{Raw: []byte("[]")}
	for _, form := range []string{"json", "table"} {
		b.Run("form="+form, func(b *testing.B) {
			ev := events[form]
			const n = 100 // events per stream, as a watch reads them
			stream := bytes.Repeat(ev, n)
			b.SetBytes(int64(len(stream)))
			b.ReportAllocs()
			for b.Loop() {
				rc := io.NopCloser(bytes.NewReader(stream))
				dec := newWatchDecoder(rc, d)
				if form == "table" {
					dec = newTableWatchDecoder(rc, d, listed, func(string) { b.Fatal("plain") })
				}
				for range n {
					if _, obj, err := dec.Decode(); err != nil || obj.(*Object).Name == "" {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
		})
	}
}
