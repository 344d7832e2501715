package livequery

import (
	"context"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/google/btree"
)

// A view is built without the table's lock, as kube-apiserver's cacher
// lists from a clone of its btree: under the lock, the Open that needs
// it registers a build and starts its goroutine, which, once it has a
// slot (see below), clones the rows under the lock (O(1)), then filters
// the clone, computes sort values and sorts (O(n +
// m log m)) while changes, pops, moves and other Opens go on; the
// changes made meanwhile queue on the build, and the goroutine applies
// them, off the lock as long as many are queued and under it for the
// last few, at which point it installs the view and opens its waiters'
// windows. So the lock is never held for more than one change, or a
// handful, whatever the table's size. A build nobody waits for any more
// (every waiter's context ended) stops at its next check.
//
// Builds scan in slots (BuildSlots, shared by a gateway's tables), at
// most max(1, GOMAXPROCS/2) at once by default, given fairly between
// owners: the goroutine waits for its slot before it takes its snapshot,
// so a queued build holds no snapshot and queues no changes, and one
// nobody waits for any more leaves the queue without scanning.

// A build is background work: it checks in (pause) every buildCheck rows
// of each of its passes, and at the first check after buildYield of work
// it yields its processor (runtime.Gosched), so that the changes and
// window updates waiting for one run first, rather than when the
// scheduler next preempts the build, up to 10 ms later. On a machine of
// two processors, with the collector's worker on the other, that wait
// was the tail of other windows' updates while builds ran. There too it
// gives its slot up when another owner has the better claim on it
// (BuildSlots), and waits to resume.

// buildYield is how long a build works before it yields its processor
// at its next check (pause). Yielding at every check, every few dozen
// microseconds, cost a build at 100,000 rows a third of its time
// (BenchmarkFirstWindow, index=new): each yield may give the processor
// to the collector's worker, or move the build to another one, its
// caches cold. At 500 µs, other windows' update p99 under viewchurn's
// churner went from twice their baseline to 1.04× it; yielding every
// 2 ms left a victim's own new views no faster (a median of 58 ms
// against 55 ms, within the runs' noise).
const buildYield = 500 * time.Microsecond

// buildCheck is how many rows a build scans, in each of its passes,
// between two checks (pause): a few hundred microseconds at most. A
// stretch without a check is a stretch in which a change or window
// update waiting for a processor can wait for the build, up to the
// scheduler's preemption, 10 ms later.
const buildCheck = 1024

// catchUpLocked is how many queued changes a build applies under the
// table's lock, with the view's install; more are applied off the lock
// first.
const catchUpLocked = 64

// rowChange is one change of the table's rows, as Upsert, Delete and
// Replace apply it: old or new is nil for an insertion or a deletion.
type rowChange struct{ old, new *row }

// build is a view being built. Its fields but stop are guarded by the
// table's lock; slot is written only by the build's goroutine.
type build struct {
	key viewKey
	x   *index // its index: t.indexes[spec], or one not yet there
	m   *matcher
	// owner is the Query.Owner of the Open that started the build: the
	// build waits for a slot in its queue (see BuildSlots).
	owner string
	slots *BuildSlots
	slot  *slot
	// snapped is set once the build has its snapshot: the table's
	// changes queue on pending from then on, not while it waits for a
	// slot.
	snapped bool
	snap    *btree.BTreeG[*row]
	pending []rowChange
	waiters []*waiter
	// owners counts the waiters by Query.Owner.
	owners map[string]int
	// done is closed once the build has ended: installed (each waiter's
	// w set), or stopped (each waiter's err set).
	done chan struct{}
	// stop is set when nobody waits any more, or the table ended; the
	// goroutine reads it between rows.
	stop atomic.Bool
	// loaded keeps what matcher.load read, so that its loads are kept.
	loaded int
	// yielded is when the build last yielded its processor (pause).
	yielded time.Time
}

// waiter is an Open waiting for a build.
type waiter struct {
	q   Query
	w   *Window
	err error
}

// stopLocked stops b, and takes it out of its queue if it waits for a
// slot. Caller must hold t.mu.
func (t *Table) stopLocked(b *build) {
	b.stop.Store(true)
	t.slots.drop(b.slot)
}

// startBuildLocked registers the build of the view of q.Sort through
// q.Filter over x, queues it for a slot and starts its goroutine.
// Caller must hold t.mu.
func (t *Table) startBuildLocked(key viewKey, x *index, q Query) *build {
	b := &build{key: key, x: x, m: newMatcher(q.Filter), owner: q.Owner, slots: t.slots, owners: map[string]int{}, done: make(chan struct{})}
	b.slot = t.slots.enqueue(b.owner)
	t.builds[key] = b
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		t.runBuild(b)
	}()
	return b
}

// joinLocked adds an Open of q to b's waiters. Caller must hold t.mu.
func (t *Table) joinLocked(b *build, q Query) *waiter {
	wt := &waiter{q: q}
	b.waiters = append(b.waiters, wt)
	if q.Owner != "" {
		if b.owners[q.Owner] == 0 {
			t.owned[q.Owner]++
		}
		b.owners[q.Owner]++
	}
	b.stop.Store(false) // wanted again, if its last waiter had left
	return wt
}

// leaveLocked removes wt from b's waiters, after its context ended; the
// build stops when it was the last. Caller must hold t.mu.
func (t *Table) leaveLocked(b *build, wt *waiter) {
	i := slices.Index(b.waiters, wt)
	if i < 0 {
		return
	}
	b.waiters = slices.Delete(b.waiters, i, i+1)
	if o := wt.q.Owner; o != "" {
		if b.owners[o]--; b.owners[o] == 0 {
			delete(b.owners, o)
			t.disownLocked(o)
		}
	}
	if len(b.waiters) == 0 {
		t.stopLocked(b)
	}
}

// await waits until b has ended, then returns wt's window, or until ctx
// ends.
func (t *Table) await(ctx context.Context, b *build, wt *waiter) (*Window, error) {
	select {
	case <-b.done:
	case <-ctx.Done():
		t.mu.Lock()
		select {
		case <-b.done: // ended meanwhile: take what it gave
		default:
			t.leaveLocked(b, wt)
			t.mu.Unlock()
			return nil, ctx.Err()
		}
		t.mu.Unlock()
	}
	return wt.w, wt.err
}

// runBuild waits for a slot, builds b's view from a snapshot of the
// rows taken then, catches up with the changes made meanwhile, and
// installs it; or ends it, when nobody waits for it any more or the
// table has ended.
func (t *Table) runBuild(b *build) {
	for {
		if b.slot.wait() {
			if v, ok := t.scanInSlot(b); ok && t.catchUpAndInstall(b, v) {
				return
			}
		}
		t.mu.Lock()
		if b.stop.Load() || t.err != nil {
			t.endBuildLocked(b)
			t.mu.Unlock()
			return
		}
		// Stopped, then wanted again before it ended: queue again, to
		// start over from the rows as they are then.
		b.snapped, b.pending = false, nil
		b.slot = t.slots.enqueue(b.owner)
		t.mu.Unlock()
	}
}

// scanInSlot takes b's snapshot, scans it and releases b's slot, which
// it may give up and get again meanwhile (pause). It reports false if
// the build stopped meanwhile.
func (t *Table) scanInSlot(b *build) (*view, bool) {
	defer t.slots.release(b.slot)
	t.mu.Lock()
	if b.stop.Load() || t.err != nil {
		t.mu.Unlock()
		return nil, false
	}
	b.snap, b.pending, b.snapped = t.rows.Clone(), nil, true
	t.mu.Unlock()
	if t.slotHook != nil {
		t.slotHook(b)
	}
	v, ok := b.scan()
	b.snap = nil
	return v, ok
}

// catchUpAndInstall applies to v the changes made since b's snapshot,
// off the lock as long as many are queued and under it for the last
// few, and installs it. It reports false if the build stopped
// meanwhile.
func (t *Table) catchUpAndInstall(b *build, v *view) bool {
	if t.buildHook != nil {
		t.buildHook()
	}
	for {
		t.mu.Lock()
		if b.stop.Load() {
			t.mu.Unlock()
			freeNodes(v.nodes) // never installed: nothing else has them
			return false
		}
		pending := b.pending
		b.pending = nil
		if len(pending) <= t.catchUp {
			b.apply(v, pending)
			t.installLocked(b, v)
			t.unlockAndWake()
			return true
		}
		t.mu.Unlock()
		b.apply(v, pending)
	}
}

// scan builds the view from b's snapshot, with no lock held: the rows
// that match, each with its sort value, sorted. It reports false if the
// build stopped meanwhile.
func (b *build) scan() (*view, bool) {
	v := &view{x: b.x, key: b.key.filter, m: b.m, owners: map[string]int{}}
	sc := scratches.Get().(*scratch)
	defer sc.release()
	rows := slices.Grow(sc.rows[:0], b.snap.Len())
	stopped := false
	b.snap.Ascend(func(r *row) bool {
		if len(rows) > 0 && len(rows)%buildCheck == 0 && !b.pause() {
			stopped = true
			return false
		}
		rows = append(rows, r)
		return true
	})
	sc.rows = rows
	if stopped {
		return nil, false
	}
	n := len(rows)
	matched := rows
	if !b.m.all {
		matched = rows[:0] // in place: a row is kept before the next is read
		for start := 0; start < n; start += buildCheck {
			if !b.pause() {
				return nil, false
			}
			block := rows[start:min(start+buildCheck, n)]
			b.loaded += b.m.load(block)
			for _, r := range block {
				if b.m.matches(r) {
					matched = append(matched, r)
				}
			}
		}
	}
	if !b.pause() {
		return nil, false
	}
	sorted, ok := b.x.sortEntries(matched, sc, b.pause)
	if !ok {
		return nil, false
	}
	v.tree = newTree(b.x.compare, uint64(len(sorted))^uint64(n)<<32)
	if !v.tree.build(sorted, b.pause) {
		freeNodes(sorted)
		return nil, false
	}
	v.nodes = sorted
	return v, true
}

// pause is a build's check between blocks of rows and passes of its
// sort: it yields the processor, and gives b's slot up and waits to get
// one again if another owner has the better claim on it (BuildSlots).
// It reports false once b must stop: nobody waits for it any more, the
// table has ended, or it was dropped while paused.
func (b *build) pause() bool {
	if b.stop.Load() {
		return false
	}
	if now := time.Now(); now.Sub(b.yielded) >= buildYield {
		runtime.Gosched()
		b.yielded = time.Now()
	}
	if b.slot.preempt.Load() && !b.slots.yield(b.slot) {
		return false
	}
	return !b.stop.Load()
}

// apply applies changes to v, which has no window yet.
func (b *build) apply(v *view, changes []rowChange) {
	for _, c := range changes {
		v.apply(b.x.entry(c.old), b.x.entry(c.new))
	}
}

// installLocked makes v, built by b, a view of its index and opens the
// windows of b's waiters on it. Caller must hold t.mu.
func (t *Table) installLocked(b *build, v *view) {
	delete(t.builds, b.key)
	x := t.indexes[b.key.spec]
	if x == nil {
		x = b.x
		t.indexes[b.key.spec] = x
	}
	v.x = x
	t.seed++
	v.opened = t.seed
	x.views[b.key.filter] = v
	t.views++
	for o, n := range b.owners {
		if n > 0 {
			t.disownLocked(o) // the windows below own it instead
		}
	}
	for _, wt := range b.waiters {
		wt.w = t.openLocked(v, wt.q)
	}
	if len(b.waiters) == 0 {
		t.idleLocked(v)
	}
	close(b.done)
}

// endBuildLocked ends b without a view: its waiters, if any (the table
// ended), get the table's error. Caller must hold t.mu.
func (t *Table) endBuildLocked(b *build) {
	delete(t.builds, b.key)
	err := t.err
	if err == nil {
		err = context.Canceled // only possible with no waiter left
	}
	for _, wt := range b.waiters {
		wt.err = err
	}
	for o := range b.owners {
		t.disownLocked(o)
	}
	close(b.done)
}

// disownLocked records that owner holds one view fewer. Caller must hold
// t.mu.
func (t *Table) disownLocked(owner string) {
	if t.owned[owner]--; t.owned[owner] <= 0 {
		delete(t.owned, owner)
	}
}
