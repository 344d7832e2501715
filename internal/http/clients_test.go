package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"kubegate/internal/testenv"
)

func createPod(t *testing.T, cs kubernetes.Interface, ns, name string, labels map[string]string) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
	if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestClientGo points client-go at the gateway: a typed clientset lists,
// gets and watches, discovery sees only read verbs, and a shared informer
// syncs and receives updates.
func TestClientGo(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	createPod(t, env.Client, ns, "p1", map[string]string{"app": "web"})
	createPod(t, env.Client, ns, "p2", map[string]string{"app": "db"})
	gw := startGateway(t, nil)
	cfg := &rest.Config{Host: gw}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	pods, err := cs.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil || len(pods.Items) != 1 || pods.Items[0].Name != "p1" || pods.Items[0].Spec.Containers[0].Name != "c" {
		t.Fatalf("list: %v %+v", err, pods)
	}
	p, err := cs.CoreV1().Pods(ns).Get(t.Context(), "p2", metav1.GetOptions{})
	if err != nil || p.Labels["app"] != "db" {
		t.Fatalf("get: %v %+v", err, p)
	}
	if _, err := cs.CoreV1().Pods(ns).Get(t.Context(), "nope", metav1.GetOptions{}); !isNotFound(err) {
		t.Errorf("get missing: %v", err)
	}
	if err := cs.CoreV1().Pods(ns).Delete(t.Context(), "p1", metav1.DeleteOptions{}); !isMethodNotAllowed(err) {
		t.Errorf("delete: %v", err)
	}

	w, err := cs.CoreV1().Pods(ns).Watch(t.Context(), metav1.ListOptions{ResourceVersion: pods.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	createPod(t, env.Client, ns, "p3", nil)
	select {
	case ev := <-w.ResultChan():
		if pod, ok := ev.Object.(*corev1.Pod); ev.Type != watch.Added || !ok || pod.Name != "p3" {
			t.Errorf("watch event: %s %#v", ev.Type, ev.Object)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no watch event")
	}

	t.Run("discovery", func(t *testing.T) {
		dc, err := discovery.NewDiscoveryClientForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, lists, err := dc.ServerGroupsAndResources()
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, l := range lists {
			for _, r := range l.APIResources {
				seen[l.GroupVersion+"/"+r.Name] = true
				// Resources the gateway serves nothing of (bindings,
				// tokenreviews; componentstatuses cannot be watched)
				// are listed without verbs, so that kubectl maps
				// their kinds.
				if len(r.Verbs) > 0 && !slices.Equal(r.Verbs, []string{"get", "list", "watch"}) {
					t.Errorf("%s %s: verbs %v", l.GroupVersion, r.Name, r.Verbs)
				}
				if l.GroupVersion == "v1" && (r.Name == "bindings" || r.Name == "componentstatuses") == (len(r.Verbs) > 0) {
					t.Errorf("%s %s: verbs %v", l.GroupVersion, r.Name, r.Verbs)
				}
			}
		}
		if !seen["v1/pods"] || !seen["apps/v1/deployments"] || seen["v1/pods/log"] || !seen["v1/bindings"] {
			t.Errorf("discovery: %v", seen)
		}
		// Aggregated when asked for first, legacy otherwise.
		const agg = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
		for path, accept := range map[string]string{
			"/api": agg + ",application/json", "/apis": agg + ",application/json",
		} {
			r := do(t, "GET", gw+path, "Accept", accept)
			if r.code != 200 || r.hdr.Get("Content-Type") != agg || !strings.Contains(string(r.body), `"kind":"APIGroupDiscoveryList"`) {
				t.Errorf("%s aggregated: %d %s %.200s", path, r.code, r.hdr.Get("Content-Type"), r.body)
			}
			r = do(t, "GET", gw+path, "Accept", "application/json,"+agg)
			if r.code != 200 || r.hdr.Get("Content-Type") != "application/json" || strings.Contains(string(r.body), "APIGroupDiscoveryList") {
				t.Errorf("%s legacy: %d %s %.200s", path, r.code, r.hdr.Get("Content-Type"), r.body)
			}
		}
		legacy, err := discovery.NewDiscoveryClientForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		legacy.UseLegacyDiscovery = true
		_, llists, err := legacy.ServerGroupsAndResources()
		if err != nil {
			t.Fatal(err)
		}
		lseen := map[string]bool{}
		for _, l := range llists {
			for _, r := range l.APIResources {
				lseen[l.GroupVersion+"/"+r.Name] = true
			}
		}
		if !maps.Equal(seen, lseen) {
			t.Errorf("aggregated and legacy discovery differ:\n%v\n%v", seen, lseen)
		}
	})

	t.Run("shared informer", func(t *testing.T) {
		f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
		inf := f.Core().V1().Pods().Informer()
		updated := make(chan string, 10)
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, n any) {
			if pod := n.(*corev1.Pod); pod.Labels["v"] == "2" {
				updated <- pod.Name
			}
		}}); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		defer func() { close(stop); f.Shutdown() }()
		f.Start(stop)
		if !cache.WaitForCacheSync(t.Context().Done(), inf.HasSynced) {
			t.Fatal("informer did not sync")
		}
		keys := inf.GetStore().ListKeys()
		slices.Sort(keys)
		if !slices.Equal(keys, []string{ns + "/p1", ns + "/p2", ns + "/p3"}) {
			t.Errorf("informer store: %v", keys)
		}
		if _, err := env.Client.CoreV1().Pods(ns).Patch(t.Context(), "p2", "application/merge-patch+json",
			[]byte(`{"metadata":{"labels":{"v":"2"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		select {
		case name := <-updated:
			if name != "p2" {
				t.Errorf("update of %s", name)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the informer saw no update")
		}
	})
}

func isNotFound(err error) bool {
	return err != nil && strings.Contains(err.Error(), "not found")
}

func isMethodNotAllowed(err error) bool {
	return err != nil && strings.Contains(err.Error(), "read-only")
}

// TestKubectl runs the real kubectl against the gateway.
func TestKubectl(t *testing.T) {
	env := testenv.Get(t)
	kubectl := env.Kubectl(t)
	ns := env.Namespace(t)
	createPod(t, env.Client, ns, "web-1", map[string]string{"app": "web"})
	createPod(t, env.Client, ns, "db-1", map[string]string{"app": "db"})
	gw := startGateway(t, nil)
	dir := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		args = append([]string{"--server", gw, "--cache-dir", filepath.Join(dir, "cache"), "--request-timeout", "30s"}, args...)
		cmd := exec.CommandContext(t.Context(), kubectl, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(dir, "none"), "HOME="+dir)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errb.String())
		}
		return out.String()
	}
	out := run("get", "pods", "-A")
	if !strings.Contains(out, "NAMESPACE") || !regexpLine(out, ns, "web-1") || !regexpLine(out, ns, "db-1") {
		t.Errorf("get pods -A:\n%s", out)
	}
	if strings.Count(strings.SplitN(out, "\n", 2)[0], "NAMESPACE") != 1 {
		t.Errorf("get pods -A header:\n%s", out)
	}
	out = run("get", "pods", "-A", "-o", "wide")
	if strings.Count(strings.SplitN(out, "\n", 2)[0], "NAMESPACE") != 1 || !regexpLine(out, ns, "web-1") {
		t.Errorf("get pods -A -o wide:\n%s", out)
	}
	out = run("get", "pods", "-n", ns, "-o", "wide")
	if !regexpLine(out, "NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE") || !regexpLine(out, "web-1", "0/1", "Pending") {
		t.Errorf("get pods -n -o wide:\n%s", out)
	}
	out = run("get", "pods", "-n", ns, "-l", "app=web")
	if !strings.Contains(out, "web-1") || strings.Contains(out, "db-1") {
		t.Errorf("get pods -l:\n%s", out)
	}
	out = run("get", "pod", "web-1", "-n", ns, "-o", "yaml")
	if !strings.Contains(out, "name: web-1") || !strings.Contains(out, "image: registry.k8s.io/pause:3.10") {
		t.Errorf("-o yaml:\n%s", out)
	}
	out = run("get", "--raw", "/api/v1/namespaces/"+ns+"/pods/db-1")
	if !strings.Contains(out, `"name":"db-1"`) {
		t.Errorf("get --raw:\n%s", out)
	}
	out = run("get", "deploy", "-n", ns, "-o", "name")
	if strings.TrimSpace(out) != "" {
		t.Errorf("get deploy:\n%s", out)
	}
	out = run("api-resources", "--namespaced=true", "-o", "name")
	if !strings.Contains(out, "pods\n") {
		t.Errorf("api-resources:\n%s", out)
	}
}

// regexpLine reports whether some line of out holds all words.
func regexpLine(out string, words ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		ok := true
		for _, w := range words {
			ok = ok && strings.Contains(line, w)
		}
		if ok {
			return true
		}
	}
	return false
}

var gadgetGVR = schema.GroupVersionResource{Group: "rest.kubegate.test", Version: "v1", Resource: "gadgets"}

// ensureGadgetCRD creates a CRD with printer columns, unless it exists
// already, and waits until the apiserver serves it.
func ensureGadgetCRD(t *testing.T, env *testenv.Env) {
	t.Helper()
	env.EnsureCRD(t, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "gadgets.rest.kubegate.test"},
		"spec": map[string]any{
			"group": "rest.kubegate.test", "scope": "Namespaced",
			"names": map[string]any{"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"additionalPrinterColumns": []any{
					map[string]any{"name": "Color", "type": "string", "jsonPath": ".spec.color"},
					map[string]any{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
				},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object",
					"x-kubernetes-preserve-unknown-fields": true}},
			}},
		},
	}})
}

// TestKubectlCustomResourcesAndWatch checks `kubectl get <crd-plural>`
// (printer columns) and `kubectl get -w`.
func TestKubectlCustomResourcesAndWatch(t *testing.T) {
	env := testenv.Get(t)
	kubectl := env.Kubectl(t)
	ns := env.Namespace(t)
	ensureGadgetCRD(t, env)
	g := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "rest.kubegate.test/v1", "kind": "Gadget",
		"metadata": map[string]any{"name": "g1"}, "spec": map[string]any{"color": "teal"}}}
	if _, err := env.Dynamic.Resource(gadgetGVR).Namespace(ns).Create(t.Context(), g, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gw := startGateway(t, nil)
	dir := t.TempDir()
	base := []string{"--server", gw, "--cache-dir", filepath.Join(dir, "cache"), "--request-timeout", "0"}
	cmd := exec.CommandContext(t.Context(), kubectl, append(base, "get", "gadgets", "-n", ns)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(dir, "none"), "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil || !regexpLine(string(out), "NAME", "COLOR", "AGE") || !regexpLine(string(out), "g1", "teal") ||
		strings.Count(string(out), "AGE") != 1 {
		t.Fatalf("get gadgets: %v\n%s", err, out)
	}

	// The first pod shows in kubectl's initial list; the second can only
	// arrive through its watch.
	createPod(t, env.Client, ns, "listed-1", nil)
	testenv.Eventually(t, "listed-1 in the cache", func() bool {
		return do(t, "GET", gw+"/api/v1/namespaces/"+ns+"/pods/listed-1").code == 200
	})
	cmd = exec.CommandContext(t.Context(), kubectl, append(base, "get", "pods", "-n", ns, "-w")...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(dir, "none"), "HOME="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	defer func() {
		_ = cmd.Process.Kill()
		for range lines {
		}
		_ = cmd.Wait()
	}()
	deadline := time.After(30 * time.Second)
	for listed := false; !listed; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("kubectl get -w ended: %s", stderr.String())
			}
			listed = strings.Contains(l, "listed-1")
		case <-deadline:
			t.Fatalf("kubectl get -w never printed listed-1: %s", stderr.String())
		}
	}
	createPod(t, env.Client, ns, "watched-1", nil)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("kubectl get -w ended: %s", stderr.String())
			}
			if strings.Contains(l, "watched-1") {
				return
			}
		case <-deadline:
			t.Fatalf("kubectl get -w never printed watched-1: %s", stderr.String())
		}
	}
}

// TestKubectlTablesMatchAPIServer runs `kubectl get` for the resources
// with built-in printers against the gateway and against the apiserver
// directly: the headers must be the same, and so must every cell but the
// ages (the two compute those a moment apart).
func TestKubectlTablesMatchAPIServer(t *testing.T) {
	env := testenv.Get(t)
	kubectl := env.Kubectl(t)
	ns := env.Namespace(t)
	ctx := t.Context()
	createPod(t, env.Client, ns, "web-1", map[string]string{"app": "web"})
	labels := map[string]string{"app": "web"}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(env.Client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}},
		metav1.CreateOptions{}))
	must(env.Client.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-1"},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}, metav1.CreateOptions{}))
	must(env.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{}))
	must(env.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ext"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com"}}, metav1.CreateOptions{}))
	must(env.Client.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}, metav1.CreateOptions{}))
	must(env.Client.AppsV1().DaemonSets(ns).Create(ctx, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}, metav1.CreateOptions{}))
	jobTmpl := *tmpl.DeepCopy()
	jobTmpl.Labels = nil
	jobTmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	must(env.Client.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "once"},
		Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](2), Template: jobTmpl}}, metav1.CreateOptions{}))
	must(env.Client.BatchV1().CronJobs(ns).Create(ctx, &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "nightly"},
		Spec: batchv1.CronJobSpec{Schedule: "0 3 * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: jobTmpl}}}},
		metav1.CreateOptions{}))
	createConfigMaps(t, env.Client, ns, nil, "settings")
	must(env.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		StringData: map[string]string{"user": "u", "pass": "p"}}, metav1.CreateOptions{}))
	must(env.Client.CoreV1().Events(ns).Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "web-1.1"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web-1"}, Type: "Warning", Reason: "BackOff",
		Message: "Back-off restarting", Count: 3, Source: corev1.EventSource{Component: "kubelet", Host: "n1"},
		FirstTimestamp: metav1.NewTime(time.Now().Add(-time.Hour)), LastTimestamp: metav1.NewTime(time.Now().Add(-time.Minute))},
		metav1.CreateOptions{}))
	node := ns + "-node"
	must(env.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node,
		Labels: map[string]string{"node-role.kubernetes.io/worker": ""}}}, metav1.CreateOptions{}))
	t.Cleanup(func() { _ = env.Client.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })

	gw := startGateway(t, nil)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := env.CP.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	run := func(server bool, args ...string) string {
		t.Helper()
		cfg := kubeconfig
		if !server {
			args = append([]string{"--server", gw}, args...)
			cfg = filepath.Join(dir, "none")
		}
		args = append([]string{"--cache-dir", filepath.Join(dir, "cache"), "--request-timeout", "30s"}, args...)
		cmd := exec.CommandContext(ctx, kubectl, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+cfg, "HOME="+dir)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errb.String())
		}
		return out.String()
	}
	for _, args := range [][]string{
		{"get", "pods", "-n", ns},
		{"get", "pods", "-n", ns, "-o", "wide"},
		{"get", "deployments", "-n", ns},
		{"get", "deployments", "-n", ns, "-o", "wide"},
		{"get", "replicasets", "-n", ns, "-o", "wide"},
		{"get", "services", "-n", ns},
		{"get", "services", "-n", ns, "-o", "wide"},
		{"get", "configmaps", "-n", ns, "settings"},
		{"get", "secrets", "-n", ns, "creds"},
		{"get", "namespaces", ns},
		{"get", "nodes", node},
		{"get", "nodes", node, "-o", "wide"},
		{"get", "events", "-n", ns},
		{"get", "events", "-n", ns, "-o", "wide"},
		{"get", "statefulsets", "-n", ns, "-o", "wide"},
		{"get", "daemonsets", "-n", ns, "-o", "wide"},
		{"get", "jobs", "-n", ns, "-o", "wide"},
		{"get", "cronjobs", "-n", ns, "-o", "wide"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			want := run(true, args...)
			var got string
			// The gateway's cache may trail the writes above by a moment.
			testenv.Eventually(t, "the gateway to list as many rows as the apiserver", func() bool {
				got = run(false, args...)
				return strings.Count(got, "\n") >= strings.Count(want, "\n")
			})
			wantHeader, wantRows := tableCells(want)
			gotHeader, gotRows := tableCells(got)
			if diff := cmp.Diff(wantHeader, gotHeader); diff != "" {
				t.Errorf("header (-apiserver +gateway):\n%s\napiserver:\n%sgateway:\n%s", diff, want, got)
			}
			if diff := cmp.Diff(wantRows, gotRows); diff != "" {
				t.Errorf("rows (-apiserver +gateway):\n%s\napiserver:\n%sgateway:\n%s", diff, want, got)
			}
		})
	}
	// Cluster-wide, kubectl adds NAMESPACE in front of the same columns.
	want, _ := tableCells(run(true, "get", "pods", "-A", "-o", "wide"))
	got, _ := tableCells(run(false, "get", "pods", "-A", "-o", "wide"))
	if !slices.Equal(want, got) {
		t.Errorf("get pods -A -o wide header: apiserver %q, gateway %q", want, got)
	}
}

// tableCells splits kubectl's table output into the header's column names
// and the rows' cells by the columns' offsets in the header, leaving out
// the age columns.
func tableCells(out string) ([]string, []map[string]string) {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	type column struct {
		name       string
		start, end int
	}
	var cols []column
	for _, loc := range regexp.MustCompile(`\S+( \S+)*`).FindAllStringIndex(lines[0], -1) {
		cols = append(cols, column{name: lines[0][loc[0]:loc[1]], start: loc[0]})
	}
	var header []string
	for i := range cols {
		header = append(header, cols[i].name)
		cols[i].end = -1
		if i+1 < len(cols) {
			cols[i].end = cols[i+1].start
		}
	}
	var rows []map[string]string
	for _, l := range lines[1:] {
		row := map[string]string{}
		for _, c := range cols {
			switch c.name {
			case "AGE", "LAST SEEN", "FIRST SEEN":
				continue
			}
			end := c.end
			if end < 0 || end > len(l) {
				end = len(l)
			}
			if c.start < len(l) {
				row[c.name] = strings.TrimSpace(l[c.start:end])
			}
		}
		rows = append(rows, row)
	}
	return header, rows
}
