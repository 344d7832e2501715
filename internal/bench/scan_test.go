package bench

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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
