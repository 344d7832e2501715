package informer

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// ErrExpired is returned by AddListener when the requested resume version
// is older than the resource's history. Like the apiserver's 410 Gone, the
// caller should start over with a snapshot.
var ErrExpired = errors.New("resourceVersion is too old")

// processor is the fan-out stage of one resource. It receives the shared
// informer's notifications (through one client-go handler registration),
// keeps its own indexer so snapshots are consistent with the changes it
// distributes, records a bounded history for resumes, and appends each
// change to the rings of the listeners whose filter matches.
//
// Goroutines: client-go's handler goroutine calls OnAdd/OnUpdate/OnDelete;
// runResync ticks resync schedules; consumers call Listener.Pop and
// AddListener. None of them blocks on another's I/O.
type processor struct {
	gvr     schema.GroupVersionResource
	log     *zap.Logger
	clock   clock.WithTicker
	metrics *resourceMetrics
	// lastSyncRV reads the informer's LastSyncResourceVersion.
	lastSyncRV func() string
	minResync  time.Duration

	// mu guards store writes, listeners, history and the RV fields, so that
	// a snapshot taken under mu.RLock and the changes distributed after it
	// form one consistent sequence.
	mu    sync.RWMutex
	store cache.Indexer
	// listeners watching all namespaces, and those watching one namespace,
	// so a change is offered only to listeners that could want it.
	allNS       map[*Listener]struct{}
	byNamespace map[string]map[*Listener]struct{}
	resyncing   map[*Listener]struct{}
	hist        *history
	// lastRV is the highest RV distributed (or listed, before sync).
	lastRV uint64
	synced bool
	count  int // objects in store
}

func newProcessor(gvr schema.GroupVersionResource, opts *Options, m *resourceMetrics, lastSyncRV func() string) *processor {
	return &processor{
		gvr:         gvr,
		log:         opts.Logger.With(zap.String("resource", gvr.String())),
		clock:       opts.clock,
		metrics:     m,
		lastSyncRV:  lastSyncRV,
		minResync:   opts.MinResync,
		store:       cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		allNS:       map[*Listener]struct{}{},
		byNamespace: map[string]map[*Listener]struct{}{},
		resyncing:   map[*Listener]struct{}{},
		hist:        newHistory(opts.HistoryEvents, opts.HistoryBytes),
	}
}

// OnAdd implements cache.ResourceEventHandler.
func (p *processor) OnAdd(obj any, isInInitialList bool) {
	o, ok := obj.(*Object)
	if !ok {
		p.log.Error("unexpected object type", zap.String("type", fmt.Sprintf("%T", obj)))
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.store.Add(o); err != nil {
		p.log.Error("cache add", zap.Error(err))
	}
	p.count++
	if isInInitialList && !p.synced {
		p.lastRV = max(p.lastRV, o.RV)
		p.metrics.objects.Set(float64(p.count))
		return
	}
	p.changeLocked(Notification{Type: Added, Object: o, RV: o.RV}, false)
}

// OnUpdate implements cache.ResourceEventHandler.
func (p *processor) OnUpdate(oldObj, newObj any) {
	o, ok := newObj.(*Object)
	if !ok {
		p.log.Error("unexpected object type", zap.String("type", fmt.Sprintf("%T", newObj)))
		return
	}
	old, _ := oldObj.(*Object)
	if old != nil && old.ResourceVersion == o.ResourceVersion {
		return // a relist re-delivered an unchanged object
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.store.Update(o); err != nil {
		p.log.Error("cache update", zap.Error(err))
	}
	p.changeLocked(Notification{Type: Modified, Object: o, RV: o.RV, prev: old}, false)
}

// OnDelete implements cache.ResourceEventHandler. A delete the informer
// only noticed by relisting arrives as DeletedFinalStateUnknown carrying
// the last state it knew; it is still delivered as a delete.
func (p *processor) OnDelete(obj any) {
	tombstone := false
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, tombstone = d.Obj, true
	}
	o, ok := obj.(*Object)
	if !ok {
		p.log.Error("unexpected object type", zap.String("type", fmt.Sprintf("%T", obj)))
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.store.Delete(o); err != nil {
		p.log.Error("cache delete", zap.Error(err))
	}
	p.count--
	p.changeLocked(Notification{Type: Deleted, Object: o, RV: o.RV, tombstone: tombstone}, tombstone)
}

// markSyncedLocked ends the initial list: from here on changes are
// recorded in the history. Caller must hold p.mu.
func (p *processor) markSyncedLocked() {
	if !p.synced {
		p.synced = true
		p.hist.reset(p.lastRV)
	}
}

// changeLocked records and distributes one change. Caller must hold p.mu.
func (p *processor) changeLocked(n Notification, tombstone bool) {
	p.markSyncedLocked()
	now := p.clock.Now()
	p.metrics.events.Inc()
	p.metrics.lastEvent.Set(float64(now.Unix()))
	p.metrics.objects.Set(float64(p.count))

	if tombstone || n.RV <= p.lastRV {
		// A relist: changes no longer arrive in RV order and a tombstone's
		// real deletion version is unknown. Resumes from before this point
		// could miss changes, so the history restarts after the newest
		// version the informer has listed.
		last, _ := strconv.ParseUint(p.lastSyncRV(), 10, 64)
		p.hist.reset(max(p.lastRV, last, p.hist.since))
		p.lastRV = max(p.lastRV, last)
		if !tombstone {
			p.lastRV = max(p.lastRV, n.RV)
		}
	} else {
		p.lastRV = n.RV
		p.hist.add(n)
	}
	for l := range p.allNS {
		l.offer(n, now)
	}
	for l := range p.byNamespace[n.Object.Namespace] {
		l.offer(n, now)
	}
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

// snapshotLocked appends the objects matching f as notifications of type t.
// Caller must hold p.mu (read or write).
func (p *processor) snapshotLocked(f *Filter, t NotificationType, buf []Notification) []Notification {
	p.eachMatchingLocked(f, func(o *Object) {
		buf = append(buf, Notification{Type: t, Object: o, RV: o.RV})
	})
	return buf
}

// addListener registers a listener, seeding its ring from the history when
// it resumes. Caller has validated opts.
func (p *processor) addListener(opts ListenerOptions) (*Listener, error) {
	l := &Listener{
		proc:   p,
		filter: opts.Filter,
		policy: opts.Overflow,
		maxEv:  opts.MaxEvents,
		maxB:   opts.MaxBytes,
		wake:   opts.Wake,
		onWake: opts.OnWake,
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

	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.synced {
		return nil, fmt.Errorf("%s: cache not synced yet", p.gvr)
	}
	now := p.clock.Now()
	switch {
	case resumeRV > 0:
		replay, ok := p.hist.after(resumeRV, nil)
		if !ok {
			return nil, fmt.Errorf("%s: resume from %d, history starts after %d: %w", p.gvr, resumeRV, p.hist.since, ErrExpired)
		}
		for _, n := range replay {
			l.offer(n, now)
		}
		l.minRV = resumeRV
	case opts.SendInitialEvents:
		l.needSnapshot = true
	}
	if l.resync > 0 {
		l.nextResync = now.Add(l.resync)
		p.resyncing[l] = struct{}{}
	}
	if nss := l.filter.namespaces(); nss != nil {
		for _, ns := range nss {
			set := p.byNamespace[ns]
			if set == nil {
				set = map[*Listener]struct{}{}
				p.byNamespace[ns] = set
			}
			set[l] = struct{}{}
		}
	} else {
		p.allNS[l] = struct{}{}
	}
	p.metrics.listeners.Inc()
	if l.needSnapshot || l.ring.Len() > 0 {
		l.signal()
	}
	return l, nil
}

func (p *processor) removeListener(l *Listener) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l.removed {
		return
	}
	l.removed = true
	delete(p.allNS, l)
	for _, ns := range l.filter.namespaces() {
		if set := p.byNamespace[ns]; set != nil {
			delete(set, l)
			if len(set) == 0 {
				delete(p.byNamespace, ns)
			}
		}
	}
	delete(p.resyncing, l)
	p.metrics.listeners.Dec()
}

// resyncTick marks listeners whose resync period has elapsed.
func (p *processor) resyncTick(now time.Time) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for l := range p.resyncing {
		l.mu.Lock()
		due := !now.Before(l.nextResync)
		if due {
			l.nextResync = now.Add(l.resync)
			if !l.needSnapshot {
				l.resyncDue = true
			}
		}
		l.mu.Unlock()
		if due {
			l.signal()
		}
	}
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
	obj, ok, _ := p.store.GetByKey(key)
	if !ok {
		return nil, false
	}
	return obj.(*Object), true
}
