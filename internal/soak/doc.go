// Package soak runs kubegate under mixed load for a long time and checks
// that it stays flat and loses nothing.
//
// Run starts a control plane of its own (package controlplane, so it may
// restart kube-apiserver), builds nothing itself but starts the gateway
// binary it is given against it, and then, for Options.Duration, drives:
//
//   - a workload creating, updating and deleting ConfigMaps across several
//     namespaces, paced by a ticker;
//   - WebSocket subscribers joining and leaving: cluster-wide, per
//     namespace, with a label selector, resuming with a resourceVersion,
//     reading slowly, never reading, and a non-admin user whose RoleBinding
//     is granted and revoked;
//   - a webhook receiver that fails for periods and recovers;
//   - kube-apiserver restarts.
//
// Every Options.Interval it samples the gateway process (RSS from /proc,
// heap and goroutines from its /metrics) and its own clients' counters into
// a Report, printed as a table and written as CSV and JSON. At the end it
// checks the pass conditions (see docs/reliability.md, "Soak"): every live
// subscriber's view and the webhook receiver's state equal the apiserver's
// list, goroutines return to their idle count, and memory and goroutines
// stayed flat.
package soak
