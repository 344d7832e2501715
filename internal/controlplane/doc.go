// Package controlplane runs a real Kubernetes control plane, etcd and
// kube-apiserver, on loopback for integration tests and for the local
// development cluster.
//
// The binaries come from an assets directory (see Options.AssetsDir) that
// hack/controlplane/build.sh fills from the Go module proxy. Start writes
// certificates, a service-account key, a static token file and the process
// logs into a data directory, starts both processes on free loopback ports
// and returns once kube-apiserver reports /readyz. Clients authenticate with
// bearer tokens: AdminConfig is a member of system:masters, UserConfig is any
// of Options.Users, and RBAC decides what those users may do.
//
// A control plane started with Options.Detach outlives its caller; its state
// (ports, pids, tokens) is kept in the data directory and Load reattaches to
// it, which is how hack/devcluster keeps a cluster up between commands.
package controlplane
