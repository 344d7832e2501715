package livequery

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// BuildSlots bounds the view builds that scan at once, over every table
// that shares it (a gateway shares one between all its tables), and
// shares them fairly between owners, as kube-apiserver's API Priority
// and Fairness shares seats between flows, but small: a build waits in
// the FIFO queue of its owner (the Query.Owner of the Open that started
// it), and a free slot goes to the owner with a queued build that was
// served least recently (owners never served, or not within the last
// flowMemory slots given, first, in the order their queues began). So
// an owner that opens new sorts and filters one after another holds at
// most the slots free, one at a time as they come.
//
// An owner whose build queues while every slot is taken may have the
// better claim on a slot than a build scanning: it was served less
// recently than that build's owner had been when the build got its
// slot, so it would have had the slot first, had it asked a moment
// earlier. That build then gives its slot up at its next check (between
// blocks of rows and passes of its sort, a millisecond or so apart),
// keeping its snapshot and the work done, and waits at the head of its
// owner's queue to resume where it stopped. Resuming does not count as
// being served, and the owner it gave way to was served meanwhile, so
// that owner never takes the slot from it twice. So an owner who opens
// a new view now and then waits for no more than a block of a busier
// owner's build, not for the whole build, and the busier owner's builds
// take the slot back when it is done. At most as many builds as there
// are slots are paused at once (each keeps its snapshot and scratch
// memory).
//
// An owner may also be held to a share of one CPU (OwnerShare): the time
// its builds hold a slot is charged to a bucket that fills at that share
// of a second per second, up to OwnerBurst, and an owner that owes time
// (its bucket below zero) gets no slot, nor takes one from another
// build, until its share has paid for it. A build is charged when it
// gives its slot up, so one build always runs to its end: an owner that
// opens a new view now and then (a user sorting a table, about 30 ms of
// scanning at 100,000 rows) is never delayed, and one that opens them
// one after another is held to its share. Meanwhile the slot goes to
// the other owners' builds, and what no build uses is left to the
// changes and the other windows.
//
// A slot is held from the build's snapshot of the table's rows
// (Table.rows.Clone) to the end of its scan: the O(n) part. Catching up
// with the changes made meanwhile and installing the view happen after
// the slot is released, as they cost what those changes cost anyway.
//
// Lock order: a table's mu before BuildSlots.mu; BuildSlots never calls
// into a table, and wakes a build only by closing its slot's channel.
type BuildSlots struct {
	n     int
	share float64 // OwnerShare, 0: none
	burst float64 // OwnerBurst, in seconds
	clock clock.WithDelayedExecution

	mu      sync.Mutex
	running int
	waiting int
	// paused counts the scanning builds asked to give their slot up, and
	// those that did and wait to resume: at most n.
	paused int
	// scanning are the builds holding a slot.
	scanning []*slot
	// grants counts the slots given, to order the flows by when they
	// were last served.
	grants uint64
	// flows are the owners with builds, and those without served within
	// the last flowMemory grants (some more, until the next prune).
	flows   map[string]*flow
	pruneAt int
	// queued holds the flows with queued builds, in the order their
	// queues began.
	queued []*flow
	// timer grants slots at timerAt, when the first queued flow that owes
	// time has paid for it (see BuildSlots); nil when none is set.
	timer   clock.Timer
	timerAt time.Time
}

// flowMemory is how many slots given an idle owner's last service is
// remembered for: one not served within them counts as never served.
// It bounds the idle flows kept, as each slot given serves one.
const flowMemory = 1024

// flow is one owner's builds.
type flow struct {
	owner string
	queue []*slot
	// active counts its builds queued, scanning or paused.
	active int
	// served is when it was last given a slot (grants); 0: never, or not
	// within flowMemory grants.
	served uint64
	// tokens is the time, in seconds, its builds may still hold slots at
	// once as of at (see BuildSlots); below zero, the time it owes.
	tokens float64
	at     time.Time
}

// slot is a build's place in BuildSlots: queued, then given a slot or
// dropped; once given one, maybe asked to give it up (preempt), queued
// again at the head of its flow's queue (paused), and given one again.
type slot struct {
	f *flow
	// ready is closed once the build may scan (granted) or has left the
	// queue (dropped); granted, done, paused and claim are guarded by
	// BuildSlots.mu, and granted is read by the build once ready is
	// closed.
	ready   chan struct{}
	granted bool
	done    bool
	paused  bool
	// claim is when its flow had last been served as the build got its
	// slot: a flow served before that has the better claim on the slot.
	claim uint64
	// since is when it got its slot, with an OwnerShare.
	since time.Time
	// preempt asks the build to give its slot up at its next check
	// (BuildSlots.yield); set and cleared under BuildSlots.mu, read by
	// the build without it.
	preempt atomic.Bool
}

// BuildSlotsOptions configures NewBuildSlots.
type BuildSlotsOptions struct {
	// Slots is how many builds scan at once. Default (0):
	// max(1, GOMAXPROCS/2), so that builds never take every CPU from the
	// changes and the other windows.
	Slots int
	// OwnerShare is the share of one CPU one owner's builds may take on
	// average (0.25: a quarter of one), after OwnerBurst at once; 0: no
	// bound but the slots (see BuildSlots).
	OwnerShare float64
	// OwnerBurst is the scanning time an owner's builds may take at once
	// before OwnerShare holds them. Default: one second.
	OwnerBurst time.Duration
	// Clock is for tests. Default: the real clock.
	Clock clock.WithDelayedExecution
}

// NewBuildSlots returns the slots opts configures.
func NewBuildSlots(opts BuildSlotsOptions) *BuildSlots {
	if opts.Slots <= 0 {
		opts.Slots = max(1, runtime.GOMAXPROCS(0)/2)
	}
	if opts.OwnerBurst <= 0 {
		opts.OwnerBurst = time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &BuildSlots{n: opts.Slots, share: max(0, opts.OwnerShare), burst: opts.OwnerBurst.Seconds(), clock: opts.Clock,
		flows: map[string]*flow{}, pruneAt: 2 * flowMemory}
}

// owesLocked reports whether f owes scanning time as of now, after its
// share has paid for what it could since it was last charged. Caller
// must hold s.mu.
func (s *BuildSlots) owesLocked(f *flow, now time.Time) bool {
	if s.share == 0 {
		return false
	}
	f.tokens = min(s.burst, f.tokens+s.share*now.Sub(f.at).Seconds())
	f.at = now
	return f.tokens < 0
}

// chargeLocked charges sl's flow the time sl has held its slot. Caller
// must hold s.mu.
func (s *BuildSlots) chargeLocked(sl *slot) {
	if s.share == 0 {
		return
	}
	now := s.clock.Now()
	s.owesLocked(sl.f, now)
	sl.f.tokens -= now.Sub(sl.since).Seconds()
}

// paidLocked returns when f, which owes time as of now, will have paid
// for it: an hour later at most, as a share small enough for the wait to
// overflow a Duration is still a finite wait. Caller must hold s.mu.
func (s *BuildSlots) paidLocked(f *flow, now time.Time) time.Time {
	return now.Add(time.Duration(min(-f.tokens/s.share, time.Hour.Seconds()) * float64(time.Second)))
}

// now returns the time, when an OwnerShare needs it.
func (s *BuildSlots) now() time.Time {
	if s.share == 0 {
		return time.Time{}
	}
	return s.clock.Now()
}

// Waiting returns how many builds wait for a slot, paused ones included.
func (s *BuildSlots) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}

// enqueue queues a build of owner's, and gives it a slot at once if one
// is free and no other build waits; or else asks a scanning build with
// a weaker claim to give its slot up.
func (s *BuildSlots) enqueue(owner string) *slot {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.flows[owner]
	if f == nil {
		f = &flow{owner: owner, tokens: s.burst, at: s.now()}
		s.flows[owner] = f
	}
	f.active++
	sl := &slot{f: f, ready: make(chan struct{})}
	if len(f.queue) == 0 {
		s.queued = append(s.queued, f)
	}
	f.queue = append(f.queue, sl)
	s.waiting++
	s.grantLocked()
	if !sl.done {
		s.preemptLocked(f)
	}
	return sl
}

// preemptLocked asks a scanning build to give its slot up to f, whose
// build has queued with every slot taken, if f has the better claim on
// it (see BuildSlots): of those builds, the one whose owner had been
// served last, and none while n builds are already paused or asked to
// pause. Caller must hold s.mu.
func (s *BuildSlots) preemptLocked(f *flow) {
	if s.paused >= s.n || s.owesLocked(f, s.now()) {
		return
	}
	var last *slot
	for _, sl := range s.scanning {
		if sl.f != f && f.served < sl.claim && !sl.preempt.Load() && (last == nil || sl.claim > last.claim) {
			last = sl
		}
	}
	if last != nil {
		last.preempt.Store(true)
		s.paused++
	}
}

// claimedLocked reports whether a queued flow has the better claim on
// sl's slot (see preemptLocked). Caller must hold s.mu.
func (s *BuildSlots) claimedLocked(sl *slot) bool {
	now := s.now()
	for _, f := range s.queued {
		if f != sl.f && f.served < sl.claim && !s.owesLocked(f, now) {
			return true
		}
	}
	return false
}

// yield is a scanning build's answer to sl.preempt: it gives its slot up
// to the queued build with the better claim, if one still waits, and
// waits at the head of its flow's queue for a slot again. It reports
// false if the build was dropped meanwhile (drop): it holds no slot
// then, and must stop.
func (s *BuildSlots) yield(sl *slot) bool {
	s.mu.Lock()
	if !sl.preempt.Load() {
		s.mu.Unlock()
		return true
	}
	sl.preempt.Store(false)
	if !s.claimedLocked(sl) { // the claimant gave up, or got a slot freed
		s.paused--
		s.mu.Unlock()
		return true
	}
	f := sl.f
	if len(f.queue) == 0 {
		s.queued = append(s.queued, f)
	}
	f.queue = slices.Insert(f.queue, 0, sl)
	sl.ready, sl.granted, sl.done, sl.paused = make(chan struct{}), false, false, true
	s.waiting++
	s.chargeLocked(sl)
	s.stopScanningLocked(sl)
	s.grantLocked()
	s.mu.Unlock()
	return sl.wait()
}

// wait returns once sl has a slot (true) or has been dropped (false).
func (sl *slot) wait() bool {
	<-sl.ready
	return sl.granted
}

// drop takes sl out of its queue if it is still there, paused or not: its
// build will not scan. A slot already given is left to its build, which
// releases it.
func (s *BuildSlots) drop(sl *slot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sl.done {
		return
	}
	f := sl.f
	f.queue = slices.DeleteFunc(f.queue, func(o *slot) bool { return o == sl })
	if len(f.queue) == 0 {
		s.queued = slices.DeleteFunc(s.queued, func(o *flow) bool { return o == f })
	}
	s.waiting--
	if sl.paused {
		sl.paused = false
		s.paused--
	}
	s.idleLocked(f)
	sl.done = true
	close(sl.ready)
}

// release frees the slot sl holds, if it holds one (it does not once
// dropped while paused), for the next build.
func (s *BuildSlots) release(sl *slot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !sl.granted {
		return
	}
	sl.granted = false
	if sl.preempt.Load() { // asked to pause, and done first
		sl.preempt.Store(false)
		s.paused--
	}
	s.chargeLocked(sl)
	s.stopScanningLocked(sl)
	s.idleLocked(sl.f)
	s.grantLocked()
}

// stopScanningLocked takes sl out of the scanning builds. Caller must
// hold s.mu.
func (s *BuildSlots) stopScanningLocked(sl *slot) {
	s.running--
	s.scanning = slices.DeleteFunc(s.scanning, func(o *slot) bool { return o == sl })
}

// idleLocked records that one of f's builds left. Flows without builds
// are kept while their last service is remembered (flowMemory), and
// dropped, once they are many, when it is not. Caller must hold s.mu.
func (s *BuildSlots) idleLocked(f *flow) {
	if f.active--; f.active > 0 || len(s.flows) <= s.pruneAt {
		return
	}
	now := s.now()
	for owner, o := range s.flows {
		if o.active == 0 && o.served+flowMemory <= s.grants && !s.owesLocked(o, now) {
			delete(s.flows, owner)
		}
	}
	s.pruneAt = max(2*flowMemory, 2*len(s.flows))
}

// grantLocked gives the free slots to the queued builds, each to the
// head of the queue of the flow served least recently that owes no time.
// A paused build resumes without its flow counting as served again (see
// BuildSlots). When only flows that owe time wait, it sets the timer for
// the first to have paid. Caller must hold s.mu.
func (s *BuildSlots) grantLocked() {
	now := s.now()
	for s.running < s.n && len(s.queued) > 0 {
		i := -1
		var paid time.Time // when the first flow that owes has paid
		for j, f := range s.queued {
			if s.owesLocked(f, now) {
				if at := s.paidLocked(f, now); paid.IsZero() || at.Before(paid) {
					paid = at
				}
				continue
			}
			if i < 0 || f.served < s.queued[i].served {
				i = j
			}
		}
		if i < 0 {
			s.wakeAtLocked(paid)
			return
		}
		f := s.queued[i]
		sl := f.queue[0]
		f.queue = f.queue[1:]
		if len(f.queue) == 0 {
			s.queued = slices.Delete(s.queued, i, i+1)
		}
		if sl.paused {
			sl.paused = false
			s.paused--
		} else {
			if f.served+flowMemory <= s.grants {
				f.served = 0 // forgotten, as if its flow had been pruned
			}
			sl.claim = f.served
			s.grants++
			f.served = s.grants
		}
		s.waiting--
		s.running++
		s.scanning = append(s.scanning, sl)
		sl.granted, sl.done, sl.since = true, true, now
		close(sl.ready)
	}
}

// wakeAtLocked sets the timer to grant slots at at, unless it is set for
// no later. Caller must hold s.mu.
func (s *BuildSlots) wakeAtLocked(at time.Time) {
	if s.timer != nil {
		if !s.timerAt.After(at) {
			return
		}
		s.timer.Stop()
	}
	s.timerAt = at
	var t clock.Timer
	// The grant runs on a goroutine of its own, as time.AfterFunc runs
	// its function: a fake clock calls it while it holds its own lock.
	t = s.clock.AfterFunc(at.Sub(s.clock.Now()), func() {
		go func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.timer == t {
				s.timer = nil
				s.grantLocked()
			}
		}()
	})
	s.timer = t
}
