package demo

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Labels every demo object carries.
const (
	partOfLabel = "app.kubernetes.io/part-of"
	partOfValue = "kubegate-demo"
	slotLabel   = "demo.kubegate.io/slot"
	trackLabel  = "track"
)

// app is one workload of the demo shop. Pod slot i of a namespace runs
// apps[i%len(apps)].
type app struct {
	name, tier, image string
	port              int32
	cpu, memory       string
	sidecar           bool
}

var apps = []app{
	{name: "storefront", tier: "frontend", image: "nginx:1.27.3", port: 8080, cpu: "100m", memory: "128Mi", sidecar: true},
	{name: "checkout", tier: "backend", image: "ghcr.io/kubegate-demo/checkout:2.4.1", port: 8443, cpu: "250m", memory: "256Mi"},
	{name: "inventory", tier: "backend", image: "ghcr.io/kubegate-demo/inventory:1.9.0", port: 9090, cpu: "200m", memory: "256Mi"},
	{name: "orders-worker", tier: "worker", image: "ghcr.io/kubegate-demo/orders-worker:3.0.2", port: 9102, cpu: "500m", memory: "512Mi"},
	{name: "redis", tier: "cache", image: "redis:7.4.1", port: 6379, cpu: "100m", memory: "64Mi"},
}

var (
	logLevels = []string{"debug", "info", "warn"}
	tracks    = []string{"stable", "canary"}
)

// nameAlphabet is the one Kubernetes uses for generated name suffixes.
const nameAlphabet = "bcdfghjklmnpqrstvwxz2456789"

func randomSuffix(rng *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = nameAlphabet[rng.IntN(len(nameAlphabet))]
	}
	return string(b)
}

// templateHash stands in for a ReplicaSet's pod-template-hash: stable per
// app, so recreated pods look like they come from the same ReplicaSet.
func templateHash(a app) string {
	h := fnv.New64a()
	h.Write([]byte(a.name + a.image))
	v := h.Sum64()
	b := make([]byte, 10)
	for i := range b {
		b[i] = nameAlphabet[v%uint64(len(nameAlphabet))]
		v /= uint64(len(nameAlphabet))
	}
	return string(b)
}

func commonLabels(a app) map[string]string {
	return map[string]string{
		"app":        a.name,
		"tier":       a.tier,
		partOfLabel:  partOfValue,
		"managed-by": "kubegate-demo",
	}
}

func newNamespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   name,
		Labels: map[string]string{partOfLabel: partOfValue},
	}}
}

func configMapName(a app) string { return a.name + "-config" }

func newConfigMap(ns string, a app) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: configMapName(a), Namespace: ns, Labels: commonLabels(a)},
		Data: map[string]string{
			"LOG_LEVEL": "info",
			"revision":  "0",
			"config.yaml": fmt.Sprintf("server:\n  port: %d\n  readTimeout: 5s\nfeatures:\n  newCheckout: false\n",
				a.port),
		},
	}
}

func newDeployment(ns string, a app, replicas int32) *appsv1.Deployment {
	labels := commonLabels(a)
	selector := map[string]string{"app": a.name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: a.name, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       podSpec(a, ""),
			},
		},
	}
}

func podSpec(a app, node string) corev1.PodSpec {
	res := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(a.cpu),
			corev1.ResourceMemory: resource.MustParse(a.memory),
		},
		Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(a.memory)},
	}
	probe := &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(a.port)}},
		PeriodSeconds:    10,
		FailureThreshold: 3,
	}
	if a.tier != "cache" {
		probe.ProbeHandler = corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}}
	}
	main := corev1.Container{
		Name:  a.name,
		Image: a.image,
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: a.port, Protocol: corev1.ProtocolTCP}},
		Env: []corev1.EnvVar{
			{Name: "LOG_LEVEL", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: configMapName(a)}, Key: "LOG_LEVEL",
			}}},
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		},
		Resources:                res,
		ReadinessProbe:           probe,
		TerminationMessagePath:   corev1.TerminationMessagePathDefault,
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		ImagePullPolicy:          corev1.PullIfNotPresent,
	}
	spec := corev1.PodSpec{
		NodeName:      node,
		Containers:    []corev1.Container{main},
		RestartPolicy: corev1.RestartPolicyAlways,
		DNSPolicy:     corev1.DNSClusterFirst,
	}
	if a.sidecar {
		spec.Containers = append(spec.Containers, corev1.Container{
			Name:  "log-shipper",
			Image: "fluent/fluent-bit:3.2.4",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("20m"),
				corev1.ResourceMemory: resource.MustParse("32Mi"),
			}},
			TerminationMessagePath:   corev1.TerminationMessagePathDefault,
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			ImagePullPolicy:          corev1.PullIfNotPresent,
		})
	}
	return spec
}

// newPod returns the pod for slot, on one of three pretend nodes.
func newPod(ns string, a app, slot int, rng *rand.Rand) *corev1.Pod {
	labels := commonLabels(a)
	labels["pod-template-hash"] = templateHash(a)
	labels[slotLabel] = strconv.Itoa(slot)
	labels[trackLabel] = tracks[0]
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s-%s-%s", a.name, templateHash(a), randomSuffix(rng, 5)),
			Namespace: ns,
			Labels:    labels,
		},
		Spec: podSpec(a, nodeName(slot)),
	}
}

func nodeName(slot int) string { return fmt.Sprintf("demo-node-%d", slot%3+1) }

func nodeIP(slot int) string { return fmt.Sprintf("192.0.2.%d", slot%3+11) }

// podIP is unique per namespace index and slot within the demo.
func podIP(nsIndex, slot int) string {
	return fmt.Sprintf("10.244.%d.%d", nsIndex%250, slot%250+2)
}

func condition(t corev1.PodConditionType, ok bool, at metav1.Time, reason string) corev1.PodCondition {
	s := corev1.ConditionTrue
	if !ok {
		s = corev1.ConditionFalse
	}
	return corev1.PodCondition{Type: t, Status: s, LastTransitionTime: at, Reason: reason}
}

// setPending writes what a kubelet reports while it pulls images.
func setPending(pod *corev1.Pod, now time.Time) {
	at := metav1.NewTime(now)
	pod.Status.Phase = corev1.PodPending
	pod.Status.HostIP = nodeIP(slotOf(pod))
	pod.Status.HostIPs = []corev1.HostIP{{IP: pod.Status.HostIP}}
	pod.Status.StartTime = &at
	pod.Status.Conditions = []corev1.PodCondition{
		condition(corev1.PodReadyToStartContainers, false, at, ""),
		condition(corev1.PodInitialized, true, at, ""),
		condition(corev1.PodReady, false, at, "ContainersNotReady"),
		condition(corev1.ContainersReady, false, at, "ContainersNotReady"),
		condition(corev1.PodScheduled, true, at, ""),
	}
	pod.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name:  c.Name,
			Image: c.Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}},
		})
	}
}

// setRunning writes what a kubelet reports once all containers run.
func setRunning(pod *corev1.Pod, nsIndex int, now time.Time) {
	at := metav1.NewTime(now)
	slot := slotOf(pod)
	pod.Status.Phase = corev1.PodRunning
	pod.Status.HostIP = nodeIP(slot)
	pod.Status.HostIPs = []corev1.HostIP{{IP: pod.Status.HostIP}}
	pod.Status.PodIP = podIP(nsIndex, slot)
	pod.Status.PodIPs = []corev1.PodIP{{IP: pod.Status.PodIP}}
	if pod.Status.StartTime == nil {
		pod.Status.StartTime = &at
	}
	pod.Status.Conditions = []corev1.PodCondition{
		condition(corev1.PodReadyToStartContainers, true, at, ""),
		condition(corev1.PodInitialized, true, at, ""),
		condition(corev1.PodReady, true, at, ""),
		condition(corev1.ContainersReady, true, at, ""),
		condition(corev1.PodScheduled, true, at, ""),
	}
	pod.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name:         c.Name,
			Image:        c.Image,
			ImageID:      "sha256:" + digest(c.Image),
			ContainerID:  "containerd://" + digest(pod.Name+"/"+c.Name+"/"+now.String()),
			Ready:        true,
			Started:      new(true),
			State:        corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at}},
			RestartCount: 0,
		})
	}
}

// restartContainer records that the pod's main container crashed and was
// restarted, as a kubelet would.
func restartContainer(pod *corev1.Pod, now time.Time) {
	if len(pod.Status.ContainerStatuses) == 0 {
		return
	}
	cs := &pod.Status.ContainerStatuses[0]
	var startedAt metav1.Time
	if cs.State.Running != nil {
		startedAt = cs.State.Running.StartedAt
	}
	cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode:    137,
		Reason:      "OOMKilled",
		StartedAt:   startedAt,
		FinishedAt:  metav1.NewTime(now),
		ContainerID: cs.ContainerID,
	}}
	cs.RestartCount++
	cs.ContainerID = "containerd://" + digest(pod.Name+"/"+cs.Name+"/"+now.String())
	cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now)}}
}

func slotOf(pod *corev1.Pod) int {
	n, _ := strconv.Atoi(pod.Labels[slotLabel])
	return n
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
