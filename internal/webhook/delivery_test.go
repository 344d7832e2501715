package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"kubegate/internal/testenv"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"

	"kubegate/internal/informer"
)

func hookConfig(t *testing.T, name, url string) Spec {
	return Spec{
		Name:       name,
		URL:        url,
		Resources:  []Resource{{Resource: "configmaps"}},
		SecretFile: secretFile(t),
		// httptest receivers listen on loopback, refused by default.
		AllowAddresses: []string{"127.0.0.0/8", "::1/128"},
		Retry: Retry{
			MaxAttempts:    5,
			InitialBackoff: metav1.Duration{Duration: time.Second},
			MaxBackoff:     metav1.Duration{Duration: 8 * time.Second},
		},
	}
}

type cloudEvent struct {
	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id"`
	Source          string          `json:"source"`
	Type            string          `json:"type"`
	Subject         string          `json:"subject"`
	Time            time.Time       `json:"time"`
	DataContentType string          `json:"datacontenttype"`
	Data            json.RawMessage `json:"data"`
}

func decode(t *testing.T, req request) cloudEvent {
	t.Helper()
	var ce cloudEvent
	if err := json.Unmarshal(req.body, &ce); err != nil {
		t.Fatalf("body %s: %v", req.body, err)
	}
	if req.header.Get(HeaderID) != ce.ID {
		t.Errorf("webhook-id %q, CloudEvents id %q", req.header.Get(HeaderID), ce.ID)
	}
	return ce
}

// stepWhenWaiting advances the fake clock by d once the hook waits on it.
func (h *harness) stepWhenWaiting(d time.Duration) {
	h.t.Helper()
	testenv.Eventually(h.t, "a retry timer", h.clock.HasWaiters)
	h.clock.Step(d)
}

func (h *harness) metric(name, outcome string) float64 {
	return testutil.ToFloat64(h.m.m.deliveries.WithLabelValues(name, outcome))
}

func TestCloudEventsInOrderAndSigned(t *testing.T) {
	rcv := newReceiver(t, time.Now)
	h := start(t, hookConfig(t, "a", rcv.srv.URL))
	src := h.source("a", 0)
	src.push(note(informer.Added, "x", 10), note(informer.Modified, "x", 11), note(informer.Deleted, "x", 12), note(informer.Sync, "y", 5))
	want := []struct{ typ, rv string }{{"added", "10"}, {"modified", "11"}, {"deleted", "12"}, {"sync", "5"}}
	ids := map[string]bool{}
	for _, w := range want {
		req := rcv.next()
		ce := decode(t, req)
		if ce.SpecVersion != "1.0" || ce.Type != "io.kubegate.resource."+w.typ || ce.Source != "https://cluster.example" ||
			ce.DataContentType != "application/json" || ce.Time.IsZero() || ids[ce.ID] {
			t.Fatalf("event %+v", ce)
		}
		ids[ce.ID] = true
		if !strings.HasPrefix(ce.Subject, "/api/v1/namespaces/ns/configmaps/") {
			t.Errorf("subject %q", ce.Subject)
		}
		if !strings.Contains(string(ce.Data), `"resourceVersion":"`+w.rv+`"`) {
			t.Errorf("%s: data %s", w.typ, ce.Data)
		}
		if ct := req.header.Get("Content-Type"); ct != "application/cloudevents+json" {
			t.Errorf("Content-Type %q", ct)
		}
	}
	testenv.Eventually(t, "delivered metric", func() bool { return h.metric("a", outcomeDelivered) == 4 })
}

func TestWatchFormatAndEventTypes(t *testing.T) {
	rcv := newReceiver(t, time.Now)
	c := hookConfig(t, "a", rcv.srv.URL)
	c.Format = "watch"
	c.EventTypes = []string{"deleted"}
	h := start(t, c)
	src := h.source("a", 0)
	src.push(note(informer.Added, "x", 1), note(informer.Deleted, "x", 2))
	req := rcv.next()
	var ev struct {
		Type   string          `json:"type"`
		Object json.RawMessage `json:"object"`
	}
	if err := json.Unmarshal(req.body, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Type != "DELETED" || string(ev.Object) != string(object("x", 2).Raw) || req.header.Get("Content-Type") != "application/json" {
		t.Fatalf("got %s", req.body)
	}
	src.settle(t)
	rcv.none() // not the added event
	if h.metric("a", outcomeDelivered) != 1 {
		t.Fatalf("delivered = %v, want 1", h.metric("a", outcomeDelivered))
	}
}

// A failing receiver gets the same event (same id and body) on every
// retry, after backoffs on the fake clock, and a later state of the same
// object only after the earlier one was delivered.
func TestRetryKeepsIDAndOrder(t *testing.T) {
	rcv := newReceiver(t, time.Now)
	rcv.setRespond(func(n int, w http.ResponseWriter) {
		if n <= 3 {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	h := start(t, hookConfig(t, "a", rcv.srv.URL))
	rcv.setNow(h.clock.Now)
	src := h.source("a", 0)
	src.push(note(informer.Added, "x", 1))
	first := rcv.next()
	src.push(note(informer.Modified, "x", 2)) // arrives while the first is retried
	for _, backoff := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		h.stepWhenWaiting(backoff - time.Millisecond)
		// Still parked on the retry timer, so nothing is in flight.
		if !h.clock.HasWaiters() {
			t.Fatalf("retried before the %s backoff elapsed", backoff)
		}
		rcv.none()
		h.clock.Step(time.Millisecond)
		again := rcv.next()
		if again.header.Get(HeaderID) != first.header.Get(HeaderID) || string(again.body) != string(first.body) {
			t.Fatalf("retry changed the event: %s vs %s", again.body, first.body)
		}
	}
	second := decode(t, rcv.next())
	if second.Type != "io.kubegate.resource.modified" || second.ID == first.header.Get(HeaderID) {
		t.Fatalf("after the retried event got %+v", second)
	}
	if got := testutil.ToFloat64(h.m.m.attempts.WithLabelValues("a", "5xx")); got != 3 {
		t.Errorf("5xx attempts = %v", got)
	}
}

func TestRetryAfter(t *testing.T) {
	for _, code := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			rcv := newReceiver(t, time.Now)
			rcv.setRespond(func(n int, w http.ResponseWriter) {
				if n == 1 {
					w.Header().Set("Retry-After", "30")
					w.WriteHeader(code)
				}
			})
			h := start(t, hookConfig(t, "a", rcv.srv.URL))
			rcv.setNow(h.clock.Now)
			h.source("a", 0).push(note(informer.Added, "x", 1))
			rcv.next()
			h.stepWhenWaiting(29 * time.Second) // well past the 1s backoff
			if !h.clock.HasWaiters() {
				t.Fatal("Retry-After: 30 not honoured")
			}
			rcv.none() // parked on the timer: nothing in flight
			h.clock.Step(time.Second)
			rcv.next()
			testenv.Eventually(t, "delivered metric", func() bool { return h.metric("a", outcomeDelivered) == 1 })
		})
	}
}

func TestRetryAfterParse(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"": 0, "7": 7 * time.Second, "-1": 0, "soon": 0,
		"Thu, 01 Jan 2026 00:01:00 GMT": time.Minute, "Wed, 31 Dec 2025 00:00:00 GMT": 0,
	} {
		if got := retryAfter(v, now); got != want {
			t.Errorf("retryAfter(%q) = %v, want %v", v, got, want)
		}
	}
}

// expectTypes reads the next requests and checks their CloudEvents types
// and subjects' last segment ("" for a marker's collection).
func (r *receiver) expectTypes(want ...string) {
	r.t.Helper()
	for _, w := range want {
		typ, name, _ := strings.Cut(w, " ")
		ce := decode(r.t, r.next())
		if ce.Type != eventTypePrefix+typ || name != "" && !strings.HasSuffix(ce.Subject, "/"+name) {
			r.t.Fatalf("got %s %s, want %s", ce.Type, ce.Subject, w)
		}
	}
}

func (h *harness) counter(c *prometheus.CounterVec, labels ...string) float64 {
	return testutil.ToFloat64(c.WithLabelValues(labels...))
}

// A permanent failure is not retried. An event that runs out of retries
// is not dropped: it and the events taken with it give way to a reset and
// the current state, which the receiver gets instead.
func TestPermanentFailuresAndExhaustedRetries(t *testing.T) {
	rcv := newReceiver(t, time.Now)
	rcv.setRespond(func(n int, w http.ResponseWriter) {
		switch n {
		case 1:
			w.WriteHeader(http.StatusBadRequest) // permanent: not retried
		case 2, 3:
			w.WriteHeader(http.StatusBadGateway) // retried, then out of retries
		}
	})
	c := hookConfig(t, "a", rcv.srv.URL)
	c.Retry.MaxAttempts = 2
	h := start(t, c)
	rcv.setNow(h.clock.Now)
	src := h.source("a", 0)
	src.change(note(informer.Added, "x", 1), note(informer.Added, "y", 2), note(informer.Added, "z", 3))
	rcv.expectTypes("added x")
	y := rcv.next()
	h.stepWhenWaiting(time.Second)
	if again := rcv.next(); again.header.Get(HeaderID) != y.header.Get(HeaderID) {
		t.Fatal("second attempt is another event")
	}
	rcv.expectTypes("reset", "added x", "added y", "added z", "snapshot.end")
	src.settle(t)
	rcv.none()
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"rejected", h.metric("a", outcomeRejected), 1},
		{"superseded", h.metric("a", outcomeSuperseded), 2}, // y and z
		{"delivered", h.metric("a", outcomeDelivered), 5},
		{"resets for retries", h.counter(h.m.m.resets, "a", reasonRetriesExhausted), 1},
		{"resets for overflows", h.counter(h.m.m.resets, "a", reasonOverflow), 0},
		{"overflows", h.counter(h.m.m.overflows, "a", "reset"), 0},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
}

// maxAge is a retry budget too: a Retry-After past it supersedes the
// events taken at once.
func TestMaxAgeSupersedes(t *testing.T) {
	rcv := newReceiver(t, time.Now)
	rcv.setRespond(func(n int, w http.ResponseWriter) {
		if n == 1 {
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	c := hookConfig(t, "a", rcv.srv.URL)
	c.Retry.MaxAge = metav1.Duration{Duration: time.Minute}
	h := start(t, c)
	rcv.setNow(h.clock.Now)
	src := h.source("a", 0)
	src.change(note(informer.Added, "x", 1), note(informer.Added, "y", 2))
	rcv.expectTypes("added x", "reset", "added x", "added y", "snapshot.end")
	src.settle(t)
	if h.metric("a", outcomeSuperseded) != 2 || h.clock.HasWaiters() {
		t.Fatalf("superseded = %v, want 2 without waiting", h.metric("a", outcomeSuperseded))
	}
}

func TestGoneDisables(t *testing.T) {
	rcv := newReceiver(t, time.Now)
	rcv.setRespond(func(n int, w http.ResponseWriter) { w.WriteHeader(http.StatusGone) })
	h := start(t, hookConfig(t, "a", rcv.srv.URL))
	src := h.source("a", 0)
	src.push(note(informer.Added, "x", 1), note(informer.Added, "y", 2))
	rcv.next()
	testenv.Eventually(t, "disabled", func() bool {
		return testutil.ToFloat64(h.m.m.disabled.WithLabelValues("a")) == 1 && src.isStopped()
	})
	if h.clock.HasWaiters() {
		t.Fatal("a 410 was retried")
	}

	// A reload with a changed configuration enables it again.
	rcv.setRespond(nil)
	c := hookConfig(t, "a", rcv.srv.URL+"/v2")
	if err := h.m.Apply(context.Background(), []Spec{c}); err != nil {
		t.Fatal(err)
	}
	// Apply has waited for the disabled hook's goroutine to exit, and the
	// new one has nothing yet: whatever the old one sent has arrived.
	rcv.none() // not y
	h.source("a", 1).push(note(informer.Added, "z", 3))
	if ce := decode(t, rcv.next()); !strings.HasSuffix(ce.Subject, "/z") {
		t.Fatalf("got %s", ce.Subject)
	}
	if testutil.ToFloat64(h.m.m.disabled.WithLabelValues("a")) != 0 {
		t.Fatal("still reported disabled")
	}
}

func TestRedirectNotFollowed(t *testing.T) {
	target := newReceiver(t, time.Now)
	rcv := newReceiver(t, time.Now)
	rcv.setRespond(func(n int, w http.ResponseWriter) {
		if n == 1 {
			w.Header().Set("Location", target.srv.URL)
			w.WriteHeader(http.StatusTemporaryRedirect)
		}
	})
	h := start(t, hookConfig(t, "a", rcv.srv.URL))
	src := h.source("a", 0)
	src.push(note(informer.Added, "x", 1), note(informer.Added, "y", 2))
	rcv.next()
	if ce := decode(t, rcv.next()); !strings.HasSuffix(ce.Subject, "/y") {
		t.Fatalf("got %s", ce.Subject)
	}
	src.settle(t)
	target.none()
	if h.metric("a", outcomeRejected) != 1 {
		t.Fatal("redirect not counted as rejected")
	}
}

// Reloading with one webhook changed restarts only that one: another
// webhook keeps its goroutine, listener and the event it is retrying.
func TestApplyKeepsOtherQueues(t *testing.T) {
	ra, rb := newReceiver(t, time.Now), newReceiver(t, time.Now)
	rb.setRespond(func(n int, w http.ResponseWriter) {
		if n == 1 {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	a, b := hookConfig(t, "a", ra.srv.URL), hookConfig(t, "b", rb.srv.URL)
	h := start(t, a, b)
	rb.setNow(h.clock.Now)
	srcB := h.source("b", 0)
	srcB.push(note(informer.Added, "x", 1), note(informer.Modified, "x", 2))
	first := rb.next()
	testenv.Eventually(t, "b to wait for a retry", h.clock.HasWaiters)
	h.m.mu.Lock()
	hookB := h.m.hooks["b"]
	h.m.mu.Unlock()

	a.URL += "/moved"
	if err := h.m.Apply(context.Background(), []Spec{a, b}); err != nil {
		t.Fatal(err)
	}
	if !h.source("a", 0).isStopped() || h.source("a", 1).isStopped() || srcB.isStopped() {
		t.Fatal("wrong listeners stopped")
	}
	h.m.mu.Lock()
	same := h.m.hooks["b"] == hookB
	h.m.mu.Unlock()
	if !same {
		t.Fatal("unchanged webhook b was restarted")
	}
	h.clock.Step(time.Second)
	if again := rb.next(); again.header.Get(HeaderID) != first.header.Get(HeaderID) {
		t.Fatal("b lost its retried event")
	}
	if ce := decode(t, rb.next()); ce.Type != "io.kubegate.resource.modified" {
		t.Fatalf("b then got %s", ce.Type)
	}

	// A bad configuration changes nothing.
	bad := a
	bad.Resources = []Resource{{Resource: "nosuchthings"}}
	if err := h.m.Apply(context.Background(), []Spec{bad, b}); err == nil ||
		!strings.Contains(err.Error(), `webhooks[0] (a): resources[0] (nosuchthings)`) {
		t.Fatalf("err = %v", err)
	}
	if h.source("a", 1).isStopped() {
		t.Fatal("a failed reload stopped a running webhook")
	}

	// Removing a stops it and forgets its metrics.
	if err := h.m.Apply(context.Background(), []Spec{b}); err != nil {
		t.Fatal(err)
	}
	if !h.source("a", 1).isStopped() || srcB.isStopped() {
		t.Fatal("wrong listeners stopped on removal")
	}
}

func TestInvalidConfigRejectedAtStart(t *testing.T) {
	c := hookConfig(t, "a", "https://r.example/")
	c.SecretFile = ""
	m, err := New(Options{Webhooks: []Spec{c}, listen: func(context.Context, string, Resource, informer.ListenerOptions) (*informer.ResourceInfo, source, error) {
		t.Fatal("listened for an invalid webhook")
		return nil, nil, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	err = m.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "webhooks[0] (a): secret: a signing secret is required") {
		t.Fatalf("err = %v", err)
	}
}

func TestAddressGuard(t *testing.T) {
	rcv := newReceiver(t, time.Now)
	c := hookConfig(t, "a", rcv.srv.URL)
	c.AllowAddresses = nil
	h := start(t, c)
	src := h.source("a", 0)
	src.push(note(informer.Added, "x", 1))
	src.settle(t)
	rcv.none()
	if h.metric("a", outcomeRejected) != 1 {
		t.Fatalf("rejected = %v, want 1", h.metric("a", outcomeRejected))
	}
	if h.clock.HasWaiters() {
		t.Fatal("a refused address was retried")
	}

	g := newAddressGuard([]string{"10.1.0.0/16"}, []string{"10.0.0.0/8"})
	for addr, refused := range map[string]bool{
		"127.0.0.1": true, "::1": true, "169.254.169.254": true, "::ffff:169.254.169.254": true, "fe80::1": true,
		"0.0.0.0": true, "10.2.3.4": true, "10.1.2.3": false, "192.0.2.1": false, "2001:db8::1": false,
	} {
		err := g.control("tcp", net.JoinHostPort(addr, "443"), nil)
		if (err != nil) != refused {
			t.Errorf("%s: err = %v, want refused=%v", addr, err, refused)
		}
	}
}

// At shutdown an event waiting for its retry is tried once more, and an
// event still undelivered is counted.
func TestShutdownDrains(t *testing.T) {
	rcv := newReceiver(t, time.Now)
	rcv.setRespond(func(n int, w http.ResponseWriter) {
		if n == 1 || n == 3 {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	h := start(t, hookConfig(t, "a", rcv.srv.URL))
	h.source("a", 0).push(note(informer.Added, "x", 1), note(informer.Added, "y", 2), note(informer.Added, "z", 3))
	first := rcv.next()
	testenv.Eventually(t, "a retry timer", h.clock.HasWaiters)
	h.stop()
	if again := rcv.next(); again.header.Get(HeaderID) != first.header.Get(HeaderID) {
		t.Fatal("drain did not retry the pending event first")
	}
	rcv.next() // y: fails, not retried again
	rcv.next() // z
	if h.metric("a", outcomeShutdown) != 1 || h.metric("a", outcomeDelivered) != 2 {
		t.Fatalf("shutdown = %v, delivered = %v", h.metric("a", outcomeShutdown), h.metric("a", outcomeDelivered))
	}
	rcv.noMore()
}

// Stopping (shutdown or a reload) does not cut off an attempt the receiver
// is already handling: it finishes within the drain time and counts as
// delivered, instead of being sent again by the drain.
func TestStopLetsAnAttemptInFlightFinish(t *testing.T) {
	rcv := newReceiver(t, time.Now)
	release := make(chan struct{})
	rcv.setRespond(func(n int, w http.ResponseWriter) {
		if n == 1 {
			<-release
		}
	})
	h := start(t, hookConfig(t, "a", rcv.srv.URL))
	h.source("a", 0).push(note(informer.Added, "x", 1))
	rcv.next() // x is being handled; its answer waits for release
	h.cancel()
	close(release)
	h.stop()
	rcv.noMore()
	if h.metric("a", outcomeDelivered) != 1 || h.metric("a", outcomeShutdown) != 0 {
		t.Fatalf("delivered = %v, shutdown = %v; want 1 and 0", h.metric("a", outcomeDelivered), h.metric("a", outcomeShutdown))
	}
}

// Events still buffered in the listener at shutdown (behind one being
// retried) are part of the queue: the drain tries them too, in order, and
// counts the ones it cannot deliver.
func TestShutdownDrainsBufferedEvents(t *testing.T) {
	rcv := newReceiver(t, time.Now)
	rcv.setRespond(func(n int, w http.ResponseWriter) {
		if n == 1 || n == 4 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	h := start(t, hookConfig(t, "a", rcv.srv.URL))
	src := h.source("a", 0)
	src.push(note(informer.Added, "x", 1))
	first := rcv.next()
	testenv.Eventually(t, "a retry timer", h.clock.HasWaiters)
	src.push(note(informer.Added, "y", 2), note(informer.Added, "z", 3)) // buffered behind x
	h.stop()
	for _, want := range []string{"x", "y", "z"} {
		ce := decode(t, rcv.next())
		if !strings.HasSuffix(ce.Subject, "/"+want) {
			t.Fatalf("drain sent %s, want %s", ce.Subject, want)
		}
		if want == "x" && ce.ID != first.header.Get(HeaderID) {
			t.Fatal("drain did not retry the pending event first")
		}
	}
	if h.metric("a", outcomeDelivered) != 2 || h.metric("a", outcomeShutdown) != 1 {
		t.Fatalf("delivered = %v, shutdown = %v; want 2 and 1 (z failed)", h.metric("a", outcomeDelivered), h.metric("a", outcomeShutdown))
	}
	rcv.noMore()
}

func reset() informer.Notification { return informer.Notification{Type: informer.Reset} }

func endOfSnapshot(rv int) informer.Notification {
	return informer.Notification{Type: informer.EndOfSnapshot, RV: uint64(rv)}
}

// A reset reaches the receiver as a reset event, the snapshot as added
// events and a snapshot.end carrying the snapshot's resourceVersion, the
// markers naming the collection the webhook's entry selects from. The
// markers are sent whatever eventTypes says, signed, each with an id of
// its own.
func TestResetAndSnapshotEndEvents(t *testing.T) {
	rcv := newReceiver(t, time.Now)
	c := hookConfig(t, "a", rcv.srv.URL)
	c.Resources = []Resource{{Resource: "configmaps", Namespace: "ns"}}
	c.EventTypes = []string{"added"}
	h := start(t, c)
	src := h.source("a", 0)
	const collection = "/api/v1/namespaces/ns/configmaps"
	want := []struct{ typ, subject, data string }{
		{"reset", collection, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"ns","annotations":{"kubegate.io/reset":"true"}}}`},
		{"added", collection + "/x", string(object("x", 5).Raw)},
		{"added", collection + "/y", string(object("y", 6).Raw)},
		{"snapshot.end", collection, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"ns","resourceVersion":"7","annotations":{"k8s.io/initial-events-end":"true"}}}`},
	}
	markerIDs := map[string]bool{}
	for round := range 2 {
		// The second reset comes at the same (fake) time as the first.
		src.push(note(informer.Modified, "w", 4), reset(), note(informer.Added, "x", 5), note(informer.Added, "y", 6),
			endOfSnapshot(7), note(informer.Deleted, "x", 8))
		ids := map[string]bool{}
		for _, w := range want {
			ce := decode(t, rcv.next())
			if ce.Type != eventTypePrefix+w.typ || ce.Subject != w.subject || string(ce.Data) != w.data || ids[ce.ID] {
				t.Fatalf("round %d: got %+v with data %s\nwant type %s, subject %s, data %s and a new id", round, ce, ce.Data, w.typ, w.subject, w.data)
			}
			ids[ce.ID] = true
			if w.typ != "added" {
				if markerIDs[ce.ID] {
					t.Fatalf("round %d: %s has the id of an earlier marker", round, w.typ)
				}
				markerIDs[ce.ID] = true
			}
		}
		src.settle(t)
		rcv.none() // neither the modified nor the deleted event
	}
}

// TestResourceGoneSendsResetAndEmptySnapshot: when the resource is no
// longer served, its listener ends after the deletions it held; the
// receiver gets them, then a reset and an empty snapshot (a snapshot.end
// right after it) for the entry's collection: none of its objects exist.
func TestResourceGoneSendsResetAndEmptySnapshot(t *testing.T) {
	rcv := newReceiver(t, time.Now)
	c := hookConfig(t, "a", rcv.srv.URL)
	c.Resources = []Resource{{Resource: "configmaps", Namespace: "ns"}}
	h := start(t, c)
	src := h.source("a", 0)
	src.change(note(informer.Added, "x", 5))
	src.change(note(informer.Deleted, "x", 8))
	src.end(&informer.ResourceGoneError{GVR: configmaps.GVR})
	const collection = "/api/v1/namespaces/ns/configmaps"
	for _, w := range []struct{ typ, subject, data string }{
		{"added", collection + "/x", string(object("x", 5).Raw)},
		{"deleted", collection + "/x", string(object("x", 8).Raw)},
		{"reset", collection, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"ns","annotations":{"kubegate.io/reset":"true"}}}`},
		{"snapshot.end", collection, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"ns","resourceVersion":"8","annotations":{"k8s.io/initial-events-end":"true"}}}`},
	} {
		ce := decode(t, rcv.next())
		if ce.Type != eventTypePrefix+w.typ || ce.Subject != w.subject || string(ce.Data) != w.data {
			t.Fatalf("got %+v with data %s\nwant type %s, subject %s, data %s", ce, ce.Data, w.typ, w.subject, w.data)
		}
	}
	src.settle(t)
	rcv.none()
	if n := testutil.ToFloat64(h.m.m.resets.WithLabelValues("a", reasonResourceGone)); n != 1 {
		t.Fatalf("resets{reason=resource_gone} = %v, want 1", n)
	}
}

// TestResourceServedAgainSendsItsObjects: once a resource that went away
// is served again, the webhook listens to it again: the receiver gets a
// reset, every object the entry selects as added and snapshot.end, then
// the changes. Neither reset counts as an overflow.
func TestResourceServedAgainSendsItsObjects(t *testing.T) {
	rcv := newReceiver(t, time.Now)
	c := hookConfig(t, "a", rcv.srv.URL)
	c.Resources = []Resource{{Resource: "configmaps", Namespace: "ns"}}
	h := start(t, c)
	src := h.source("a", 0)
	src.end(&informer.ResourceGoneError{GVR: configmaps.GVR})
	for _, typ := range []string{"reset", "snapshot.end"} {
		if ce := decode(t, rcv.next()); ce.Type != eventTypePrefix+typ {
			t.Fatalf("got %s, want %s", ce.Type, typ)
		}
	}
	src.settle(t)
	rcv.none()

	h.serve(note(informer.Added, "y", 20))
	const collection = "/api/v1/namespaces/ns/configmaps"
	for _, w := range []struct{ typ, subject, data string }{
		{"reset", collection, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"ns","annotations":{"kubegate.io/reset":"true"}}}`},
		{"added", collection + "/y", string(object("y", 20).Raw)},
		{"snapshot.end", collection, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"ns","resourceVersion":"20","annotations":{"k8s.io/initial-events-end":"true"}}}`},
	} {
		ce := decode(t, rcv.next())
		if ce.Type != eventTypePrefix+w.typ || ce.Subject != w.subject || string(ce.Data) != w.data {
			t.Fatalf("got %+v with data %s\nwant type %s, subject %s, data %s", ce, ce.Data, w.typ, w.subject, w.data)
		}
	}
	again := h.source("a", 1)
	again.change(note(informer.Modified, "y", 21))
	if ce := decode(t, rcv.next()); ce.Type != eventTypePrefix+"modified" || !strings.Contains(string(ce.Data), `"resourceVersion":"21"`) {
		t.Fatalf("change after the return: %+v with data %s", ce, ce.Data)
	}
	again.settle(t)
	rcv.none()
	if !src.isStopped() {
		t.Error("the ended source was not stopped")
	}
	for reason, want := range map[string]float64{reasonResourceGone: 1, reasonResourceServed: 1, reasonOverflow: 0} {
		if n := testutil.ToFloat64(h.m.m.resets.WithLabelValues("a", reason)); n != want {
			t.Errorf("resets{reason=%s} = %v, want %v", reason, n, want)
		}
	}
	if n := testutil.ToFloat64(h.m.m.overflows.WithLabelValues("a", "reset")); n != 0 {
		t.Errorf("overflows{resolution=reset} = %v, want 0", n)
	}
}

// In the watch format both markers are BOOKMARKs of the resource's kind,
// told apart by their annotation; the end carries the resourceVersion as
// the apiserver's initial-events-end bookmark does.
func TestResetAndSnapshotEndWatchFormat(t *testing.T) {
	rcv := newReceiver(t, time.Now)
	c := hookConfig(t, "a", rcv.srv.URL)
	c.Format = "watch"
	h := start(t, c)
	src := h.source("a", 0)
	src.push(reset(), note(informer.Added, "x", 5), endOfSnapshot(7))
	for _, want := range []string{
		`{"type":"BOOKMARK","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"annotations":{"kubegate.io/reset":"true"}}}}`,
		`{"type":"ADDED","object":` + string(object("x", 5).Raw) + `}`,
		`{"type":"BOOKMARK","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"resourceVersion":"7","annotations":{"k8s.io/initial-events-end":"true"}}}}`,
	} {
		if got := rcv.next(); string(got.body) != want {
			t.Fatalf("got  %s\nwant %s", got.body, want)
		}
	}
	src.settle(t)
	rcv.none()
}

// A receiver that rejects a marker is not sent it again (it would reject
// it again), but the snapshot and the end still follow: the receiver
// decides what to make of them. The rejection is counted.
func TestRejectedResetStillSendsTheSnapshot(t *testing.T) {
	rcv := newReceiver(t, time.Now)
	rcv.setRespond(func(n int, w http.ResponseWriter) {
		if n == 1 {
			w.WriteHeader(http.StatusBadRequest)
		}
	})
	h := start(t, hookConfig(t, "a", rcv.srv.URL))
	src := h.source("a", 0)
	src.push(reset(), note(informer.Added, "x", 5), endOfSnapshot(7))
	for _, want := range []string{"reset", "added", "snapshot.end"} {
		if ce := decode(t, rcv.next()); ce.Type != eventTypePrefix+want {
			t.Fatalf("got %s, want %s", ce.Type, want)
		}
	}
	src.settle(t)
	rcv.none()
	if h.metric("a", outcomeRejected) != 1 || h.metric("a", outcomeDelivered) != 2 {
		t.Fatalf("rejected = %v, delivered = %v; want 1 and 2", h.metric("a", outcomeRejected), h.metric("a", outcomeDelivered))
	}
}

// Entries of one webhook must not select from the same objects: a
// receiver reconciles a reset by its collection.
func TestOverlappingResourcesRejected(t *testing.T) {
	cm := func(ns, labels string) Resource {
		return Resource{Resource: "configmaps", Namespace: ns, LabelSelector: labels}
	}
	for _, tc := range []struct {
		name      string
		resources []Resource
		err       string
	}{
		{"two namespaces", []Resource{cm("a", ""), cm("b", "")}, ""},
		{"the same namespace twice", []Resource{cm("a", "x=1"), cm("a", "x=2")},
			"webhooks[0] (a): resources[1] (configmaps): overlaps resources[0] (configmaps) in /api/v1/namespaces/a/configmaps: " +
				"list a resource once for all namespaces or once per namespace"},
		{"a namespace and all of them", []Resource{cm("a", ""), cm("b", ""), cm("", "")},
			"webhooks[0] (a): resources[2] (configmaps): overlaps resources[0] (configmaps) in /api/v1/namespaces/a/configmaps"},
		{"all namespaces and one", []Resource{cm("", ""), cm("a", "")},
			"webhooks[0] (a): resources[1] (configmaps): overlaps resources[0] (configmaps) in /api/v1/configmaps"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := hookConfig(t, "a", "https://r.example/")
			c.Resources = tc.resources
			var sources []*fakeSource
			m, err := New(Options{Webhooks: []Spec{c}, Logger: zaptest.NewLogger(t),
				listen: func(_ context.Context, _ string, _ Resource, o informer.ListenerOptions) (*informer.ResourceInfo, source, error) {
					s := &fakeSource{wake: o.Wake}
					sources = append(sources, s)
					return configmaps, s, nil
				}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			if tc.err == "" {
				cancel() // Start applies the configuration, then returns
			}
			defer cancel()
			err = m.Start(ctx)
			if tc.err == "" {
				if err != nil {
					t.Fatalf("Start: %v", err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
				t.Fatalf("err = %v\nwant %s...", err, tc.err)
			}
			for i, s := range sources {
				if !s.isStopped() {
					t.Errorf("listener %d left attached", i)
				}
			}
		})
	}
}

// A receiver down for longer than the retry budget loses no final state
// and no delete. The event that runs out of retries, and those taken with
// it, give way to a reset; the reset is retried past the budget, at most
// maxBackoff apart, until the receiver is back; then the snapshot and its
// end let the receiver drop what was deleted meanwhile, and the changes
// made while the reset was being retried follow.
func TestOutageLongerThanTheRetryBudget(t *testing.T) {
	rcv := newReceiver(t, time.Now)
	var down atomic.Bool
	rcv.setStatus(func(int) int {
		if down.Load() {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	c := hookConfig(t, "a", rcv.srv.URL)
	c.Retry.MaxAttempts, c.Retry.MaxBackoff = 3, metav1.Duration{Duration: 4 * time.Second}
	h := start(t, c)
	rcv.setNow(h.clock.Now)
	src := h.source("a", 0)
	rec := newReconciler()
	for i := range 5 {
		src.change(note(informer.Added, fmt.Sprintf("o%d", i), i+1))
	}
	rec.converge(t, rcv, src.view())

	down.Store(true)
	src.change(note(informer.Modified, "o0", 10))
	first := rcv.next()
	src.change(note(informer.Deleted, "o1", 11), note(informer.Added, "o5", 12), note(informer.Modified, "o5", 13),
		note(informer.Deleted, "o2", 14), note(informer.Deleted, "o3", 15),
		informer.Notification{Type: informer.Added, Object: objectUID("o3", "uid-o3-again", 16), RV: 16})
	// Attempts 2 and 3 of the first event, 1s and 2s after the one before.
	for _, wait := range []time.Duration{time.Second, 2 * time.Second} {
		h.stepWhenWaiting(wait)
		if again := rcv.next(); again.header.Get(HeaderID) != first.header.Get(HeaderID) {
			t.Fatalf("got %s, want a retry of %s", again.body, first.body)
		}
	}
	// Out of retries: a reset instead, retried well past maxAttempts, each
	// attempt at most maxBackoff after the one before.
	reset := decode(t, rcv.next())
	if reset.Type != eventTypePrefix+"reset" {
		t.Fatalf("after the retry budget got %s, want a reset", reset.Type)
	}
	for i := range 2 * c.Retry.MaxAttempts {
		h.stepWhenWaiting(4 * time.Second)
		if again := decode(t, rcv.next()); again.ID != reset.ID {
			t.Fatalf("attempt %d after the reset: got %s %s, want the reset again", i+2, again.Type, again.Subject)
		}
		if i == 2 { // changes while the reset waits: after the snapshot
			src.change(note(informer.Deleted, "o4", 20), note(informer.Added, "o6", 21))
		}
	}
	testenv.Eventually(t, "the reset's next retry", h.clock.HasWaiters)
	rcv.none() // parked on the clock: nothing in flight

	down.Store(false)
	h.clock.Step(4 * time.Second)
	rec.converge(t, rcv, src.view())
	src.settle(t)
	rcv.none()
	if rec.types["reset"] != 1 || rec.types["snapshot.end"] != 1 {
		t.Errorf("receiver applied %v, want one reset and one snapshot.end", rec.types)
	}
	if got := h.counter(h.m.m.resets, "a", reasonRetriesExhausted); got != 1 {
		t.Errorf("resets for exhausted retries = %v, want 1", got)
	}
	if got := h.metric("a", outcomeSuperseded); got < 1 {
		t.Errorf("superseded = %v, want at least the event that ran out of retries", got)
	}
}

// A large backlog (a snapshot after a reset, say) waits in the listener
// and is rendered a chunk at a time, not all at once ahead of delivery.
func TestHookRendersAChunkAtATime(t *testing.T) {
	rcv := newReceiver(t, time.Now)
	release := make(chan struct{})
	rcv.setRespond(func(n int, w http.ResponseWriter) {
		if n == 1 {
			<-release
		}
	})
	c := hookConfig(t, "a", rcv.srv.URL)
	h := start(t, c)
	src := h.source("a", 0)
	const total = 600
	var ns []informer.Notification
	for i := range total {
		ns = append(ns, note(informer.Added, "x"+strconv.Itoa(i), i+1))
	}
	src.push(ns...)
	rcv.next() // the first delivery is in flight, held by the receiver
	src.mu.Lock()
	left := len(src.q)
	src.mu.Unlock()
	close(release)
	if left != total-popChunk {
		t.Fatalf("%d notifications left in the listener while the first is delivered, want %d", left, total-popChunk)
	}
	for i := 1; i < total; i++ {
		rcv.next()
	}
	src.settle(t)
	rcv.none()
}
