// Package workload is what kubegate's load tool writes to kube-apiserver:
// Pods shaped like a real web workload (NewPod, about 7 KB of JSON),
// spread over namespaces with ConfigMaps beside them (CreateWorkload),
// many small ConfigMaps in namespaces of their own
// (CreateSmallConfigMaps, for the scale scenario), and updates at a fixed rate, each recorded with the resourceVersion
// the apiserver gave it and when it was sent and acknowledged (Update),
// so receivers can match every event to its write.
package workload
