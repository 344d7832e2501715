package livequery

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// One feeder and several consumers, each woken through its channel,
// popping, scrolling and checking its copy against the window: run with
// -race, it checks the locking model.
func TestConcurrentFeederAndConsumers(t *testing.T) {
	tbl := NewTable(Options{Columns: testColumns})
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 9))
			wake := make(chan struct{}, 1)
			w, err := tbl.Open(context.Background(), Query{
				Sort:  SortSpec{Key: testSortKeys[i%len(testSortKeys)], Desc: i%2 == 0},
				Range: Range{Offset: i, Limit: 5},
				Wake: func() {
					select {
					case wake <- struct{}{}:
					default:
					}
				},
			})
			if err != nil {
				errs <- err
				return
			}
			defer w.Close()
			var c client
			pop := func() bool {
				ops, _ := w.Pop(nil)
				if rng.IntN(4) == 0 {
					more, _, err := w.Move(Range{Offset: rng.IntN(20), Limit: 5})
					if err != nil {
						errs <- err
						return false
					}
					ops = append(ops, more...)
				}
				if err := c.apply(ops); err != nil {
					errs <- fmt.Errorf("consumer %d: %w", i, err)
					return false
				}
				return true
			}
			if !pop() {
				return
			}
			for {
				select {
				case <-wake:
					if !pop() {
						return
					}
				case <-done:
					// The feeder has stopped: drain, then the copy
					// must equal the window.
					ops, _ := w.Pop(nil)
					if err := c.apply(ops); err != nil {
						errs <- err
						return
					}
					if got, want := c.keys(), rowKeys(w.Rows()); !slices.Equal(got, want) {
						errs <- fmt.Errorf("consumer %d holds %v, window is %v", i, got, want)
					}
					return
				}
			}
		})
	}
	rng := rand.New(rand.NewPCG(42, 42))
	for rv := uint64(1); rv <= 3000; rv++ {
		if rng.IntN(4) == 0 {
			tbl.Delete(testNamespaces[rng.IntN(len(testNamespaces))], fmt.Sprintf("pod-%d", rng.IntN(24)), rv)
		} else {
			tbl.Upsert(randomRow(randChooser{rng}, rv), rv)
		}
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
