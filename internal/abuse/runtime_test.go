package abuse

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Runtime figures come from runtime/metrics: the goroutine count and the
// heap. They cover the whole test process, clients included, which is
// why every figure is taken with the clients either all present or all
// gone.
const (
	mGoroutines = "/sched/goroutines:goroutines"
	mHeapLive   = "/gc/heap/live:bytes"                // marked live by the last GC
	mHeapInUse  = "/memory/classes/heap/objects:bytes" // live plus not yet swept
)

// figures is a snapshot of the runtime after a full GC.
type figures struct {
	goroutines int
	heap       uint64 // live heap bytes
}

func read(names ...string) []metrics.Sample {
	s := make([]metrics.Sample, len(names))
	for i, n := range names {
		s[i].Name = n
	}
	metrics.Read(s)
	return s
}

// measure collects garbage (twice, so sync.Pool victims go too) and reads
// the goroutine count and the live heap.
func measure() figures {
	runtime.GC()
	runtime.GC()
	s := read(mGoroutines, mHeapLive)
	return figures{goroutines: int(s[0].Value.Uint64()), heap: s[1].Value.Uint64()}
}

// tolerance is how far above the baseline the figures may stay once the
// abusive clients are gone: a few goroutines for connections the gateway
// keeps to the apiserver (TokenReview, SubjectAccessReview) and whatever
// the HTTP transports keep idle, and heap for caches that are bounded by
// design (token and authorization caches, sync.Pool scratch buffers).
type tolerance struct {
	goroutines int
	heap       uint64
}

var afterTolerance = tolerance{goroutines: 10, heap: 4 << 20}

// perSocket is what one open socket may cost while it is attached,
// counting both ends (the test's clients run in the same process): the
// gateway's writer and reader goroutines, the client's reader, and their
// buffers.
var perSocket = tolerance{goroutines: 4, heap: 64 << 10}

// bounded fails the test if the figures taken with n sockets attached
// exceed the baseline by more than n times perSocket plus slack (the
// after-tolerance).
func bounded(t *testing.T, base, during figures, n int) {
	t.Helper()
	maxG := base.goroutines + n*perSocket.goroutines + afterTolerance.goroutines
	maxHeap := base.heap + uint64(n)*perSocket.heap + afterTolerance.heap
	if during.goroutines > maxG || during.heap > maxHeap {
		t.Fatalf("with %d sockets attached: goroutines %d (bound %d), heap %s (bound %s)",
			n, during.goroutines, maxG, mib(during.heap), mib(maxHeap))
	}
}

// settle polls until the figures are back within tol of base and returns
// them; after 60s it fails the test with the last figures.
func settle(t *testing.T, base figures, tol tolerance) figures {
	t.Helper()
	var last figures
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 60*time.Second, true,
		func(context.Context) (bool, error) {
			last = measure()
			return last.goroutines <= base.goroutines+tol.goroutines && last.heap <= base.heap+tol.heap, nil
		})
	if err != nil {
		t.Fatalf("figures did not return to the baseline: goroutines %d (baseline %d, tolerance %d), heap %s (baseline %s, tolerance %s)",
			last.goroutines, base.goroutines, tol.goroutines, mib(last.heap), mib(base.heap), mib(tol.heap))
	}
	return last
}

// sampler records the highest goroutine count and heap (including garbage
// not yet collected) seen while it runs. It samples every 5ms from its
// own goroutine; stop ends it and returns the maxima.
type sampler struct {
	stopc      chan struct{}
	done       chan struct{}
	mu         sync.Mutex // guards goroutines and heap
	goroutines int
	heap       uint64
}

func startSampler() *sampler {
	s := &sampler{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			s.sample()
			select {
			case <-s.stopc:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *sampler) sample() {
	v := read(mGoroutines, mHeapInUse)
	s.mu.Lock()
	s.goroutines = max(s.goroutines, int(v[0].Value.Uint64()))
	s.heap = max(s.heap, v[1].Value.Uint64())
	s.mu.Unlock()
}

func (s *sampler) stop() figures {
	close(s.stopc)
	<-s.done
	s.sample()
	s.mu.Lock()
	defer s.mu.Unlock()
	return figures{goroutines: s.goroutines, heap: s.heap}
}

// report logs one abuse's figures in the form docs/reliability.md quotes.
func report(t *testing.T, base, during, peak, after figures) {
	t.Helper()
	t.Logf("figures: goroutines %d before, %d with the clients attached (peak %d), %d after; heap %s before, %s with the clients attached (peak in use %s), %s after",
		base.goroutines, during.goroutines, peak.goroutines, after.goroutines,
		mib(base.heap), mib(during.heap), mib(peak.heap), mib(after.heap))
}

func mib(b uint64) string {
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}
