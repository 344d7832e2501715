// Package harness runs the processes that kubegate's load tools measure
// and reads what they use: the gateway binary, started from a
// config.Config written to a file (the one way the tools configure it);
// CPU time and memory of any process from /proc (procfs); a server's
// Prometheus /metrics (expfmt); perf profiles; and the machine the
// figures come from.
//
// cmd/kubegate-bench's scenarios (package scenario) and the soak
// (internal/soak) share it, so both start and read the gateway the same
// way. What it reads is Linux's (/proc), though it builds everywhere.
package harness
