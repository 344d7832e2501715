package auth

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// pending is an Acquire running in a goroutine: err receives its error
// once it has a seat or has failed, then release its release function.
type pending struct {
	flow    string
	release chan func()
	err     chan error
	at      time.Time // when Acquire returned
}

func acquireAsync(q *ReviewQueue, ctx context.Context, flow string) *pending {
	p := &pending{flow: flow, release: make(chan func(), 1), err: make(chan error, 1)}
	go func() {
		rel, err := q.Acquire(ctx, flow)
		p.at = time.Now()
		p.err <- err
		p.release <- rel
	}()
	return p
}

// done reports whether p got its seat, or its error, already.
func (p *pending) done() bool { return len(p.err) > 0 }

// TestReviewQueueServesFlowsInTurn: with one seat, a flow that queued 40
// reviews first does not make a later flow wait for them: the later
// flow's review is dispatched after at most one review of each of the
// flooding flow's queues (its hand), and the flood's own reviews are all
// served in the end, each once.
func TestReviewQueueServesFlowsInTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := must[*ReviewQueue](t)(NewReviewQueue(ReviewQueueOptions{Concurrency: 1, QueueLength: 16, MaxWait: time.Hour}))
		ctx := context.Background()
		first := must[func()](t)(q.Acquire(ctx, "source:flood"))
		var flood []*pending
		for range 40 {
			flood = append(flood, acquireAsync(q, ctx, "source:flood"))
		}
		synctest.Wait()
		victim := acquireAsync(q, ctx, "user:victim")
		synctest.Wait()
		if inUse, waiting := q.stats(); inUse != 1 || waiting != 41 {
			t.Fatalf("seats %d, waiting %d; want 1 and 41", inUse, waiting)
		}
		// Release seats one at a time and see who gets each.
		release := first
		all := append(slices.Clone(flood), victim)
		var order []*pending
		for len(order) < len(all) {
			release()
			synctest.Wait()
			i := slices.IndexFunc(all, func(p *pending) bool { return p.done() && !slices.Contains(order, p) })
			if i < 0 {
				t.Fatalf("no review dispatched after %d", len(order))
			}
			order = append(order, all[i])
			if err := <-all[i].err; err != nil {
				t.Fatal(err)
			}
			release = <-all[i].release
		}
		release()
		at := slices.Index(order, victim)
		t.Logf("the victim's review was dispatched %d-th of %d", at+1, len(all))
		if at > DefaultReviewHandSize {
			t.Fatalf("the victim's review was dispatched after %d of the flood's, want at most %d (one per queue of the flood's hand)", at, DefaultReviewHandSize)
		}
		if inUse, waiting := q.stats(); inUse != 0 || waiting != 0 {
			t.Fatalf("after all: seats %d, waiting %d", inUse, waiting)
		}
	})
}

// TestReviewQueueRefuses: a review whose queue is full while every seat
// is taken is refused at once, and one that waits past MaxWait is
// refused then, both with 429 and Retry-After; one whose context ends
// gets the context's error. None of them keeps a place or a seat.
func TestReviewQueueRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := must[*ReviewQueue](t)(NewReviewQueue(ReviewQueueOptions{Concurrency: 1, Queues: 1, HandSize: 1, QueueLength: 2, MaxWait: 5 * time.Second}))
		ctx := context.Background()
		seat := must[func()](t)(q.Acquire(ctx, "a"))
		cctx, cancel := context.WithCancel(ctx)
		waiting := []*pending{acquireAsync(q, ctx, "a"), acquireAsync(q, cctx, "b")}
		synctest.Wait()
		start := time.Now()
		_, err := q.Acquire(ctx, "c")
		if !errors.Is(err, ErrReviewQueueFull) || !apierrors.IsTooManyRequests(err) || time.Since(start) != 0 {
			t.Fatalf("a review whose queue is full: %v after %v, want 429 at once", err, time.Since(start))
		}
		if st := err.(apierrors.APIStatus).Status(); st.Code != http.StatusTooManyRequests || st.Details.RetryAfterSeconds != 1 {
			t.Fatalf("status %+v", st)
		}
		cancel()
		if err := <-waiting[1].err; !errors.Is(err, context.Canceled) {
			t.Fatalf("a review whose context ended: %v", err)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if err := <-waiting[0].err; !errors.Is(err, ErrReviewQueueFull) || time.Since(start) != 5*time.Second {
			t.Fatalf("a review that waited %v: %v, want 429 after 5s", time.Since(start), err)
		}
		if inUse, n := q.stats(); inUse != 1 || n != 0 {
			t.Fatalf("seats %d, waiting %d; want 1 and 0", inUse, n)
		}
		seat()
		seat() // idempotent
		if inUse, _ := q.stats(); inUse != 0 {
			t.Fatalf("seats %d after release", inUse)
		}
	})
}

// TestReviewQueuePaces: with QPS set, seats are given no faster than
// QPS, Burst at once, even while seats are free, and the reviews held
// back are dispatched as tokens come, in turn.
func TestReviewQueuePaces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := must[*ReviewQueue](t)(NewReviewQueue(ReviewQueueOptions{Concurrency: 100, QPS: 10, Burst: 2, MaxWait: time.Hour}))
		ctx := context.Background()
		start := time.Now()
		var ps []*pending
		for i := range 6 {
			ps = append(ps, acquireAsync(q, ctx, []string{"a", "b"}[i%2]))
			synctest.Wait()
		}
		var at []time.Duration
		for _, p := range ps {
			if err := <-p.err; err != nil {
				t.Fatal(err)
			}
			at = append(at, p.at.Sub(start))
			(<-p.release)()
		}
		want := []time.Duration{0, 0, 100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond, 400 * time.Millisecond}
		slices.Sort(at)
		if !slices.Equal(at, want) {
			t.Fatalf("seats given at %v, want %v", at, want)
		}
	})
}

// A nil queue admits everything at once.
func TestReviewQueueNil(t *testing.T) {
	var q *ReviewQueue
	release, err := q.Acquire(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	release()
}
