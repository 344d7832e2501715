// Package jsclient holds the JavaScript client of the kubegate.v1
// WebSocket protocol (kubegate.js, an ES module with its declarations in
// kubegate.d.ts; see README.md). The Go side only embeds the module, so
// the dashboard (package web) serves this one copy of it at /kubegate.js.
//
// client_test.go runs the client's own tests (test/*.test.js, Node's
// built-in test runner) against a real gateway and kube-apiserver.
package jsclient

import _ "embed"

// Module is kubegate.js, served as is (no build step).
//
//go:embed kubegate.js
var Module []byte
