package informer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
)

// apiHealth tracks whether requests to the apiserver succeed, so Ready can
// report a cache that has gone stale: informers keep serving their last
// state while they retry, and Synced never turns false again.
//
// Every request through the manager's clients passes its round tripper. A
// transport error (or a watch stream breaking) starts or continues an
// outage of the whole apiserver. A 5xx or 429 answer to one resource's list
// or watch counts against that resource only, and shows the apiserver
// reachable: an aggregated API that is down or a CRD whose conversion
// webhook fails must not make every other resource look stale. Other 5xx
// and 429 answers (discovery, for example) count as an outage. Any other
// answer, even an error status, ends the outage (and the resource's
// failure). Watches that stall without an error are caught by the HTTP/2
// health check (see docs/reliability.md), which fails the stream and so
// the next request.
type apiHealth struct {
	clock clock.PassiveClock
	// errors counts failed requests by code: an HTTP status, "transport"
	// or "stream" (a watch that broke mid-body). Nil counts nothing.
	errors *prometheus.CounterVec

	// mu guards global and byPath.
	mu     sync.Mutex
	global healthState
	// byPath holds resources whose last answer was a 5xx or 429, keyed by
	// collection path (see collectionPath).
	byPath map[string]*healthState
}

type healthState struct {
	failingSince time.Time // zero while the last request succeeded
	lastErr      error
}

func (s *healthState) fail(now time.Time, err error) {
	if s.failingSince.IsZero() {
		s.failingSince = now
	}
	s.lastErr = err
}

func (h *apiHealth) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		switch {
		case err != nil:
			if req.Context().Err() == nil && !errors.Is(err, context.Canceled) {
				h.count("transport")
				h.failed(err)
			}
		case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
			h.count(strconv.Itoa(resp.StatusCode))
			err := fmt.Errorf("%s %s: HTTP %d", req.Method, req.URL.Path, resp.StatusCode)
			if p := collectionPath(req.URL.Path); p != "" {
				h.resourceFailed(p, err)
			} else {
				h.failed(err)
			}
		default:
			h.succeeded(collectionPath(req.URL.Path))
			resp.Body = &healthBody{ReadCloser: resp.Body, h: h, req: req}
		}
		return resp, err
	})
}

// collectionPath returns path if it names a cluster-wide resource
// collection, as the informers list and watch them ("/api/v1/pods",
// "/apis/apps/v1/deployments"), else "".
func collectionPath(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) == 3 && parts[0] == "api", len(parts) == 4 && parts[0] == "apis":
		return path
	}
	return ""
}

// resourcePath is the collection path the informer of gvr requests.
func resourcePath(gvr schema.GroupVersionResource) string {
	if gvr.Group == "" {
		return "/api/" + gvr.Version + "/" + gvr.Resource
	}
	return "/apis/" + gvr.Group + "/" + gvr.Version + "/" + gvr.Resource
}

// healthBody reports a stream (a watch) that breaks mid-body, for example
// when the HTTP/2 health check gives up on a connection that stopped
// answering, so the outage counts from then and not from the next request.
type healthBody struct {
	io.ReadCloser
	h   *apiHealth
	req *http.Request
}

func (b *healthBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && b.req.Context().Err() == nil && !errors.Is(err, context.Canceled) {
		b.h.count("stream")
		b.h.failed(fmt.Errorf("%s %s: %w", b.req.Method, b.req.URL.Path, err))
	}
	return n, err
}

func (h *apiHealth) count(code string) {
	if h.errors != nil {
		h.errors.WithLabelValues(code).Inc()
	}
}

// failed records an apiserver-wide failure.
func (h *apiHealth) failed(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.global.fail(h.clock.Now(), err)
}

// resourceFailed records a failed answer to one resource's request; the
// apiserver answered, so it is reachable.
func (h *apiHealth) resourceFailed(path string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.global = healthState{}
	if h.byPath == nil {
		h.byPath = map[string]*healthState{}
	}
	s, ok := h.byPath[path]
	if !ok {
		s = &healthState{}
		h.byPath[path] = s
	}
	s.fail(h.clock.Now(), err)
}

// succeeded records an answer: the apiserver is reachable, and the
// resource at path (if any) answers again.
func (h *apiHealth) succeeded(path string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.global = healthState{}
	if path != "" {
		delete(h.byPath, path)
	}
}

// stale returns how long requests to the apiserver have been failing and
// the last error, or 0 and nil while it answers.
func (h *apiHealth) stale() (time.Duration, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.since(h.global)
}

// staleResource is stale for the answers to one resource's requests.
func (h *apiHealth) staleResource(path string) (time.Duration, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.byPath[path]
	if !ok {
		return 0, nil
	}
	return h.since(*s)
}

func (h *apiHealth) since(s healthState) (time.Duration, error) {
	if s.failingSince.IsZero() {
		return 0, nil
	}
	return h.clock.Since(s.failingSince), s.lastErr
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
