package workload

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestCreateEach: every index once, from..to-1, whatever the workers.
func TestCreateEach(t *testing.T) {
	var (
		mu   sync.Mutex
		seen = map[int]int{}
	)
	err := createEach(t.Context(), 10, 1010, 7, func(_ context.Context, j int) error {
		mu.Lock()
		seen[j]++
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1000 {
		t.Errorf("%d indexes created, want 1000", len(seen))
	}
	for j := 10; j < 1010; j++ {
		if seen[j] != 1 {
			t.Errorf("index %d created %d times", j, seen[j])
		}
	}
}

// TestCreateEachStopsAtTheFirstError: the error is returned, the creates
// running are cancelled, and no worker starts another.
func TestCreateEachStopsAtTheFirstError(t *testing.T) {
	const workers = 4
	boom := errors.New("boom")
	var calls atomic.Int64
	err := createEach(t.Context(), 0, 100_000, workers, func(ctx context.Context, j int) error {
		calls.Add(1)
		if j == 3 {
			return boom
		}
		if j > 3 {
			<-ctx.Done() // a create in flight when another failed
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want %v", err, boom)
	}
	// Up to index 3, and at most one more per worker, taken before the
	// cancellation was seen.
	if n := calls.Load(); n > 4+workers {
		t.Errorf("%d creates after the first error at the 4th, want at most %d", n, 4+workers)
	}
}

// TestCreateSmallConfigMapsAgain: a second creation over the same range
// and beyond counts what exists as created.
func TestCreateSmallConfigMapsAgain(t *testing.T) {
	c := fake.NewClientset()
	const k = 3
	if err := CreateSmallConfigMaps(t.Context(), c, k, 0, 10, 4); err != nil {
		t.Fatal(err)
	}
	if err := CreateSmallConfigMaps(t.Context(), c, k, 5, 20, 4); err != nil {
		t.Fatalf("creating existing small ConfigMaps again: %v", err)
	}
	n, err := CountSmallConfigMaps(t.Context(), c, k)
	if err != nil {
		t.Fatal(err)
	}
	if n != 20 {
		t.Errorf("%d small ConfigMaps, want 20", n)
	}
	cm, err := c.CoreV1().ConfigMaps(SmallNamespaceName(7%k)).Get(t.Context(), SmallConfigMapName(7), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cm.Data) != 1 || cm.Data["key"] != "value-7" || len(cm.Labels) != 0 {
		t.Errorf("small ConfigMap 7 is %+v, want one data key and no labels", cm)
	}
}
