package informer

import (
	"bytes"
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
