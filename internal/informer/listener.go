package informer

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/buffer"
	"k8s.io/utils/clock"
)

// NotificationType says what a Notification carries.
type NotificationType uint8

const (
	// Added, Modified and Deleted are live changes (and, for Added, the
	// objects of a snapshot).
	Added NotificationType = iota + 1
	Modified
	Deleted
	// Sync re-sends the current state of one object during a resync.
	Sync
	// EndOfSnapshot follows the last object of a snapshot; RV is the
	// resourceVersion the snapshot reflects.
	EndOfSnapshot
	// Reset tells the consumer to drop everything it knows for this listener:
	// its backlog overflowed or its resume point expired. A fresh snapshot
	// (Added objects, then EndOfSnapshot) follows.
	Reset
	// Ended is the last notification of a listener whose resource the
	// apiserver no longer serves (see ResourceGoneError): nothing
	// follows. It comes after every change the listener held; RV is the
	// version the resource's cache had reached. Listener.Err says why.
	Ended
)

var notificationNames = [...]string{"", "ADDED", "MODIFIED", "DELETED", "SYNC", "END_OF_SNAPSHOT", "RESET", "ENDED"}

func (t NotificationType) String() string {
	if int(t) < len(notificationNames) {
		return notificationNames[t]
	}
	return "UNKNOWN"
}

// Notification is one entry of a listener's stream. Object is nil for
// EndOfSnapshot, Reset and Ended. Object is shared and read-only.
type Notification struct {
	Type   NotificationType
	Object *Object
	// RV orders notifications: the object's resourceVersion for changes,
	// the snapshot's resourceVersion for EndOfSnapshot.
	RV uint64
	// prev is the object's previous state for a Modified change, so a
	// listener can tell an object entering or leaving its selector. It is
	// never handed to consumers.
	prev *Object
	// tombstone marks a delete the informer only noticed by relisting.
	// RV is then the object's last known version, older than the
	// deletion, so it must not be skipped by a listener's minRV.
	tombstone bool
	// restated marks a Modified a relist found for an object at the same
	// version whose row follows other columns: it must not be skipped by
	// a listener's minRV either, though its RV is not new.
	restated bool
}

// OverflowPolicy decides what a listener does when its backlog reaches its
// bound. Either way the consumer loses no final state.
type OverflowPolicy uint8

const (
	// OverflowReset discards the backlog and stops buffering; when the
	// consumer next pops it receives Reset followed by a fresh snapshot.
	// This suits clients that can redraw from scratch (dashboards).
	OverflowReset OverflowPolicy = iota
	// OverflowCollapse replaces the backlog by the latest state of each
	// object it mentions (DeltaFIFO style). If the collapsed backlog still
	// fills more than 3/4 of the bound, it falls back to OverflowReset.
	// This suits receivers that apply changes one by one (webhooks).
	OverflowCollapse
)

// ListenerOptions configures a listener. The zero value is usable: all
// namespaces, no resync, no initial snapshot, reset on overflow, default
// bounds.
type ListenerOptions struct {
	Filter Filter
	// ResyncPeriod re-sends every matching object as Sync this often.
	// 0 disables resync; a positive value below the manager's MinResync is
	// raised to it.
	ResyncPeriod time.Duration
	// ResyncBudget, if set, is the resync allowance this listener shares
	// with the other listeners of one client. A resync due while the
	// budget is spent is postponed until it has refilled. Default: none
	// (resyncs are bounded by MinResync only).
	ResyncBudget *ResyncBudget
	// SendInitialEvents starts the stream with a snapshot of the matching
	// objects (as Added) and an EndOfSnapshot marker. Ignored when
	// ResourceVersion is set.
	SendInitialEvents bool
	// ResourceVersion resumes after this version: the listener receives
	// exactly the changes after it from the resource's history. "" and "0"
	// mean "from now". AddListener returns ErrExpired when the history no
	// longer reaches back that far.
	ResourceVersion string
	// Overflow is the policy applied when the backlog reaches its bound.
	Overflow OverflowPolicy
	// MaxEvents bounds the backlog in notifications. Default 4096.
	MaxEvents int
	// MaxBytes bounds the backlog in object bytes. Default 16 MiB.
	MaxBytes int64
	// Wake receives a non-blocking send whenever notifications become
	// available. Several listeners may share one channel (one per socket);
	// it should have capacity 1. Either Wake or OnWake is required.
	Wake chan<- struct{}
	// OnWake, if set, is called instead of sending on Wake. It suits a
	// consumer that starts a goroutine only when there is work, rather
	// than keeping one parked on a channel (an idle WebSocket keeps no
	// writer goroutine). It is called after the resource's lock is
	// released, possibly from several goroutines at once; it must not
	// block.
	OnWake func()
	// WakeOnProgress also wakes the consumer when the resource's version
	// moves on with nothing for the listener (a bookmark, a relist that
	// changed nothing, changes the filter drops), so that a consumer that
	// reports its version (Progress) follows a quiet resource instead of
	// staying at its last change. Default false: woken by notifications
	// only.
	WakeOnProgress bool
}

const (
	defaultMaxEvents = 4096
	defaultMaxBytes  = 16 << 20
	// ringNormalSize is the ring's capacity once drained: a live consumer
	// that drains after every change reuses it instead of allocating it
	// again for the next change.
	ringNormalSize = 16
)

// newRing returns an empty ring that shrinks back to ringNormalSize.
func newRing() buffer.Ring[Notification] {
	return *buffer.NewRing[Notification](buffer.RingOptions{NormalSize: ringNormalSize})
}

// ListenerStats is a point-in-time view of a listener for status pages and
// metrics.
type ListenerStats struct {
	Buffered   int    // notifications waiting
	Capacity   int    // current ring capacity
	Bytes      int64  // object bytes waiting
	Overflows  uint64 // times the bound was hit
	Collapses  uint64 // overflows resolved by collapsing
	Resets     uint64 // overflows resolved by reset (and expired resumes)
	Resyncs    uint64 // resyncs delivered
	Deferred   uint64 // resyncs postponed by the ResyncBudget
	Delivered  uint64 // notifications popped
	LastRV     uint64 // RV of the last change popped
	PendingFor time.Duration
}

// hub is what a Listener needs from its resource's processor, and all it
// sees of it (as client-go's processorListener never references the
// sharedProcessor).
type hub interface {
	// freeze calls fn while no change is being distributed, with the
	// store as of one version.
	freeze(fn func(c *storeCut))
	// progress is the version up to which every change has been offered
	// to the listeners.
	progress() uint64
	removeListener(l *Listener)
}

// Listener is one consumer's view of a resource: a filter, a bounded
// growing ring of pending notifications and a resync schedule.
//
// A Listener has no goroutine. The processor appends under its lock (never
// blocking) and, once it has released its lock, signals Wake (or calls
// OnWake); the consumer calls Pop. Lock order: the processor's lock before
// Listener.mu.
type Listener struct {
	hub    hub
	filter Filter
	key    indexKey // where the processor's index files it
	policy OverflowPolicy
	resync time.Duration
	budget *ResyncBudget
	maxEv  int
	maxB   int64
	wake   chan<- struct{}
	onWake func()
	// wakeOnProgress: see ListenerOptions.WakeOnProgress.
	wakeOnProgress bool
	metrics        *resourceMetrics
	clock          clock.PassiveClock

	// Guarded by the processor's lock: removed is set once the processor
	// has dropped the listener.
	removed bool
	// mu guards everything below.
	mu sync.Mutex
	// ring holds live notifications in order. It grows by doubling and
	// shrinks back to ringNormalSize once drained. read counts the
	// notifications taken from it since it was last rewritten, so a view
	// can be placed between two of them (see writtenLocked).
	ring  buffer.Ring[Notification]
	read  uint64
	bytes int64
	// needSnapshot: buffering is suspended; the next Pop cuts a snapshot
	// (behind a Reset, if needReset) and buffering resumes.
	needSnapshot bool
	needReset    bool
	// view is a snapshot or resync being sent: it goes out once the ring
	// has been read up to view.at, before the changes after it.
	view *view
	// resyncCost is what the last resync sent, the estimate charged to
	// the budget for the next.
	resyncCost int
	// minRV: live changes at or below it are skipped (the consumer resumed
	// from a version this gateway had not processed yet). Tombstones are
	// not: their version is the deleted object's last one, not the
	// deletion's.
	minRV    uint64
	oldestAt time.Time // when the oldest pending notification arrived
	// progress is the resource's version as of the last Pop that left
	// nothing pending: the consumer has been handed every matching change
	// up to it. See Progress.
	progress uint64
	stopped  bool
	// err is set when the resource ended (see processor.end): once the
	// rest is popped, Pop hands out Ended, and endSent records that it
	// did. endRV is the version the resource's cache had reached.
	err     error
	endRV   uint64
	endSent bool
	stats   ListenerStats
}

// view is a set of objects cut at one version, sent as a snapshot (Added,
// then EndOfSnapshot) or a resync (Sync). The objects are candidates: the
// filter is applied as they are sent (objects are immutable, so the
// result is the same as filtering at the cut). A resync's chunks are
// shared by every listener due at the same tick.
type view struct {
	chunks [][]any
	typ    NotificationType
	rv     uint64 // the version the objects reflect
	at     uint64 // sent once the ring has been read up to here
	reset  bool   // a Reset precedes the objects
	chunk  int    // position: chunks[chunk][next]
	next   int
	sent   int
}

// writtenLocked is the position after the last notification in the
// ring: where a view placed now goes. Caller must hold l.mu.
func (l *Listener) writtenLocked() uint64 { return l.read + uint64(l.ring.Len()) }

// Filter returns the listener's filter.
func (l *Listener) Filter() Filter { return l.filter }

// signal wakes the consumer without blocking. Callers must not hold the
// processor's lock.
func (l *Listener) signal() {
	if l.onWake != nil {
		l.onWake()
		return
	}
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// offer appends a change if it passes the filter, and reports whether
// the consumer must be signalled: the listener had nothing pending, so no
// earlier signal covers it. Called by the processor with its lock held;
// never blocks.
//
// Like the apiserver's watch, a change that moves an object into a label
// or field selector arrives as Added and one that moves it out as Deleted
// (carrying the new state), so a consumer's view never keeps an object
// that no longer matches.
func (l *Listener) offer(n Notification, now time.Time) (signal bool) {
	if !l.filter.Matches(n.Object) {
		if n.Type != Modified || n.prev == nil || !l.filter.Matches(n.prev) {
			return false
		}
		n.Type = Deleted
	} else if n.Type == Modified && n.prev != nil && !l.filter.Matches(n.prev) {
		n.Type = Added
	}
	n.prev = nil
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped || l.needSnapshot || n.RV <= l.minRV && n.RV != 0 && !n.tombstone && !n.restated {
		return false
	}
	idle := l.ring.Len() == 0 && l.view == nil
	size := int64(len(n.Object.Raw))
	if l.ring.Len() >= l.maxEv || l.bytes+size > l.maxB {
		l.overflowLocked()
		if l.needSnapshot {
			return true
		}
	}
	if l.ring.Len() == 0 {
		l.oldestAt = now
	}
	l.ring.WriteOne(n)
	l.bytes += size
	return idle
}

// overflowLocked applies the overflow policy. Caller must hold l.mu.
func (l *Listener) overflowLocked() {
	l.stats.Overflows++
	l.metrics.overflows.Inc()
	if l.policy == OverflowCollapse {
		l.collapseLocked()
		// The ring was rewritten: renumber it. A snapshot being sent
		// stays ahead of every change; a pending resync is dropped, as
		// its state is older than the collapsed changes (the next period
		// brings another).
		l.read = 0
		if v := l.view; v != nil {
			if v.typ == Sync {
				l.view = nil
			} else {
				v.at = 0
			}
		}
		if l.ring.Len() <= l.maxEv*3/4 && l.bytes <= l.maxB*3/4 {
			l.stats.Collapses++
			return
		}
	}
	l.resetLocked()
}

// resetLocked drops the backlog and arranges Reset + snapshot on next Pop.
func (l *Listener) resetLocked() {
	l.stats.Resets++
	l.metrics.resets.Inc()
	l.ring = newRing()
	l.read = 0
	l.bytes = 0
	l.needSnapshot = true
	l.needReset = true
	l.view = nil // the snapshot supersedes what was being sent
}

// collapseLocked rewrites the ring to hold the latest state per object,
// ordered by each object's last change, so no later state for an object is
// overtaken by an earlier one. An object is a UID, not a name: an object
// deleted and re-created under its name is two objects, so the consumer
// is told the old one is gone before it is told of the new one. Caller
// must hold l.mu.
func (l *Listener) collapseLocked() {
	type entry struct {
		first, last Notification
		pos         int
	}
	type objectID struct {
		key string
		uid types.UID
	}
	byKey := make(map[objectID]*entry, l.ring.Len())
	var order []objectID
	for i := 0; ; i++ {
		n, ok := l.ring.ReadOne()
		if !ok {
			break
		}
		k := objectID{n.Object.Key(), n.Object.UID}
		e := byKey[k]
		if e == nil {
			e = &entry{first: n}
			byKey[k] = e
		}
		e.last, e.pos = n, i
		order = append(order, k)
	}
	l.ring = newRing()
	l.bytes = 0
	for i, k := range order {
		e := byKey[k]
		if e.pos != i {
			continue // not this object's last change
		}
		for _, n := range collapsed(e.first, e.last) {
			l.ring.WriteOne(n)
			l.bytes += int64(len(n.Object.Raw))
		}
	}
}

// collapsed reduces one object's (one UID's) first and last pending
// changes to what a consumer that saw neither needs to reach the last
// state.
func collapsed(first, last Notification) []Notification {
	switch {
	case first.Type == Added && last.Type == Deleted:
		return nil // the consumer never knew it
	case first.Type == Added:
		last.Type = Added
		return []Notification{last}
	case last.Type == Deleted:
		return []Notification{last}
	case first.Type == Deleted:
		// Left the filter and came back (same UID): the consumer
		// dropped it at the first change and must add it again.
		return []Notification{first, {Type: Added, Object: last.Object, RV: last.RV}}
	default:
		last.Type = Modified
		return []Notification{last}
	}
}

// Pop appends everything pending to buf and returns it: first a Reset and
// snapshot if one is due, then the buffered changes, with the Sync
// notifications of a resync where it fell due. It never blocks on the
// consumer.
func (l *Listener) Pop(buf []Notification) []Notification {
	return l.PopAtMost(buf, 0)
}

// PopAtMost is Pop appending at most limit notifications (0: no limit), so
// that a consumer can stream a large snapshot in bounded chunks. What it
// leaves stays pending and is not signalled again: call it until it
// appends fewer than limit, which means the listener was empty (sinks do
// so through sink.Popper).
func (l *Listener) PopAtMost(buf []Notification, limit int) []Notification {
	l.mu.Lock()
	if l.needSnapshot {
		// The snapshot is cut with no change being distributed: take
		// the processor's lock first (lock order: processor, listener).
		l.mu.Unlock()
		l.hub.freeze(l.cutSnapshot)
		l.mu.Lock()
	}
	defer l.mu.Unlock()
	// Read before draining: every change up to it was offered before it
	// was published, so it is in the ring or already popped.
	progress := l.hub.progress()
	start := len(buf)
	for limit <= 0 || len(buf)-start < limit {
		if v := l.view; v != nil && v.at == l.read {
			room := 0
			if limit > 0 {
				room = limit - (len(buf) - start)
			}
			buf = l.sendViewLocked(buf, room)
			if l.view != nil {
				break // out of room
			}
			continue
		}
		n, ok := l.ring.ReadOne()
		if !ok {
			break
		}
		l.read++
		l.bytes -= int64(len(n.Object.Raw))
		buf = append(buf, n)
		l.stats.Delivered++
		l.stats.LastRV = n.RV
	}
	if l.ring.Len() == 0 && l.view == nil && !l.needSnapshot {
		l.bytes = 0
		l.progress = max(l.progress, progress)
		if l.err != nil && !l.endSent && (limit <= 0 || len(buf)-start < limit) {
			l.endSent = true
			buf = append(buf, Notification{Type: Ended, RV: l.endRV})
		}
	}
	return buf
}

// endLocked marks the listener ended with err, its resource's cache at
// rv: Pop hands out Ended after what the listener holds. Caller must
// hold l.mu.
func (l *Listener) endLocked(err error, rv uint64) {
	l.err, l.endRV = err, rv
}

// Err returns why the listener ended (a *ResourceGoneError), or nil while
// its resource is served. It is set before Pop hands out Ended.
func (l *Listener) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// cutSnapshot replaces a pending snapshot request by a view of the store;
// buffering resumes behind it. Called through hub.freeze.
func (l *Listener) cutSnapshot(c *storeCut) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.needSnapshot {
		return // another Pop cut it
	}
	l.view = &view{chunks: c.chunks(&l.filter), typ: Added, rv: c.rv, at: l.read, reset: l.needReset}
	l.needSnapshot, l.needReset = false, false
	l.minRV = 0
}

// sendViewLocked appends up to room (0: no limit) notifications of the
// view; it clears the view once it is all sent. Caller must hold l.mu.
func (l *Listener) sendViewLocked(buf []Notification, room int) []Notification {
	v := l.view
	start := len(buf)
	full := func() bool { return room > 0 && len(buf)-start >= room }
	if v.reset {
		buf = append(buf, Notification{Type: Reset})
		v.reset = false
	}
	for ; v.chunk < len(v.chunks); v.chunk, v.next = v.chunk+1, 0 {
		objs := v.chunks[v.chunk]
		for v.next < len(objs) {
			if full() {
				return buf
			}
			o := objs[v.next].(*Object)
			v.next++
			if l.filter.Matches(o) {
				buf = append(buf, Notification{Type: v.typ, Object: o, RV: o.RV})
				v.sent++
			}
		}
	}
	if full() {
		return buf // the EndOfSnapshot goes out with the next Pop
	}
	l.view = nil
	if v.typ == Sync {
		l.stats.Resyncs++
		l.metrics.resyncs.Inc()
		if l.budget != nil {
			l.budget.adjust(v.sent - l.resyncCost)
		}
		l.resyncCost = v.sent
		return buf
	}
	l.progress = v.rv
	return append(buf, Notification{Type: EndOfSnapshot, RV: v.rv})
}

// Progress returns the resource's resourceVersion as of the last Pop that
// left nothing pending: the consumer has been handed every change up to it
// that matches its filter, and none after it that Pop did not return. It
// moves on with bookmarks and with changes the filter drops, so a quiet
// filtered stream can report progress (a REST watch's BOOKMARK) without
// resuming from a stale version. 0 until the first Pop, and while a reset
// or snapshot is pending.
func (l *Listener) Progress() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.needSnapshot || l.view != nil && l.view.typ != Sync {
		return 0
	}
	return l.progress
}

// Stats returns the listener's counters.
func (l *Listener) Stats() ListenerStats {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stats
	s.Buffered = l.ring.Len()
	s.Capacity = l.ring.Cap()
	s.Bytes = l.bytes
	if s.Buffered > 0 {
		s.PendingFor = now.Sub(l.oldestAt)
	}
	return s
}

// Overflowed reports whether the listener is waiting for its consumer to
// take a Reset and snapshot after an overflow. Sinks use it to close
// consumers that stay behind for too long.
func (l *Listener) Overflowed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.needReset
}

// Reset drops the backlog and makes the next Pop return a Reset, a
// snapshot and an EndOfSnapshot, as an overflow that cannot be collapsed
// does. A consumer calls it when it had to discard what it popped (a
// webhook whose receiver stayed down past its retry budget). It is
// counted in Stats().Resets. Once the listener has ended, what it now
// has to tell is only that, so the next Pop returns Ended again. It does
// nothing once the listener is stopped.
func (l *Listener) Reset() {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return
	}
	l.resetLocked()
	if l.err != nil {
		// Ended: no snapshot of a resource that is gone, only the end.
		l.needSnapshot, l.needReset, l.endSent = false, false, false
	}
	l.mu.Unlock()
	l.signal()
}

// Stop detaches the listener from its resource. Pop keeps returning what
// was buffered. Safe to call more than once.
func (l *Listener) Stop() {
	l.hub.removeListener(l)
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
}
