// Package demo keeps a Kubernetes cluster busy so that kubegate has
// something to show: without kubelets, controllers or users, a bare
// kube-apiserver emits no events.
//
// Run creates namespaces demo-1..N holding Deployments, ConfigMaps, Pods
// and Widgets (a custom resource whose CRD it installs), then changes them
// at a steady rate, playing the parts a real cluster would: the kubelet
// (pod status, restarts), the deployment controller (deployment status), a
// widget controller (spec and status) and users (labels, config). Every
// write goes through the apiserver, so watchers see ordinary ADDED,
// MODIFIED and DELETED events.
package demo
