// Package gateway builds and runs kubegate from its configuration: the
// informers (internal/informer), the live tables (internal/livequery),
// the webhooks (internal/webhook), authentication and authorization
// (internal/auth) and the HTTP server (internal/http) with its WebSocket
// endpoint (internal/ws) and the dashboard (web).
//
// It is the one place where those parts are wired together, as
// controller-runtime's manager.New is for a controller: cmd/gateway and
// every end-to-end test build the gateway with New, so that a test runs
// what production runs, with production's limits. What a configuration
// file cannot say (an apiserver client, a listener, hooks for tests) is
// passed in Options.
package gateway
