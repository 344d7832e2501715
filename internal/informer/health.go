package informer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// apiHealth tracks whether requests to the apiserver succeed, so Ready can
// report a cache that has gone stale: informers keep serving their last
// state while they retry, and Synced never turns false again.
//
// Every request through the manager's clients passes its round tripper. A
// response below 500 (other than 429) counts as reachable, even an error
// status, since the apiserver answered. A transport error, 5xx or 429 starts
// (or continues) an outage. Watches that stall without an error are caught
// by the HTTP/2 health check (see docs/reliability.md), which fails the
// stream and so the next request.
type apiHealth struct {
	clock clock.PassiveClock

	// mu guards failingSince and lastErr.
	mu           sync.Mutex
	failingSince time.Time // zero while the last request succeeded
	lastErr      error
}

func (h *apiHealth) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		switch {
		case err != nil:
			if req.Context().Err() == nil && !errors.Is(err, context.Canceled) {
				h.failed(err)
			}
		case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
			h.failed(fmt.Errorf("%s %s: HTTP %d", req.Method, req.URL.Path, resp.StatusCode))
		default:
			h.succeeded()
			resp.Body = &healthBody{ReadCloser: resp.Body, h: h, req: req}
		}
		return resp, err
	})
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
		b.h.failed(fmt.Errorf("%s %s: %w", b.req.Method, b.req.URL.Path, err))
	}
	return n, err
}

func (h *apiHealth) failed(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failingSince.IsZero() {
		h.failingSince = h.clock.Now()
	}
	h.lastErr = err
}

func (h *apiHealth) succeeded() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failingSince = time.Time{}
	h.lastErr = nil
}

// stale returns how long requests have been failing and the last error,
// or 0 and nil while the apiserver answers.
func (h *apiHealth) stale() (time.Duration, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failingSince.IsZero() {
		return 0, nil
	}
	return h.clock.Since(h.failingSince), h.lastErr
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
