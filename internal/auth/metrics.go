package auth

import "github.com/prometheus/client_golang/prometheus"

// Metrics counts authentication and authorization decisions, cache hits
// and rate-limited requests. A nil *Metrics records nothing, so every
// Options.Metrics field is optional.
type Metrics struct {
	authn       *prometheus.CounterVec
	authz       *prometheus.CounterVec
	cache       *prometheus.CounterVec
	reviews     *prometheus.CounterVec
	rateLimited *prometheus.CounterVec
}

// NewMetrics registers the auth metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		authn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubegate_auth_authentications_total",
			Help: "Authentication attempts by credential transport (header, protocol, cookie, none) and result (success, failure, error, refused).",
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
			Help: "Requests answered 429, by limit (rate, inflight).",
		}, []string{"limit"}),
	}
	reg.MustRegister(m.authn, m.authz, m.cache, m.reviews, m.rateLimited)
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
