package informer

import (
	"sync"
	"sync/atomic"
	"testing"
)

// TestDeriveComputesOncePerKey checks that concurrent Derive calls for
// one key compute its value once and all get it, that keys are apart,
// and that a copy derives afresh.
func TestDeriveComputesOncePerKey(t *testing.T) {
	type key string
	o := &Object{Raw: []byte(`{}`)}
	var calls atomic.Int32
	derive := func(v string) func(*Object) any {
		return func(*Object) any {
			calls.Add(1)
			return v
		}
	}
	const n = 32
	got := make([]any, 2*n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 2 * n {
		wg.Go(func() {
			<-start
			if i%2 == 0 {
				got[i] = o.Derive(key("a"), derive("A"))
			} else {
				got[i] = o.Derive(key("b"), derive("B"))
			}
		})
	}
	close(start)
	wg.Wait()
	if c := calls.Load(); c != 2 {
		t.Errorf("derive ran %d times for 2 keys", c)
	}
	for i, v := range got {
		if want := []string{"A", "B"}[i%2]; v != want {
			t.Errorf("call %d got %v, want %s", i, v, want)
		}
	}
	if v := o.Derive(key("a"), derive("other")); v != "A" || calls.Load() != 2 {
		t.Errorf("a later Derive got %v after %d computations", v, calls.Load())
	}
	c := o.DeepCopyObject().(*Object)
	if v := c.Derive(key("a"), derive("copy")); v != "copy" {
		t.Errorf("a copy's Derive got %v, want its own value", v)
	}
}
