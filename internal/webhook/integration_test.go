package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"kubegate/internal/informer"
	"kubegate/internal/testenv"
)

// startReal runs an informer manager and a webhook Manager against the
// test apiserver until the test ends, or until stop stops the webhooks
// (and waits for their goroutines). A nil clk means the real clock.
func startReal(t *testing.T, clk clock.Clock, hooks ...Spec) (m *Manager, stop func()) {
	t.Helper()
	return startRealWith(t, clk, nil, hooks...)
}

// startRealWith is startReal with the informer manager's options changed
// by mod.
func startRealWith(t *testing.T, clk clock.Clock, mod func(*informer.Options), hooks ...Spec) (m *Manager, stop func()) {
	t.Helper()
	env := testenv.Get(t)
	opts := informer.Options{Config: env.Config, Logger: zaptest.NewLogger(t).Named("informer")}
	if mod != nil {
		mod(&opts)
	}
	inf, err := informer.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	m, err = New(Options{Resources: inf, Webhooks: hooks, Source: env.Config.Host,
		Logger: zaptest.NewLogger(t), Registerer: prometheus.NewRegistry(), Clock: clk,
		jitter: func(d time.Duration) time.Duration { return d }})
	if err != nil {
		t.Fatal(err)
	}
	infCtx, stopInf := context.WithCancel(context.Background())
	hookCtx, stopHooks := context.WithCancel(infCtx)
	infDone, hookDone := make(chan error, 1), make(chan error, 1)
	go func() { infDone <- inf.Start(infCtx) }()
	go func() { hookDone <- m.Start(hookCtx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			stopHooks()
			if err := <-hookDone; err != nil {
				t.Errorf("webhook Start: %v", err)
			}
		})
	}
	t.Cleanup(func() {
		stop()
		stopInf()
		if err := <-infDone; err != nil {
			t.Errorf("informer Start: %v", err)
		}
	})
	// Start has attached the listeners once the webhook is registered.
	testenv.Eventually(t, "webhooks to start", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.hooks) == len(hooks)
	})
	return m, stop
}

type configMapEvent struct {
	typ  string
	name string
	data string
	id   string
}

func (r *receiver) nextConfigMap(t *testing.T) configMapEvent {
	t.Helper()
	req := r.next()
	ce := decode(t, req)
	var cm corev1.ConfigMap
	if err := json.Unmarshal(ce.Data, &cm); err != nil {
		t.Fatalf("data %s: %v", ce.Data, err)
	}
	if want := "/api/v1/namespaces/" + cm.Namespace + "/configmaps/" + cm.Name; ce.Subject != want {
		t.Errorf("subject %q, want %q", ce.Subject, want)
	}
	return configMapEvent{strings.TrimPrefix(ce.Type, eventTypePrefix), cm.Name, cm.Data["v"], ce.ID}
}

func TestIntegrationConfigMapLifecycle(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	rcv := newReceiver(t, time.Now)
	c := hookConfig(t, "cm", rcv.srv.URL)
	c.Resources = []Resource{{Resource: "configmaps", Namespace: ns, LabelSelector: "webhook=yes"}}
	c.Retry.InitialBackoff, c.Retry.MaxBackoff = metav1.Duration{Duration: 10 * time.Millisecond}, metav1.Duration{Duration: 50 * time.Millisecond}
	// The receiver fails the first attempt of the update: the retry must
	// carry the same id, and the delete must still come after it.
	var updateID string
	rcv.setRespond(func(n int, w http.ResponseWriter) {
		if n == 2 {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	startReal(t, nil, c)

	ctx := context.Background()
	cms := env.Client.CoreV1().ConfigMaps(ns)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "one", Labels: map[string]string{"webhook": "yes"}}, Data: map[string]string{"v": "1"}}
	if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Not selected: never delivered.
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm.Data["v"] = "2"
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "one", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []configMapEvent{{"added", "one", "1", ""}, {"modified", "one", "2", ""}, {"modified", "one", "2", ""}, {"deleted", "one", "2", ""}}
	for i, w := range want {
		got := rcv.nextConfigMap(t)
		if got.typ != w.typ || got.name != w.name || got.data != w.data {
			t.Fatalf("event %d: got %+v, want %+v", i, got, w)
		}
		switch i {
		case 1:
			updateID = got.id
		case 2:
			if got.id != updateID {
				t.Fatalf("retry id %s, first attempt %s", got.id, updateID)
			}
		}
	}
}

// A receiver that is down while many changes happen gets, once it
// recovers, the final state of each object rather than every change.
func TestIntegrationCollapseWhileDown(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	rcv := newReceiver(t, time.Now)
	down := make(chan struct{})
	rcv.setRespond(func(n int, w http.ResponseWriter) {
		select {
		case <-down:
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
		}
	})
	close(down)
	c := hookConfig(t, "collapse", rcv.srv.URL)
	c.Resources = []Resource{{Resource: "configmaps", Namespace: ns}}
	c.MaxEvents = 16
	c.Retry = Retry{MaxAttempts: 100000, MaxAge: metav1.Duration{Duration: time.Hour},
		InitialBackoff: metav1.Duration{Duration: 50 * time.Millisecond}, MaxBackoff: metav1.Duration{Duration: 200 * time.Millisecond}}
	m, stop := startReal(t, nil, c)

	ctx := context.Background()
	cms := env.Client.CoreV1().ConfigMaps(ns)
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hold"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ev := rcv.nextConfigMap(t); ev.name != "hold" {
		t.Fatalf("first %+v", ev)
	}
	const objects, updates = 3, 12
	for i := range objects {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}, Data: map[string]string{"v": "0"}}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for u := 1; u <= updates; u++ {
			cm.Data["v"] = fmt.Sprint(u)
			if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	testenv.Eventually(t, "a collapse", func() bool {
		return testutil.ToFloat64(m.m.overflows.WithLabelValues("collapse", "collapse")) > 0
	})
	// Recover: each object arrives as added, its states in order, ending
	// with its final state, with fewer events than changes made.
	rcv.setRespond(nil)
	last := map[string]int{}
	received, done := 0, 0
	for done < objects {
		ev := rcv.nextConfigMap(t)
		if ev.name == "hold" {
			continue // the retried first event
		}
		received++
		v := 0
		fmt.Sscan(ev.data, &v)
		prev, seen := last[ev.name]
		switch {
		case !seen && ev.typ != "added":
			t.Fatalf("%s: first event after the collapse is %s, want added", ev.name, ev.typ)
		case seen && v <= prev:
			t.Fatalf("%s: state %d after %d", ev.name, v, prev)
		}
		last[ev.name] = v
		if v == updates {
			done++
		}
	}
	if received >= objects*(updates+1) {
		t.Fatalf("received %d events for %d changes: nothing collapsed", received, objects*(updates+1))
	}
	testenv.Eventually(t, "an empty queue", func() bool {
		return testutil.ToFloat64(m.m.queue.WithLabelValues("collapse")) == 0
	})
	stop()
	rcv.noMore()
}

// TestOverflowCounted: while its receiver is down, a webhook's listener
// overflows its bound for real, first collapsing a backlog of a few
// objects' changes, then, once more objects changed than collapsing
// could hold, resetting; the webhook counts each overflow under its
// resolution, as many as the listener had.
func TestOverflowCounted(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	rcv := newReceiver(t, time.Now)
	rcv.setRespond(func(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) })
	c := hookConfig(t, "overflow", rcv.srv.URL)
	c.Resources = []Resource{{Resource: "configmaps", Namespace: ns}}
	c.MaxEvents = 16
	c.Retry = Retry{MaxAttempts: 100000, MaxAge: metav1.Duration{Duration: time.Hour},
		InitialBackoff: metav1.Duration{Duration: 50 * time.Millisecond}, MaxBackoff: metav1.Duration{Duration: 200 * time.Millisecond}}
	m, _ := startReal(t, nil, c)
	m.mu.Lock()
	src := m.hooks["overflow"].inputs[0].src
	m.mu.Unlock()
	metric := func(v *prometheus.CounterVec, label string) uint64 {
		return uint64(testutil.ToFloat64(v.WithLabelValues("overflow", label)))
	}

	ctx := context.Background()
	cms := env.Client.CoreV1().ConfigMaps(ns)
	create := func(name string) *corev1.ConfigMap {
		t.Helper()
		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": "0"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm
	}
	// The first event is taken and retried: the rest waits in the listener.
	create("hold")
	if ev := rcv.nextConfigMap(t); ev.name != "hold" {
		t.Fatalf("first %+v", ev)
	}
	// Two objects changed 40 times: the backlog reaches 16 and collapses
	// to their latest states, again and again.
	create("few-0")
	create("few-1")
	for i := range 40 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("few-%d", i%2)}, Data: map[string]string{"v": fmt.Sprint(i)}}
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, "the listener to collapse", func() bool { return src.Stats().Collapses > 0 })
	// More objects than collapsing can hold in 3/4 of the bound: a reset.
	for i := range 16 {
		create(fmt.Sprintf("many-%d", i))
	}
	testenv.Eventually(t, "the listener to reset", func() bool { return src.Stats().Resets > 0 })
	s := src.Stats()
	if s.Overflows != s.Collapses+s.Resets {
		t.Errorf("listener stats %+v: overflows are not collapses and resets", s)
	}
	// The hook reports what its listener counted at its next retry.
	want := [3]uint64{s.Collapses, s.Resets, s.Resets}
	var got [3]uint64
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		got = [3]uint64{metric(m.m.overflows, "collapse"), metric(m.m.overflows, "reset"), metric(m.m.resets, reasonOverflow)}
		return got == want, nil
	}); err != nil {
		t.Fatalf("overflows counted (collapse, reset; resets for overflow) %v, want %v as the listener counted them", got, want)
	}
	if s2 := src.Stats(); s2.Overflows != s.Overflows {
		t.Errorf("the listener overflowed again with no change: %+v after %+v", s2, s)
	}
}

// TestIntegrationOutageReconciles takes a receiver down while config maps
// it knows are changed, created and deleted, until its webhook either
// overflows its bound past collapsing or runs out of retries. Once the
// receiver is back and applies what it is sent as docs/webhooks.md says,
// it holds exactly what the apiserver holds: no final state and no delete
// is lost. The webhook's clock is fake, so the outage lasts as many
// retries as the test decides.
func TestIntegrationOutageReconciles(t *testing.T) {
	for _, tc := range []struct {
		name      string
		maxEvents int
		retry     Retry
		// outage makes the changes while the first event is being
		// retried, and steps the clock until the receiver is being sent a
		// reset; then more changes follow.
		outage func(o *outage)
	}{{
		name:      "overflow",
		maxEvents: 8,
		retry:     Retry{MaxAttempts: 1000, MaxAge: metav1.Duration{Duration: 24 * time.Hour}, InitialBackoff: metav1.Duration{Duration: time.Second}, MaxBackoff: metav1.Duration{Duration: time.Second}},
		outage: func(o *outage) {
			// More distinct objects than the bound: no collapse fits.
			o.deleteAll("gone-")
			o.update("keep-1")
			for i := range 10 {
				o.create(fmt.Sprintf("new-%d", i))
			}
			o.delete("new-0")
			testenv.Eventually(o.t, "a reset of the listener", func() bool { return o.listener().Stats().Resets > 0 })
		},
	}, {
		name:      "retries exhausted",
		maxEvents: 16,
		retry:     Retry{MaxAttempts: 3, MaxAge: metav1.Duration{Duration: 24 * time.Hour}, InitialBackoff: metav1.Duration{Duration: time.Second}, MaxBackoff: metav1.Duration{Duration: 2 * time.Second}},
		outage: func(o *outage) {
			// Fewer changes than the bound: only the retry budget resets.
			before := o.changes
			o.deleteAll("gone-")
			o.update("keep-1")
			for i := range 2 {
				o.create(fmt.Sprintf("new-%d", i))
			}
			o.delete("new-0")
			testenv.Eventually(o.t, "the changes in the listener", func() bool { return o.listener().Stats().Buffered == o.changes-before })
			for _, wait := range []time.Duration{time.Second, 2 * time.Second} {
				o.stepWhenWaiting(wait)
				if ce := decode(o.t, o.rcv.next()); ce.Type != eventTypePrefix+"modified" {
					o.t.Fatalf("got %s, want the first event again", ce.Type)
				}
			}
			reset := decode(o.t, o.rcv.next())
			if reset.Type != eventTypePrefix+"reset" {
				o.t.Fatalf("after the retry budget got %s %s, want a reset", reset.Type, reset.Subject)
			}
			for range 5 {
				o.stepWhenWaiting(2 * time.Second)
				if ce := decode(o.t, o.rcv.next()); ce.ID != reset.ID {
					o.t.Fatalf("got %s %s, want the reset again", ce.Type, ce.Subject)
				}
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			env := testenv.Get(t)
			o := &outage{t: t, ns: env.Namespace(t), clk: clocktesting.NewFakeClock(time.Now())}
			o.cms = env.Client.CoreV1().ConfigMaps(o.ns)
			o.rcv = newReceiver(t, o.clk.Now)
			var down atomic.Bool
			o.rcv.setStatus(func(int) int {
				if down.Load() {
					return http.StatusServiceUnavailable
				}
				return 0
			})
			c := hookConfig(t, "outage", o.rcv.srv.URL)
			c.Resources = []Resource{{Resource: "configmaps", Namespace: o.ns}}
			c.MaxEvents = tc.maxEvents
			c.Retry = tc.retry
			var stop func()
			o.m, stop = startReal(t, o.clk, c)

			for i := range 4 {
				o.create(fmt.Sprintf("keep-%d", i))
				o.create(fmt.Sprintf("gone-%d", i))
			}
			rec := newReconciler()
			rec.converge(t, o.rcv, o.apiserverView())

			down.Store(true)
			o.update("keep-0")
			if ce := decode(t, o.rcv.next()); ce.Type != eventTypePrefix+"modified" {
				t.Fatalf("got %s, want the change made once the receiver was down", ce.Type)
			}
			tc.outage(o)
			// While the receiver is being sent the reset, or about to be.
			o.delete("keep-2")
			o.create("late-0")

			down.Store(false)
			o.stepWhenWaiting(tc.retry.MaxBackoff.Duration)
			rec.converge(t, o.rcv, o.apiserverView())
			if rec.types["reset"] == 0 || rec.types["snapshot.end"] == 0 {
				t.Errorf("receiver applied %v: want a reset and a snapshot.end", rec.types)
			}
			stop()
			o.rcv.noMore()
		})
	}
}

// outage is the state of one TestIntegrationOutageReconciles case.
type outage struct {
	t   *testing.T
	ns  string
	cms typedcorev1.ConfigMapInterface
	clk *clocktesting.FakeClock
	rcv *receiver
	m   *Manager
	// changes counts the changes made, each a notification for the
	// webhook's listener.
	changes int
}

func (o *outage) create(name string) {
	o.t.Helper()
	if _, err := o.cms.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		o.t.Fatal(err)
	}
	o.changes++
}

func (o *outage) update(name string) {
	o.t.Helper()
	o.changes++
	patch := fmt.Appendf(nil, `{"data":{"n":"%d"}}`, o.changes)
	if _, err := o.cms.Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		o.t.Fatal(err)
	}
}

func (o *outage) delete(name string) {
	o.t.Helper()
	if err := o.cms.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		o.t.Fatal(err)
	}
	o.changes++
}

func (o *outage) deleteAll(prefix string) {
	o.t.Helper()
	for name := range o.apiserverView() {
		if _, name, _ := strings.Cut(name, "/"); strings.HasPrefix(name, prefix) {
			o.delete(name)
		}
	}
}

// apiserverView is what the receiver should hold: namespace/name →
// uid@resourceVersion of every config map in the namespace.
func (o *outage) apiserverView() map[string]string {
	o.t.Helper()
	list, err := o.cms.List(context.Background(), metav1.ListOptions{})
	if err != nil {
		o.t.Fatal(err)
	}
	v := map[string]string{}
	for _, cm := range list.Items {
		v[cm.Namespace+"/"+cm.Name] = string(cm.UID) + "@" + cm.ResourceVersion
	}
	return v
}

// listener is the webhook's informer listener.
func (o *outage) listener() source {
	o.m.mu.Lock()
	defer o.m.mu.Unlock()
	return o.m.hooks["outage"].inputs[0].src
}

func (o *outage) stepWhenWaiting(d time.Duration) {
	o.t.Helper()
	testenv.Eventually(o.t, "a retry timer", o.clk.HasWaiters)
	o.clk.Step(d)
}
