package rows

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"kubegate/internal/informer"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenNow is the fixtures' "now": ages are relative to it.
var goldenNow = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(goldenNow.Add(-d)) }

func objMeta(name string, age time.Duration) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "demo", CreationTimestamp: ago(age)}
}

func running(since time.Duration) corev1.ContainerState {
	return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ago(since)}}
}

// tableFixtures are objects per resource that exercise the printers'
// rules (kube-apiserver prints the same cells for them).
var tableFixtures = map[string][]any{
	"pods": {
		&corev1.Pod{ObjectMeta: objMeta("pending", time.Minute), Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c"}}}, Status: corev1.PodStatus{Phase: corev1.PodPending}},
		&corev1.Pod{ObjectMeta: objMeta("running", 3*time.Hour), Spec: corev1.PodSpec{NodeName: "node-1",
			Containers:     []corev1.Container{{Name: "a"}, {Name: "b"}},
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "example.com/gate"}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.0.0.7"}},
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse},
					{Type: "example.com/gate", Status: corev1.ConditionTrue}},
				ContainerStatuses: []corev1.ContainerStatus{
					{Name: "a", Ready: true, State: running(time.Hour), RestartCount: 2, LastTerminationState: corev1.ContainerState{
						Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: ago(time.Hour)}}},
					{Name: "b", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}},
				}}},
		&corev1.Pod{ObjectMeta: objMeta("init", 10*time.Second), Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "i1"}, {Name: "i2"}, {Name: "sidecar", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}},
			Containers:     []corev1.Container{{Name: "c"}}},
			Status: corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{
				{Name: "i1", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}},
				{Name: "i2", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}},
			}}},
		&corev1.Pod{ObjectMeta: objMeta("done", 48*time.Hour), Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
			Status: corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{Name: "c",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}}}}},
		&corev1.Pod{ObjectMeta: func() metav1.ObjectMeta {
			m := objMeta("going", 5*time.Minute)
			m.DeletionTimestamp = ptr.To(ago(time.Second))
			return m
		}(), Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
				{Name: "c", Ready: true, State: running(time.Minute)}}}},
		&corev1.Pod{ObjectMeta: objMeta("gated", time.Second), Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
			Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated}}}},
	},
	"deployments": {
		&appsv1.Deployment{ObjectMeta: objMeta("web", 26*time.Hour), Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "nginx", Image: "nginx:1.27"}, {Name: "log", Image: "busybox"}}}}},
			Status: appsv1.DeploymentStatus{ReadyReplicas: 2, UpdatedReplicas: 3, AvailableReplicas: 2}},
	},
	"replicasets": {
		&appsv1.ReplicaSet{ObjectMeta: objMeta("web-5d4f", 26*time.Hour), Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "pod-template-hash": "5d4f"}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:1.27"}}}}},
			Status: appsv1.ReplicaSetStatus{Replicas: 3, ReadyReplicas: 1}},
	},
	"services": {
		&corev1.Service{ObjectMeta: objMeta("api", time.Hour), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP,
			ClusterIPs: []string{"10.96.0.10"}, Selector: map[string]string{"app": "api"},
			Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}, {Port: 53, Protocol: corev1.ProtocolUDP}}}},
		&corev1.Service{ObjectMeta: objMeta("np", time.Hour), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort,
			ClusterIPs: []string{"10.96.0.11"}, ExternalIPs: []string{"192.0.2.1"},
			Ports: []corev1.ServicePort{{Port: 443, NodePort: 30443, Protocol: corev1.ProtocolTCP}}}},
		&corev1.Service{ObjectMeta: objMeta("lb-pending", time.Hour), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			ClusterIPs: []string{"10.96.0.12"}, Ports: []corev1.ServicePort{{Port: 80, NodePort: 31000, Protocol: corev1.ProtocolTCP}}}},
		&corev1.Service{ObjectMeta: objMeta("lb", time.Hour), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			ClusterIPs: []string{"10.96.0.13"}, ExternalIPs: []string{"192.0.2.9"}},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{
				{Hostname: "lb.example.com"}, {IP: "198.51.100.4"}}}}},
		&corev1.Service{ObjectMeta: objMeta("ext", time.Hour), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName,
			ExternalName: "db.example.com"}},
		&corev1.Service{ObjectMeta: objMeta("headless", time.Hour), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP,
			ClusterIPs: []string{"None"}}},
	},
	"configmaps": {
		&corev1.ConfigMap{ObjectMeta: objMeta("settings", 90*time.Second), Data: map[string]string{"a": "1", "b": "2"},
			BinaryData: map[string][]byte{"c": {1}}},
		&corev1.ConfigMap{ObjectMeta: objMeta("empty", 90*time.Second)},
	},
	"secrets": {
		&corev1.Secret{ObjectMeta: objMeta("tls", 400*24*time.Hour), Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{"tls.crt": {1}, "tls.key": {2}}},
	},
	"namespaces": {
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo", CreationTimestamp: ago(time.Hour)},
			Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "old", CreationTimestamp: ago(time.Hour)},
			Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}},
	},
	"nodes": {
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp-1", CreationTimestamp: ago(30 * 24 * time.Hour),
			Labels: map[string]string{"node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/etcd": "",
				"kubernetes.io/role": "master"}},
			Spec: corev1.NodeSpec{Unschedulable: true},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
				Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.18.0.2"}},
				NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.37.2", OSImage: "Debian GNU/Linux 13", KernelVersion: "6.12.0",
					Architecture: "amd64", ContainerRuntimeVersion: "containerd://2.1.0"}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", CreationTimestamp: ago(time.Hour)},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "new", CreationTimestamp: ago(time.Second)}},
	},
	"statefulsets": {
		&appsv1.StatefulSet{ObjectMeta: objMeta("db", 2*time.Hour), Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "pg", Image: "postgres:17"}}}}},
			Status: appsv1.StatefulSetStatus{ReadyReplicas: 2}},
	},
	"daemonsets": {
		&appsv1.DaemonSet{ObjectMeta: objMeta("agent", 2*time.Hour), Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
				Containers: []corev1.Container{{Name: "a", Image: "agent:1"}}}}},
			Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 4, CurrentNumberScheduled: 4, NumberReady: 3,
				UpdatedNumberScheduled: 2, NumberAvailable: 3}},
	},
	"jobs": {
		&batchv1.Job{ObjectMeta: objMeta("done", time.Hour), Spec: batchv1.JobSpec{Completions: ptr.To[int32](2)},
			Status: batchv1.JobStatus{Succeeded: 2, StartTime: ptr.To(ago(time.Hour)), CompletionTime: ptr.To(ago(50 * time.Minute)),
				Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}},
		&batchv1.Job{ObjectMeta: objMeta("busy", time.Minute), Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](3)},
			Status: batchv1.JobStatus{Succeeded: 1, StartTime: ptr.To(ago(40 * time.Second))}},
		&batchv1.Job{ObjectMeta: objMeta("paused", time.Minute), Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](1)},
			Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue}}}},
	},
	"cronjobs": {
		&batchv1.CronJob{ObjectMeta: objMeta("nightly", 10*24*time.Hour), Spec: batchv1.CronJobSpec{Schedule: "0 3 * * *",
			TimeZone: ptr.To("Europe/Paris"), Suspend: ptr.To(false)},
			Status: batchv1.CronJobStatus{Active: []corev1.ObjectReference{{Name: "nightly-1"}}, LastScheduleTime: ptr.To(ago(9 * time.Hour))}},
		&batchv1.CronJob{ObjectMeta: objMeta("never", time.Hour), Spec: batchv1.CronJobSpec{Schedule: "@yearly"}},
	},
	"events": {
		&corev1.Event{ObjectMeta: objMeta("web.1", time.Hour), Type: "Warning", Reason: "BackOff", Message: "Back-off restarting failed container \n",
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web", FieldPath: "spec.containers{c}"},
			Source:         corev1.EventSource{Component: "kubelet", Host: "node-1"}, Count: 7,
			FirstTimestamp: ago(time.Hour), LastTimestamp: ago(2 * time.Minute)},
		&corev1.Event{ObjectMeta: objMeta("web.2", time.Minute), Type: "Normal", Reason: "Scheduled", Message: "assigned",
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web"}, ReportingController: "default-scheduler",
			EventTime: metav1.NewMicroTime(goldenNow.Add(-time.Minute)),
			Series:    &corev1.EventSeries{Count: 3, LastObservedTime: metav1.NewMicroTime(goldenNow.Add(-5 * time.Second))}},
		&corev1.Event{ObjectMeta: objMeta("cluster.1", time.Minute), Type: "Normal", Reason: "Started",
			InvolvedObject: corev1.ObjectReference{Kind: "Namespace"}, EventTime: metav1.NewMicroTime(goldenNow.Add(-30 * time.Second))},
	},
}

// goldenTable is the part of a Table the golden files show.
type goldenTable struct {
	Columns []string         `json:"columns"` // name, "(wide)" for priority 1
	Rows    []goldenTableRow `json:"rows"`
}

type goldenTableRow struct {
	Cells      []any                      `json:"cells"`
	Conditions []metav1.TableRowCondition `json:"conditions,omitempty"`
}

// fixtureObjects returns the fixtures of a resource as cached objects.
func fixtureObjects(t *testing.T, resource string) []*informer.Object {
	t.Helper()
	var objs []*informer.Object
	for _, o := range tableFixtures[resource] {
		objs = append(objs, cached(t, o))
	}
	return objs
}

// cached returns o as the informer caches it.
func cached(t *testing.T, o any) *informer.Object {
	t.Helper()
	raw, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return &informer.Object{ObjectMeta: m.Metadata, Raw: raw}
}

// golden compares got with testdata/<path> (rewritten with -update).
func golden(t *testing.T, path string, got any) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep <none> readable
	enc.SetIndent("", "  ")
	if err := enc.Encode(got); err != nil {
		t.Fatal(err)
	}
	gotJSON := buf.Bytes()
	path = filepath.Join("testdata", path)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, gotJSON, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(gotJSON)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}
