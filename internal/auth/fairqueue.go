package auth

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/util/shufflesharding"
	"k8s.io/utils/clock"
)

// Defaults of ReviewQueueOptions.
const (
	DefaultReviewConcurrency = 8
	DefaultReviewQueues      = 128
	DefaultReviewHandSize    = 4
	DefaultReviewQueueLength = 16
	DefaultReviewMaxWait     = 5 * time.Second
)

// ReviewQueueOptions configures NewReviewQueue. Zero fields take the
// defaults given.
type ReviewQueueOptions struct {
	// Concurrency bounds the reviews in flight, of every kind and flow.
	// Default DefaultReviewConcurrency (8): at the gateway's default 50
	// requests per second to kube-apiserver it keeps the gateway's client
	// busy while leaving the order of the rest to the queues.
	Concurrency int
	// Queues is the number of queues flows are shuffle-sharded onto, and
	// HandSize the queues each flow is dealt; a review joins the shortest
	// queue of its flow's hand. Defaults 128 and 4: two flows share all
	// their queues with a probability of 1 in C(128,4), about 10^7; ten
	// flooding flows cover a given hand whole with a probability of
	// about 1%; and one flooding flow holds at most 4 queues, so a
	// review of another flow waits for at most 4 of its reviews.
	Queues, HandSize int
	// QueueLength bounds each queue's waiting reviews; a review whose
	// queue is full while every seat is taken is refused at once (429).
	// Default DefaultReviewQueueLength.
	QueueLength int
	// MaxWait bounds a review's wait for a seat; past it the review is
	// refused (429). Default DefaultReviewMaxWait.
	MaxWait time.Duration
	// QPS, when positive, also paces the seats given, Burst at most at
	// once: set to the rate of the client the reviews are sent with, so
	// that a review given its seat is sent at once instead of waiting in
	// the client's own first-come-first-served rate limiter, which would
	// undo the fair order. Default: no pacing.
	QPS   float64
	Burst int
	// Metrics, when set, counts reviews refused and their waits.
	Metrics *Metrics

	clock clock.WithDelayedExecution // test hook
}

// ReviewQueue shares the gateway's reviews (TokenReviews and
// SubjectAccessReviews) fairly among the flows that cause them: users,
// and client addresses for callers not authenticated yet. It is
// kube-apiserver's API Priority and Fairness queue set in small
// (k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing/queueset): a bound
// on the reviews in flight (seats); a fixed deck of queues onto which
// each flow is shuffle-sharded (k8s.io/apiserver/pkg/util/shufflesharding),
// a review joining the shortest queue of its flow's hand; a length limit
// per queue; and, when a seat frees, the head of the next non-empty queue
// in turn. queueset dispatches the queue whose head has the earliest
// virtual finish time; every review takes one seat for about the same
// time, and then that choice is serving the non-empty queues in turn,
// which is what dispatch does. So a flow that floods the gateway with
// reviews fills the queues of its own hand and waits in them, while a
// review of another flow waits behind at most one review of each busy
// queue. State is bounded by Queues × QueueLength whatever the number of
// flows, which callers choose (a client address is one).
//
// A caller takes a seat with Acquire and gives it back with the release
// function it returns; there is no goroutine of its own. Waiting callers
// block in Acquire on a channel that dispatch closes for the review it
// gives a seat: a release, or, when the pace (QPS) held reviews back, a
// timer armed for the next token.
type ReviewQueue struct {
	opts   ReviewQueueOptions
	dealer *shufflesharding.Dealer
	seed   maphash.Seed

	// mu guards everything below.
	mu       sync.Mutex
	queues   []*list.List  // of *reviewWaiter, oldest first
	inUse    int           // seats taken
	waiting  int           // reviews in the queues
	robin    int           // the queue dispatch looked at last
	enqueues int           // rotates where a hand is read from, as queueset does
	pace     *rate.Limiter // nil without QPS
	paced    clock.Timer   // armed to dispatch when pace has a token again
}

// reviewWaiter is a review waiting in a queue. ready is closed when it is
// given a seat; elem is nil once it has left its queue.
type reviewWaiter struct {
	ready chan struct{}
	queue *list.List
	elem  *list.Element
}

// NewReviewQueue returns a queue set with opts.
func NewReviewQueue(opts ReviewQueueOptions) (*ReviewQueue, error) {
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultReviewConcurrency
	}
	if opts.Queues <= 0 {
		opts.Queues = DefaultReviewQueues
	}
	if opts.HandSize <= 0 {
		opts.HandSize = min(DefaultReviewHandSize, opts.Queues)
	}
	if opts.QueueLength <= 0 {
		opts.QueueLength = DefaultReviewQueueLength
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = DefaultReviewMaxWait
	}
	if opts.clock == nil {
		opts.clock = clock.RealClock{}
	}
	d, err := shufflesharding.NewDealer(opts.Queues, opts.HandSize)
	if err != nil {
		return nil, fmt.Errorf("auth: review queues: %w", err)
	}
	q := &ReviewQueue{opts: opts, dealer: d, seed: maphash.MakeSeed(), queues: make([]*list.List, opts.Queues)}
	if opts.QPS > 0 {
		q.pace = rate.NewLimiter(rate.Limit(opts.QPS), max(1, opts.Burst))
	}
	for i := range q.queues {
		q.queues[i] = list.New()
	}
	return q, nil
}

// ErrReviewQueueFull is wrapped by Acquire's 429 errors.
var ErrReviewQueueFull = errors.New("too many reviews waiting")

// Acquire waits for a seat for one review of flow. It returns at once
// when a seat is free and nobody waits; else the review waits in its
// queue until it is dispatched, ctx ends (ctx's error), MaxWait passes or
// its queue is full (a 429 *apierrors.StatusError with Retry-After,
// wrapping ErrReviewQueueFull). On success, release must be called once
// the review is done; it is idempotent.
func (q *ReviewQueue) Acquire(ctx context.Context, flow string) (release func(), err error) {
	if q == nil {
		return func() {}, nil
	}
	q.mu.Lock()
	if q.inUse < q.opts.Concurrency && q.waiting == 0 && q.takeTokenLocked() {
		q.inUse++
		q.mu.Unlock()
		return q.releaser(), nil
	}
	queue := q.shortestOfHandLocked(flow)
	if queue.Len() >= q.opts.QueueLength {
		q.mu.Unlock()
		q.opts.Metrics.reviewRefused("queue_full")
		return nil, reviewsBusy()
	}
	w := &reviewWaiter{ready: make(chan struct{}), queue: queue}
	w.elem = queue.PushBack(w)
	q.waiting++
	q.dispatchLocked() // a seat may be free, waiting for the pace
	q.mu.Unlock()

	start := q.opts.clock.Now()
	timer := q.opts.clock.NewTimer(q.opts.MaxWait)
	defer timer.Stop()
	var cause error
	select {
	case <-w.ready:
		q.opts.Metrics.reviewWaited(q.opts.clock.Since(start))
		return q.releaser(), nil
	case <-ctx.Done():
		cause = ctx.Err()
	case <-timer.C():
		cause = reviewsBusy()
	}
	q.mu.Lock()
	if w.elem == nil {
		// Dispatched as we gave up: hand the seat on.
		q.mu.Unlock()
		q.releaser()()
	} else {
		w.queue.Remove(w.elem)
		w.elem = nil
		q.waiting--
		q.mu.Unlock()
	}
	if errors.Is(cause, ErrReviewQueueFull) {
		q.opts.Metrics.reviewRefused("timeout")
	}
	return nil, cause
}

// releaser returns the release function of one seat.
func (q *ReviewQueue) releaser() func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			q.mu.Lock()
			q.inUse--
			q.dispatchLocked()
			q.mu.Unlock()
		})
	}
}

// shortestOfHandLocked deals flow's hand and returns its queue with the
// fewest waiting, starting at a rotating card so that ties do not always
// go to the same queue. Caller must hold mu.
func (q *ReviewQueue) shortestOfHandLocked(flow string) *list.List {
	var cards [16]int
	hand := q.dealer.DealIntoHand(maphash.String(q.seed, flow), cards[:0])
	offset := q.enqueues % len(hand)
	q.enqueues++
	var best *list.List
	for i := range hand {
		queue := q.queues[hand[(offset+i)%len(hand)]]
		if best == nil || queue.Len() < best.Len() {
			best = queue
		}
	}
	return best
}

// dispatchLocked gives free seats to the heads of the non-empty queues,
// in turn, as fast as the pace allows; when it holds them back, it arms
// a timer to go on. Caller must hold mu.
func (q *ReviewQueue) dispatchLocked() {
	for q.inUse < q.opts.Concurrency && q.waiting > 0 {
		if !q.takeTokenLocked() {
			q.armLocked()
			return
		}
		for range q.queues {
			q.robin = (q.robin + 1) % len(q.queues)
			queue := q.queues[q.robin]
			if front := queue.Front(); front != nil {
				w := queue.Remove(front).(*reviewWaiter)
				w.elem = nil
				q.waiting--
				q.inUse++
				close(w.ready)
				break
			}
		}
	}
}

// takeTokenLocked takes a token of the pace, if there is one now.
// Caller must hold mu.
func (q *ReviewQueue) takeTokenLocked() bool {
	if q.pace == nil {
		return true
	}
	now := q.opts.clock.Now()
	r := q.pace.ReserveN(now, 1)
	if r.DelayFrom(now) > 0 {
		r.CancelAt(now)
		return false
	}
	return true
}

// armLocked arms the timer that dispatches once the pace has a token
// again, unless it is armed. Caller must hold mu.
func (q *ReviewQueue) armLocked() {
	if q.paced != nil {
		return
	}
	now := q.opts.clock.Now()
	r := q.pace.ReserveN(now, 1)
	d := r.DelayFrom(now)
	r.CancelAt(now)
	q.paced = q.opts.clock.AfterFunc(d, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		q.paced = nil
		q.dispatchLocked()
	})
}

// stats returns the seats taken and the reviews waiting (tests).
func (q *ReviewQueue) stats() (inUse, waiting int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.inUse, q.waiting
}

// reviewsBusy is a review refused by the queues: 429, as kube-apiserver's
// priority and fairness refuses a request its queues cannot take.
func reviewsBusy() error {
	return &reviewQueueError{StatusError: apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusTooManyRequests, Reason: metav1.StatusReasonTooManyRequests,
		Message: "too many requests are waiting for the apiserver's authentication and authorization reviews; try again later",
		Details: &metav1.StatusDetails{RetryAfterSeconds: 1},
	}}}
}

// reviewQueueError is reviewsBusy's error: a 429 Status that errors.Is
// finds as ErrReviewQueueFull.
type reviewQueueError struct{ apierrors.StatusError }

func (e *reviewQueueError) Is(target error) bool { return target == ErrReviewQueueFull }
