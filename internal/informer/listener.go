package informer

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/buffer"
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
)

var notificationNames = [...]string{"", "ADDED", "MODIFIED", "DELETED", "SYNC", "END_OF_SNAPSHOT", "RESET"}

func (t NotificationType) String() string {
	if int(t) < len(notificationNames) {
		return notificationNames[t]
	}
	return "UNKNOWN"
}

// Notification is one entry of a listener's stream. Object is nil for
// EndOfSnapshot and Reset. Object is shared and read-only.
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
	// writer goroutine). It is called with the resource's lock held, so it
	// must return at once and must not call the listener or the resource.
	OnWake func()
}

const (
	defaultMaxEvents = 4096
	defaultMaxBytes  = 16 << 20
	ringNormalSize   = 16
)

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
	Delivered  uint64 // notifications popped
	LastRV     uint64 // RV of the last change popped
	PendingFor time.Duration
}

// Listener is one consumer's view of a resource: a filter, a bounded
// growing ring of pending notifications and a resync schedule.
//
// A Listener has no goroutine. The processor appends under mu (never
// blocking) and signals Wake (or calls OnWake); the consumer calls Pop. Lock
// order: processor.mu before Listener.mu.
type Listener struct {
	proc   *processor
	filter Filter
	policy OverflowPolicy
	resync time.Duration
	maxEv  int
	maxB   int64
	wake   chan<- struct{}
	onWake func()
	// removed is set once the processor has dropped the listener; guarded
	// by processor.mu.
	removed bool

	// mu guards everything below.
	mu sync.Mutex
	// ring holds live notifications in order. It grows by doubling from
	// empty and shrinks back once drained.
	ring  buffer.Ring[Notification]
	bytes int64
	// needSnapshot: buffering is suspended; the next Pop emits (Reset, if
	// needReset) a snapshot and EndOfSnapshot, then buffering resumes.
	needSnapshot bool
	needReset    bool
	// resyncDue: the next Pop appends Sync notifications after the ring.
	resyncDue  bool
	nextResync time.Time
	// minRV: live changes at or below it are skipped (the consumer resumed
	// from a version this gateway had not processed yet). Tombstones are
	// not: their version is the deleted object's last one, not the
	// deletion's.
	minRV    uint64
	oldestAt time.Time // when the oldest pending notification arrived
	// progress is the resource's version as of the last Pop: the consumer
	// has been handed every matching change up to it. See Progress.
	progress uint64
	stopped  bool
	stats    ListenerStats
}

// Filter returns the listener's filter.
func (l *Listener) Filter() Filter { return l.filter }

// signal wakes the consumer without blocking.
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

// offer appends a change if it passes the filter. Called by the processor
// with processor.mu held; never blocks.
//
// Like the apiserver's watch, a change that moves an object into a label
// or field selector arrives as Added and one that moves it out as Deleted
// (carrying the new state), so a consumer's view never keeps an object
// that no longer matches.
func (l *Listener) offer(n Notification, now time.Time) {
	if !l.filter.Matches(n.Object) {
		if n.Type != Modified || n.prev == nil || !l.filter.Matches(n.prev) {
			return
		}
		n.Type = Deleted
	} else if n.Type == Modified && n.prev != nil && !l.filter.Matches(n.prev) {
		n.Type = Added
	}
	n.prev = nil
	l.mu.Lock()
	if l.stopped || l.needSnapshot || n.RV <= l.minRV && n.RV != 0 && !n.tombstone {
		l.mu.Unlock()
		return
	}
	size := int64(len(n.Object.Raw))
	if l.ring.Len() >= l.maxEv || l.bytes+size > l.maxB {
		l.overflowLocked()
		if l.needSnapshot {
			l.mu.Unlock()
			l.signal()
			return
		}
	}
	if l.ring.Len() == 0 {
		l.oldestAt = now
	}
	l.ring.WriteOne(n)
	l.bytes += size
	l.mu.Unlock()
	l.signal()
}

// overflowLocked applies the overflow policy. Caller must hold l.mu.
func (l *Listener) overflowLocked() {
	l.stats.Overflows++
	l.proc.metrics.overflows.Inc()
	if l.policy == OverflowCollapse {
		l.collapseLocked()
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
	l.proc.metrics.resets.Inc()
	l.ring = buffer.Ring[Notification]{}
	l.bytes = 0
	l.needSnapshot = true
	l.needReset = true
	l.resyncDue = false // the snapshot supersedes a pending resync
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
	l.ring = buffer.Ring[Notification]{}
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
// snapshot if one is due, else the buffered changes followed by Sync
// notifications if a resync is due. It never blocks on the consumer.
func (l *Listener) Pop(buf []Notification) []Notification {
	l.mu.Lock()
	if !l.needSnapshot && !l.resyncDue {
		// Read before draining: every change up to it was offered
		// before it was published, so it is in the ring or popped.
		progress := l.proc.progress.Load()
		buf = l.drainLocked(buf)
		l.progress = max(l.progress, progress)
		l.mu.Unlock()
		return buf
	}
	l.mu.Unlock()

	// A snapshot must be cut while no change is being distributed, so take
	// the processor's read lock first (lock order: processor, listener).
	p := l.proc
	p.mu.RLock()
	defer p.mu.RUnlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.needSnapshot:
		if l.needReset {
			buf = append(buf, Notification{Type: Reset})
		}
		buf = p.snapshotLocked(&l.filter, Added, buf)
		buf = append(buf, Notification{Type: EndOfSnapshot, RV: p.lastRV})
		l.needSnapshot, l.needReset = false, false
		l.minRV = 0
		l.progress = p.lastRV
	case l.resyncDue:
		buf = l.drainLocked(buf)
		buf = p.snapshotLocked(&l.filter, Sync, buf)
		l.progress = max(l.progress, p.lastRV)
		l.resyncDue = false
		l.stats.Resyncs++
		p.metrics.resyncs.Inc()
	default:
		buf = l.drainLocked(buf)
		l.progress = max(l.progress, p.lastRV)
	}
	return buf
}

// Progress returns the resource's resourceVersion as of the last Pop: the
// consumer has been handed every change up to it that matches its filter,
// and none after it that Pop did not return. It moves on with bookmarks
// and with changes the filter drops, so a quiet filtered stream can
// report progress (a REST watch's BOOKMARK) without resuming from a stale
// version. 0 until the first Pop, and while a reset is pending.
func (l *Listener) Progress() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.needSnapshot {
		return 0
	}
	return l.progress
}

func (l *Listener) drainLocked(buf []Notification) []Notification {
	for {
		n, ok := l.ring.ReadOne()
		if !ok {
			break
		}
		buf = append(buf, n)
		l.stats.Delivered++
		l.stats.LastRV = n.RV
	}
	l.bytes = 0
	return buf
}

// Stats returns the listener's counters.
func (l *Listener) Stats() ListenerStats {
	now := l.proc.clock.Now()
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
// counted in Stats().Resets. It does nothing once the listener is
// stopped.
func (l *Listener) Reset() {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return
	}
	l.resetLocked()
	l.mu.Unlock()
	l.signal()
}

// Stop detaches the listener from its resource. Pop keeps returning what
// was buffered. Safe to call more than once.
func (l *Listener) Stop() {
	l.proc.removeListener(l)
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
}
