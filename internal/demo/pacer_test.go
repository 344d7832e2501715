package demo

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/utils/clock"
)

func TestPacer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rate  float64
		calls int
		want  time.Duration
	}{
		{name: "rate=5/calls=1", rate: 5, calls: 1, want: 0},
		{name: "rate=5/calls=6", rate: 5, calls: 6, want: time.Second},
		{name: "rate=0.5/calls=3", rate: 0.5, calls: 3, want: 4 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := newPacer(tc.rate, clock.RealClock{})
				start := time.Now()
				for range tc.calls {
					if err := p.wait(t.Context()); err != nil {
						t.Fatal(err)
					}
				}
				if got := time.Since(start); got != tc.want {
					t.Errorf("%d calls took %v, want %v", tc.calls, got, tc.want)
				}
			})
		})
	}
}

func TestPacerCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPacer(1, clock.RealClock{})
		ctx, cancel := context.WithCancel(t.Context())
		if err := p.wait(ctx); err != nil {
			t.Fatal(err)
		}
		done := make(chan error)
		go func() { done <- p.wait(ctx) }()
		synctest.Wait() // the second call is now blocked on its timer
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("wait after cancel: %v", err)
		}
		// The cancelled reservation is returned: the next call is due one
		// second after the first, not two.
		start := time.Now()
		if err := p.wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got > time.Second {
			t.Errorf("next call waited %v", got)
		}
	})
}
