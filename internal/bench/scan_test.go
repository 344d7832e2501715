package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

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
		{name: "truncated", msg: `{"type":"MODIFIED","id":"s1","rv":"42","object":{"a":`, err: true},
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
	line := `{"type":"MODIFIED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web-1","namespace":"bench-000","uid":"u","resourceVersion":"1234","ownerReferences":[{"resourceVersion":"9"}]}}}`
	typ, rv, ok := scanWatchEvent([]byte(line))
	if !ok || string(typ) != "MODIFIED" || rv != 1234 {
		t.Errorf("scanWatchEvent = %s %d %v, want MODIFIED 1234 true", typ, rv, ok)
	}
	if _, _, ok := scanWatchEvent([]byte(strings.Repeat("x", 10))); ok {
		t.Error("garbage scanned ok")
	}
}

// benchPodJSON is one workload Pod as kube-apiserver serves it, about
// 7 KB.
func benchPodJSON(b *testing.B, j int) []byte {
	b.Helper()
	p := NewPod(PodAt(j, 10), j)
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
