package ws

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubegate/internal/informer"
	"kubegate/internal/rows"
)

func TestParseClientFrame(t *testing.T) {
	f, err := parseClientFrame([]byte(`{"type":"subscribe","id":"p","resource":"pods","namespace":"ns",
		"labelSelector":"a=b","fieldSelector":"spec.nodeName=n","resyncPeriod":"30s","resourceVersion":"42","sendInitialEvents":false,
		"as":"Table"}`))
	if err != nil {
		t.Fatal(err)
	}
	if f.Type != "subscribe" || f.ID != "p" || f.Resource != "pods" || f.Namespace != "ns" || f.LabelSelector != "a=b" ||
		f.FieldSelector != "spec.nodeName=n" || f.resync.String() != "30s" || f.ResourceVersion != "42" || f.initialEvents() ||
		f.As != "Table" {
		t.Fatalf("parsed %+v", f)
	}
	f, err = parseClientFrame([]byte(` {"type":"subscribe","id":"p","resource":"pods","namespace":null} `))
	if err != nil || !f.initialEvents() || f.Namespace != "" || f.As != "" {
		t.Fatalf("defaults: %+v %v", f, err)
	}
	if _, err := parseClientFrame([]byte(`{"type":"subscribe","type":"unsubscribe","id":"p"}`)); err != nil {
		t.Fatalf("duplicate keys (last wins, as in encoding/json): %v", err)
	}
	for in, want := range map[string]string{
		`null`:                 "not null",
		`"subscribe"`:          "not string",
		`{"type":1}`:           `field "type" must be a string, not number`,
		`{"Type":"subscribe"}`: `"type" is required`,
		`{"type":"subscribe","id":"p","Resource":"pods"}`:                              `unknown field "Resource"`,
		`{"type":"unsubscribe","id":"p","x":1}`:                                        `unknown field "x"`,
		`{"type":"subscribe","id":"p","resource":"pods"}x`:                             "exactly one JSON object",
		`{"type":"subscribe","id":"p","resource":"pods","as":"table"}`:                 `"as" "table" is not a form the gateway serves; want "Table" (rows) or none (objects)`,
		`{"type":"subscribe","id":"p","resource":"pods","as":"PartialObjectMetadata"}`: `"as" "PartialObjectMetadata" is not a form`,
		`{"type":"subscribe","id":"p","resource":"pods","as":true}`:                    `field "as" must be a string, not bool`,
	} {
		_, err := parseClientFrame([]byte(in))
		re, ok := err.(*requestError)
		if !ok || re.Status.Code != 400 || !strings.Contains(re.Status.Message, want) {
			t.Errorf("parse %q: %v, want 400 containing %q", in, err, want)
		}
	}
}

// FuzzParseClientFrame: no input panics; accepted frames are valid and
// survive a round trip; refused ones carry a 400 status whose id, if any,
// is a valid id.
func FuzzParseClientFrame(f *testing.F) {
	for _, s := range []string{
		`{"type":"subscribe","id":"p","resource":"pods"}`,
		`{"type":"unsubscribe","id":"p"}`,
		`{"type":"subscribe","id":"x","resource":"deployments.apps","namespace":"default","labelSelector":"app in (a,b)","fieldSelector":"metadata.name=x","resyncPeriod":"1m","resourceVersion":"12","sendInitialEvents":true}`,
		`{"type":"subscribe","id":"x","resource":"pods","resyncPeriod":"-5s"}`,
		`{"type":"subscribe","id":"x","resource":"pods","as":"Table"}`,
		`{"type":"watch"}`, `[]`, `null`, ``, `{"type":"subscribe","id":"\u0000"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := parseClientFrame(data)
		if err != nil {
			re, ok := err.(*requestError)
			if !ok || re.Status.Code != 400 || re.Status.Reason != metav1.StatusReasonBadRequest || re.Status.Message == "" {
				t.Fatalf("error %T %v", err, err)
			}
			// An id too long is echoed in the error that refuses it, and
			// only there.
			if re.ID != "" && validID(re.ID) != nil && !strings.Contains(re.Status.Message, `"id"`) {
				t.Fatalf("error attributed to invalid id %q", re.ID)
			}
			if !utf8.ValidString(re.Status.Message) && utf8.Valid(data) {
				t.Fatalf("message not UTF-8: %q", re.Status.Message)
			}
			return
		}
		if fr.Type != typeSubscribe && fr.Type != typeUnsubscribe || validID(fr.ID) != nil {
			t.Fatalf("accepted invalid frame %+v", fr)
		}
		if fr.Type == typeSubscribe && (fr.Resource == "" || fr.resync < 0) {
			t.Fatalf("accepted invalid subscribe %+v", fr)
		}
		b, err := json.Marshal(fr)
		if err != nil {
			t.Fatal(err)
		}
		again, err := parseClientFrame(b)
		if err != nil {
			t.Fatalf("re-encoded frame %s refused: %v", b, err)
		}
		if diff := cmp.Diff(fr, again, cmp.AllowUnexported(clientFrame{})); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}

func TestEventFramesAreValidJSON(t *testing.T) {
	obj := &informer.Object{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"7"}}`), RV: 7}
	qid := quoteID("id \"with\" quotes\n")
	var b batch
	b.reset()
	for _, n := range []informer.Notification{
		{Type: informer.Added, Object: obj, RV: 7},
		{Type: informer.Modified, Object: obj, RV: 7},
		{Type: informer.Deleted, Object: obj, RV: 7},
		{Type: informer.Sync, Object: obj, RV: 7},
		{Type: informer.EndOfSnapshot, RV: 9},
		{Type: informer.Reset},
	} {
		b.begin()
		b.buf = appendObjectEvent(b.buf, qid, &n)
	}
	b.add(encodeAck("id", "subscribe", nil, nil, nil))
	var got struct {
		Type   string
		Events []map[string]any
	}
	if err := json.Unmarshal(b.message(), &got); err != nil {
		t.Fatalf("batch is not JSON: %v\n%s", err, b.buf)
	}
	var types []string
	for _, e := range got.Events {
		types = append(types, e["type"].(string))
		if e["type"] != "ack" && e["id"] != "id \"with\" quotes\n" {
			t.Errorf("id = %q", e["id"])
		}
	}
	want := []string{"ADDED", "MODIFIED", "DELETED", "SYNC", "END_OF_SNAPSHOT", "RESET", "ack"}
	if got.Type != "batch" || !cmp.Equal(types, want) {
		t.Fatalf("batch %s with %v, want %v", got.Type, types, want)
	}
	if got.Events[0]["rv"] != "7" || got.Events[4]["rv"] != "9" || got.Events[5]["reason"] != "Overflow" {
		t.Fatalf("events %v", got.Events)
	}
	if md := got.Events[0]["object"].(map[string]any)["metadata"].(map[string]any); md["name"] != "a" {
		t.Fatalf("object %v", got.Events[0]["object"])
	}

	// A lone frame is sent bare.
	b.reset()
	b.add([]byte(`{"type":"ack","id":"x","request":"unsubscribe"}`))
	if s := string(b.message()); s != `{"type":"ack","id":"x","request":"unsubscribe"}` {
		t.Fatalf("lone frame = %s", s)
	}
}

// TestEventLen: the writer sizes each frame before building it, so
// eventLen must agree with appendEvent for every kind of notification.
func TestEventLen(t *testing.T) {
	obj := &informer.Object{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`), RV: 7}
	odd := &informer.Object{Raw: obj.Raw}
	odd.ResourceVersion = "not \"numeric\"\n"
	for _, p := range []*rows.Printer{nil, rows.Generic()} {
		for _, qid := range [][]byte{quoteID("s"), quoteID("id \"with\" quotes\n")} {
			for _, n := range []informer.Notification{
				{Type: informer.Added, Object: obj, RV: 7},
				{Type: informer.Modified, Object: obj, RV: 1<<64 - 1},
				{Type: informer.Deleted, Object: obj, RV: 123456789},
				{Type: informer.Sync, Object: odd},
				{Type: informer.EndOfSnapshot, RV: 9},
				{Type: informer.EndOfSnapshot},
				{Type: informer.Reset},
			} {
				field, body := eventBody(&n, p)
				if got, want := eventLen(qid, &n, field, body), len(appendEvent(nil, qid, &n, field, body)); got != want {
					t.Errorf("eventLen(%s, %v rv %d, %s) = %d, want %d", qid, n.Type, n.RV, field, got, want)
				}
			}
		}
	}
}

// appendObjectEvent appends the frame of n for a subscription to objects.
func appendObjectEvent(buf, qid []byte, n *informer.Notification) []byte {
	field, body := eventBody(n, nil)
	return appendEvent(buf, qid, n, field, body)
}

// BenchmarkAppendEvent measures framing one event of a 2 KiB object, the
// per-socket cost of a delivery.
func BenchmarkAppendEvent(b *testing.B) {
	raw := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"x":"` + strings.Repeat("x", 2000) + `"}}`)
	n := informer.Notification{Type: informer.Modified, Object: &informer.Object{Raw: raw, RV: 123456}, RV: 123456}
	qid := quoteID("pods")
	var bt batch
	bt.reset()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if len(bt.buf) > 256<<10 {
			bt.reset()
		}
		bt.begin()
		bt.buf = appendObjectEvent(bt.buf, qid, &n)
	}
}
