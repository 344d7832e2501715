package informer

import (
	"container/heap"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// processor is the cache and fan-out stage of one resource. It consumes
// the deltas client-go's reflector queues (see upstream.go), applies each
// to the resource's only store, records a bounded history for resumes, and
// appends each change to the rings of the listeners whose filter matches.
//
// Because it sees deltas rather than handler callbacks, it knows the exact
// resourceVersion its store reflects (lastRV): a list's resourceVersion
// after a ReplacedAll, an event's after a watch event, a bookmark's after
// a Bookmark. Nothing reads the reflector's LastSyncResourceVersion, which
// runs ahead of what has been applied while deltas are queued.
//
// Goroutines: the upstream controller's process loop calls process, one
// delta at a time; the manager's resync loop calls resyncTick; consumers
// call Listener.Pop and AddListener. None of them blocks on another's I/O,
// and no consumer is signalled while mu is held: wakes are collected under
// it and sent once it is released.
type processor struct {
	gvr       schema.GroupVersionResource
	log       *zap.Logger
	clock     clock.WithTicker
	metrics   *resourceMetrics
	minResync time.Duration

	// mu guards store writes, listeners, history and the RV fields, so that
	// a snapshot taken under mu.RLock and the changes distributed after it
	// form one consistent sequence.
	mu sync.RWMutex
	// store is keyed by Object.Key and indexed by namespace. Only process
	// writes it, under mu.
	store cache.ThreadSafeStore
	// nsKeys interns the namespace index's values, so indexing an object
	// allocates nothing. Used by the index function, which the store
	// calls only on writes.
	nsKeys map[string][]string
	// listeners, filed by namespace and by a selector equality, so a change
	// is offered only to listeners that could want it.
	listeners *listenerIndex
	hist      *history
	// lastRV is the resourceVersion of the state the store holds: every
	// change up to it has been applied and distributed, none after it.
	lastRV uint64
	synced bool
	count  int // objects in store
	// ended is set by end: the resource is gone, its listeners have been
	// ended and no listener is added any more.
	ended error
	// wakes collects the listeners to signal once mu is released. Owned
	// by process (one delta at a time).
	wakes []*Listener
	// progressWakes are the listeners woken whenever lastRV moves on
	// (ListenerOptions.WakeOnProgress).
	progressWakes map[*Listener]struct{}

	// resyncMu guards the resync schedule (lock order: mu, resyncMu,
	// Listener.mu): a min-heap on each resyncing listener's next resync,
	// and each listener's entry in it.
	resyncMu  sync.Mutex
	resyncs   resyncQueue
	scheduled map[*Listener]*resyncEntry

	// columns are those of the objects the store holds, from the last
	// ReplacedAll (see boundedFIFO.Replace); written under mu.
	columns atomic.Pointer[Columns]

	// published mirrors lastRV once a delta has been fully distributed. It
	// is stored after the listeners' offers, so a listener that reads it
	// and then drains its ring has seen every matching change up to it
	// (see Listener.Progress).
	published atomic.Uint64
}

func newProcessor(gvr schema.GroupVersionResource, opts *Options, m *resourceMetrics) *processor {
	p := &processor{
		gvr:       gvr,
		log:       opts.Logger.With(zap.String("resource", gvr.String())),
		clock:     opts.clock,
		metrics:   m,
		minResync: opts.MinResync,
		listeners: newListenerIndex(),
		nsKeys:    map[string][]string{},
		scheduled: map[*Listener]*resyncEntry{},
		hist:      newHistory(opts.HistoryEvents, opts.HistoryBytes),
	}
	p.store = cache.NewThreadSafeStore(cache.Indexers{cache.NamespaceIndex: p.namespaceIndex}, cache.Indices{})
	return p
}

// process is the upstream controller's cache.ProcessFunc. The queue is a
// RealFIFO with atomic events, so it pops one Delta at a time, in the
// order the reflector saw them:
//   - ReplacedAll: a (re)list, with the list's resourceVersion;
//   - Added, Updated, Deleted: a watch event;
//   - Bookmark: the watch has progressed to a resourceVersion with no
//     change of its own.
//
// An error is logged by nobody (the controller drops it), so process logs
// what it cannot apply itself.
func (p *processor) process(obj any, _ bool) error {
	deltas, ok := obj.(cache.Deltas)
	if !ok {
		err := fmt.Errorf("unexpected %T from the queue", obj)
		p.log.Error("cannot process", zap.Error(err))
		return err
	}
	var err error
	p.mu.Lock()
	before := p.lastRV
	for _, d := range deltas {
		if err = p.applyLocked(d); err != nil {
			p.log.Error("cannot process", zap.String("delta", string(d.Type)), zap.Error(err))
			break
		}
	}
	if p.lastRV > before {
		for l := range p.progressWakes {
			p.wakes = append(p.wakes, l) // a second signal of one listener is a no-op
		}
	}
	p.published.Store(p.lastRV)
	p.mu.Unlock()
	signalAll(p.wakes)
	clear(p.wakes)
	p.wakes = p.wakes[:0]
	return err
}

// signalAll signals each listener; several may share a consumer, whose
// wake is idempotent.
func signalAll(ls []*Listener) {
	for _, l := range ls {
		l.signal()
	}
}

// applyLocked applies one delta. Caller must hold p.mu.
func (p *processor) applyLocked(d cache.Delta) error {
	switch d.Type {
	case cache.ReplacedAll:
		info, ok := d.Object.(cache.ReplacedAllInfo)
		if !ok {
			return fmt.Errorf("ReplacedAll carries %T", d.Object)
		}
		return p.replaceLocked(info)
	case cache.Added, cache.Updated, cache.Replaced, cache.Sync:
		o, ok := d.Object.(*Object)
		if !ok {
			return fmt.Errorf("%s carries %T", d.Type, d.Object)
		}
		p.upsertLocked(o)
	case cache.Deleted:
		o, tombstone, err := deletedObject(d.Object)
		if err != nil {
			return err
		}
		p.deleteLocked(o, tombstone)
	case cache.Bookmark:
		info, ok := d.Object.(cache.BookmarkInfo)
		if !ok {
			return fmt.Errorf("Bookmark carries %T", d.Object)
		}
		// Every change up to the bookmark has been applied: the store
		// now reflects its version, though nothing changed.
		if rv, err := strconv.ParseUint(info.ResourceVersion, 10, 64); err == nil && rv > p.lastRV {
			p.lastRV = rv
		}
	case cache.SyncAll:
		// The upstream has no resync period; listeners resync on their own.
	default:
		return fmt.Errorf("unknown delta type %q", d.Type)
	}
	return nil
}

// deletedObject unwraps a Deleted delta's object, which is a
// DeletedFinalStateUnknown when the queue only noticed the deletion by
// relisting.
func deletedObject(obj any) (o *Object, tombstone bool, err error) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, tombstone = d.Obj, true
	}
	o, ok := obj.(*Object)
	if !ok {
		return nil, false, fmt.Errorf("Deleted carries %T", obj)
	}
	return o, tombstone, nil
}

// upsertLocked applies a watch ADDED or MODIFIED. Caller must hold p.mu.
func (p *processor) upsertLocked(o *Object) {
	key := o.Key()
	old, exists := p.getLocked(key)
	if exists && old.ResourceVersion == o.ResourceVersion && old.UID == o.UID && old.Columns == o.Columns {
		return // a repeat of what the store holds: nothing changed
	}
	p.store.Update(key, o) // adds when absent
	if !exists {
		p.count++
		p.changeLocked(Notification{Type: Added, Object: o, RV: o.RV})
		return
	}
	p.changeLocked(Notification{Type: Modified, Object: o, RV: o.RV, prev: old})
}

// deleteLocked applies a watch DELETED. Caller must hold p.mu.
func (p *processor) deleteLocked(o *Object, tombstone bool) {
	key := o.Key()
	if _, exists := p.getLocked(key); exists {
		p.count--
	}
	p.store.Delete(key)
	p.changeLocked(Notification{Type: Deleted, Object: o, RV: o.RV, tombstone: tombstone})
}

// changeLocked records and distributes one watch event. Watch events
// arrive in resourceVersion order, each newer than the store. Caller must
// hold p.mu.
func (p *processor) changeLocked(n Notification) {
	if n.RV > p.lastRV {
		p.lastRV = n.RV
		p.hist.add(n)
	} else {
		// Not newer than what the store reflects: an apiserver that does
		// not order its events. Resumes from before here could miss or
		// repeat it, so the history restarts after it.
		p.log.Warn("watch event out of resourceVersion order; resumes from before it will relist",
			zap.Uint64("rv", n.RV), zap.Uint64("storeRV", p.lastRV))
		p.hist.reset(p.lastRV)
	}
	p.distributeLocked(n)
}

// distributeLocked offers a change to the listeners that could want it.
// Caller must hold p.mu.
func (p *processor) distributeLocked(n Notification) {
	now := p.clock.Now()
	p.metrics.events.Inc()
	p.metrics.lastEvent.Set(float64(now.Unix()))
	p.metrics.objects.Set(float64(p.count))
	p.listeners.each(n.Object, n.prev, func(l *Listener) {
		if l.offer(n, now) {
			p.wakes = append(p.wakes, l)
		}
	})
}

// replaceLocked applies a (re)list: the store becomes exactly the list, at
// the list's resourceVersion. The first list only fills the store. A
// relist also tells live listeners what changed since the store's previous
// state: objects gone are DELETED (with their last known state; their
// deletion's version is unknown, so they are marked as tombstones), new
// ones ADDED, changed ones MODIFIED, and an object deleted and re-created
// under the same name (another UID) DELETED then ADDED.
//
// The changes between the previous state and the list are not known one by
// one, so the history restarts at the list's version: a resume from before
// it is told to start over (ErrExpired), as kube-apiserver answers 410.
// Caller must hold p.mu.
func (p *processor) replaceLocked(info cache.ReplacedAllInfo) error {
	listRV, err := strconv.ParseUint(info.ResourceVersion, 10, 64)
	if err != nil {
		return fmt.Errorf("list resourceVersion %q: %w", info.ResourceVersion, err)
	}
	list := info.Objects
	var cols *Columns
	if n := len(list); n > 0 {
		if lc, ok := list[n-1].(listedColumns); ok {
			cols, list = lc.columns, list[:n-1]
		}
	}
	objs := make([]*Object, len(list))
	for i, obj := range list {
		o, ok := obj.(*Object)
		if !ok {
			return fmt.Errorf("list item %d is %T", i, obj)
		}
		objs[i] = o
	}
	var changes []Notification
	if p.synced {
		changes = p.diffLocked(objs)
	}
	items := make(map[string]any, len(objs))
	for _, o := range objs {
		items[o.Key()] = o
	}
	p.store.Replace(items, info.ResourceVersion)
	if old := p.columns.Swap(cols); p.synced && old != cols {
		p.log.Info("the resource's Table columns changed", zap.Int("columns", columnCount(cols)))
	}
	p.count = len(objs)
	p.lastRV = listRV
	p.hist.reset(listRV)
	if !p.synced {
		p.synced = true
		p.metrics.objects.Set(float64(p.count))
		p.metrics.synced.Set(1)
		p.log.Info("cache synced", zap.Int("objects", p.count), zap.Uint64("resourceVersion", listRV))
		return nil
	}
	p.metrics.relists.Inc()
	p.log.Info("relisted", zap.Int("objects", p.count), zap.Int("changes", len(changes)), zap.Uint64("resourceVersion", listRV))
	for _, n := range changes {
		p.distributeLocked(n)
	}
	p.metrics.objects.Set(float64(p.count))
	return nil
}

// columnCount is the number of columns c defines.
func columnCount(c *Columns) int {
	if c == nil {
		return 0
	}
	return len(c.Definitions)
}

// diffLocked lists the changes that take the store to objs: deletions
// first, as client-go's informers deliver them, then additions and
// modifications in list order. An object at the same resourceVersion
// whose row follows other columns (the resource's columns changed) is
// modified: its Cells changed, though the object did not. Cells are not
// compared otherwise: those computed at send time (ages) differ from list
// to list for the same object. Caller must hold p.mu.
func (p *processor) diffLocked(objs []*Object) []Notification {
	listed := make(map[string]*Object, len(objs))
	for _, o := range objs {
		listed[o.Key()] = o
	}
	var changes []Notification
	for _, key := range p.store.ListKeys() {
		old, _ := p.getLocked(key)
		if o, ok := listed[key]; !ok || o.UID != old.UID {
			changes = append(changes, Notification{Type: Deleted, Object: old, RV: old.RV, tombstone: true})
		}
	}
	for _, o := range objs {
		old, exists := p.getLocked(o.Key())
		switch {
		case !exists || old.UID != o.UID:
			changes = append(changes, Notification{Type: Added, Object: o, RV: o.RV})
		case old.ResourceVersion != o.ResourceVersion:
			changes = append(changes, Notification{Type: Modified, Object: o, RV: o.RV, prev: old})
		case old.Columns != o.Columns:
			changes = append(changes, Notification{Type: Modified, Object: o, RV: o.RV, prev: old, restated: true})
		}
	}
	return changes
}

func (p *processor) getLocked(key string) (*Object, bool) {
	obj, ok := p.store.Get(key)
	if !ok {
		return nil, false
	}
	return obj.(*Object), true
}

// namespaceIndex is the store's namespace index function.
func (p *processor) namespaceIndex(obj any) ([]string, error) {
	o, ok := obj.(*Object)
	if !ok {
		return nil, fmt.Errorf("cache holds %T", obj)
	}
	keys, ok := p.nsKeys[o.Namespace]
	if !ok {
		keys = []string{o.Namespace}
		p.nsKeys[o.Namespace] = keys
	}
	return keys, nil
}

// eachMatchingLocked calls fn for every cached object matching f, using
// the namespace index when f names a namespace. Caller must hold p.mu.
func (p *processor) eachMatchingLocked(f *Filter, fn func(*Object)) {
	visit := func(objs []any) {
		for _, obj := range objs {
			if o := obj.(*Object); f.Matches(o) {
				fn(o)
			}
		}
	}
	nss := f.namespaces()
	if nss == nil {
		visit(p.store.List())
		return
	}
	for _, ns := range nss {
		objs, _ := p.store.ByIndex(cache.NamespaceIndex, ns)
		visit(objs)
	}
}

// addListener registers a listener, seeding its ring from the history when
// it resumes. Caller has validated opts.
func (p *processor) addListener(opts ListenerOptions) (*Listener, error) {
	l := &Listener{
		hub:            p,
		filter:         opts.Filter,
		key:            indexKeyOf(&opts.Filter),
		policy:         opts.Overflow,
		maxEv:          opts.MaxEvents,
		maxB:           opts.MaxBytes,
		wake:           opts.Wake,
		onWake:         opts.OnWake,
		wakeOnProgress: opts.WakeOnProgress,
		budget:         opts.ResyncBudget,
		metrics:        p.metrics,
		clock:          p.clock,
		ring:           newRing(),
	}
	if l.maxEv <= 0 {
		l.maxEv = defaultMaxEvents
	}
	if l.maxB <= 0 {
		l.maxB = defaultMaxBytes
	}
	if opts.ResyncPeriod > 0 {
		l.resync = max(opts.ResyncPeriod, p.minResync)
	}
	var resumeRV uint64
	if opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
		rv, err := strconv.ParseUint(opts.ResourceVersion, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("invalid resourceVersion %q: %w", opts.ResourceVersion, ErrInvalidResourceVersion)
		}
		resumeRV = rv
	}

	pending, err := p.attach(l, resumeRV, opts.SendInitialEvents)
	if err != nil {
		return nil, err
	}
	if pending {
		l.signal()
	}
	return l, nil
}

// attach files l under mu, seeding its ring from the history when it
// resumes. It reports whether l has something to pop already.
func (p *processor) attach(l *Listener, resumeRV uint64, snapshot bool) (pending bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended != nil {
		return false, p.ended
	}
	if !p.synced {
		return false, fmt.Errorf("%s: cache not synced yet", p.gvr)
	}
	now := p.clock.Now()
	switch {
	case resumeRV > 0:
		replay, ok := p.hist.after(resumeRV, nil)
		if !ok {
			return false, fmt.Errorf("%s: resume from %d, history starts after %d: %w", p.gvr, resumeRV, p.hist.since, ErrExpired)
		}
		for _, n := range replay {
			pending = l.offer(n, now) || pending
		}
		l.minRV = resumeRV
	case snapshot:
		l.needSnapshot, pending = true, true
	}
	p.listeners.add(l)
	if l.wakeOnProgress {
		if p.progressWakes == nil {
			p.progressWakes = map[*Listener]struct{}{}
		}
		p.progressWakes[l] = struct{}{}
	}
	if l.resync > 0 {
		p.resyncMu.Lock()
		e := &resyncEntry{l: l, next: now.Add(l.resync)}
		p.scheduled[l] = e
		heap.Push(&p.resyncs, e)
		p.resyncMu.Unlock()
	}
	p.metrics.listeners.Inc()
	return pending, nil
}

func (p *processor) removeListener(l *Listener) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.removeLocked(l)
}

// removeLocked detaches l. Caller must hold p.mu.
func (p *processor) removeLocked(l *Listener) {
	if l.removed {
		return
	}
	l.removed = true
	p.listeners.remove(l)
	delete(p.progressWakes, l)
	p.resyncMu.Lock()
	if e := p.scheduled[l]; e != nil {
		heap.Remove(&p.resyncs, e.index)
		delete(p.scheduled, l)
	}
	p.resyncMu.Unlock()
	p.metrics.listeners.Dec()
}

// end is called once the resource is gone and its upstream has stopped,
// after the changes it had queued have been processed. Every listener is
// detached and told: once a listener's consumer has popped what it holds
// (and a snapshot it was due), it pops Ended, and Err returns err. Later
// listeners are refused with err. The store is kept, read-only, for
// snapshots still being cut.
func (p *processor) end(err error) {
	p.mu.Lock()
	p.ended = err
	ls := p.listeners.all()
	for _, l := range ls {
		p.removeLocked(l)
		l.mu.Lock()
		l.endLocked(err, p.lastRV)
		l.mu.Unlock()
	}
	p.metrics.forget()
	p.mu.Unlock()
	signalAll(ls)
}

// freeze implements hub: fn runs under the read lock, which excludes
// process.
func (p *processor) freeze(fn func(c *storeCut)) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	fn(p.cutLocked())
}

// progress implements hub.
func (p *processor) progress() uint64 { return p.published.Load() }

// cutLocked returns a cut of the store as it is now. Caller must hold mu
// (read or write) for as long as the cut is being filled.
func (p *processor) cutLocked() *storeCut {
	return &storeCut{store: p.store, rv: p.lastRV}
}

// listenerCount returns the number of listeners attached.
func (p *processor) listenerCount() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.listeners.n
}

// objectCount returns the number of objects cached.
func (p *processor) objectCount() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.count
}

// list returns the objects matching f and the version they reflect.
func (p *processor) list(f *Filter) ([]*Object, uint64) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var out []*Object
	p.eachMatchingLocked(f, func(o *Object) { out = append(out, o) })
	return out, p.lastRV
}

// get returns one object by namespace and name.
func (p *processor) get(namespace, name string) (*Object, bool) {
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	obj, ok := p.store.Get(key)
	if !ok {
		return nil, false
	}
	return obj.(*Object), true
}
