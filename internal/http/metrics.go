package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inflight prometheus.Gauge
	watches  *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubegate_http_requests_total",
			Help: "HTTP requests by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kubegate_http_request_duration_seconds",
			Help:    "Time to answer HTTP requests (streams count until they end).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"route", "method"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kubegate_http_requests_in_flight",
			Help: "HTTP requests being served, streams included.",
		}),
	}
	m.watches = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubegate_rest_watches",
		Help: "Open REST watch streams (NDJSON and server-sent events) by resource.",
	}, []string{"resource"})
	reg.MustRegister(m.requests, m.duration, m.inflight, m.watches)
	return m
}

// instrument counts requests by chi route pattern (never by raw path, so
// object names do not become label values).
func (m *metrics) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		m.inflight.Inc()
		defer m.inflight.Dec()
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		var apiRoute string
		next.ServeHTTP(ww, r.WithContext(context.WithValue(r.Context(), apiRouteKey{}, &apiRoute)))
		route := "other"
		if apiRoute != "" {
			route = apiRoute
		} else if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		}
		code := ww.Status()
		if code == 0 {
			code = http.StatusOK
		}
		m.requests.WithLabelValues(route, r.Method, strconv.Itoa(code)).Inc()
		m.duration.WithLabelValues(route, r.Method).Observe(time.Since(start).Seconds())
	})
}

type apiRouteKey struct{}

// setAPIRoute names the request's route for the metrics more precisely
// than chi's pattern (/api/*): a template such as
// "/apis/{group}/{version}/namespaces/{namespace}/{resource} watch". It
// never contains names from the request, so label values stay few.
func setAPIRoute(r *http.Request, route string) {
	if p, _ := r.Context().Value(apiRouteKey{}).(*string); p != nil {
		*p = route
	}
}
