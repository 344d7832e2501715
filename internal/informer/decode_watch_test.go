package informer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// watchEvent is one event of a watch stream as encoding/json reads it.
type watchEvent struct {
	Type   watch.EventType
	Object json.RawMessage
}

// extraWatchEvents follow the captured stream: what a long watch also
// sees, and members in an order the apiserver does not use.
const extraWatchEvents = `{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"300","creationTimestamp":null},"spec":{"containers":null},"status":{}}}

  {"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (225)","reason":"Expired","code":410}}
{"object":{"metadata":{"name":"late","namespace":"shop","resourceVersion":"301","labels":{"a":"b"}}},"type":"MODIFIED"}
{"object":{"kind":"Pod","metadata":{"resourceVersion":"302","annotations":{"k8s.io/initial-events-end":"true"}}},"type":"BOOKMARK","extra":[1]}
{"type":"ERROR","object":{"kind":"Status","code":500,"message":"internal"}}
`

func watchStream(t *testing.T) ([]byte, []watchEvent) {
	t.Helper()
	stream := append(readFile(t, "testdata/watch/pods.json"), extraWatchEvents...)
	var events []watchEvent
	dec := json.NewDecoder(bytes.NewReader(stream))
	for {
		var e watchEvent
		if err := dec.Decode(&e); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
	return stream, events
}

// checkEvent compares a decoded event with what it must be.
func checkEvent(t *testing.T, d *objectDecoder, i int, want watchEvent, typ watch.EventType, obj runtime.Object) {
	t.Helper()
	if typ != want.Type {
		t.Fatalf("event %d: type %s, want %s", i, typ, want.Type)
	}
	switch want.Type {
	case watch.Error:
		var st metav1.Status
		if err := json.Unmarshal(want.Object, &st); err != nil {
			t.Fatal(err)
		}
		got, ok := obj.(*metav1.Status)
		if !ok {
			t.Fatalf("event %d: ERROR object is %T, want *metav1.Status", i, obj)
		}
		if diff := cmp.Diff(&st, got); diff != "" {
			t.Errorf("event %d: Status (-want +got):\n%s", i, diff)
		}
	case watch.Bookmark:
		var m struct{ Metadata metav1.ObjectMeta }
		if err := json.Unmarshal(want.Object, &m); err != nil {
			t.Fatal(err)
		}
		got, ok := obj.(*Object)
		if !ok {
			t.Fatalf("event %d: BOOKMARK object is %T, want *Object", i, obj)
		}
		if got.ResourceVersion != m.Metadata.ResourceVersion || got.RV == 0 {
			t.Errorf("event %d: bookmark resourceVersion %q (%d), want %q", i, got.ResourceVersion, got.RV, m.Metadata.ResourceVersion)
		}
		if diff := cmp.Diff(m.Metadata.Annotations, got.Annotations); diff != "" {
			t.Errorf("event %d: bookmark annotations (-want +got):\n%s", i, diff)
		}
	default:
		wantObj, err := d.decode(want.Object)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := obj.(*Object)
		if !ok {
			t.Fatalf("event %d: %s object is %T, want *Object", i, typ, obj)
		}
		if !bytes.Equal(got.Raw, wantObj.Raw) {
			t.Errorf("event %d: Raw differs from decoding the object alone: %s", i, firstDiff(got.Raw, wantObj.Raw))
		}
		if diff := cmp.Diff(viewOf(wantObj), viewOf(got)); diff != "" {
			t.Errorf("event %d (-alone +watch):\n%s", i, diff)
		}
		if got.Annotations != nil {
			t.Errorf("event %d: %s object has annotations", i, typ)
		}
	}
}

func TestDecodeWatch(t *testing.T) {
	stream, events := watchStream(t)
	types := map[watch.EventType]int{}
	for _, e := range events {
		types[e.Type]++
	}
	for _, typ := range []watch.EventType{watch.Added, watch.Modified, watch.Deleted, watch.Bookmark, watch.Error} {
		if types[typ] == 0 {
			t.Fatalf("the stream has no %s event", typ)
		}
	}
	d := newObjectDecoder(podGVK, false, podFields)
	for name, r := range readers(stream) {
		t.Run(name, func(t *testing.T) {
			dec := newWatchDecoder(io.NopCloser(r()), d)
			defer dec.Close()
			for i, want := range events {
				typ, obj, err := dec.Decode()
				if err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
				checkEvent(t, d, i, want, typ, obj)
			}
			if _, _, err := dec.Decode(); err != io.EOF {
				t.Fatalf("after the last event: %v, want io.EOF", err)
			}
		})
	}
}

// TestDecodeWatchCut checks how a stream that ends is reported: io.EOF
// between events, io.ErrUnexpectedEOF inside one.
func TestDecodeWatchCut(t *testing.T) {
	stream, events := watchStream(t)
	d := newObjectDecoder(podGVK, false, podFields)
	// Event boundaries, after each event's closing brace.
	var ends []int
	for off := 0; ; {
		i := bytes.IndexByte(stream[off:], '\n')
		if i < 0 {
			break
		}
		if line := bytes.TrimSpace(stream[off : off+i]); len(line) > 0 {
			ends = append(ends, off+bytes.LastIndexByte(stream[off:off+i], '}')+1)
		}
		off += i + 1
	}
	if len(ends) != len(events) {
		t.Fatalf("found %d event ends, want %d", len(ends), len(events))
	}
	// Cut every 211 bytes, and on each side of every event's end.
	cuts := []int{0, len(stream)}
	for c := 0; c < len(stream); c += 211 {
		cuts = append(cuts, c)
	}
	for _, e := range ends {
		cuts = append(cuts, e-1, e, e+1)
	}
	slices.Sort(cuts)
	for _, cut := range slices.Compact(cuts) {
		if cut < 0 || cut > len(stream) {
			continue
		}
		whole := 0 // events that end before the cut
		for whole < len(ends) && ends[whole] <= cut {
			whole++
		}
		prevEnd := 0
		if whole > 0 {
			prevEnd = ends[whole-1]
		}
		atBoundary := len(bytes.TrimSpace(stream[prevEnd:cut])) == 0
		dec := newWatchDecoder(io.NopCloser(newChunkReader(bytes.NewReader(stream[:cut]), uint64(cut))), d)
		for i := range whole {
			if _, _, err := dec.Decode(); err != nil {
				t.Fatalf("cut at %d: event %d: %v", cut, i, err)
			}
		}
		_, _, err := dec.Decode()
		switch {
		case atBoundary && err != io.EOF:
			t.Fatalf("cut at %d, between events: %v, want io.EOF", cut, err)
		case !atBoundary && err != io.ErrUnexpectedEOF:
			t.Fatalf("cut at %d, inside event %d: %v, want io.ErrUnexpectedEOF", cut, whole, err)
		}
	}
}

func TestDecodeWatchErrors(t *testing.T) {
	d := newObjectDecoder(podGVK, false, podFields)
	for _, in := range []string{
		`{"type":"ADDED","object":{"a":}}`,
		`{"type":"ADDED","object":{"a":1,"a":2}}`,
		`{"type":"ADDING","object":{}}`,
		`{"type":1,"object":{}}`,
		`{"type":"ADDED"}`,
		`{"object":{}}`,
		`{"type":"ADDED","object":[]}`,
		`{"type":"ADDED","object":null}`,
		`{"type":"ERROR","object":[]}`,
		`[]`,
		`{"type":"ADDED","type":"DELETED","object":{}}`,
	} {
		dec := newWatchDecoder(io.NopCloser(strings.NewReader(in+"\n")), d)
		_, obj, err := dec.Decode()
		if err == nil || err == io.EOF || err == io.ErrUnexpectedEOF {
			t.Errorf("Decode(%s) = %v, %v; want a decoding error", in, obj, err)
		}
	}

	// The connection's own error comes back as is, for StreamWatcher's
	// net.IsProbableEOF and timeout checks.
	connErr := errors.New("read tcp: connection reset by peer")
	event := `{"type":"ADDED","object":{"kind":"Pod","metadata":{"name":"a"}}}`
	r := io.MultiReader(strings.NewReader(event+"\n"+event[:20]), iotest.ErrReader(connErr))
	dec := newWatchDecoder(io.NopCloser(r), d)
	if _, _, err := dec.Decode(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := dec.Decode(); err != connErr {
		t.Errorf("Decode after a read error: %v, want %v", err, connErr)
	}
}

// TestDecodeWatchStreamWatcher runs the decoder as the reflector will:
// under watch.StreamWatcher.
func TestDecodeWatchStreamWatcher(t *testing.T) {
	stream, events := watchStream(t)
	d := newObjectDecoder(podGVK, false, podFields)
	reporter := apierrors.NewClientErrorReporter(500, "GET", "ClientWatchDecoding")

	w := watch.NewStreamWatcher(newWatchDecoder(io.NopCloser(newChunkReader(bytes.NewReader(stream), 3)), d), reporter)
	i := 0
	for e := range w.ResultChan() {
		if i == len(events) {
			t.Fatalf("extra event %s %T", e.Type, e.Object)
		}
		checkEvent(t, d, i, events[i], e.Type, e.Object)
		i++
	}
	if i != len(events) {
		t.Fatalf("got %d events, want %d", i, len(events))
	}

	// A malformed event ends the watch with an ERROR event built by the
	// reporter, as client-go's own decoder would.
	bad := append(bytes.Clone(stream[:bytes.IndexByte(stream, '\n')+1]), `{"type":"ADDED","object":{"a":}}`...)
	w = watch.NewStreamWatcher(newWatchDecoder(io.NopCloser(bytes.NewReader(bad)), d), reporter)
	var got []watch.Event
	for e := range w.ResultChan() {
		got = append(got, e)
	}
	if len(got) != 2 || got[0].Type != watch.Added || got[1].Type != watch.Error {
		t.Fatalf("got %d events %v, want ADDED then ERROR", len(got), got)
	}
	if st, ok := got[1].Object.(*metav1.Status); !ok || st.Code != 500 || !strings.Contains(st.Message, "unable to decode an event from the watch stream") {
		t.Errorf("ERROR object %#v", got[1].Object)
	}
}

// TestDecodeWatchDoesNotReadAhead checks that an event is returned as
// soon as its last byte arrives, and that Close ends a waiting Decode.
func TestDecodeWatchDoesNotReadAhead(t *testing.T) {
	pr, pw := io.Pipe()
	dec := newWatchDecoder(pr, newObjectDecoder(podGVK, false, nil))
	type result struct {
		typ watch.EventType
		err error
	}
	results := make(chan result)
	go func() {
		for {
			typ, _, err := dec.Decode()
			results <- result{typ, err}
			if err != nil {
				return
			}
		}
	}()
	for i, typ := range []watch.EventType{watch.Added, watch.Modified} {
		// A pipe write returns once the reader has taken all of it.
		written := make(chan error, 1)
		go func() {
			_, err := fmt.Fprintf(pw, `{"type":%q,"object":{"metadata":{"name":"a","resourceVersion":"%d"}}}`, typ, i+1)
			written <- err
		}()
		select {
		case r := <-results:
			if r.err != nil || r.typ != typ {
				t.Fatalf("Decode = %s, %v; want %s", r.typ, r.err, typ)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Decode did not return %s once the event was written", typ)
		}
		if err := <-written; err != nil {
			t.Fatal(err)
		}
	}
	dec.Close()
	select {
	case r := <-results:
		if r.err == nil {
			t.Fatal("Decode after Close succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end Decode")
	}
}
