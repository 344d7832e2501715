package informer

import (
	"container/heap"
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
)

// Resyncs are scheduled as client-go schedules its listeners' resyncs
// (determineNextResync, shouldResync), with three differences that keep
// their cost proportional to what is due, not to every listener and
// object:
//   - a min-heap on each listener's next resync, so a tick looks only at
//     the listeners due;
//   - one cut of the store per tick, shared by every listener due: each
//     listener's view holds the cut's object lists, and the listener
//     applies its filter as it sends them;
//   - a budget per client (ResyncBudget): a resync due while the
//     client's budget is spent is postponed until it has refilled.

// storeCut is the store as of one version, taken under the processor's
// lock: the object lists a snapshot or resync sends, per namespace or
// whole. It is filled lazily and shared by the listeners of one tick.
// Every method must be called under the processor's lock held when the
// cut was taken.
type storeCut struct {
	store cache.ThreadSafeStore
	rv    uint64
	all   []any
	byNS  map[string][]any
}

// chunks returns the object lists f's objects are among.
func (c *storeCut) chunks(f *Filter) [][]any {
	nss := f.namespaces()
	if nss == nil {
		if c.all == nil {
			c.all = c.store.List()
		}
		return [][]any{c.all}
	}
	if c.byNS == nil {
		c.byNS = make(map[string][]any, len(nss))
	}
	out := make([][]any, 0, len(nss))
	for _, ns := range nss {
		objs, ok := c.byNS[ns]
		if !ok {
			objs, _ = c.store.ByIndex(cache.NamespaceIndex, ns)
			c.byNS[ns] = objs
		}
		if len(objs) > 0 {
			out = append(out, objs)
		}
	}
	return out
}

func chunksLen(chunks [][]any) int {
	n := 0
	for _, c := range chunks {
		n += len(c)
	}
	return n
}

// resyncTick starts the resyncs that are due: each due listener gets a
// view of one shared cut, placed after the changes it has buffered so far,
// unless it is still sending a snapshot or its previous resync (that one is
// skipped), or its budget is spent (postponed). The views are cut under
// the read lock, so no change is distributed meanwhile.
func (p *processor) resyncTick(now time.Time) {
	var wakes []*Listener
	p.mu.RLock()
	p.resyncMu.Lock()
	var cut *storeCut
	for len(p.resyncs) > 0 && !p.resyncs[0].next.After(now) {
		e := p.resyncs[0]
		l := e.l
		next := now.Add(l.resync)
		if cut == nil {
			cut = p.cutLocked()
		}
		if wait, started := l.startResync(cut, now); started {
			wakes = append(wakes, l)
		} else if wait > 0 {
			next = now.Add(wait)
			p.metrics.resyncsDeferred.Inc()
		}
		e.next = next
		heap.Fix(&p.resyncs, e.index)
	}
	p.resyncMu.Unlock()
	p.mu.RUnlock()
	signalAll(wakes)
}

// startResync gives the listener a resync view of cut, after what it has
// buffered. It reports false when there is nothing to start: a snapshot
// or the previous resync is still being sent (wait 0), or the budget is
// spent (wait: until it has refilled). Caller must hold the processor's
// read lock.
func (l *Listener) startResync(cut *storeCut, now time.Time) (wait time.Duration, started bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped || l.needSnapshot || l.view != nil {
		return 0, false
	}
	chunks := cut.chunks(&l.filter)
	if l.budget != nil {
		// Charge what the last resync sent, or the candidates the first
		// time; sendViewLocked settles the difference.
		if l.resyncCost == 0 {
			l.resyncCost = chunksLen(chunks)
		}
		if wait := l.budget.take(now, l.resyncCost); wait > 0 {
			l.stats.Deferred++
			return wait, false
		}
	}
	l.view = &view{chunks: chunks, typ: Sync, rv: cut.rv, at: l.writtenLocked()}
	return 0, true
}

// resyncEntry is a listener's place in the resync schedule, which the
// processor owns.
type resyncEntry struct {
	l     *Listener
	next  time.Time // when its next resync is due
	index int       // in the heap
}

// resyncQueue is a min-heap of entries on their next resync
// (container/heap.Interface). Guarded by processor.resyncMu.
type resyncQueue []*resyncEntry

func (q resyncQueue) Len() int           { return len(q) }
func (q resyncQueue) Less(i, j int) bool { return q[i].next.Before(q[j].next) }
func (q resyncQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}

func (q *resyncQueue) Push(x any) {
	e := x.(*resyncEntry)
	e.index = len(*q)
	*q = append(*q, e)
}

func (q *resyncQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	e.index = -1
	return e
}

// ResyncBudget bounds the resync work of one client: the objects its
// listeners' resyncs send, per second. A client with many subscriptions at
// a short resync period over a large resource would otherwise make the
// gateway re-send its whole cache many times a second.
//
// It is a token bucket that may go into debt: a resync is started while
// the bucket is not in debt and charged in full, however large, so a
// resync larger than the burst still runs, and the client's next resyncs
// wait until the debt is paid. (golang.org/x/time/rate refuses a charge
// above its burst outright, which would never let a large resync run,
// and a resync's cost is settled only once it has been sent.) Over time the client gets at most
// perSecond objects a second, plus one burst. Safe for concurrent use.
type ResyncBudget struct {
	mu     sync.Mutex
	rate   float64 // objects per second
	burst  float64
	tokens float64
	last   time.Time
}

// NewResyncBudget returns a budget of perSecond objects a second that
// accumulates up to burst objects while unused.
func NewResyncBudget(perSecond float64, burst int) *ResyncBudget {
	return &ResyncBudget{rate: perSecond, burst: float64(burst), tokens: float64(burst)}
}

// refillLocked adds the tokens earned since the last call.
func (b *ResyncBudget) refillLocked(now time.Time) {
	if !b.last.IsZero() && now.After(b.last) {
		b.tokens = min(b.burst, b.tokens+b.rate*now.Sub(b.last).Seconds())
	}
	if b.last.IsZero() || now.After(b.last) {
		b.last = now
	}
}

// take charges cost and returns 0 if the budget is not in debt; otherwise
// it charges nothing and returns how long until the debt is paid.
func (b *ResyncBudget) take(now time.Time, cost int) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refillLocked(now)
	if b.tokens < 0 {
		if b.rate <= 0 {
			return time.Hour
		}
		return time.Duration(-b.tokens / b.rate * float64(time.Second))
	}
	b.tokens -= float64(cost)
	return 0
}

// adjust charges delta more objects (or refunds, if negative): the
// difference between what a resync was charged and what it sent.
func (b *ResyncBudget) adjust(delta int) {
	b.mu.Lock()
	b.tokens = min(b.burst, b.tokens-float64(delta))
	b.mu.Unlock()
}
