package informer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// Options configures a Manager. Zero fields take the defaults given.
type Options struct {
	// Config reaches the apiserver with the gateway's own identity. Required.
	Config *rest.Config
	// Resources are started by Start and gate readiness: Ready fails until
	// they have synced, and while their requests fail. Others start on
	// first use and are reported by Status but do not gate readiness, so
	// one client asking for a resource that cannot sync (an aggregated API
	// that is down, say) does not take the gateway out of service. Names
	// as kubectl accepts them.
	//
	// A resource of Resources that the apiserver stops serving (its
	// CustomResourceDefinition is deleted) is ended like any other (see
	// Manager) and no longer gates readiness: there is nothing to be
	// stale about. The manager looks it up again every
	// DiscoveryRefreshInterval and, once it is served again, starts it
	// again; it then gates readiness again until it has synced.
	Resources []string
	// KeepManagedFields keeps metadata.managedFields in cached objects.
	// Default false: they are stripped, as they are large and of no use to
	// readers.
	KeepManagedFields bool
	// MinResync is the shortest resync period a listener may ask for;
	// shorter requests are raised to it. Default 5s.
	MinResync time.Duration
	// ResyncCheckPeriod is how often resync schedules are checked, so a
	// resync arrives up to this late. Default 1s.
	ResyncCheckPeriod time.Duration
	// HistoryEvents bounds each resource's change history (used to resume
	// listeners) in changes. Default 10000.
	HistoryEvents int
	// HistoryBytes bounds each resource's history in object bytes.
	// Default 64 MiB.
	HistoryBytes int64
	// QueueDeltas bounds each resource's queue between the reflector and
	// the processor, in deltas (a watch event, a bookmark or a whole
	// list). At the bound the reflector stops reading the watch until the
	// processor catches up; see boundedFIFO. Default 1000.
	QueueDeltas int
	// DiscoveryRefreshInterval is the minimum time between discovery
	// refreshes, triggered by unknown resource names or by requests for
	// the discovery the gateway serves (ServerResources), and how often
	// WaitForResource looks a name up. Default 5s.
	DiscoveryRefreshInterval time.Duration
	// StaleAfter is how long requests to the apiserver may keep failing
	// (transport errors, or 5xx and 429 answers to the lists and watches
	// of a resource in Resources) before Ready reports the caches stale.
	// Informers keep serving their last state meanwhile. Default 30s.
	StaleAfter time.Duration
	// Logger defaults to a no-op logger.
	Logger *zap.Logger
	// Registerer receives the manager's metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// OnStart, if set, is called each time a resource's informer has
	// started (at Start for Resources, on first use, and again when a
	// configured resource that went away is served again), before it
	// has synced, with whether the resource is one of Resources. It must
	// not block.
	OnStart func(r *Resource, configured bool)

	health *apiHealth // set by withDefaults

	// Test hooks.
	clock     clock.WithTicker
	rest      rest.Interface
	discovery discovery.DiscoveryInterface
	// canList checks the gateway may list and watch a resource before its
	// informer starts. Default: accessCheck's SelfSubjectAccessReview.
	canList func(context.Context, schema.GroupVersionResource) error
	// tablePageSize is the limit of each page of a Table list. Default
	// 500.
	tablePageSize int
}

func (o Options) withDefaults() (Options, error) {
	if o.MinResync <= 0 {
		o.MinResync = 5 * time.Second
	}
	if o.ResyncCheckPeriod <= 0 {
		o.ResyncCheckPeriod = time.Second
	}
	if o.HistoryEvents <= 0 {
		o.HistoryEvents = 10000
	}
	if o.HistoryBytes <= 0 {
		o.HistoryBytes = 64 << 20
	}
	if o.QueueDeltas <= 0 {
		o.QueueDeltas = 1000
	}
	if o.DiscoveryRefreshInterval <= 0 {
		o.DiscoveryRefreshInterval = 5 * time.Second
	}
	if o.StaleAfter <= 0 {
		o.StaleAfter = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.clock == nil {
		o.clock = clock.RealClock{}
	}
	o.health = &apiHealth{clock: o.clock}
	if o.Config != nil {
		cfg := rest.CopyConfig(o.Config)
		cfg.Wrap(o.health.wrap)
		o.Config = cfg
	}
	if o.rest == nil || o.discovery == nil || o.canList == nil {
		if o.Config == nil {
			return o, errors.New("informer: Options.Config is required")
		}
		cs, err := kubernetes.NewForConfig(o.Config)
		if err != nil {
			return o, fmt.Errorf("informer: client: %w", err)
		}
		if o.rest == nil {
			if o.rest, err = newRESTClient(o.Config); err != nil {
				return o, fmt.Errorf("informer: REST client: %w", err)
			}
		}
		if o.discovery == nil {
			o.discovery = cs.Discovery()
		}
		if o.canList == nil {
			o.canList = newAccessCheck(cs.AuthorizationV1().SelfSubjectAccessReviews(), o.Logger, o.Config.Host).canList
		}
	}
	return o, nil
}

// Manager owns one upstream (reflector, queue, processor) per started
// resource. Upstreams start on first use (or at Start for configured
// resources) and run until Start's context ends; each runs under its own
// context, and the Manager joins their goroutines when it stops.
//
// Upstreams are not stopped when idle: re-listing on the next use costs
// the apiserver more than the memory saved. Limit what is served with
// Options.Resources and the gateway's RBAC instead.
//
// An upstream is stopped when the apiserver no longer serves its
// resource. A 404 to a list or watch alone does not say so (a proxy in
// the way may answer one), so the reflector's watch error handler asks
// discovery, fetched again after the 404, whether the resource is still
// listed. If it is not, the handler removes the resource from the
// manager (so the next use resolves its name again, and gets 404 while
// it stays away) and cancels the upstream's context. The upstream's
// goroutine, once client-go's controller has returned, hands the
// processor the deltas still queued (the deletions that came before the
// end) and ends the processor: every listener pops Ended after what it
// holds. Resources of Options.Resources are then waited for (see
// WaitForResource) and started again when served.
type Manager struct {
	opts     Options
	log      *zap.Logger
	resolver *resolver
	metrics  *metrics
	// ctx is the parent of every upstream's context; shutdown cancels it
	// and waits for wg, which counts the upstreams' controllers.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// mu guards resources, gating, absent, bootPending and stopped.
	mu        sync.Mutex
	resources map[schema.GroupVersionResource]*Resource
	// gating holds the resources of Options.Resources, with the name
	// they were configured by; bootPending counts the names Start has
	// not started yet. absent holds those of them the apiserver no
	// longer serves, until they are started again.
	gating      map[schema.GroupVersionResource]string
	absent      map[schema.GroupVersionResource]*absence
	bootPending int
	stopped     bool
}

// absence is a configured resource the apiserver stopped serving.
type absence struct {
	name string // as configured
	err  error  // a *ResourceGoneError
}

// New builds a Manager. Nothing runs until Start or the first Resource call.
func New(opts Options) (*Manager, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	met := newMetrics(o.Registerer)
	o.health.errors = met.upstreamErrors
	m := &Manager{
		opts:      o,
		log:       o.Logger,
		resolver:  newResolver(o.discovery, float32(1/o.DiscoveryRefreshInterval.Seconds()), o.clock),
		metrics:   met,
		ctx:       ctx,
		cancel:    cancel,
		resources: map[schema.GroupVersionResource]*Resource{},
		gating:    map[schema.GroupVersionResource]string{},
		absent:    map[schema.GroupVersionResource]*absence{},
		// Until Start has started them, the configured resources are
		// not in resources: Ready must not report ready meanwhile.
		bootPending: len(o.Resources),
	}
	m.resolver.log = o.Logger
	if o.rest != nil {
		m.resolver.readCRD = restCRDReader(o.rest)
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(staleCollector{m})
	}
	return m, nil
}

// Start starts the configured resources and the resync schedule, blocks
// until ctx ends, then stops every upstream and returns once their
// goroutines have exited. It fails if a configured resource is unknown or
// may not be listed.
func (m *Manager) Start(ctx context.Context) error {
	defer m.shutdown()
	for _, name := range m.opts.Resources {
		// Gating from before the upstream starts, so that a resource
		// that goes away at once is waited for like any configured one.
		info, err := m.Resolve(ctx, name)
		if err == nil {
			m.mu.Lock()
			m.gating[info.GVR] = name
			m.mu.Unlock()
			_, err = m.ResourceFor(ctx, info)
		}
		if err != nil {
			return fmt.Errorf("configured resource %q: %w", name, err)
		}
		m.mu.Lock()
		m.bootPending--
		m.mu.Unlock()
	}
	ticker := m.opts.clock.NewTicker(m.opts.ResyncCheckPeriod)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-ticker.C():
			for _, r := range m.started() {
				r.proc.resyncTick(now)
			}
		}
	}
}

func (m *Manager) shutdown() {
	m.mu.Lock()
	m.stopped = true // no upstream starts after this
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
}

// Resolve maps a user-supplied name to a resource without starting it.
func (m *Manager) Resolve(ctx context.Context, name string) (*ResourceInfo, error) {
	return m.resolver.Resolve(ctx, name)
}

// Discovery returns the apiserver's discovery document (see Discovery
// for its order), fetched again at most every
// Options.DiscoveryRefreshInterval. With an error, the document returned
// (if any) is the last one fetched, or one that lacks the group versions
// the error names.
func (m *Manager) Discovery(ctx context.Context) (*Discovery, error) {
	return m.resolver.Discovery(ctx)
}

// Resource resolves name and returns its Resource, starting its informer
// if needed. It does not wait for the cache to sync: see WaitForSync.
func (m *Manager) Resource(ctx context.Context, name string) (*Resource, error) {
	info, err := m.Resolve(ctx, name)
	if err != nil {
		return nil, err
	}
	return m.ResourceFor(ctx, info)
}

// ResourceFor returns the Resource for a resolved resource, starting its
// informer if needed. Before starting it checks that the gateway may list
// and watch it, so a forbidden resource fails at once instead of never
// syncing.
func (m *Manager) ResourceFor(ctx context.Context, info *ResourceInfo) (*Resource, error) {
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return nil, ErrStopped
	}
	r, ok := m.resources[info.GVR]
	if !ok {
		r = &Resource{Info: info, initDone: make(chan struct{}), done: make(chan struct{}), errChanged: make(chan struct{})}
		m.resources[info.GVR] = r
	}
	m.mu.Unlock()
	if ok {
		select {
		case <-r.initDone:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if r.initErr != nil {
			return nil, r.initErr
		}
		return r, nil
	}

	r.initErr = m.startResource(ctx, r)
	if r.initErr != nil {
		m.mu.Lock()
		delete(m.resources, info.GVR) // let a later call try again
		m.mu.Unlock()
	}
	close(r.initDone)
	if r.initErr != nil {
		return nil, r.initErr
	}
	if m.opts.OnStart != nil {
		m.mu.Lock()
		_, configured := m.gating[info.GVR]
		m.mu.Unlock()
		m.opts.OnStart(r, configured)
	}
	return r, nil
}

func (m *Manager) startResource(ctx context.Context, r *Resource) error {
	gvr := r.Info.GVR
	if err := m.opts.canList(ctx, gvr); err != nil {
		return err
	}
	r.log = m.log.With(zap.String("resource", gvr.String()))
	r.proc = newProcessor(gvr, &m.opts, m.metrics.forResource(gvr))
	fields := r.Info.fields
	if fields == nil {
		fields = newSharedFields(builtinFieldSet(gvr.GroupResource()), false)
	}
	dec := newFieldDecoder(r.Info.GVK, m.opts.KeepManagedFields, fields.load().fields)
	lw := newListWatch(m.opts.rest, gvr, dec, r.log)
	if fields.crd && m.resolver.readCRD != nil {
		lw.fields, lw.namespaced, lw.keepManagedFields = fields, r.Info.Namespaced, m.opts.KeepManagedFields
		lw.readCRD = m.resolver.readCRD
	}
	if m.opts.tablePageSize > 0 {
		lw.pageSize = m.opts.tablePageSize
	}
	q := newBoundedFIFO(m.opts.QueueDeltas)
	q.listColumns = lw.listedColumns
	ctrl := newController(lw, q, r.proc, m.watchErrorHandler(r))
	r.synced = ctrl.HasSyncedChecker()
	r.warnings = lw.listedWarnings

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return ErrStopped
	}
	// Its own context, not ctx (the first caller's request).
	upCtx, cancel := context.WithCancel(m.ctx)
	r.cancel = cancel
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer cancel()
		ctrl.RunWithContext(upCtx)
		if err := r.goneErr(); err != nil {
			q.drain(r.proc.process)
			r.proc.end(err)
			close(r.done)
			r.log.Info("upstream stopped and listeners ended: the resource is no longer served")
			m.awaitReturn(r)
			return
		}
		close(r.done)
	}()
	r.log.Info("upstream started")
	return nil
}

// watchErrorHandler is r's reflector's error handler, run by the
// reflector between its attempts: it records the error (see
// Resource.watchError) and, on a 404, checks whether r is gone.
func (m *Manager) watchErrorHandler(r *Resource) cache.WatchErrorHandlerWithContext {
	return func(ctx context.Context, refl *cache.Reflector, err error) {
		gen := m.resolver.generation()
		r.watchError(ctx, refl, err)
		if apierrors.IsNotFound(err) {
			m.checkServed(ctx, r, gen, err)
		}
	}
}

// checkServed asks discovery, fetched after gen was read, whether r's
// resource is still served, and removes r if not. notFound is the 404
// that raised the question. Discovery that still lists the resource, or
// cannot be read, leaves r to its reflector, which retries with backoff
// and asks again at its next 404.
func (m *Manager) checkServed(ctx context.Context, r *Resource, gen uint64, notFound error) {
	gvr := r.Info.GVR
	served, err := m.resolver.served(ctx, gvr, gen)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			r.log.Warn("404 from the apiserver, and discovery could not be read to tell whether the resource is gone; retrying", zap.Error(err))
		}
		return
	case served:
		r.log.Warn("404 from the apiserver for a resource discovery still lists; retrying", zap.Error(notFound))
		return
	}
	gone := &ResourceGoneError{GVR: gvr, Err: notFound}
	r.setGone(gone)
	m.mu.Lock()
	if m.resources[gvr] == r {
		delete(m.resources, gvr)
	}
	if name, ok := m.gating[gvr]; ok {
		delete(m.gating, gvr)
		m.absent[gvr] = &absence{name: name, err: gone}
	}
	m.mu.Unlock()
	r.log.Warn("the apiserver no longer serves the resource: stopping its upstream and ending its listeners", zap.Error(notFound))
	// The controller stops once this handler returns; see startResource.
	r.cancel()
}

// awaitReturn waits, if r was configured (Options.Resources), until its
// name is served again and starts it again, gating readiness as before.
// It runs in r's upstream goroutine, after r ended, until the manager
// stops.
func (m *Manager) awaitReturn(r *Resource) {
	gvr := r.Info.GVR
	m.mu.Lock()
	a := m.absent[gvr]
	m.mu.Unlock()
	if a == nil {
		return // started on first use: the next use starts it
	}
	for {
		info, err := m.WaitForResource(m.ctx, a.name)
		if err != nil {
			return // the manager stopped
		}
		m.mu.Lock()
		m.gating[info.GVR] = a.name
		m.mu.Unlock()
		next, err := m.ResourceFor(m.ctx, info)
		m.mu.Lock()
		if err != nil {
			delete(m.gating, info.GVR)
		} else if m.absent[gvr] == a {
			delete(m.absent, gvr)
		}
		m.mu.Unlock()
		if err != nil {
			if !errors.Is(err, ErrStopped) {
				r.log.Warn("configured resource is served again but cannot be started; retrying", zap.String("name", a.name), zap.Error(err))
			}
			continue
		}
		next.log.Info("configured resource is served again: upstream started", zap.String("name", a.name))
		return
	}
}

// WaitForResource blocks until name resolves (as in Resolve) to a
// resource the apiserver serves, and returns it; or ctx's error. It
// looks the name up every Options.DiscoveryRefreshInterval, the first
// time one interval after the call, so it suits waiting for a resource
// that has gone away (see ResourceGoneError) to be served again. The
// lookups refresh discovery no more often than Resolve does.
func (m *Manager) WaitForResource(ctx context.Context, name string) (*ResourceInfo, error) {
	t := m.opts.clock.NewTimer(m.opts.DiscoveryRefreshInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C():
		}
		info, err := m.Resolve(ctx, name)
		if err == nil {
			return info, nil
		}
		if !isNoMatch(err) && ctx.Err() == nil {
			m.log.Debug("waiting for a resource: lookup failed", zap.String("name", name), zap.Error(err))
		}
		t.Reset(m.opts.DiscoveryRefreshInterval)
	}
}

// Started returns the Resource of gvr when its informer has been
// started, without starting it (see ResourceFor).
func (m *Manager) Started(gvr schema.GroupVersionResource) (*Resource, bool) {
	m.mu.Lock()
	r, ok := m.resources[gvr]
	m.mu.Unlock()
	if !ok {
		return nil, false
	}
	select {
	case <-r.initDone:
		return r, r.initErr == nil
	default:
		return nil, false
	}
}

func (m *Manager) started() []*Resource {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Resource, 0, len(m.resources))
	for _, r := range m.resources {
		select {
		case <-r.initDone:
			if r.initErr == nil {
				out = append(out, r)
			}
		default:
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Info.GVR.String() < out[j].Info.GVR.String() })
	return out
}

// Configured returns the started resources of Options.Resources that
// the apiserver serves, those that gate readiness, sorted by group,
// version and resource.
func (m *Manager) Configured() []*Resource {
	rs := m.started()
	m.mu.Lock()
	rs = slices.DeleteFunc(rs, func(r *Resource) bool {
		_, ok := m.gating[r.Info.GVR]
		return !ok
	})
	m.mu.Unlock()
	return slices.DeleteFunc(rs, func(r *Resource) bool { return r.goneErr() != nil })
}

// ResourceStatus is one resource's state for /readyz and status pages.
type ResourceStatus struct {
	Resource string `json:"resource"`
	// Gating is true for Options.Resources, which gate readiness.
	Gating bool `json:"gating"`
	// Gone is true for a resource of Options.Resources that the
	// apiserver no longer serves (Error says so). It does not gate
	// readiness until it is served and started again.
	Gone      bool `json:"gone,omitempty"`
	Synced    bool `json:"synced"`
	Objects   int  `json:"objects"`
	Listeners int  `json:"listeners"`
	// Error is the last list or watch error while not synced.
	Error string `json:"error,omitempty"`
	// FailingFor is how long the answers to this resource's requests have
	// been 5xx or 429, and FailingError the last one.
	FailingFor   time.Duration `json:"failingFor,omitempty"`
	FailingError string        `json:"failingError,omitempty"`
}

// Status reports every started resource, and the configured ones that
// are gone (see ResourceStatus.Gone).
func (m *Manager) Status() []ResourceStatus {
	var out []ResourceStatus
	for _, r := range m.started() {
		s := r.Status()
		m.mu.Lock()
		_, s.Gating = m.gating[r.Info.GVR]
		m.mu.Unlock()
		if d, err := m.opts.health.staleResource(resourcePath(r.Info.GVR)); err != nil {
			s.FailingFor, s.FailingError = d, err.Error()
		}
		out = append(out, s)
	}
	m.mu.Lock()
	for gvr, a := range m.absent {
		if m.resources[gvr] == nil {
			out = append(out, ResourceStatus{Resource: gvr.GroupResource().String(), Gating: true, Gone: true, Error: a.err.Error()})
		}
	}
	m.mu.Unlock()
	return out
}

// Ready returns nil once Start has started every resource of
// Options.Resources, they have synced, and neither the apiserver nor their
// own requests have been failing for longer than Options.StaleAfter; else
// an error naming the resources not synced (and why, when known) or the
// failure. Resources started on first use do not count (see
// Options.Resources).
func (m *Manager) Ready() error {
	m.mu.Lock()
	pending := m.bootPending
	m.mu.Unlock()
	if pending > 0 {
		return fmt.Errorf("starting: %d configured resources not started yet", pending)
	}
	d, err := m.opts.health.stale()
	return readiness(m.Status(), d, err, m.opts.StaleAfter)
}

// readiness is Ready's verdict on the resources' status and an outage of
// length failing ending with lastErr (0 and nil when there is none).
func readiness(status []ResourceStatus, failing time.Duration, lastErr error, staleAfter time.Duration) error {
	var missing, stale []string
	for _, s := range status {
		switch {
		case !s.Gating, s.Gone:
		case !s.Synced:
			msg := s.Resource
			if s.Error != "" {
				msg += " (" + s.Error + ")"
			} else if s.FailingError != "" {
				msg += " (" + s.FailingError + ")"
			}
			missing = append(missing, msg)
		case s.FailingFor > staleAfter:
			stale = append(stale, fmt.Sprintf("%s (failing for %s: %s)", s.Resource, s.FailingFor.Truncate(time.Second), s.FailingError))
		}
	}
	if len(missing) > 0 {
		// While client-go retries a request itself (a 429 or 5xx with
		// Retry-After, up to ten times) the informer has no error to
		// report yet; the failing requests say why it is not synced.
		if lastErr != nil {
			return fmt.Errorf("not synced: %v; requests to the apiserver have failed for %s: %v",
				missing, failing.Truncate(time.Second), lastErr)
		}
		return fmt.Errorf("not synced: %v", missing)
	}
	if failing > staleAfter {
		return fmt.Errorf("stale: requests to the apiserver have failed for %s: %v", failing.Truncate(time.Second), lastErr)
	}
	if len(stale) > 0 {
		return fmt.Errorf("stale: %v", stale)
	}
	return nil
}

// Resource is one served resource: its informer, cache and processor.
type Resource struct {
	Info *ResourceInfo

	initDone chan struct{} // closed when startResource has returned
	initErr  error

	log    *zap.Logger
	synced cache.DoneChecker
	proc   *processor
	// cancel stops the upstream. done is closed once the upstream's
	// goroutines have exited (and, if the resource is gone, its
	// listeners have been ended); the manager's shutdown waits for them
	// too.
	cancel context.CancelFunc
	done   chan struct{}

	// errMu guards lastErr, gone and errChanged.
	errMu   sync.Mutex
	lastErr error
	// gone is set when the apiserver no longer serves the resource (a
	// *ResourceGoneError); it never changes after.
	gone       error
	errChanged chan struct{} // closed and replaced when lastErr or gone is set

	// warnings returns the Warning headers' texts of the last list.
	warnings func() []string
}

// Warnings are the texts of the Warning headers kube-apiserver sent with
// the last list of the resource: a deprecated API's ("v1 Endpoints is
// deprecated in v1.33+; …"), which kube-apiserver sends with every
// request for the resource. The REST layer repeats them on its answers.
// The caller must not modify the slice.
func (r *Resource) Warnings() []string {
	if r.warnings == nil {
		return nil
	}
	return r.warnings()
}

// setGone records that the resource is gone, waking WaitForSync.
func (r *Resource) setGone(err error) {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	r.gone = err
	close(r.errChanged)
	r.errChanged = make(chan struct{})
}

// goneErr returns the *ResourceGoneError once the resource is gone, else
// nil.
func (r *Resource) goneErr() error {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	return r.gone
}

func (r *Resource) watchError(_ context.Context, _ *cache.Reflector, err error) {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		r.log.Debug("watch restarting", zap.Error(err))
		return
	}
	r.log.Warn("list/watch failed; retrying with backoff", zap.Error(err))
	r.errMu.Lock()
	r.lastErr = err
	close(r.errChanged)
	r.errChanged = make(chan struct{})
	r.errMu.Unlock()
}

func (r *Resource) err() (error, <-chan struct{}) {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	return r.lastErr, r.errChanged
}

// fatal reports errors that retrying will not fix soon.
func fatal(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsNotFound(err) ||
		apierrors.IsMethodNotSupported(err) || apierrors.IsBadRequest(err)
}

// WaitForSync blocks until the cache has synced. It returns early with the
// list error if listing fails in a way retrying will not fix soon
// (forbidden, unauthorized, not found), and with ctx's error (and the last
// list error, if any) when ctx ends first. A forbidden list is a
// *GatewayForbiddenError: it was the gateway's request, not the caller's.
// Once the resource is gone it returns its *ResourceGoneError, synced or
// not.
func (r *Resource) WaitForSync(ctx context.Context) error {
	for {
		err, changed := r.err()
		if gone := r.goneErr(); gone != nil {
			return gone
		}
		select {
		case <-r.synced.Done():
			return nil
		default:
		}
		if err != nil && apierrors.IsForbidden(err) {
			// The upstream refused the gateway's own list (an upstream
			// kubegate, which takes no access review first): the
			// client's request is not at fault, as with the check
			// ResourceFor makes.
			return &GatewayForbiddenError{GVR: r.Info.GVR, Verb: "list", Reason: err.Error()}
		}
		if err != nil && fatal(err) {
			return fmt.Errorf("list %s: %w", r.Info.GVR.GroupResource(), err)
		}
		select {
		case <-r.synced.Done():
			return nil
		case <-changed:
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("%s not synced: %w (last error: %v)", r.Info.GVR.GroupResource(), ctx.Err(), err)
			}
			return fmt.Errorf("%s not synced: %w", r.Info.GVR.GroupResource(), ctx.Err())
		}
	}
}

// Synced reports whether the cache has synced.
func (r *Resource) Synced() bool { return cache.IsDone(r.synced) }

// AddListener attaches a listener. The cache must have synced (see
// WaitForSync). It returns ErrExpired when opts.ResourceVersion is older
// than the history, and the *ResourceGoneError once the resource's
// listeners have been ended.
func (r *Resource) AddListener(opts ListenerOptions) (*Listener, error) {
	if opts.Wake == nil && opts.OnWake == nil {
		return nil, errors.New("informer: ListenerOptions.Wake or OnWake is required")
	}
	return r.proc.addListener(opts)
}

// List returns the cached objects matching f, unsorted, and the
// resourceVersion they reflect. A nil f matches every object. The objects
// are shared and read-only.
func (r *Resource) List(f *Filter) ([]*Object, uint64) {
	if f == nil {
		f = &Filter{}
	}
	return r.proc.list(f)
}

// Columns returns the columns of the objects the resource's cache holds
// as of its last relist and changes (nil when it is not read as a Table);
// a relist with other columns changes it. Every object the cache holds
// has these Columns, and every change after the relist too: a change of
// columns (a CRD's printer columns edited) comes as a relist, whose
// objects have the new ones.
func (r *Resource) Columns() *Columns { return r.proc.columns.Load() }

// Get returns one cached object.
func (r *Resource) Get(namespace, name string) (*Object, bool) { return r.proc.get(namespace, name) }

// Status reports the resource's state.
func (r *Resource) Status() ResourceStatus {
	s := ResourceStatus{Resource: r.Info.GVR.GroupResource().String(), Synced: r.Synced()}
	s.Objects = r.proc.objectCount()
	s.Listeners = r.proc.listenerCount()
	if err, _ := r.err(); err != nil && !s.Synced {
		s.Error = err.Error()
	}
	return s
}
