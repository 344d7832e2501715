package livequery

import (
	"runtime"
	"slices"
	"sync"
)

// BuildSlots bounds the view builds that scan at once, over every table
// that shares it (a gateway shares one between all its tables), and
// shares them fairly between owners, as kube-apiserver's API Priority
// and Fairness shares seats between flows, but small: a build waits in
// the FIFO queue of its owner (the Query.Owner of the Open that started
// it), and a free slot goes to the owner with a queued build that was
// served least recently (owners served never since they were last idle
// first, in the order their queues began). So an owner that opens new
// sorts and filters one after another holds at most the slots free, one
// at a time as they come, and delays another owner's new view by no more
// than the builds already scanning.
//
// A slot is held from the build's snapshot of the table's rows
// (Table.rows.Clone) to the end of its scan: the O(n) part. Catching up
// with the changes made meanwhile and installing the view happen after
// the slot is released, as they cost what those changes cost anyway.
//
// Lock order: a table's mu before BuildSlots.mu; BuildSlots never calls
// into a table, and wakes a build only by closing its slot's channel.
type BuildSlots struct {
	n int

	mu      sync.Mutex
	running int
	waiting int
	// grants counts the slots given, to order the flows by when they
	// were last served.
	grants uint64
	flows  map[string]*flow
	// queued holds the flows with queued builds, in the order their
	// queues began.
	queued []*flow
}

// flow is one owner's builds.
type flow struct {
	owner string
	queue []*slot
	// active counts its builds queued or scanning: the flow is dropped
	// when none is left, and starts over, unserved, when it comes back.
	active int
	// served is when it was last given a slot (grants); 0: not since it
	// was idle.
	served uint64
}

// slot is a build's place in BuildSlots: queued, then given a slot or
// dropped.
type slot struct {
	f *flow
	// ready is closed once the build may scan (granted) or has left the
	// queue (dropped); granted and done are guarded by BuildSlots.mu, and
	// granted is read by the build once ready is closed.
	ready   chan struct{}
	granted bool
	done    bool
}

// NewBuildSlots returns slots for n builds at once; n <= 0 means
// max(1, GOMAXPROCS/2), so that builds never take every CPU from the
// changes and the other windows.
func NewBuildSlots(n int) *BuildSlots {
	if n <= 0 {
		n = max(1, runtime.GOMAXPROCS(0)/2)
	}
	return &BuildSlots{n: n, flows: map[string]*flow{}}
}

// Waiting returns how many builds wait for a slot.
func (s *BuildSlots) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}

// enqueue queues a build of owner's, and gives it a slot at once if one
// is free and no other build waits.
func (s *BuildSlots) enqueue(owner string) *slot {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.flows[owner]
	if f == nil {
		f = &flow{owner: owner}
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
	return sl
}

// wait returns once sl has a slot (true) or has been dropped (false).
func (sl *slot) wait() bool {
	<-sl.ready
	return sl.granted
}

// drop takes sl out of its queue if it is still there: its build will
// not scan. A slot already given is left to its build, which releases
// it.
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
	s.idleLocked(f)
	sl.done = true
	close(sl.ready)
}

// release frees the slot sl was given, for the next build.
func (s *BuildSlots) release(sl *slot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running--
	s.idleLocked(sl.f)
	s.grantLocked()
}

// idleLocked records that one of f's builds left, and forgets f with its
// last. Caller must hold s.mu.
func (s *BuildSlots) idleLocked(f *flow) {
	if f.active--; f.active == 0 {
		delete(s.flows, f.owner)
	}
}

// grantLocked gives the free slots to the queued builds, each to the
// head of the queue of the flow served least recently. Caller must hold
// s.mu.
func (s *BuildSlots) grantLocked() {
	for s.running < s.n && len(s.queued) > 0 {
		i := 0
		for j, f := range s.queued {
			if f.served < s.queued[i].served {
				i = j
			}
		}
		f := s.queued[i]
		sl := f.queue[0]
		f.queue = f.queue[1:]
		if len(f.queue) == 0 {
			s.queued = slices.Delete(s.queued, i, i+1)
		}
		s.grants++
		f.served = s.grants
		s.waiting--
		s.running++
		sl.granted, sl.done = true, true
		close(sl.ready)
	}
}
