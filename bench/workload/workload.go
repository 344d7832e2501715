package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

// Labels every benchmark object carries. ShardLabel takes Shards values,
// so ShardLabel=shard-0 selects 1/Shards of the objects.
const (
	PartOfLabel = "app.kubernetes.io/part-of"
	PartOfValue = "kubegate-bench"
	ShardLabel  = "bench.kubegate.io/shard"
	Shards      = 10
	// StampAnnotation carries the time the updater sent a write
	// (RFC 3339 with nanoseconds). Receivers do not parse it; latency is
	// measured against the time the write was acknowledged (see Update).
	StampAnnotation = "bench.kubegate.io/sent"
)

// Workload describes the objects a run created.
type Workload struct {
	Namespaces []string `json:"namespaces"`
	Pods       int      `json:"pods"`
	ConfigMaps int      `json:"configMaps"`
	// PodJSONBytes is the average size of a Pod's JSON as the gateway caches
	// it (managedFields stripped); PodJSONBytesServed as kube-apiserver
	// serves it (with managedFields).
	PodJSONBytes       float64 `json:"podJSONBytes"`
	PodJSONBytesServed float64 `json:"podJSONBytesServed"`
	// Selector selects 1/Shards of the Pods (LabelSelector syntax).
	Selector string `json:"selector"`
}

// PodKey names a Pod.
type PodKey struct{ Namespace, Name string }

// NamespaceName is the i-th benchmark namespace.
func NamespaceName(i int) string { return fmt.Sprintf("bench-%03d", i) }

// PodName is the name of the j-th Pod.
func PodName(j int) string { return fmt.Sprintf("web-%05d", j) }

// PodAt is where the j-th of the Pods lives with k namespaces.
func PodAt(j, k int) PodKey { return PodKey{NamespaceName(j % k), PodName(j)} }

// NewPod returns a Pod shaped like a real web workload: three containers
// with env, ports, probes, resources and mounts, six volumes, the usual
// labels and annotations. Its JSON is about 7 KB.
func NewPod(key PodKey, j int) *corev1.Pod {
	labels := map[string]string{
		PartOfLabel:                   PartOfValue,
		ShardLabel:                    fmt.Sprintf("shard-%d", j%Shards),
		"app.kubernetes.io/name":      "web",
		"app.kubernetes.io/instance":  fmt.Sprintf("web-%d", j%50),
		"app.kubernetes.io/version":   "1.27.3",
		"app.kubernetes.io/component": "frontend",
		"pod-template-hash":           fmt.Sprintf("%08x", j*2654435761%(1<<32)),
	}
	annotations := map[string]string{
		"prometheus.io/scrape":              "true",
		"prometheus.io/port":                "9090",
		"kubectl.kubernetes.io/restartedAt": "2026-11-01T08:15:00Z",
		"checksum/config":                   fmt.Sprintf("%064x", j),
	}
	env := func(prefix string, n int) []corev1.EnvVar {
		out := make([]corev1.EnvVar, 0, n+3)
		for i := range n {
			out = append(out, corev1.EnvVar{Name: fmt.Sprintf("%s_SETTING_%02d", prefix, i), Value: fmt.Sprintf("value-%d-for-%s-setting-%02d", j, prefix, i)})
		}
		out = append(out,
			corev1.EnvVar{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			corev1.EnvVar{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			corev1.EnvVar{Name: "DB_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "web-db"}, Key: "password"}}},
		)
		return out
	}
	res := func(cpu, mem string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)},
		}
	}
	probe := func(path string, port int) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt(port)}},
			InitialDelaySeconds: 5, PeriodSeconds: 10, TimeoutSeconds: 2, FailureThreshold: 3,
		}
	}
	mounts := []corev1.VolumeMount{
		{Name: "config", MountPath: "/etc/web", ReadOnly: true},
		{Name: "tls", MountPath: "/etc/tls", ReadOnly: true},
		{Name: "cache", MountPath: "/var/cache/web"},
		{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true},
	}
	container := func(name, image string, port int, nEnv int, cpu, mem string) corev1.Container {
		ports := []corev1.ContainerPort{{Name: name[:min(len(name), 10)], ContainerPort: int32(port), Protocol: corev1.ProtocolTCP}}
		if name == "web" {
			ports = append(ports, corev1.ContainerPort{Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP})
		}
		return corev1.Container{
			Name: name, Image: image,
			Command:         []string{"/usr/local/bin/" + name},
			Args:            []string{"--config=/etc/web/" + name + ".yaml", "--log-format=json", "--metrics-port=9090"},
			Ports:           ports,
			Env:             env(name, nEnv),
			Resources:       res(cpu, mem),
			VolumeMounts:    mounts,
			LivenessProbe:   probe("/healthz", port),
			ReadinessProbe:  probe("/readyz", port),
			ImagePullPolicy: corev1.PullIfNotPresent,
			SecurityContext: &corev1.SecurityContext{
				RunAsNonRoot: ptr(true), AllowPrivilegeEscalation: ptr(false), ReadOnlyRootFilesystem: ptr(true),
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
			TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		}
	}
	mode := int32(0o420)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{
				container("web", "registry.example.com/shop/web:1.27.3", 8080, 10, "500m", "512Mi"),
				container("sidecar", "registry.example.com/platform/proxy:2.4.1", 15001, 6, "100m", "128Mi"),
				container("log-shipper", "registry.example.com/platform/fluent-bit:3.1.0", 2020, 4, "50m", "64Mi"),
			},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}, DefaultMode: &mode}}},
				{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "web-tls", DefaultMode: &mode}}},
				{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr(resource.MustParse("1Gi"))}}},
				{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: &mode, Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr(int64(3607))}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
				}}}},
			},
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr(int64(30)),
			DNSPolicy:                     corev1.DNSClusterFirst,
			NodeSelector:                  map[string]string{"kubernetes.io/os": "linux"},
			ServiceAccountName:            "default",
			AutomountServiceAccountToken:  ptr(false),
			SecurityContext:               &corev1.PodSecurityContext{RunAsUser: ptr(int64(10001)), FSGroup: ptr(int64(10001))},
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))},
			},
		},
	}
}

func ptr[T any](v T) *T { return &v }

// CreateWorkload creates k namespaces, pods Pods spread over them
// round-robin and one ConfigMap per 10 Pods, with workers concurrent
// requests. It measures the Pods' JSON size from what the apiserver
// returned.
func CreateWorkload(ctx context.Context, c kubernetes.Interface, k, pods, workers int) (Workload, error) {
	w := Workload{Pods: pods, ConfigMaps: (pods + 9) / 10, Selector: ShardLabel + "=shard-0"}
	for i := range k {
		ns := NamespaceName(i)
		w.Namespaces = append(w.Namespaces, ns)
		_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil {
			return w, fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	var withMF, withoutMF atomic.Int64
	err := createEach(ctx, 0, pods+w.ConfigMaps, workers, func(ctx context.Context, j int) error {
		if j < pods {
			key := PodAt(j, k)
			p, err := c.CoreV1().Pods(key.Namespace).Create(ctx, NewPod(key, j), metav1.CreateOptions{})
			if err != nil {
				return err
			}
			b, _ := json.Marshal(p)
			withMF.Add(int64(len(b)))
			p.ManagedFields = nil
			b, _ = json.Marshal(p)
			withoutMF.Add(int64(len(b)))
			return nil
		}
		i := j - pods
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-config-%04d", i), Namespace: NamespaceName(i % k),
				Labels: map[string]string{PartOfLabel: PartOfValue, ShardLabel: fmt.Sprintf("shard-%d", i%Shards)}},
			Data: map[string]string{"web.yaml": fmt.Sprintf("listen: :8080\nworkers: 8\nupstream: http://api-%d.svc:8080\n", i)},
		}
		_, err := c.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return w, fmt.Errorf("create workload: %w", err)
	}
	if pods > 0 {
		w.PodJSONBytesServed = float64(withMF.Load()) / float64(pods)
		w.PodJSONBytes = float64(withoutMF.Load()) / float64(pods)
	}
	return w, nil
}

// CreatePods creates Pods from..to-1 (PodAt with k namespaces), 16 at a
// time.
func CreatePods(ctx context.Context, c kubernetes.Interface, k, from, to int) error {
	return createEach(ctx, from, to, 16, func(ctx context.Context, j int) error {
		key := PodAt(j, k)
		if _, err := c.CoreV1().Pods(key.Namespace).Create(ctx, NewPod(key, j), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create pod %s/%s: %w", key.Namespace, key.Name, err)
		}
		return nil
	})
}

// createEach calls create for every j from..to-1, workers at a time, and
// returns the first error; after it, no further create starts and the
// context of those running is cancelled.
func createEach(ctx context.Context, from, to, workers int, create func(ctx context.Context, j int) error) error {
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	next.Store(int64(from))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range max(workers, 1) {
		wg.Go(func() {
			for {
				j := int(next.Add(1) - 1)
				if j >= to || ctx.Err() != nil {
					return
				}
				if err := create(ctx, j); err != nil {
					errOnce.Do(func() { first = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}
