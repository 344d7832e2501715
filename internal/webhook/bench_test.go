package webhook

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/util/wait"

	"kubegate/internal/informer"
)

// BenchmarkDeliver measures deliveries per second to a local receiver
// that answers 204, with several webhooks sharing it. Each iteration
// pushes a batch to every webhook and waits until all of it is delivered.
func BenchmarkDeliver(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	secret := filepath.Join(b.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte(specSecret), 0o600); err != nil {
		b.Fatal(err)
	}
	const batch = 100
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("webhooks=%d", n), func(b *testing.B) {
			var mu sync.Mutex
			var sources []*fakeSource
			var hooks []Spec
			for i := range n {
				hooks = append(hooks, Spec{Name: fmt.Sprintf("h%d", i), URL: srv.URL,
					Resources: []Resource{{Resource: "configmaps"}}, SecretFile: secret,
					AllowAddresses: []string{"127.0.0.0/8"}})
			}
			m, err := New(Options{Webhooks: hooks, Logger: zap.NewNop(),
				listen: func(_ context.Context, _ string, _ Resource, o informer.ListenerOptions) (*informer.ResourceInfo, source, error) {
					s := &fakeSource{wake: o.Wake}
					mu.Lock()
					sources = append(sources, s)
					mu.Unlock()
					return configmaps, s, nil
				}})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- m.Start(ctx) }()
			defer func() { cancel(); <-done }()
			poll := func(cond func() bool) {
				err := wait.PollUntilContextTimeout(context.Background(), 50*time.Microsecond, time.Minute, true,
					func(context.Context) (bool, error) { return cond(), nil })
				if err != nil {
					b.Fatal(err)
				}
			}
			poll(func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(sources) == n
			})
			total := func() float64 {
				sum := 0.0
				for _, h := range hooks {
					sum += testutil.ToFloat64(m.m.deliveries.WithLabelValues(h.Name, outcomeDelivered))
				}
				return sum
			}
			rv := 0
			want := 0.0
			start := time.Now()
			for b.Loop() {
				for _, s := range sources {
					ns := make([]informer.Notification, batch)
					for j := range ns {
						rv++
						ns[j] = note(informer.Modified, fmt.Sprintf("o%d", j), rv)
					}
					s.push(ns...)
				}
				want += float64(n * batch)
				poll(func() bool { return total() >= want })
			}
			b.ReportMetric(want/time.Since(start).Seconds(), "deliveries/s")
		})
	}
}
