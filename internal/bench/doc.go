// Package bench measures kubegate against kube-apiserver on one workload in
// one run. It starts its own etcd and kube-apiserver (internal/controlplane)
// and the gateway binary as a subprocess, so the CPU time and memory of
// both serving processes come from /proc. It creates Pods of realistic size
// and ConfigMaps, writes updates at a fixed rate, and drives the same
// subscribers through the gateway (/ws) and straight to kube-apiserver
// (JSON and protobuf watches). Every measurement is a Figure; Table prints
// them with the ratio gateway/apiserver.
//
// cmd/kubegate-bench is the command-line front end; the smoke test in this
// package runs every scenario at tiny sizes so the harness cannot rot.
package bench
