package webhook

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the webhook metrics, labelled by webhook name.
type metrics struct {
	deliveries *prometheus.CounterVec   // webhook, outcome
	attempts   *prometheus.CounterVec   // webhook, result
	latency    *prometheus.HistogramVec // webhook
	queue      *prometheus.GaugeVec     // webhook
	overflows  *prometheus.CounterVec   // webhook, resolution (collapse, reset)
	resets     *prometheus.CounterVec   // webhook, reason
	disabled   *prometheus.GaugeVec     // webhook
}

// Delivery outcomes (label "outcome" of kubegate_webhook_deliveries_total).
const (
	outcomeDelivered  = "delivered"  // a 2xx answer
	outcomeRejected   = "rejected"   // a permanent failure (4xx other than 408/429, a redirect)
	outcomeSuperseded = "superseded" // retries exhausted: replaced by a reset and the current state
	outcomeShutdown   = "shutdown"   // undelivered when the gateway stopped
)

// Why a receiver is sent a reset (label "reason" of
// kubegate_webhook_resets_total).
const (
	reasonOverflow         = "overflow"          // a listener's backlog could not be collapsed within its bound
	reasonRetriesExhausted = "retries_exhausted" // an event ran out of maxAttempts or maxAge
	reasonResourceGone     = "resource_gone"     // the resource is no longer served: the snapshot is empty
	reasonResourceServed   = "resource_served"   // the resource is served again: a snapshot of its objects
)

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "kubegate", Subsystem: "webhook", Name: "deliveries_total",
			Help: "Events finished per webhook by outcome: delivered, rejected (permanent failure), superseded (retries exhausted; replaced by a reset and the current state), shutdown.",
		}, []string{"webhook", "outcome"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "kubegate", Subsystem: "webhook", Name: "attempts_total",
			Help: "HTTP delivery attempts per webhook by result: the status class (2xx, 3xx, 4xx, 5xx) or error.",
		}, []string{"webhook", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "kubegate", Subsystem: "webhook", Name: "attempt_duration_seconds",
			Help:    "Duration of one delivery attempt, request to response headers and bounded body read.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 10),
		}, []string{"webhook"}),
		queue: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "kubegate", Subsystem: "webhook", Name: "queue_length",
			Help: "Events waiting for delivery per webhook (taken and still buffered in its listeners).",
		}, []string{"webhook"}),
		overflows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "kubegate", Subsystem: "webhook", Name: "overflows_total",
			Help: "Times a webhook's backlog hit its bound, by resolution: collapse (latest state per object kept) or reset (re-sent as a snapshot).",
		}, []string{"webhook", "resolution"}),
		resets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "kubegate", Subsystem: "webhook", Name: "resets_total",
			Help: "Resets queued for a webhook's receiver, each followed by the current state and snapshot.end, by reason: overflow, retries_exhausted, resource_gone or resource_served.",
		}, []string{"webhook", "reason"}),
		disabled: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "kubegate", Subsystem: "webhook", Name: "disabled",
			Help: "1 when a webhook is disabled because its receiver answered 410 Gone; reload the configuration to enable it again.",
		}, []string{"webhook"}),
	}
	if reg != nil {
		reg.MustRegister(m.deliveries, m.attempts, m.latency, m.queue, m.overflows, m.resets, m.disabled)
	}
	return m
}

// forget removes a webhook's series once it is no longer configured.
func (m *metrics) forget(name string) {
	l := prometheus.Labels{"webhook": name}
	m.deliveries.DeletePartialMatch(l)
	m.attempts.DeletePartialMatch(l)
	m.latency.DeletePartialMatch(l)
	m.queue.DeletePartialMatch(l)
	m.overflows.DeletePartialMatch(l)
	m.resets.DeletePartialMatch(l)
	m.disabled.DeletePartialMatch(l)
}
