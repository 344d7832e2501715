package feed

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"

	"kubegate/internal/informer"
	"kubegate/internal/livequery"
)

// RowFunc builds the table row of one cached object. It is called once
// per change, on the feeder's goroutine; the row it returns is shared by
// the table and every window and must not be modified afterwards. An
// error keeps the object out of the table (its previous row, if any, is
// deleted) and is logged.
type RowFunc func(*informer.Object) (*livequery.Row, error)

// MetadataRow is the default RowFunc: namespace, name, labels, creation
// time, the object itself as the row's selectable fields and payload,
// and no cells.
func MetadataRow(o *informer.Object) (*livequery.Row, error) {
	return &livequery.Row{
		Namespace: o.Namespace,
		Name:      o.Name,
		Labels:    o.Labels,
		Fields:    o,
		Created:   o.CreationTimestamp.Time,
		RV:        o.RV,
		Object:    o,
	}, nil
}

// Schema is how one resource's table is built.
type Schema struct {
	// Table configures the table: its columns, sort keys and bounds.
	Table livequery.Options
	// Row builds the row of each object; nil is MetadataRow.
	Row RowFunc
	// Data is kept with the table for its windows' consumers
	// (Window.Data): for example what encodes a row's cells, which must
	// be the one that computed them.
	Data any
	// Stale, if set, reports that the schema no longer fits the
	// resource (its columns changed): the table then ends with
	// ErrSchemaChanged, and the next Open builds it afresh. Checked after
	// each batch of changes.
	Stale func() bool
}

// ErrSchemaChanged ends a table whose schema no longer fits its resource
// (Schema.Stale): 410 Gone, as what the table held is gone; the client
// opens its window again, on a table with the resource's columns now.
var ErrSchemaChanged = apierrors.NewGone("the resource's columns changed: open the window again for its new columns")

// ErrStopped wraps informer.ErrStopped (503, "the gateway is shutting
// down"): Open once Tables has stopped, and the end of the tables it
// held.
var ErrStopped = fmt.Errorf("live tables stopped: %w", informer.ErrStopped)

// Options configures Tables. The zero value is usable.
type Options struct {
	// Schema returns a resource's table options (columns, sort keys,
	// bounds), the function building its rows and what its windows'
	// consumers need to show them (Schema.Data). It is called, with no
	// lock held, when a resource's table is about to be created, with
	// the context of the Open that creates it. Default: livequery's zero
	// Options and MetadataRow.
	Schema func(context.Context, *informer.Resource) Schema
	// IdleGrace, when positive, is how long a table outlives its last
	// window before it is dropped. Default 0: a table is kept while its
	// resource is served, as its rows cost little beside the objects
	// they are computed from (and kept with), and a first window then
	// never waits for one to be built again.
	IdleGrace time.Duration
	// MinBacklog is the least bound, in notifications, of a feeder's
	// listener. The bound is max(MinBacklog, 4×objects) and grows with
	// the resource (see feeder). Default 4096.
	MinBacklog int
	// Logger defaults to a no-op logger.
	Logger *zap.Logger

	// Test hooks.
	clock clock.Clock
	// beforeDrain, if set, runs on the feeder's goroutine each time it is
	// woken, before it pops.
	beforeDrain func(*feeder)
}

func (o Options) withDefaults() Options {
	if o.Schema == nil {
		o.Schema = func(context.Context, *informer.Resource) Schema { return Schema{Row: MetadataRow} }
	}
	if o.MinBacklog <= 0 {
		o.MinBacklog = 4096
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.clock == nil {
		o.clock = clock.RealClock{}
	}
	return o
}

// Tables holds one live table per resource that has windows (or had
// within Options.IdleGrace), each kept by a feeder goroutine.
//
// Goroutines: one feeder per table, started by the first Open of its
// resource and counted in wg. A feeder exits when its table has been
// idle for the grace period, when its resource ends, or when Tables
// stops (Start's context ends); Start returns once every feeder has
// exited.
type Tables struct {
	opts Options
	log  *zap.Logger
	// ctx is the feeders' lifetime; Start cancels it when its own
	// context ends, then waits for wg.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// mu guards stopped, feeders and every feeder's refs.
	mu sync.Mutex
	// stopped is set once Start's context has ended: Open fails.
	stopped bool
	feeders map[schema.GroupVersionResource]*feeder
}

// New returns Tables. Open may be called before Start: feeders run until
// Start's context ends.
func New(opts Options) *Tables {
	o := opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Tables{opts: o, log: o.Logger, ctx: ctx, cancel: cancel, feeders: map[schema.GroupVersionResource]*feeder{}}
}

// Start blocks until ctx ends, then ends every table with ErrStopped
// and returns once their feeders have exited. Open fails from then on.
func (ts *Tables) Start(ctx context.Context) error {
	<-ctx.Done()
	ts.mu.Lock()
	ts.stopped = true // no feeder starts after this
	ts.mu.Unlock()
	ts.cancel()
	ts.wg.Wait()
	return nil
}

// Run runs Start in a goroutine, for an owner that stops the tables
// when it stops itself: the function it returns stops them and returns
// once they have.
func (ts *Tables) Run() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = ts.Start(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// Window is a livequery.Window on a resource's table. Close releases the
// table: the last Close of a resource's windows starts its idle grace.
type Window struct {
	*livequery.Window
	data    any
	once    sync.Once
	release func()
}

// Data returns the Schema.Data of the window's table.
func (w *Window) Data() any { return w.data }

// Close detaches the window and releases its table. Safe to call more
// than once.
func (w *Window) Close() {
	w.Window.Close()
	w.once.Do(w.release)
}

// Open returns a window on r's table, creating the table and starting
// its feeder if needed. It waits (bounded by ctx) for r's cache to sync
// and for the table to hold its first snapshot, so the window's first
// Pop is the resource as of a version, never a table being filled. Its
// errors: r's (WaitForSync, AddListener; a *informer.ResourceGoneError
// once r ended), the query's (*livequery.InvalidQueryError), ctx's, and
// ErrStopped.
func (ts *Tables) Open(ctx context.Context, r *informer.Resource, q livequery.Query) (*Window, error) {
	if err := r.WaitForSync(ctx); err != nil {
		return nil, err
	}
	f, err := ts.acquire(ctx, r)
	if err != nil {
		return nil, err
	}
	select {
	case <-f.ready:
	case <-f.done:
		// Ended or stopped before its first snapshot: the table says
		// why below, unless the feeder stopped with Tables.
		if f.table.Err() == nil {
			ts.release(f)
			return nil, ErrStopped
		}
	case <-ctx.Done():
		ts.release(f)
		return nil, ctx.Err()
	}
	lw, err := f.table.Open(ctx, q)
	if err != nil {
		ts.release(f)
		return nil, err
	}
	return &Window{Window: lw, data: f.data, release: func() { ts.release(f) }}, nil
}

// Warm builds r's table ahead of its first window: once r's cache has
// synced, its feeder starts, as the first Open would start it, and keeps
// the table with no window (see Options.IdleGrace). Warm returns at
// once; a table that exists already is left as it is. The build runs
// on Tables' goroutines and stops with them. If r cannot sync, nothing
// is built, and the first Open builds the table as usual.
func (ts *Tables) Warm(r *informer.Resource) {
	ts.mu.Lock()
	if ts.stopped {
		ts.mu.Unlock()
		return
	}
	ts.wg.Add(1) // under mu, with stopped false: Start has not begun to wait
	ts.mu.Unlock()
	go func() {
		defer ts.wg.Done()
		if err := r.WaitForSync(ts.ctx); err != nil {
			return
		}
		f, err := ts.acquire(ts.ctx, r)
		if err != nil {
			ts.log.Debug("live table not built ahead of its first window", zap.String("resource", r.Info.GVR.String()), zap.Error(err))
			return
		}
		ts.release(f)
	}()
}

// Built reports whether r's table holds its first snapshot, so that a
// window on r only builds its own view.
func (ts *Tables) Built(r *informer.Resource) bool {
	f := ts.feederOf(r)
	if f == nil {
		return false
	}
	select {
	case <-f.ready:
		return true
	default:
		return false
	}
}

// Ready returns nil once the table of each of rs is built (Built), else
// an error naming those that are not. It warms (Warm) a synced resource
// that has no table, so that a table ended with its schema (or one whose
// first build found the cache unsynced) is built again.
func (ts *Tables) Ready(rs []*informer.Resource) error {
	var building []string
	for _, r := range rs {
		if ts.Built(r) {
			continue
		}
		building = append(building, r.Info.GVR.GroupResource().String())
		if ts.feederOf(r) == nil && r.Synced() {
			ts.Warm(r)
		}
	}
	if len(building) > 0 {
		return fmt.Errorf("live tables not built yet: %v", building)
	}
	return nil
}

// feederOf returns the feeder of r's table, or nil: none, or one of a
// resource that has ended and come back (another *informer.Resource).
func (ts *Tables) feederOf(r *informer.Resource) *feeder {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.feederLocked(r)
}

// feederLocked is feederOf. Caller must hold ts.mu.
func (ts *Tables) feederLocked(r *informer.Resource) *feeder {
	if f := ts.feeders[r.Info.GVR]; f != nil && f.res == r {
		return f
	}
	return nil
}

// acquire returns r's feeder with one more reference, starting it if
// there is none. The schema of a new table is computed with no lock
// held: it may read other resources.
func (ts *Tables) acquire(ctx context.Context, r *informer.Resource) (*feeder, error) {
	if f, err := ts.acquireExisting(r); f != nil || err != nil {
		return f, err
	}
	sch := ts.opts.Schema(ctx, r)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if f, err := ts.acquireExistingLocked(r); f != nil || err != nil {
		return f, err // started meanwhile by another Open
	}
	// None, or one on a resource that has ended and come back, whose
	// feeder is about to see its end: it is replaced.
	f, err := ts.newFeeder(r, sch)
	if err != nil {
		return nil, err
	}
	f.refs = 1
	ts.feeders[r.Info.GVR] = f
	ts.wg.Add(1)
	go func() {
		defer ts.wg.Done()
		f.run(ts.ctx)
	}()
	return f, nil
}

func (ts *Tables) acquireExisting(r *informer.Resource) (*feeder, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.acquireExistingLocked(r)
}

// acquireExistingLocked returns r's running feeder with one more
// reference, or nil. Caller must hold ts.mu.
func (ts *Tables) acquireExistingLocked(r *informer.Resource) (*feeder, error) {
	if ts.stopped {
		return nil, ErrStopped
	}
	if f := ts.feederLocked(r); f != nil {
		f.refs++
		f.kick()
		return f, nil
	}
	return nil, nil
}

// release drops one reference to f; the feeder starts its idle grace at
// the last.
func (ts *Tables) release(f *feeder) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	f.refs--
	if f.refs == 0 {
		f.kick()
	}
}

// retire removes f from the registry (if onlyIdle, only while it has
// no window), so that the next Open starts another, and reports whether
// it did: the feeder must then exit.
func (ts *Tables) retire(f *feeder, onlyIdle bool) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if onlyIdle && f.refs > 0 {
		return false
	}
	if ts.feeders[f.res.Info.GVR] == f {
		delete(ts.feeders, f.res.Info.GVR)
	}
	return true
}

// idle reports whether f has no window.
func (ts *Tables) idle(f *feeder) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return f.refs == 0
}

// feeder keeps one resource's table equal to its cache. It owns one
// goroutine (run) and one listener at a time; it pops the listener's
// notifications in order and applies each to the table.
//
// The listener collapses its backlog on overflow (the latest state of
// each object, in the order of their last changes), which a table
// applies like any change. Collapsing holds at most one notification per
// object the backlog touched, about twice the objects in the worst case,
// so with a bound of 4×objects it never falls back to a reset; the bound
// is checked after every snapshot and, once the resource has grown past
// 3/4 of it, the listener is replaced by one sized for the new count (a
// snapshot whose Replace changes nothing that the table holds). A reset
// that happens anyway (a resource that grew fast between two snapshots)
// is a Replace. The byte bound is off: the ring holds pointers to
// objects the cache shares, and its length is bounded.
type feeder struct {
	ts    *Tables
	res   *informer.Resource
	table *livequery.Table
	row   RowFunc
	data  any // Schema.Data
	stale func() bool
	log   *zap.Logger

	// refs counts the windows (and Opens under way) holding the table.
	// Guarded by ts.mu.
	refs int

	// wake receives the listener's signals; refsChanged a signal when
	// refs may have reached or left 0. Both have capacity 1.
	wake        chan struct{}
	refsChanged chan struct{}
	// ready is closed once the first snapshot is in the table; done once
	// run has returned.
	ready chan struct{}
	done  chan struct{}

	// Owned by run.
	l          *informer.Listener
	maxEvents  int
	collecting bool // a snapshot is being received
	snapshot   []*informer.Object
	buf        []informer.Notification
	resets     int // listener resets seen, for logs and tests
	resizes    int // listeners replaced to raise the bound
}

// popChunk bounds one Pop, so the feeder checks for its end between
// chunks of a large snapshot.
const popChunk = 1024

// newFeeder attaches a feeder's listener to r. Caller must hold ts.mu.
func (ts *Tables) newFeeder(r *informer.Resource, sch Schema) (*feeder, error) {
	if sch.Row == nil {
		sch.Row = MetadataRow
	}
	f := &feeder{
		ts:          ts,
		res:         r,
		table:       livequery.NewTable(sch.Table),
		row:         sch.Row,
		data:        sch.Data,
		stale:       sch.Stale,
		log:         ts.log.With(zap.String("resource", r.Info.GVR.String())),
		wake:        make(chan struct{}, 1),
		refsChanged: make(chan struct{}, 1),
		ready:       make(chan struct{}),
		done:        make(chan struct{}),
	}
	if err := f.listen(r.Status().Objects); err != nil {
		return nil, err
	}
	return f, nil
}

// listen attaches a new listener sized for n objects, with a snapshot.
func (f *feeder) listen(n int) error {
	f.maxEvents = max(f.ts.opts.MinBacklog, 4*n)
	l, err := f.res.AddListener(informer.ListenerOptions{
		SendInitialEvents: true,
		Overflow:          informer.OverflowCollapse,
		MaxEvents:         f.maxEvents,
		MaxBytes:          math.MaxInt64,
		Wake:              f.wake,
		// A bookmark moves the table's version too (drain's
		// SetVersion): a quiet resource's sorted lists and windows
		// report the version the cache has reached, as its other lists
		// do, not their last change's.
		WakeOnProgress: true,
	})
	if err != nil {
		return fmt.Errorf("live table of %s: %w", f.res.Info.GVR.GroupResource(), err)
	}
	f.l = l
	f.collecting, f.snapshot = true, f.snapshot[:0]
	return nil
}

// kick signals run that refs changed. Never blocks.
func (f *feeder) kick() {
	select {
	case f.refsChanged <- struct{}{}:
	default:
	}
}

// run applies the listener's notifications until the table ends or has
// been idle for the grace period, then stops the listener.
func (f *feeder) run(ctx context.Context) {
	defer close(f.done)
	// No view build outlives the feeder: the table's end stops them, and
	// a table dropped idle has none anyone waits for.
	defer f.table.Wait()
	defer func() { f.l.Stop() }()
	var idle clock.Timer
	var idleC <-chan time.Time
	stopIdle := func() {
		if idle != nil {
			idle.Stop()
			idle, idleC = nil, nil
		}
	}
	defer stopIdle()
	for {
		select {
		case <-ctx.Done():
			f.ts.retire(f, false)
			f.table.End(ErrStopped)
			return
		case <-f.wake:
			if f.ts.opts.beforeDrain != nil {
				f.ts.opts.beforeDrain(f)
			}
			if ended := f.drain(); ended {
				return
			}
		case <-f.refsChanged:
			switch isIdle := f.ts.idle(f); {
			case isIdle && idle == nil && f.ts.opts.IdleGrace > 0:
				idle = f.ts.opts.clock.NewTimer(f.ts.opts.IdleGrace)
				idleC = idle.C()
			case !isIdle:
				stopIdle()
			}
		case <-idleC:
			idle, idleC = nil, nil
			if f.ts.retire(f, true) {
				f.log.Debug("live table dropped: no window for the idle grace period")
				return
			}
		}
	}
}

// drain pops and applies everything pending, and reports whether the
// table ended.
func (f *feeder) drain() (ended bool) {
	for {
		l := f.l
		f.buf = l.PopAtMost(f.buf[:0], popChunk)
		n := len(f.buf)
		for _, note := range f.buf {
			if f.apply(note) {
				clear(f.buf)
				return true
			}
			if f.l != l {
				// Resized: the rest is the old listener's, which the
				// new one's snapshot covers.
				n = popChunk
				break
			}
		}
		clear(f.buf)
		if n < popChunk {
			break
		}
	}
	if !f.collecting {
		if f.stale != nil && f.stale() {
			f.ts.retire(f, false)
			f.table.End(ErrSchemaChanged)
			f.log.Info("live table ended: its resource's columns changed")
			return true
		}
		// Bookmarks and the changes of the listener's last Pop: the
		// table is current up to the resource's progress.
		f.table.SetVersion(f.l.Progress())
	}
	return false
}

// apply applies one notification, and reports whether the table ended.
func (f *feeder) apply(n informer.Notification) (ended bool) {
	switch n.Type {
	case informer.Reset:
		f.resets++
		f.log.Info("live table's listener reset; the snapshot that follows replaces the table")
		f.collecting, f.snapshot = true, f.snapshot[:0]
	case informer.Added, informer.Modified:
		if f.collecting {
			f.snapshot = append(f.snapshot, n.Object)
			break
		}
		switch r := f.build(n.Object); {
		case r != nil:
			f.table.Upsert(r, n.RV)
		default:
			f.table.Delete(n.Object.Namespace, n.Object.Name, n.RV)
		}
	case informer.Deleted:
		f.table.Delete(n.Object.Namespace, n.Object.Name, n.RV)
	case informer.EndOfSnapshot:
		f.table.Replace(f.buildAll(f.snapshot), n.RV)
		count := len(f.snapshot)
		clear(f.snapshot)
		f.collecting, f.snapshot = false, f.snapshot[:0]
		select {
		case <-f.ready:
		default:
			close(f.ready)
		}
		if 4*count > 3*f.maxEvents {
			f.resize(count)
		}
	case informer.Ended:
		err := f.l.Err()
		f.ts.retire(f, false)
		f.table.End(err)
		f.log.Info("live table ended", zap.Error(err))
		return true
	}
	return false
}

// resize replaces the listener by one whose bound suits n objects.
func (f *feeder) resize(n int) {
	old := f.l
	if err := f.listen(n); err != nil {
		// The resource ended meanwhile: the old listener hands out
		// Ended after what it holds.
		f.log.Debug("live table's listener not resized", zap.Error(err))
		return
	}
	old.Stop()
	f.resizes++
	f.log.Info("live table's listener resized", zap.Int("objects", n), zap.Int("maxEvents", f.maxEvents))
}

// build returns o's row, or nil when the RowFunc fails.
// buildAll builds the rows of a snapshot's objects, on every CPU: a
// resource's first table computes (and keeps with each object version)
// every row at once.
func (f *feeder) buildAll(objs []*informer.Object) []*livequery.Row {
	rows := make([]*livequery.Row, len(objs))
	workers := min(runtime.GOMAXPROCS(0), max(len(objs)/256, 1))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(objs); i += workers {
				rows[i] = f.build(objs[i])
			}
		})
	}
	wg.Wait()
	return slices.DeleteFunc(rows, func(r *livequery.Row) bool { return r == nil })
}

func (f *feeder) build(o *informer.Object) *livequery.Row {
	r, err := f.row(o)
	if err != nil {
		f.log.Warn("object left out of the live table: its row cannot be built",
			zap.String("object", o.Key()), zap.Error(err))
		return nil
	}
	return r
}
