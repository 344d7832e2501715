// Package scenario measures kubegate against kube-apiserver on one
// workload in one run: it is the body of cmd/kubegate-bench. It starts
// its own etcd and kube-apiserver (internal/controlplane) and the gateway
// binary as a subprocess (bench/harness, from a config.Config), creates
// Pods of realistic size and ConfigMaps (bench/workload), writes updates
// at a fixed rate, and drives the same subscribers through the gateway
// (/ws, REST) and straight to kube-apiserver (JSON and protobuf watches
// and lists). Every measurement is a Figure; Table prints them with the
// ratio gateway/apiserver, and Goals judges them against the project's
// goals.
//
// The packages live at bench/, outside internal/, because kubegate-bench
// is a tool users run against their own builds, and its parts (harness,
// workload, scenarios) are what a reader of docs/benchmarks.md looks up;
// they make no promise of a stable Go API. Product packages never import
// them. The smoke test in this package runs every scenario at tiny sizes
// so the harness cannot rot.
package scenario
