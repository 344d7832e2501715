package gateway_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kubegate/internal/gateway"
	"kubegate/internal/testenv"
)

// webDeployment is the workload's Deployment with %[1]d replicas of
// image %[2]s.
const webDeployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web}}
spec:
  replicas: %[1]d
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: %[2]s}]}
`

// conformanceWorkload is the fixed workload TestKubectlConformance reads
// and writes in its namespace, with webDeployment; %[1]s is the fake
// kubelet's node.
const conformanceWorkload = `
apiVersion: v1
kind: Pod
metadata: {name: web-1, labels: {app: web, tier: front}}
spec: {nodeName: %[1]s, containers: [{name: c, image: registry.k8s.io/pause:3.10}]}
---
apiVersion: v1
kind: Pod
metadata: {name: web-2, labels: {app: web, tier: back}}
spec: {containers: [{name: c, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: 100m}}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: solo, labels: {app: solo}}
spec: {nodeName: %[1]s, containers: [{name: c, image: registry.k8s.io/pause:3.10}]}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec: {selector: {app: web}, ports: [{name: http, port: 80, targetPort: 8080}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm-a, labels: {app: web}}
data: {mode: fast}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm-b}
data: {mode: slow}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm-c, labels: {app: solo}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 2
  maxReplicas: 5
  metrics: [{type: Resource, resource: {name: cpu, target: {type: Utilization, averageUtilization: 60}}}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web}
spec:
  rules: [{host: shop.example.com, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-abc, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints: [{addresses: [10.0.0.7], conditions: {ready: true}, nodeName: %[1]s}]
---
apiVersion: conformance.kubegate.test/v1
kind: Widget
metadata: {name: w1, labels: {app: web}}
spec: {color: blue, size: 3, ready: true}
---
apiVersion: conformance.kubegate.test/v1
kind: Widget
metadata: {name: w2}
spec: {color: red, size: 12}
`

// widgetCRD is a namespaced CRD with a schema kubectl explain reads and
// printer columns of several types, one of them only in -o wide.
func widgetCRD() *unstructured.Unstructured {
	crd := testenv.NewCRD("conformance.kubegate.test", "widgets", "Widget")
	v := crd.Object["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any)
	v["schema"] = map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{
		"spec": map[string]any{"type": "object", "description": "What a widget is.", "properties": map[string]any{
			"color": map[string]any{"type": "string", "description": "The widget's color, as a word."},
			"size":  map[string]any{"type": "integer", "description": "How many parts it has."},
			"ready": map[string]any{"type": "boolean"},
		}},
	}}}
	v["additionalPrinterColumns"] = []any{
		map[string]any{"name": "Color", "type": "string", "jsonPath": ".spec.color"},
		map[string]any{"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
		map[string]any{"name": "Ready", "type": "boolean", "jsonPath": ".spec.ready", "priority": int64(1)},
		map[string]any{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
	}
	return crd
}

// What TestKubectlConformance normalises in kubectl's output before
// comparing, and why each may differ between two runs of one command a
// moment apart against one server. Nothing else is normalised.
var (
	// Ages: kubectl and kube-apiserver print durations relative to the
	// time of the request (AGE, LAST SEEN, a restart's "(7m ago)",
	// describe's event ages), and the two runs are not at the same
	// instant. This also masks CPU quantities such as 100m, alike on
	// both sides.
	conformanceAge = regexp.MustCompile(`\b([0-9]+[smhdy])+\b`)
	// Column padding: kubectl pads a table's columns to their widest
	// cell, so a wider age ("59s" then "1m") shifts the columns after it.
	// Runs of spaces after a printed character become one space; the
	// indentation at the start of a line (YAML, describe) is kept.
	conformancePadding = regexp.MustCompile(`(\S) +`)
	// kubectl diff's temporary directories (LIVE-123, MERGED-456) and
	// the files' modification times in the headers of diff -u.
	conformanceDiffDir  = regexp.MustCompile(`\b(LIVE|MERGED)-[0-9]+\b`)
	conformanceDiffTime = regexp.MustCompile(`\t[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:.]+ [+-][0-9]{4}`)
)

func normaliseKubectl(s string) string {
	s = conformanceDiffDir.ReplaceAllString(s, "$1-<tmp>")
	s = conformanceDiffTime.ReplaceAllString(s, "\t<mtime>")
	s = conformanceAge.ReplaceAllString(s, "<age>")
	return conformancePadding.ReplaceAllString(s, "$1 ")
}

func normalisedRun(r ran) ran {
	return ran{stdout: normaliseKubectl(r.stdout), stderr: normaliseKubectl(r.stderr), code: r.code}
}

// kubectlCase is one kubectl command, run as kcUser against both
// servers: code is the exit code wanted from both, want a string the
// output (stdout, then stderr) must hold, so that a command failing alike
// on both sides for an unrelated reason does not pass.
type kubectlCase struct {
	args  []string
	stdin string
	code  int
	want  string
}

// conform runs c through the gateway and straight to kube-apiserver and
// fails the test unless both print the same, normalised, and exit with
// c.code, with c.want in their output.
func (g *passGateway) conform(t *testing.T, c kubectlCase) ran {
	t.Helper()
	viaGW, direct := g.pair(t, nil, kcUser, c.stdin, c.args...)
	gw, api := normalisedRun(viaGW), normalisedRun(direct)
	if gw != api {
		t.Errorf("kubectl %s:\nthrough the gateway: exit %d\n%s%s\nfrom kube-apiserver: exit %d\n%s%s",
			strings.Join(c.args, " "), viaGW.code, viaGW.stdout, viaGW.stderr, direct.code, direct.stdout, direct.stderr)
	}
	if direct.code != c.code || !strings.Contains(api.stdout+api.stderr, c.want) {
		t.Errorf("kubectl %s from kube-apiserver: exit %d\n%s%s\nwant exit %d with %q", strings.Join(c.args, " "), direct.code, direct.stdout, direct.stderr, c.code, c.want)
	}
	return viaGW
}

// TestKubectlConformance: every kubectl command of a user's day, read
// and pass-through, prints the same through the gateway (with the
// production defaults: authn kubernetes, authz rbac, pass-through on) as
// straight from kube-apiserver, as the same user (a token user whose
// RBAC lets it read everything and edit its namespace, so the gateway's
// TokenReview and SubjectAccessReview path is exercised), and exits
// alike; outputs are compared after the normalisations above. The
// workload is fixed: pods (two on a fake kubelet's node, so logs and exec
// reach a kubelet), a deployment, a service, configmaps, an HPA, an
// ingress, an endpointslice, a CRD with printer columns and its
// instances, and an event. TestPassThroughLogsAndExec covers logs and
// exec in depth (follow, attach, SPDY, port-forward); here they are one
// command each.
func TestKubectlConformance(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	env.CreateCRD(t, widgetCRD())
	// kcUser reads everything, as kubectl get of every resource needs.
	grant(t, "", kcUser, kcUser+"-read-all", []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}}},
		authorizationv1.ResourceAttributes{Verb: "list", Group: "flowcontrol.apiserver.k8s.io", Resource: "flowschemas"})
	grantEdit(t, ns, kcUser)
	kubelet := startFakeKubelet(t, ns)

	// The gateway starts no informer before a resource is first read
	// (cache.resources is empty by default), so its first list of each
	// resource, after the workload is written, holds the workload: reads
	// need not wait for the cache to catch up.
	g := startPassGateway(t, nil, gateway.Options{})
	workload := fmt.Sprintf(webDeployment, 2, "registry.k8s.io/pause:3.10") + "---" + fmt.Sprintf(conformanceWorkload, kubelet.node)
	// What diff and apply --dry-run=server are given: more replicas of
	// another image.
	changedDeployment := fmt.Sprintf(webDeployment, 4, "registry.k8s.io/pause:3.9")
	if r := g.kubectl(t, "api-kubegate-admin", workload, "apply", "-n", ns, "-f", "-"); r.code != 0 {
		t.Fatalf("apply the workload: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	pod, err := env.Client.CoreV1().Pods(ns).Get(t.Context(), "web-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	_, err = env.Client.CoreV1().Events(ns).Create(t.Context(), &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "web-1.pulled"},
		InvolvedObject: corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: "web-1", UID: pod.UID},
		Reason:         "Pulled", Message: "Container image already present on machine", Type: corev1.EventTypeNormal,
		Source:         corev1.EventSource{Component: "kubelet", Host: kubelet.node},
		FirstTimestamp: metav1.NewTime(now.Add(-5 * time.Minute)), LastTimestamp: metav1.NewTime(now.Add(-time.Minute)), Count: 3,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// Discovery first, one command at a time: api-resources refreshes
	// kubectl's discovery cache, which the reads below share.
	for _, c := range []kubectlCase{
		{args: []string{"api-versions"}, want: "apps/v1"},
		{args: []string{"api-resources"}, want: "widgets"},
		{args: []string{"api-resources", "-o", "wide", "--sort-by", "name"}, want: "create,delete,deletecollection,get,list,patch,update,watch"},
		{args: []string{"api-resources", "--namespaced=false", "--api-group", "rbac.authorization.k8s.io"}, want: "clusterroles"},
	} {
		g.conform(t, c)
	}
	kinds := strings.Fields(g.conform(t, kubectlCase{args: []string{"api-resources", "--verbs=list", "-o", "name"}, want: "widgets.conformance.kubegate.test"}).stdout)

	// Every resource that can be listed, in every namespace: a table
	// each, then, to keep the number of kubectl runs down, all of them
	// in one command as wide tables and as names.
	var reads []kubectlCase
	for _, k := range kinds {
		args := []string{"get", k, "-A"}
		if k == "componentstatuses" {
			// kube-apiserver probes the components in parallel and lists
			// them in the order they answer: kubectl sorts.
			args = append(args, "--sort-by", ".metadata.name")
		}
		reads = append(reads, kubectlCase{args: args})
	}
	all := strings.Join(slices.DeleteFunc(slices.Clone(kinds), func(k string) bool { return k == "componentstatuses" }), ",")
	reads = append(reads,
		kubectlCase{args: []string{"get", all, "-A", "-o", "wide"}, want: "widget.conformance.kubegate.test/w2"},
		kubectlCase{args: []string{"get", all, "-A", "-o", "name"}, want: "horizontalpodautoscaler.autoscaling/web"},
	)
	in := func(args ...string) []string { return append([]string{"-n", ns}, args...) }
	node := kubelet.node
	reads = append(reads,
		kubectlCase{args: in("get", "pods"), want: "web-1"},
		kubectlCase{args: in("get", "all"), want: "deployment.apps/web"},
		kubectlCase{args: in("get", "deployments,services,configmaps,hpa,ingresses,endpointslices,widgets"), want: "shop.example.com"},
		kubectlCase{args: in("get", "widgets", "-o", "wide"), want: "READY"},
		kubectlCase{args: in("get", "pod", "web-1", "-o", "yaml"), want: "nodeName: " + node},
		kubectlCase{args: in("get", "deployment", "web", "-o", "json"), want: `"replicas": 2`},
		kubectlCase{args: in("get", "widgets", "-o", "yaml"), want: "color: red"},
		kubectlCase{args: in("get", "configmaps", "-o", "json"), want: `"mode": "slow"`},
		kubectlCase{args: in("get", "pods", "-o", "jsonpath={.items[*].metadata.name}"), want: "solo web-1 web-2"},
		kubectlCase{args: in("get", "pods", "-o", "custom-columns=NAME:.metadata.name,NODE:.spec.nodeName,IMAGE:.spec.containers[0].image"), want: "registry.k8s.io/pause:3.10"},
		kubectlCase{args: in("get", "pods", "--sort-by", "{.metadata.labels.tier}"), want: "web-2"},
		kubectlCase{args: in("get", "widgets", "--sort-by", ".spec.size", "-o", "wide"), want: "w2"},
		kubectlCase{args: []string{"get", "configmaps", "-A", "--sort-by", ".metadata.name"}, want: "cm-b"},
		kubectlCase{args: in("get", "pods,configmaps,widgets", "-l", "app=web"), want: "widget.conformance.kubegate.test/w1"},
		kubectlCase{args: in("get", "pods", "-l", "tier in (front,back),app!=solo", "-o", "wide"), want: "web-2"},
		kubectlCase{args: []string{"get", "pods", "-A", "--field-selector", "spec.nodeName=" + node}, want: "solo"},
		kubectlCase{args: in("get", "pods", "--field-selector", "status.phase=Pending,metadata.name!=solo"), want: "web-2"},
		kubectlCase{args: in("get", "events", "--field-selector", "involvedObject.kind=Pod,reason=Pulled"), want: "Container image already present"},
		kubectlCase{args: in("get", "configmaps", "--chunk-size", "1"), want: "cm-c"},
		kubectlCase{args: []string{"get", "pods", "-A", "--chunk-size", "2", "-o", "name"}, want: "pod/solo"},
		kubectlCase{args: in("get", "pods", "--show-labels"), want: "app=web,tier=front"},
		kubectlCase{args: in("get", "pod", "missing"), code: 1, want: `pods "missing" not found`},
		kubectlCase{args: []string{"get", "nosuchkind"}, code: 1, want: `the server doesn't have a resource type "nosuchkind"`},
		kubectlCase{args: in("describe", "pod", "web-1"), want: "Container image already present"},
		kubectlCase{args: in("describe", "pods", "-l", "app=web"), want: "Name: web-2"},
		kubectlCase{args: in("describe", "deployment", "web"), want: "Replicas:"},
		kubectlCase{args: in("describe", "service", "web"), want: "TargetPort:"},
		kubectlCase{args: in("describe", "hpa", "web"), want: "Min replicas:"},
		kubectlCase{args: in("describe", "widget", "w1"), want: "Color: blue"},
		kubectlCase{args: []string{"describe", "node", node}, want: "Non-terminated Pods:"},
		kubectlCase{args: []string{"explain", "pods.spec.containers"}, want: "FIELD: containers <[]Container>"},
		kubectlCase{args: []string{"explain", "widgets.spec"}, want: "The widget's color, as a word."},
		kubectlCase{args: []string{"explain", "hpa", "--recursive"}, want: "scaleTargetRef"},
		kubectlCase{args: in("events"), want: "Pulled"},
		kubectlCase{args: in("events", "--for", "pod/web-1", "-o", "yaml"), want: "reason: Pulled"},
		kubectlCase{args: []string{"events", "-A"}, want: ns},
		// Pass-through: what the cache does not serve goes to
		// kube-apiserver as the user, and comes back as it answers.
		kubectlCase{args: in("diff", "-f", "-"), stdin: changedDeployment, code: 1, want: "+ replicas: 4"},
		kubectlCase{args: in("apply", "--dry-run=server", "-f", "-"), stdin: changedDeployment, want: "deployment.apps/web configured (server dry run)"},
		kubectlCase{args: in("create", "--dry-run=server", "configmap", "cm-new", "--from-literal=a=1"), want: "configmap/cm-new created (server dry run)"},
		kubectlCase{args: in("create", "--dry-run=server", "-f", "-"), stdin: changedDeployment, code: 1, want: `deployments.apps "web" already exists`},
		kubectlCase{args: in("auth", "can-i", "create", "configmaps"), want: "yes"},
		kubectlCase{args: in("auth", "can-i", "patch", "deployments/scale"), want: "yes"},
		kubectlCase{args: []string{"auth", "can-i", "delete", "nodes"}, code: 1, want: "no"},
		kubectlCase{args: in("auth", "can-i", "create", "secrets"), code: 1, want: "no"},
		kubectlCase{args: in("logs", "web-1"), want: "line 1\nline 2\n"},
		kubectlCase{args: in("logs", "web-2")}, // no node: kube-apiserver answers an empty log
		kubectlCase{args: in("exec", "web-1", "--", "ls"), code: 1, want: "no container runtime"},
		kubectlCase{args: in("top", "pods"), code: 1, want: "Metrics API not available"},
	)
	t.Run("read", func(t *testing.T) {
		for _, c := range reads {
			t.Run(strings.Join(c.args, " "), func(t *testing.T) {
				t.Parallel()
				g.conform(t, c)
			})
		}
	})

	// Writes that change the workload, each with its undo: through the
	// gateway, then straight to kube-apiserver, so that each server is
	// sent the same command on the same state. After each, both servers
	// print the change read back alike, once the gateway's cache has it.
	for _, w := range []struct {
		do, undo, readBack []string
		want               string // in the read back after do, not after undo
	}{
		{in("label", "configmap", "cm-b", "color=blue"), in("label", "configmap", "cm-b", "color-"), in("get", "configmaps", "--show-labels"), "color=blue"},
		{in("annotate", "deployment", "web", "note=hello"), in("annotate", "deployment", "web", "note-"), in("get", "deployment", "web", "-o", "jsonpath={.metadata.annotations}"), `"note":"hello"`},
		{in("scale", "deployment", "web", "--replicas=3"), in("scale", "deployment", "web", "--replicas=2"), in("get", "deployment", "web", "-o", "wide"), "0/3"},
	} {
		var runs [2][2]ran // [gateway, kube-apiserver][do, undo]
		for i, kctx := range []string{"gw-", "api-"} {
			for j, args := range [][]string{w.do, w.undo} {
				runs[i][j] = normalisedRun(g.kubectl(t, kctx+kcUser, "", args...))
				var viaGW, direct ran
				testenv.EventuallyShowing(t, fmt.Sprintf("kubectl %s read back alike after %s", strings.Join(w.readBack, " "), strings.Join(args, " ")), func() bool {
					viaGW, direct = g.pair(t, nil, kcUser, "", w.readBack...)
					return normalisedRun(viaGW) == normalisedRun(direct)
				}, func() string {
					return fmt.Sprintf("through the gateway:\n%s%s\nfrom kube-apiserver:\n%s%s", viaGW.stdout, viaGW.stderr, direct.stdout, direct.stderr)
				})
				if strings.Contains(direct.stdout, w.want) != (j == 0) {
					t.Errorf("after kubectl %s: %q", strings.Join(args, " "), direct.stdout)
				}
			}
		}
		for j, args := range [][]string{w.do, w.undo} {
			if gw, api := runs[0][j], runs[1][j]; gw != api || api.code != 0 {
				t.Errorf("kubectl %s:\nthrough the gateway: %+v\nfrom kube-apiserver: %+v", strings.Join(args, " "), gw, api)
			}
		}
	}

	// The one difference the gateway documents (docs/rest.md, "Differences
	// from kube-apiserver"; docs/auth.md, "Cluster-wide lists and
	// watches"): a user who may list configmaps only in some namespaces
	// is refused a cluster-wide list by kube-apiserver, and shown those
	// namespaces' configmaps by the gateway.
	grantEdit(t, ns, ptWriter)
	viaGW, direct := g.pair(t, nil, ptWriter, "", "get", "configmaps", "-A", "-o", "name")
	if direct.code != 1 || !strings.Contains(direct.stderr, `cannot list resource "configmaps" in API group "" at the cluster scope`) {
		t.Errorf("kubectl get configmaps -A as %s from kube-apiserver: %+v, want its 403", ptWriter, direct)
	}
	// Those of every namespace where grantEdit gave ptWriter its Role:
	// this test's, and those of earlier tests, which stay (Terminating,
	// with no controller to empty them).
	bindings, err := env.Client.RbacV1().RoleBindings("").List(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=" + ptWriter + "-edit"})
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, b := range bindings.Items { // in namespace order, as the gateway lists
		cms, err := env.Client.CoreV1().ConfigMaps(b.Namespace).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, cm := range cms.Items {
			want.WriteString("configmap/" + cm.Name + "\n")
		}
	}
	if viaGW != (ran{stdout: want.String()}) || !strings.Contains(want.String(), "configmap/cm-c\n") {
		t.Errorf("kubectl get configmaps -A as %s through the gateway: %+v, want the configmaps of the namespaces where it may list them:\n%s", ptWriter, viaGW, want.String())
	}
}
