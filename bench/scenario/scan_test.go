package scenario

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"kubegate/bench/workload"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestScanFrames(t *testing.T) {
	obj := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a\"}","annotations":{"x":"[{\\\"}"}},"spec":{"containers":[{"name":"c","args":["}","]"]}]}}`
	for _, tc := range []struct {
		name, msg string
		want      []string
		err       bool
	}{
		{name: "single", msg: `{"type":"MODIFIED","id":"s1","rv":"42","object":` + obj + `}`, want: []string{"MODIFIED s1 42"}},
		{name: "ack", msg: `{"type":"ack","id":"s1","request":"subscribe","resource":{"group":"","version":"v1"}}`, want: []string{"ack s1 "}},
		{name: "batch", msg: `{"type":"batch","events":[{"type":"ADDED","id":"a","rv":"1","object":` + obj + `}, {"type":"END_OF_SNAPSHOT","id":"a","rv":"1"},{"type":"RESET","id":"b","reason":"Overflow"}]}`,
			want: []string{"ADDED a 1", "END_OF_SNAPSHOT a 1", "RESET b "}},
		{name: "error frame", msg: `{"type":"error","id":"x","status":{"code":404,"ended":true}}`, want: []string{"error x "}},
		{name: "events only at the top", msg: `{"type":"MODIFIED","id":"a","rv":"1","object":{"events":[{"type":"ADDED"}]}}`, want: []string{"MODIFIED a 1"}},
		{name: "truncated", msg: `{"type":"MODIFIED","id":"s1","rv":"42","object":{"a":`, err: true},
		{name: "mismatched brackets", msg: `{"type":"MODIFIED","id":"s1","object":{"a":[}]}`, err: true},
		{name: "id not a string", msg: `{"type":"ack","id":1}`, err: true},
		{name: "data after", msg: `{"type":"ack","id":"a"}{}`, err: true},
		{name: "not an object", msg: `[1]`, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			err := scanFrames([]byte(tc.msg), func(typ, id, rv []byte) {
				got = append(got, fmt.Sprintf("%s %s %s", typ, id, rv))
			})
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if !tc.err {
				if d := cmp.Diff(tc.want, got); d != "" {
					t.Errorf("frames (-want +got):\n%s", d)
				}
			}
		})
	}
}

func TestScanWatchEvent(t *testing.T) {
	const pod = `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web-1","namespace":"bench-000","uid":"u","resourceVersion":"1234","ownerReferences":[{"resourceVersion":"9"}]},"spec":{"x":"}"}}`
	for _, tc := range []struct {
		name, line string
		typ        string
		rv         uint64
		ok         bool
	}{
		{name: "modified", line: `{"type":"MODIFIED","object":` + pod + `}`, typ: "MODIFIED", rv: 1234, ok: true},
		// Heads of long lines are cut; what follows the version is not read.
		{name: "head", line: `{"type":"MODIFIED","object":` + pod[:strings.Index(pod, "ownerReferences")], typ: "MODIFIED", rv: 1234, ok: true},
		{name: "type last", line: `{"object":` + pod + `,"type":"DELETED"}`, typ: "DELETED", rv: 1234, ok: true},
		{name: "bookmark", line: `{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"77","annotations":{"k8s.io/initial-events-end":"true"}}}}`,
			typ: "BOOKMARK", rv: 77, ok: true},
		{name: "error status", line: `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","code":410}}`, typ: "ERROR", ok: true},
		// Only metadata.resourceVersion counts, not one further in.
		{name: "no version", line: `{"type":"ADDED","object":{"metadata":{"ownerReferences":[{"resourceVersion":"9"}]}}}`, typ: "ADDED", ok: true},
		{name: "bad version", line: `{"type":"ADDED","object":{"metadata":{"resourceVersion":"x"}}}`},
		{name: "no type", line: `{"object":` + pod + `}`},
		{name: "cut before the version", line: `{"type":"MODIFIED","object":{"metadata":{"name":"web-1","resou`},
		{name: "garbage", line: strings.Repeat("x", 10)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			typ, rv, ok := scanWatchEvent([]byte(tc.line))
			if ok != tc.ok || (ok && (string(typ) != tc.typ || rv != tc.rv)) {
				t.Errorf("scanWatchEvent = %s %d %v, want %s %d %v", typ, rv, ok, tc.typ, tc.rv, tc.ok)
			}
		})
	}
}

func TestObjectRV(t *testing.T) {
	for in, want := range map[string]uint64{
		`{"kind":"Pod","metadata":{"name":"a","resourceVersion":"42"},"spec":{}}`:          42,
		`{"spec":{"metadata":{"resourceVersion":"1"}},"metadata":{"resourceVersion":"2"}}`: 2,
		`{"metadata":{"ownerReferences":[{"resourceVersion":"9"}]}}`:                       0,
		`{"metadata":{"resourceVersion":5}}`:                                               0,
		`{"metadata":`:                                                                     0,
		`[]`:                                                                               0,
	} {
		rv, err := objectRV([]byte(in))
		if rv != want || (want == 0) != (err != nil) {
			t.Errorf("objectRV(%s) = %d, %v; want %d", in, rv, err, want)
		}
	}
}

// benchPodJSON is one workload Pod as kube-apiserver serves it, about
// 7 KB.
func benchPodJSON(b *testing.B, j int) []byte {
	b.Helper()
	p := workload.NewPod(workload.PodAt(j, 10), j)
	p.TypeMeta = metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}
	p.UID = types.UID(fmt.Sprintf("6b0b2a6e-0000-4000-8000-%012d", j))
	p.ResourceVersion = strconv.Itoa(1000 + j)
	raw, err := json.Marshal(p)
	if err != nil {
		b.Fatal(err)
	}
	return raw
}

// BenchmarkScanFrames measures reading the gateway's WebSocket messages
// as the receivers do: one event per message, or batches of events.
func BenchmarkScanFrames(b *testing.B) {
	for _, events := range []int{1, 16} {
		b.Run(fmt.Sprintf("events=%d", events), func(b *testing.B) {
			var msg bytes.Buffer
			if events > 1 {
				msg.WriteString(`{"type":"batch","events":[`)
			}
			for i := range events {
				if i > 0 {
					msg.WriteByte(',')
				}
				fmt.Fprintf(&msg, `{"type":"MODIFIED","id":"sub-1","rv":"%d","object":%s}`, 1000+i, benchPodJSON(b, i))
			}
			if events > 1 {
				msg.WriteString(`]}`)
			}
			n := 0
			b.SetBytes(int64(msg.Len()))
			b.ReportAllocs()
			for b.Loop() {
				if err := scanFrames(msg.Bytes(), func(typ, id, rv []byte) { n++ }); err != nil {
					b.Fatal(err)
				}
			}
			if n != b.N*events {
				b.Fatalf("%d frames, want %d", n, b.N*events)
			}
		})
	}
}

// BenchmarkScanWatchEvent measures reading one line of kube-apiserver's
// JSON watch stream.
func BenchmarkScanWatchEvent(b *testing.B) {
	line := fmt.Appendf(nil, `{"type":"MODIFIED","object":%s}`, benchPodJSON(b, 7))
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if typ, rv, ok := scanWatchEvent(line); !ok || string(typ) != "MODIFIED" || rv != 1007 {
			b.Fatalf("scanWatchEvent = %s %d %v", typ, rv, ok)
		}
	}
}
