package webhook

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"reflect"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"k8s.io/utils/clock"

	"kubegate/internal/informer"
)

// Resources is the part of *informer.Manager the webhooks use.
type Resources interface {
	Resolve(ctx context.Context, name string) (*informer.ResourceInfo, error)
	ResourceFor(ctx context.Context, info *informer.ResourceInfo) (*informer.Resource, error)
	// WaitForResource blocks until name is served, to attach a webhook's
	// listener again after its resource went away.
	WaitForResource(ctx context.Context, name string) (*informer.ResourceInfo, error)
}

// Options configures a Manager.
type Options struct {
	// Resources provides the informers. Required.
	Resources Resources
	// Webhooks is the configuration applied by Start.
	Webhooks []Spec
	// Source is the CloudEvents source of webhooks that set none, for
	// example the apiserver URL. Default "kubegate".
	Source string
	// MaxBytes bounds each listener's backlog in object bytes. Default
	// the informer's (16 MiB).
	MaxBytes int64
	// DrainTimeout bounds the final delivery attempts at shutdown.
	// Default 5s.
	DrainTimeout time.Duration
	// Logger is scoped per webhook. Default no logging.
	Logger *zap.Logger
	// Registerer receives the metrics. Default none.
	Registerer prometheus.Registerer
	// Clock times retries. Default the real clock.
	Clock clock.Clock

	// Test hooks.
	jitter func(time.Duration) time.Duration
	listen func(ctx context.Context, hook string, r Resource, opts informer.ListenerOptions) (*informer.ResourceInfo, source, error)
	// await blocks until the named resource is served. Default
	// Resources.WaitForResource.
	await func(ctx context.Context, name string) error
}

func (o Options) withDefaults() Options {
	if o.Source == "" {
		o.Source = "kubegate"
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.jitter == nil {
		o.jitter = func(d time.Duration) time.Duration {
			if d <= 0 {
				return 0
			}
			return rand.N(d + 1)
		}
	}
	return o
}

// Manager runs the configured webhooks: one hook goroutine per webhook.
// Apply replaces the configuration; webhooks whose configuration (and
// secret) did not change keep running with their queues.
type Manager struct {
	opts Options
	m    *metrics

	// applyMu serialises Apply and shutdown.
	applyMu sync.Mutex
	// mu guards ctx and hooks.
	mu    sync.Mutex
	ctx   context.Context // Start's; nil before Start and after it ends
	hooks map[string]*hook
}

// New returns a Manager; Start runs it.
func New(opts Options) (*Manager, error) {
	if opts.Resources == nil && opts.listen == nil {
		return nil, errors.New("webhook: Options.Resources is required")
	}
	opts = opts.withDefaults()
	return &Manager{opts: opts, m: newMetrics(opts.Registerer), hooks: map[string]*hook{}}, nil
}

// Start applies Options.Webhooks, runs the webhooks until ctx ends, then
// gives each at most DrainTimeout to deliver what it has taken, and
// returns once every hook goroutine has exited. It fails if the initial
// configuration cannot be applied (for example an unknown resource).
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	m.ctx = ctx
	m.mu.Unlock()
	err := m.Apply(ctx, m.opts.Webhooks)
	if err == nil {
		<-ctx.Done()
	} else if ctx.Err() != nil {
		err = nil // stopped while starting, not a failure
	}
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	m.mu.Lock()
	m.ctx = nil
	hooks := m.hooks
	m.hooks = map[string]*hook{}
	m.mu.Unlock()
	for _, h := range hooks {
		h.cancel()
	}
	for _, h := range hooks {
		<-h.done
	}
	return err
}

// Apply makes hooks the running configuration. It validates all of it and
// attaches the listeners of new or changed webhooks first; on any error
// nothing changes. Unchanged webhooks keep their goroutine and queue;
// changed ones restart (their undelivered events are dropped); removed
// ones stop. A webhook disabled by a 410 answer is enabled again only when
// its configuration changes.
func (m *Manager) Apply(ctx context.Context, hooks []Spec) error {
	if err := Validate(hooks); err != nil {
		return err
	}
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	m.mu.Lock()
	runCtx, old := m.ctx, m.hooks
	m.mu.Unlock()
	if runCtx == nil {
		return errors.New("webhook: manager is not running")
	}

	next := map[string]*hook{}
	var started []*hook
	fail := func(err error) error {
		for _, h := range started {
			for _, in := range h.inputs {
				in.src.Stop()
			}
		}
		return err
	}
	for i, c := range hooks {
		c = c.WithDefaults()
		secrets, err := c.Secrets()
		if err != nil {
			return fail(fmt.Errorf("webhooks[%d] (%s): secret: %w", i, c.Name, err))
		}
		if h := old[c.Name]; h != nil && reflect.DeepEqual(h.cfg, c) && reflect.DeepEqual(h.secrets, secrets) {
			next[c.Name] = h
			continue
		}
		h, err := m.newHook(ctx, c, secrets)
		if err != nil {
			return fail(fmt.Errorf("webhooks[%d] (%s): %w", i, c.Name, err))
		}
		started = append(started, h)
		next[c.Name] = h
	}

	// Stop what goes away, then start what is new.
	for name, h := range old {
		if next[name] != h {
			h.cancel()
			<-h.done
			if next[name] == nil {
				m.m.forget(name)
			} else {
				m.m.disabled.WithLabelValues(name).Set(0)
			}
			h.log.Info("webhook stopped by reload")
		}
	}
	for _, h := range started {
		hctx, cancel := context.WithCancel(runCtx)
		h.cancel = cancel
		h.m.disabled.WithLabelValues(h.name()).Set(0)
		go h.run(hctx)
		h.log.Info("webhook started", zap.String("url", redactURL(h.cfg.URL)), zap.Int("resources", len(h.inputs)))
	}
	m.mu.Lock()
	m.hooks = next
	m.mu.Unlock()
	return nil
}

func (m *Manager) newHook(ctx context.Context, c Spec, secrets [][]byte) (*hook, error) {
	o := m.opts
	h := &hook{
		cfg:     c,
		secrets: secrets,
		source:  c.Source,
		types:   map[informer.NotificationType]bool{},
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		clock:   o.Clock,
		jitter:  o.jitter,
		drain:   o.DrainTimeout,
		m:       m.m,
		log:     o.Logger.With(zap.String("webhook", c.Name)),
		client: &http.Client{
			Transport: newTransport(newAddressGuard(c.AllowAddresses, c.DenyAddresses)),
			// A redirect is answered as is: following it would send signed
			// events to a host nobody configured.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
	if h.source == "" {
		h.source = o.Source
	}
	for _, t := range c.EventTypes {
		for nt, name := range eventKinds {
			if name == t {
				h.types[nt] = true
			}
		}
	}
	listen := o.listen
	if listen == nil {
		listen = m.listen
	}
	await := o.await
	if await == nil {
		await = func(ctx context.Context, name string) error {
			_, err := o.Resources.WaitForResource(ctx, name)
			return err
		}
	}
	lopts := informer.ListenerOptions{
		ResyncPeriod: c.ResyncPeriod.Duration,
		Overflow:     informer.OverflowCollapse,
		MaxEvents:    c.MaxEvents,
		MaxBytes:     o.MaxBytes,
		Wake:         h.wake,
	}
	for j, r := range c.Resources {
		info, src, err := listen(ctx, c.Name, r, lopts)
		if err != nil {
			for _, in := range h.inputs {
				in.src.Stop()
			}
			return nil, fmt.Errorf("resources[%d] (%s): %w", j, r.Resource, err)
		}
		in := &input{entry: r, src: src}
		in.setInfo(info)
		// Once the resource is served again after it went away: a new
		// listener that starts with a reset, so that the receiver is
		// sent the current objects between reset and snapshot.end.
		in.reattach = func(ctx context.Context) (*informer.ResourceInfo, source, error) {
			if err := await(ctx, r.Resource); err != nil {
				return nil, nil, err
			}
			info, src, err := listen(ctx, c.Name, r, lopts)
			if err != nil {
				return nil, nil, err
			}
			src.Reset()
			return info, src, nil
		}
		h.inputs = append(h.inputs, in)
		if k := overlapping(h.inputs); k >= 0 {
			for _, in := range h.inputs {
				in.src.Stop()
			}
			return nil, fmt.Errorf("resources[%d] (%s): overlaps resources[%d] (%s) in %s: "+
				"list a resource once for all namespaces or once per namespace, so that a reset names the objects it replaces",
				j, r.Resource, k, c.Resources[k].Resource, h.inputs[k].collection)
		}
	}
	h.revived = make(chan revival, len(h.inputs))
	return h, nil
}

// overlapping returns the index of an earlier input that may select the
// same objects as the last one, or -1. A receiver reconciles a reset by
// collection, so two entries whose collections meet (the same resource in
// the same namespace, or one of them in all namespaces) could not tell
// which objects each snapshot replaces.
func overlapping(inputs []*input) int {
	last := inputs[len(inputs)-1]
	for k, in := range inputs[:len(inputs)-1] {
		if in.info.GVR == last.info.GVR && (in.namespace == last.namespace || in.namespace == "" || last.namespace == "") {
			return k
		}
	}
	return -1
}

// listen attaches an informer listener for one configured resource.
func (m *Manager) listen(ctx context.Context, _ string, r Resource, opts informer.ListenerOptions) (*informer.ResourceInfo, source, error) {
	info, err := m.opts.Resources.Resolve(ctx, r.Resource)
	if err != nil {
		return nil, nil, err
	}
	opts.Filter, err = informer.ParseFilter(info, r.Namespace, r.LabelSelector, r.FieldSelector)
	if err != nil {
		return nil, nil, err
	}
	res, err := m.opts.Resources.ResourceFor(ctx, info)
	if err != nil {
		return nil, nil, err
	}
	if err := res.WaitForSync(ctx); err != nil {
		return nil, nil, err
	}
	l, err := res.AddListener(opts)
	if err != nil {
		return nil, nil, err
	}
	return info, l, nil
}
