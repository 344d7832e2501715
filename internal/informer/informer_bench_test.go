package informer

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// benchPodJSON renders a Pod of realistic size (~7 KB of JSON, like a
// Deployment's Pod with a few containers, env, probes and status).
func benchPodJSON(ns, name string, rv uint64) []byte {
	env := make([]map[string]any, 0, 30)
	for i := range 30 {
		env = append(env, map[string]any{"name": fmt.Sprintf("SETTING_%02d", i), "value": strings.Repeat("v", 40)})
	}
	ctr := func(n string) map[string]any {
		return map[string]any{
			"name": n, "image": "registry.example.com/team/" + n + ":v1.2.3",
			"ports":          []any{map[string]any{"containerPort": 8080, "protocol": "TCP", "name": "http"}},
			"env":            env,
			"resources":      map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "128Mi"}, "limits": map[string]any{"memory": "256Mi"}},
			"readinessProbe": map[string]any{"httpGet": map[string]any{"path": "/readyz", "port": 8080}, "periodSeconds": 10},
			"volumeMounts":   []any{map[string]any{"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}},
		}
	}
	pod := map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{
			"name": name, "namespace": ns, "uid": "6c1f0d3e-1b7a-4c44-9d8e-" + fmt.Sprintf("%012d", rv),
			"resourceVersion": strconv.FormatUint(rv, 10), "creationTimestamp": "2026-11-23T07:00:00Z",
			"labels":      map[string]any{"app": "web", "pod-template-hash": "7d9f8c6b5", "tier": "frontend"},
			"annotations": map[string]any{"kubegate.io/stamp": "1700000000000000000"},
			"ownerReferences": []any{map[string]any{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f8c6b5",
				"uid": "0b5e2f8a-9c1d-4e7f-8a6b-3c2d1e0f9a8b", "controller": true, "blockOwnerDeletion": true}},
			"managedFields": []any{map[string]any{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
				"fieldsType": "FieldsV1", "fieldsV1": map[string]any{"f:metadata": map[string]any{"f:labels": map[string]any{".": map[string]any{}}}}}},
		},
		"spec": map[string]any{
			"containers": []any{ctr("app"), ctr("sidecar")}, "nodeName": "node-1", "serviceAccountName": "default",
			"restartPolicy": "Always", "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler",
			"volumes": []any{map[string]any{"name": "kube-api-access", "projected": map[string]any{"sources": []any{
				map[string]any{"serviceAccountToken": map[string]any{"path": "token", "expirationSeconds": 3607}}}}}},
		},
		"status": map[string]any{"phase": "Running", "podIP": "10.244.1.17", "hostIP": "172.18.0.2", "startTime": "2026-11-23T07:00:01Z",
			"conditions": []any{map[string]any{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-23T07:00:05Z"}}},
	}
	b, err := json.Marshal(pod)
	if err != nil {
		panic(err)
	}
	return b
}

var benchDecoder = newObjectDecoder(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, false, []string{"spec.nodeName", "status.phase"})

func benchPod(b testing.TB, ns, name string, rv uint64) *Object {
	o, err := benchDecoder.decode(benchPodJSON(ns, name, rv))
	if err != nil {
		b.Fatal(err)
	}
	return o
}

// benchProc is a synced processor holding n Pods spread over nsCount
// namespaces; every tenth Pod carries the label sel=yes.
func benchProc(b *testing.B, n, nsCount int) *processor {
	p, _ := testProc(&testing.T{}, nil)
	objs := make([]*Object, 0, n)
	for i := range n {
		o := benchPod(b, "ns-"+strconv.Itoa(i%nsCount), "pod-"+strconv.Itoa(i), uint64(i+1))
		if i%10 == 0 {
			o.Labels = map[string]string{"app": "web", "sel": "yes"}
		}
		objs = append(objs, o)
	}
	relist(b, p, uint64(n), objs...)
	return p
}

// BenchmarkFanout measures the processor's cost per event delivered to N
// listeners. filter=broad: every listener sees every event;
// filter=selective: each listener watches one of 100 namespaces, so about
// N/100 listeners match. drain=1: every listener drains after each event,
// as live sockets do; drain=64: after every 64 events, so backlogs build.
func BenchmarkFanout(b *testing.B) {
	for _, drainEvery := range []int{1, 64} {
		for _, filter := range []string{"broad", "selective"} {
			for _, n := range []int{1, 100, 1000} {
				b.Run(fmt.Sprintf("drain=%d/filter=%s/listeners=%d", drainEvery, filter, n), func(b *testing.B) {
					p := benchProc(b, 100, 100)
					wake := make(chan struct{}, 1)
					ls := make([]*Listener, n)
					for i := range ls {
						f := Filter{}
						if filter == "selective" {
							f.Namespace = "ns-" + strconv.Itoa(i%100)
						}
						l, err := p.addListener(ListenerOptions{Filter: f, Wake: wake, MaxEvents: 1 << 20, MaxBytes: 1 << 40})
						if err != nil {
							b.Fatal(err)
						}
						ls[i] = l
					}
					defer func() {
						for _, l := range ls {
							l.Stop()
						}
					}()
					pods := make([]*Object, 100)
					for i := range pods {
						pods[i] = benchPod(b, "ns-"+strconv.Itoa(i), "pod-"+strconv.Itoa(i), 1)
					}
					rv := uint64(1000)
					buf := make([]Notification, 0, 16)
					delivered := 0
					i := 0
					for b.Loop() {
						old := pods[i%100]
						o := old.DeepCopyObject().(*Object)
						rv++
						o.RV, o.ResourceVersion = rv, strconv.FormatUint(rv, 10)
						update(b, p, o)
						pods[i%100] = o
						i++
						if i%drainEvery == 0 {
							for _, l := range ls {
								buf = l.Pop(buf[:0])
								delivered += len(buf)
							}
						}
					}
					for _, l := range ls {
						delivered += len(l.Pop(buf[:0]))
					}
					b.ReportMetric(float64(delivered)/b.Elapsed().Seconds(), "deliveries/s")
					if delivered > 0 {
						b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(delivered), "ns/delivery")
					}
				})
			}
		}
	}
}

// BenchmarkPop measures a listener's queue: offering a backlog of updates
// and draining it with one Pop, per notification. The timer runs
// throughout: stopping it per iteration (which reads MemStats under
// -benchmem) would cost more than what is measured.
func BenchmarkPop(b *testing.B) {
	for _, backlog := range []int{1, 64} {
		b.Run(fmt.Sprintf("backlog=%d", backlog), func(b *testing.B) {
			p := benchProc(b, 1, 1)
			l, err := p.addListener(ListenerOptions{Wake: make(chan struct{}, 1)})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Stop()
			old := benchPod(b, "ns-0", "pod-0", 1)
			buf := make([]Notification, 0, backlog)
			rv := uint64(10)
			for b.Loop() {
				for range backlog {
					o := old.DeepCopyObject().(*Object) // the informer allocates each new object too
					rv++
					o.RV, o.ResourceVersion = rv, strconv.FormatUint(rv, 10)
					update(b, p, o)
					old = o
				}
				buf = l.Pop(buf[:0])
				if len(buf) != backlog {
					b.Fatalf("popped %d, want %d", len(buf), backlog)
				}
				clear(buf)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*backlog), "ns/notification")
		})
	}
}

// BenchmarkList measures List over 10k cached Pods in 100 namespaces.
func BenchmarkList(b *testing.B) {
	p := benchProc(b, 10000, 100)
	sel, err := labels.Parse("sel=yes")
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		f    *Filter
		want int
	}{
		{"all", &Filter{}, 10000},
		{"namespace", &Filter{Namespace: "ns-7"}, 100},
		{"label", &Filter{Label: sel}, 1000},
	} {
		b.Run("filter="+c.name, func(b *testing.B) {
			for b.Loop() {
				objs, _ := p.list(c.f)
				if len(objs) != c.want {
					b.Fatalf("listed %d, want %d", len(objs), c.want)
				}
			}
			b.ReportMetric(float64(c.want)*float64(b.N)/b.Elapsed().Seconds(), "objects/s")
		})
	}
}
