// Package faults holds the gateway's fault tests: a control plane of the
// package's own whose kube-apiserver and etcd are stopped and restarted,
// whose history is compacted, and which is reached through proxies that
// black-hole connections or answer 429/500. The promises they check are
// listed in docs/reliability.md.
package faults
