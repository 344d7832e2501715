package abuse

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubegate/internal/testenv"
)

// bystander is a well-behaved subscriber on the gateway under abuse. A
// producer goroutine updates one ConfigMap every 50ms with an increasing
// counter; a reader goroutine checks that every update arrives, once and
// in order. checkpoint waits until everything produced so far has
// arrived. Both goroutines end in stop.
type bystander struct {
	c    *client
	sent atomic.Int64 // last counter value the apiserver accepted

	mu   sync.Mutex // guards seen and err
	seen int64      // last counter value received
	err  error      // first out-of-order or missing update

	cancel   context.CancelFunc
	producer chan struct{} // closed when the producer has returned
	reader   chan struct{} // closed when the reader has returned
	stopped  atomic.Bool
}

func startBystander(t *testing.T, g *gateway) *bystander {
	t.Helper()
	env := testenv.Get(t)
	ns := env.Namespace(t)
	cms := env.Client.CoreV1().ConfigMaps(ns)
	cm := createCM(t, ns, "counter", map[string]string{"n": "0"})
	ctx := context.Background()
	c, _, err := g.dial(ctx, bystand)
	if err != nil {
		t.Fatal(err)
	}
	b := &bystander{c: &client{c: c}, producer: make(chan struct{}), reader: make(chan struct{})}
	if err := b.c.send(ctx, subscribe("counter", ns)); err != nil {
		t.Fatal(err)
	}
	b.c.expect(t, "ack", "counter")
	// The gateway's cache may not hold the object just created yet: it
	// comes in the snapshot or, right after it, as a live ADDED.
	for added, synced := false, false; !added || !synced; {
		f, err := b.c.next(ctx)
		switch {
		case err != nil:
			t.Fatalf("waiting for the counter's ADDED and END_OF_SNAPSHOT: %v", err)
		case f.ID == "counter" && f.Type == "ADDED" && !added:
			added = true
		case f.ID == "counter" && f.Type == "END_OF_SNAPSHOT" && !synced:
			synced = true
		default:
			t.Fatalf("got %v, want the counter's ADDED and END_OF_SNAPSHOT", f)
		}
	}

	go func() {
		defer close(b.reader)
		for {
			f, err := b.c.next(ctx)
			if err != nil {
				if !b.stopped.Load() {
					b.fail(fmt.Errorf("read: %w", err))
				}
				return
			}
			var n int64 = -1
			if f.Type == "MODIFIED" && f.ID == "counter" && f.Object != nil {
				n, _ = strconv.ParseInt(f.Object.Data["n"], 10, 64)
			}
			b.mu.Lock()
			if n != b.seen+1 {
				b.mu.Unlock()
				b.fail(fmt.Errorf("after update %d got %v (n=%d)", b.seen, f, n))
				return
			}
			b.seen = n
			b.mu.Unlock()
		}
	}()

	pctx, cancel := context.WithCancel(ctx)
	b.cancel = cancel
	go func() {
		defer close(b.producer)
		tick := time.NewTicker(50 * time.Millisecond) // the change rate, not a synchronisation
		defer tick.Stop()
		for n := int64(1); ; n++ {
			select {
			case <-pctx.Done():
				return
			case <-tick.C:
			}
			cm = cm.DeepCopy()
			cm.Data["n"] = strconv.FormatInt(n, 10)
			next, err := cms.Update(pctx, cm, metav1.UpdateOptions{})
			if err != nil {
				if pctx.Err() == nil {
					b.fail(fmt.Errorf("update %d: %w", n, err))
				}
				return
			}
			cm = next
			b.sent.Store(n)
		}
	}()
	t.Cleanup(func() { b.stop(t) })
	return b
}

func (b *bystander) fail(err error) {
	b.mu.Lock()
	if b.err == nil {
		b.err = err
	}
	b.mu.Unlock()
}

// checkpoint waits until every update produced so far has been received,
// in order, and returns how many that is.
func (b *bystander) checkpoint(t *testing.T) int64 {
	t.Helper()
	target := b.sent.Load()
	var err error
	testenv.Eventually(t, fmt.Sprintf("the bystander to receive update %d", target), func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		err = b.err
		return err != nil || b.seen >= target
	})
	if err != nil {
		t.Fatalf("bystander: %v", err)
	}
	return target
}

// stop ends the producer, checks the last updates arrived and closes the
// socket.
func (b *bystander) stop(t *testing.T) {
	if b.stopped.Load() {
		return
	}
	b.cancel()
	<-b.producer
	b.checkpoint(t)
	b.stopped.Store(true)
	_ = b.c.c.Close(websocket.StatusNormalClosure, "")
	<-b.reader
}

// scene is one abuse test's setting: a gateway, a namespace, a bystander
// and the baseline figures taken with only the bystander attached.
type scene struct {
	g    *gateway
	ns   string
	by   *bystander
	base figures
	peak *sampler
}

func newScene(t *testing.T, o gatewayOptions) *scene {
	t.Helper()
	g := startGateway(t, o)
	ns := testenv.Get(t).Namespace(t)
	for _, n := range []string{"a", "b", "c"} {
		createCM(t, ns, n, map[string]string{"v": n})
	}
	warmUp(t, g, ns)
	s := &scene{g: g, ns: ns, by: startBystander(t, g)}
	s.by.checkpoint(t)
	s.base = measure()
	s.peak = startSampler()
	return s
}

// finish checks that the bystander missed nothing, waits until only its
// socket is left and the figures are back near the baseline, and reports
// them.
func (s *scene) finish(t *testing.T, attached figures) (peak figures) {
	t.Helper()
	n := s.by.checkpoint(t)
	testenv.Eventually(t, "only the bystander's socket, subscription and listener to be left", func() bool {
		return s.g.ws.Sockets() == 1 && s.g.metric(t, "kubegate_ws_subscriptions") == 1 &&
			s.g.metric(t, "kubegate_listener_active") == 1
	})
	after := settle(t, s.base, afterTolerance)
	peak = s.peak.stop()
	report(t, s.base, attached, peak, after)
	t.Logf("the bystander received all %d updates in order", n)
	return peak
}

// bigNamespace creates n ConfigMaps of size bytes each in a namespace of
// their own, so that a subscription to it has megabytes to send.
func bigNamespace(t *testing.T, n, size int) string {
	t.Helper()
	env := testenv.Get(t)
	ns := env.Namespace(t)
	cms := env.Client.CoreV1().ConfigMaps(ns)
	t.Cleanup(func() {
		// Namespaces are never emptied without a controller-manager; free
		// the bytes so that later tests' informers do not list them.
		_ = cms.DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	data := strings.Repeat("x", size)
	for i := range n {
		if _, err := cms.Create(context.Background(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("big-", i)}, Data: map[string]string{"x": data},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return ns
}
