package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"kubegate/internal/config"
	"kubegate/internal/informer"
	"kubegate/internal/testenv"
)

// startReal runs an informer manager and a webhook Manager against the
// test apiserver until the test ends, or until stop stops the webhooks
// (and waits for their goroutines). A nil clk means the real clock.
func startReal(t *testing.T, clk clock.Clock, hooks ...config.Webhook) (m *Manager, stop func()) {
	t.Helper()
	env := testenv.Get(t)
	inf, err := informer.New(informer.Options{Config: env.Config, Logger: zaptest.NewLogger(t).Named("informer")})
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
	eventually(t, "webhooks to start", func() bool {
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
	c.Resources = []config.WebhookResource{{Resource: "configmaps", Namespace: ns, LabelSelector: "webhook=yes"}}
	c.Retry.InitialBackoff, c.Retry.MaxBackoff = config.Duration(10*time.Millisecond), config.Duration(50*time.Millisecond)
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
	c.Resources = []config.WebhookResource{{Resource: "configmaps", Namespace: ns}}
	c.MaxEvents = 16
	c.Retry = config.WebhookRetry{MaxAttempts: 100000, MaxAge: config.Duration(time.Hour),
		InitialBackoff: config.Duration(50 * time.Millisecond), MaxBackoff: config.Duration(200 * time.Millisecond)}
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
	eventually(t, "a collapse", func() bool {
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
	eventually(t, "an empty queue", func() bool {
		return testutil.ToFloat64(m.m.queue.WithLabelValues("collapse")) == 0
	})
	stop()
	rcv.noMore()
}
