package auth

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts authentication and authorization decisions, cache hits
// and rate-limited requests. A nil *Metrics records nothing, so every
// Options.Metrics field is optional.
type Metrics struct {
	authn        *prometheus.CounterVec
	authz        *prometheus.CounterVec
	cache        *prometheus.CounterVec
	reviews      *prometheus.CounterVec
	rateLimited  *prometheus.CounterVec
	queueRefused *prometheus.CounterVec
	queueWait    prometheus.Histogram
	suppressed   *prometheus.CounterVec
}

// NewMetrics registers the auth metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		authn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubegate_auth_authentications_total",
			Help: "Authentication attempts by credential transport (header, protocol, cookie, none, login) and result (success, failure, error, refused, limited).",
		}, []string{"transport", "result"}),
		authz: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubegate_auth_authorizations_total",
			Help: "Authorization decisions by verb and result (allow, restricted, deny, error, unauthenticated).",
		}, []string{"verb", "result"}),
		cache: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubegate_auth_cache_lookups_total",
			Help: "Decision cache lookups by cache (token, access, namespaces) and result (hit, miss).",
		}, []string{"cache", "result"}),
		reviews: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubegate_auth_reviews_total",
			Help: "TokenReviews and SubjectAccessReviews sent to the apiserver, by kind and result (ok, error).",
		}, []string{"kind", "result"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubegate_auth_rate_limited_total",
			Help: "Requests answered 429, by limit (rate, inflight, failed_credentials, login).",
		}, []string{"limit"}),
		queueRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubegate_auth_review_queue_rejected_total",
			Help: "Reviews refused by the fair review queues, by reason (queue_full, timeout).",
		}, []string{"reason"}),
		queueWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kubegate_auth_review_queue_wait_seconds",
			Help:    "Time reviews waited in the fair review queues for a seat (those that waited).",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 8),
		}),
		suppressed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubegate_auth_log_suppressed_total",
			Help: "Log lines about failed reviews and authentications left out of the log and counted in the next line, by message.",
		}, []string{"message"}),
	}
	reg.MustRegister(m.authn, m.authz, m.cache, m.reviews, m.rateLimited, m.queueRefused, m.queueWait, m.suppressed)
	return m
}

func (m *Metrics) authnResult(transport, result string) {
	if m != nil {
		m.authn.WithLabelValues(transport, result).Inc()
	}
}

func (m *Metrics) authzResult(verb, result string) {
	if m != nil {
		m.authz.WithLabelValues(verb, result).Inc()
	}
}

func (m *Metrics) cacheLookup(cache string, hit bool) {
	if m != nil {
		r := "miss"
		if hit {
			r = "hit"
		}
		m.cache.WithLabelValues(cache, r).Inc()
	}
}

func (m *Metrics) review(kind string, err error) {
	if m != nil {
		r := "ok"
		if err != nil {
			r = "error"
		}
		m.reviews.WithLabelValues(kind, r).Inc()
	}
}

func (m *Metrics) limited(limit string) {
	if m != nil {
		m.rateLimited.WithLabelValues(limit).Inc()
	}
}

func (m *Metrics) reviewRefused(reason string) {
	if m != nil {
		m.queueRefused.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) reviewWaited(d time.Duration) {
	if m != nil {
		m.queueWait.Observe(d.Seconds())
	}
}

func (m *Metrics) logSuppressed(msg string) {
	if m != nil {
		m.suppressed.WithLabelValues(msg).Inc()
	}
}

// limitedLogin counts a login refused for its user's login rate, beside
// the refusal the RateLimiter itself counts as "rate".
func (m *Metrics) limitedLogin() {
	if m != nil {
		m.rateLimited.WithLabelValues("login").Inc()
	}
}
