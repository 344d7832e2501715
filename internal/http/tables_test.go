package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubegate/internal/testenv"
)

// everyKind are objects of kinds kubectl prints with columns of their
// own, beyond the common ones of TestKubectlTablesMatchAPIServer, and a
// custom resource with printer columns of every type.
const everyKind = `
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 2
  maxReplicas: 5
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 60}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-abc, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints: [{addresses: [10.0.0.7], conditions: {ready: true}}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web}
spec:
  rules:
  - host: shop.example.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}
  tls: [{hosts: [shop.example.com], secretName: tls}]
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}, storageClassName: none}
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: leader}
spec: {holderIdentity: web-1, leaseDurationSeconds: 15}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec: {minAvailable: 1, selector: {matchLabels: {app: web}}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: robot}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: reader}
rules: [{apiGroups: [""], resources: [pods], verbs: [get, list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reader}
subjects: [{kind: ServiceAccount, name: robot}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny}
spec: {podSelector: {matchLabels: {app: web}}, policyTypes: [Ingress]}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: quota}
spec: {hard: {pods: "10", requests.cpu: "4"}}
---
apiVersion: v1
kind: LimitRange
metadata: {name: limits}
spec: {limits: [{type: Container, default: {cpu: 500m}}]}
---
apiVersion: tables.example.com/v1
kind: Gauge
metadata: {name: g1}
spec: {size: 2Gi, replicas: 3, ratio: 0.25, enabled: true, since: "2020-01-01T00:00:00Z"}
---
apiVersion: tables.example.com/v1
kind: Gauge
metadata: {name: g2}
spec: {size: 500m}
`

// TestKubectlTablesOfEveryKind: kubectl get prints the same table
// through the gateway as from kube-apiserver for kinds the gateway has
// no code of its own for, built-in and custom: their columns and cells
// come from kube-apiserver itself.
func TestKubectlTablesOfEveryKind(t *testing.T) {
	env := testenv.Get(t)
	kubectl := env.Kubectl(t)
	ns := env.Namespace(t)
	crd := testenv.NewCRD("tables.example.com", "gauges", "Gauge")
	v := crd.Object["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any)
	v["additionalPrinterColumns"] = []any{
		map[string]any{"name": "Size", "type": "string", "jsonPath": ".spec.size"},
		map[string]any{"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
		map[string]any{"name": "Ratio", "type": "number", "jsonPath": ".spec.ratio", "priority": int64(1)},
		map[string]any{"name": "Enabled", "type": "boolean", "jsonPath": ".spec.enabled"},
		map[string]any{"name": "Since", "type": "date", "jsonPath": ".spec.since"},
		map[string]any{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
	}
	env.CreateCRD(t, crd)

	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := env.CP.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	gw := startGateway(t, nil)
	run := func(server bool, stdin string, args ...string) string {
		t.Helper()
		cfg := kubeconfig
		if !server {
			args = append([]string{"--server", gw}, args...)
			cfg = filepath.Join(dir, "none")
		}
		args = append([]string{"--cache-dir", filepath.Join(dir, "cache"), "--request-timeout", "30s"}, args...)
		cmd := exec.CommandContext(t.Context(), kubectl, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+cfg, "HOME="+dir)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errb.String())
		}
		return out.String()
	}
	run(true, everyKind, "apply", "-n", ns, "-f", "-")

	// A pod that restarted, and one that completed (kube-apiserver gives
	// its row a condition).
	createPod(t, env.Client, ns, "crashy", nil)
	createPod(t, env.Client, ns, "done", nil)
	ctx := t.Context()
	set := func(name string, st corev1.PodStatus) {
		t.Helper()
		p, err := env.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Status = st
		if _, err := env.Client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	finished := metav1.NewTime(time.Now().Add(-7 * time.Minute))
	set("crashy", corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "c", RestartCount: 3,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: finished}}}}})
	set("done", corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{Name: "c",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}}})

	// A completed pod's row carries the condition kube-apiserver gives
	// it, as kube-apiserver's Table does.
	table := func(base string, hc *http.Client) metav1.Table {
		t.Helper()
		var tbl metav1.Table
		testenv.Eventually(t, "the completed pod's Table", func() bool {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/namespaces/"+ns+"/pods/done", nil)
			req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
			resp, err := hc.Do(req)
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			return resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&tbl) == nil &&
				len(tbl.Rows) == 1 && len(tbl.Rows[0].Conditions) > 0
		})
		return tbl
	}
	hc, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	want, got := table(env.Config.Host, hc), table(gw, http.DefaultClient)
	if !cmp.Equal(want.Rows[0].Conditions, got.Rows[0].Conditions) {
		t.Errorf("completed pod's row conditions: apiserver %+v, gateway %+v", want.Rows[0].Conditions, got.Rows[0].Conditions)
	}

	for _, args := range [][]string{
		{"get", "pods", "-n", ns, "-o", "wide"},
		{"get", "hpa", "-n", ns},
		{"get", "endpointslices", "-n", ns},
		{"get", "ingresses", "-n", ns, "-o", "wide"},
		{"get", "pvc", "-n", ns, "-o", "wide"},
		{"get", "leases", "-n", ns},
		{"get", "pdb", "-n", ns},
		{"get", "serviceaccounts", "-n", ns, "robot"},
		{"get", "roles", "-n", ns},
		{"get", "rolebindings", "-n", ns, "-o", "wide"},
		{"get", "networkpolicies", "-n", ns},
		{"get", "resourcequotas", "-n", ns},
		{"get", "limitranges", "-n", ns},
		{"get", "gauges", "-n", ns},
		{"get", "gauges", "-n", ns, "-o", "wide"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			want := run(true, "", args...)
			var got string
			// The gateway's cache may trail the writes above by a moment.
			testenv.Eventually(t, "the gateway to print what the apiserver prints", func() bool {
				got = run(false, "", args...)
				return sameTable(want, got)
			})
			if !sameTable(want, got) {
				t.Errorf("apiserver:\n%sgateway:\n%s", want, got)
			}
			if diff := cmp.Diff(strings.Count(want, "\n"), strings.Count(got, "\n")); diff != "" {
				t.Errorf("rows (-apiserver +gateway): %s", diff)
			}
		})
	}
}

// relativeCell matches what kube-apiserver prints relative to the time it
// prints it: a duration (5s, 3m2s, 4h, 2d3h, 6y332d), alone or in a
// restart count ("3 (7m ago)").
var relativeCell = regexp.MustCompile(`\b([0-9]+[smhdy])+\b`)

// sameTable reports whether two kubectl tables are the same but for
// durations, which may have moved on between the two.
func sameTable(a, b string) bool {
	norm := func(s string) string { return relativeCell.ReplaceAllString(s, "<d>") }
	fields := func(s string) []string {
		var out []string
		for _, l := range strings.Split(strings.TrimRight(norm(s), "\n"), "\n") {
			out = append(out, strings.Join(strings.Fields(l), " "))
		}
		return out
	}
	return cmp.Equal(fields(a), fields(b))
}
