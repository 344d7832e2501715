// Package webhook pushes resource events to HTTP receivers.
//
// Each configured webhook gets one informer listener per watched resource
// (internal/informer, OverflowCollapse policy) and one delivery goroutine
// that turns notifications into signed POSTs (CloudEvents 1.0 structured
// JSON or Kubernetes watch-event JSON), retried with backoff. When a
// listener's backlog cannot be collapsed within its bound, or an event runs
// out of retries, the listener is reset and the receiver gets reset and
// snapshot.end events around the current state, from which it learns what
// was deleted meanwhile (docs/webhooks.md). Requests are signed per the
// Standard Webhooks specification; Verify is the receiver-side check.
// Configuration comes from Spec and may be replaced at run time
// with Manager.Apply (SIGHUP in cmd/gateway).
package webhook
