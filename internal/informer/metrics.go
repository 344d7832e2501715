package informer

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// metrics are the manager's Prometheus collectors. Per-listener figures
// are aggregated per resource (listeners are unbounded in number and
// short-lived, so a label per listener would explode cardinality); the
// individual figures are available from Resource.ListenerStats.
type metrics struct {
	objects   *prometheus.GaugeVec
	events    *prometheus.CounterVec
	relists   *prometheus.CounterVec
	lastEvent *prometheus.GaugeVec
	listeners *prometheus.GaugeVec
	overflows *prometheus.CounterVec
	resets    *prometheus.CounterVec
	resyncs   *prometheus.CounterVec
	deferred  *prometheus.CounterVec
	synced    *prometheus.GaugeVec

	// upstreamErrors counts failed requests to the apiserver (see
	// apiHealth.errors).
	upstreamErrors *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	labels := []string{"group", "resource"}
	m := &metrics{
		objects: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "kubegate", Subsystem: "cache",
			Name: "objects", Help: "Objects in the cache."}, labels),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "kubegate", Subsystem: "cache",
			Name: "events_total", Help: "Changes received from the apiserver and distributed to listeners."}, labels),
		relists: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "kubegate", Subsystem: "cache",
			Name: "relists_total", Help: "Lists after the first: the upstream watch could not resume (410, or a restart) and the cache was replaced by a new list."}, labels),
		lastEvent: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "kubegate", Subsystem: "cache",
			Name: "last_event_timestamp_seconds", Help: "Unix time of the last change."}, labels),
		synced: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "kubegate", Subsystem: "cache",
			Name: "synced", Help: "1 when the resource's informer has synced."}, labels),
		listeners: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "kubegate", Subsystem: "listener",
			Name: "active", Help: "Listeners attached to the resource."}, labels),
		overflows: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "kubegate", Subsystem: "listener",
			Name: "overflows_total", Help: "Times a listener's backlog reached its bound."}, labels),
		resets: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "kubegate", Subsystem: "listener",
			Name: "resets_total", Help: "Backlogs discarded and replaced by a reset and snapshot."}, labels),
		resyncs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "kubegate", Subsystem: "listener",
			Name: "resyncs_total", Help: "Resyncs delivered to listeners."}, labels),
		deferred: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "kubegate", Subsystem: "listener",
			Name: "resyncs_deferred_total", Help: "Resyncs postponed because the client's resync budget was spent."}, labels),
		upstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "kubegate", Subsystem: "upstream",
			Name: "errors_total", Help: "Failed requests to the apiserver, by code: the HTTP status of a 5xx or 429 answer, \"transport\" when no answer came, or \"stream\" when a watch broke mid-stream."},
			[]string{"code"}),
	}
	if reg != nil {
		reg.MustRegister(m.objects, m.events, m.relists, m.lastEvent, m.synced, m.listeners, m.overflows, m.resets, m.resyncs, m.deferred,
			m.upstreamErrors)
	}
	return m
}

// resourceMetrics are the collectors of one resource, resolved once so
// the hot path does no label lookups.
type resourceMetrics struct {
	objects, lastEvent, listeners, synced prometheus.Gauge
	events, relists, overflows, resets    prometheus.Counter
	resyncs, resyncsDeferred              prometheus.Counter

	// forget deletes the resource's series, once it is no longer served:
	// a resource that is gone has no state to report, as an object gone
	// from kube-state-metrics has no series (and an alert on, say,
	// kubegate_cache_synced == 0 does not fire for it forever). Updates
	// to the collectors above after forget are not exported; a resource
	// served again starts new series.
	forget func()
}

func (m *metrics) forResource(gvr schema.GroupVersionResource) *resourceMetrics {
	l := prometheus.Labels{"group": gvr.Group, "resource": gvr.Resource}
	return &resourceMetrics{
		objects:   m.objects.With(l),
		lastEvent: m.lastEvent.With(l),
		listeners: m.listeners.With(l),
		synced:    m.synced.With(l),
		events:    m.events.With(l),
		relists:   m.relists.With(l),
		overflows: m.overflows.With(l),
		resets:    m.resets.With(l),
		resyncs:   m.resyncs.With(l),

		resyncsDeferred: m.deferred.With(l),

		forget: func() {
			for _, v := range []*prometheus.MetricVec{m.objects.MetricVec, m.events.MetricVec, m.relists.MetricVec,
				m.lastEvent.MetricVec, m.synced.MetricVec, m.listeners.MetricVec, m.overflows.MetricVec,
				m.resets.MetricVec, m.resyncs.MetricVec, m.deferred.MetricVec} {
				v.Delete(l)
			}
		},
	}
}

// staleDesc describes kubegate_cache_stale_seconds, which staleCollector
// computes at scrape time from the manager's apiHealth.
var staleDesc = prometheus.NewDesc("kubegate_cache_stale_seconds",
	"How long the requests the resource's cache depends on have been failing: the longer of an apiserver-wide outage "+
		"(transport errors) and the resource's own failed lists and watches (5xx or 429); 0 while they succeed. "+
		"The cache keeps serving its last state meanwhile; /readyz fails once a configured resource's passes 30s.",
	[]string{"group", "resource"}, nil)

// staleCollector exports kubegate_cache_stale_seconds for every started
// resource. Its labels are the other per-resource metrics' (group and
// resource, no version), so versions of one resource cached side by side
// share a series, which shows the stalest of them: a registry refuses
// two series with the same labels and fails the whole scrape.
type staleCollector struct{ m *Manager }

func (c staleCollector) Describe(ch chan<- *prometheus.Desc) { ch <- staleDesc }

func (c staleCollector) Collect(ch chan<- prometheus.Metric) {
	h := c.m.opts.health
	global, _ := h.stale()
	stale := map[schema.GroupResource]time.Duration{}
	for _, r := range c.m.started() {
		d, _ := h.staleResource(resourcePath(r.Info.GVR))
		gr := r.Info.GVR.GroupResource()
		stale[gr] = max(stale[gr], d, global)
	}
	for gr, d := range stale {
		ch <- prometheus.MustNewConstMetric(staleDesc, prometheus.GaugeValue, d.Seconds(), gr.Group, gr.Resource)
	}
}
