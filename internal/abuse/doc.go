// Package abuse holds the gateway's abuse tests: clients that open too
// many sockets, never read, read one byte at a time, send oversized
// frames or garbage, subscribe thousands of times, or connect and
// disconnect in a tight loop. The gateway runs in the test process, built
// by gateway.New as cmd/gateway builds it, with the default configuration
// (TokenReview, SubjectAccessReview, per-user rate limits, the WebSocket
// limits) against a real control plane, so the tests can read the
// runtime's goroutine and heap figures. The promises they check are listed in docs/reliability.md.
package abuse
