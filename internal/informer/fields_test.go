package informer

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"kubegate/internal/testenv"
)

func TestParseFieldPath(t *testing.T) {
	for in, want := range map[string][]string{
		".spec.color":         {"spec", "color"},
		".spec['a.b'].c":      {"spec", "a.b", "c"},
		`.spec["x"]`:          {"spec", "x"},
		".status.pool.name":   {"status", "pool", "name"},
		".metadata.labels.x1": {"metadata", "labels", "x1"},
	} {
		got, err := parseFieldPath(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("parseFieldPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "spec.color", ".spec..color", ".spec['a", ".spec['a'x", "."} {
		if got, err := parseFieldPath(bad); err == nil {
			t.Errorf("parseFieldPath(%q) = %q, want an error", bad, got)
		}
	}
}

// TestFieldValues checks the values kube-apiserver gives fields that the
// served JSON leaves out or spreads over several members.
func TestFieldValues(t *testing.T) {
	gr := func(group, resource string) []selectableField {
		return builtinFieldSet(schema.GroupResource{Group: group, Resource: resource}).fields
	}
	for _, tc := range []struct {
		fields []selectableField
		json   string
		want   map[string]string
	}{
		{gr("", "pods"), `{"kind":"Pod","metadata":{"name":"a"},"spec":{"nodeName":"n1"},"status":{"podIPs":[{"ip":"10.0.0.1"}]}}`,
			map[string]string{"spec.nodeName": "n1", "spec.hostNetwork": "false", "status.podIPs": "", "spec.host": ""}},
		{gr("", "pods"), `{"kind":"Pod","metadata":{"name":"a"},"spec":{"hostNetwork":true}}`,
			map[string]string{"spec.nodeName": "", "spec.hostNetwork": "true"}},
		{gr("", "nodes"), `{"kind":"Node","metadata":{"name":"a"},"spec":{}}`, map[string]string{"spec.unschedulable": "false"}},
		{gr("batch", "jobs"), `{"kind":"Job","metadata":{"name":"a"},"status":{}}`, map[string]string{"status.successful": "0"}},
		{gr("batch", "jobs"), `{"kind":"Job","metadata":{"name":"a"},"status":{"succeeded":2}}`, map[string]string{"status.successful": "2"}},
		{gr("", "events"), `{"kind":"Event","metadata":{"name":"a"},"source":{"component":"c"},"reportingComponent":"r"}`,
			map[string]string{"source": "c", "reportingComponent": "r"}},
		{gr("", "events"), `{"kind":"Event","metadata":{"name":"a"},"source":{},"reportingComponent":"r"}`, map[string]string{"source": "r"}},
		{gr("", "events"), `{"kind":"Event","metadata":{"name":"a"},"source":{"component":""},"reportingComponent":""}`, map[string]string{"source": ""}},
		{gr("resource.k8s.io", "resourceslices"), `{"kind":"ResourceSlice","metadata":{"name":"a"},"spec":{"driver":"d","pool":{"name":"p"},"allNodes":true}}`,
			map[string]string{"spec.nodeName": "", "spec.driver": "d", "spec.pool.name": "p"}},
	} {
		o, err := newFieldDecoder(podGVK, false, tc.fields).decode([]byte(tc.json))
		if err != nil {
			t.Fatal(err)
		}
		for f, want := range tc.want {
			if got := o.Get(f); got != want {
				t.Errorf("%s: %s = %q, want %q", tc.json, f, got, want)
			}
		}
	}
}

// quietClient is a REST client of the test apiserver that does not log
// the warnings kube-apiserver sends for deprecated resources.
func quietClient(t *testing.T, env *testenv.Env) rest.Interface {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = rest.NoWarnings{}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs.Discovery().RESTClient()
}

// candidateFields are the field labels whose acceptance is compared with
// kube-apiserver's for every resource: every field of builtinFields, and
// some kube-apiserver computes but refuses.
func candidateFields() []string {
	set := map[string]bool{"metadata.name": true, "metadata.namespace": true, "name": true,
		"status.replicas": true, "spec.leaseName": true, "spec.bogus": true}
	for _, b := range builtinFields {
		for _, f := range b.fields {
			set[f.name] = true
		}
		for a := range b.aliases {
			set[a] = true
		}
	}
	out := make([]string, 0, len(set))
	for f := range set {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

// selectableCRD is a CRD with selectable fields of each allowed type.
func selectableCRD(group string) *unstructured.Unstructured {
	crd := testenv.NewCRD(group, "gauges", "Gauge")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	v := versions[0].(map[string]any)
	v["schema"] = map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{
		"spec": map[string]any{"type": "object", "properties": map[string]any{
			"color":   map[string]any{"type": "string"},
			"size":    map[string]any{"type": "integer"},
			"enabled": map[string]any{"type": "boolean"},
			"pool":    map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}},
		}}}}}
	v["selectableFields"] = []any{
		map[string]any{"jsonPath": ".spec.color"}, map[string]any{"jsonPath": ".spec.size"},
		map[string]any{"jsonPath": ".spec.enabled"}, map[string]any{"jsonPath": ".spec.pool.name"},
	}
	_ = unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions")
	return crd
}

// TestFieldSelectorsMatchKubeAPIServer: for every resource kube-apiserver
// serves, the gateway accepts exactly the field labels kube-apiserver
// accepts, and a CRD's selectableFields.
func TestFieldSelectorsMatchKubeAPIServer(t *testing.T) {
	env := testenv.Get(t)
	group := "fields.kubegate.io"
	env.EnsureCRD(t, selectableCRD(group))
	m := startManager(t, env.Config, nil)
	lists, err := env.Client.Discovery().ServerPreferredResources()
	if err != nil {
		t.Fatal(err)
	}
	hc := quietClient(t, env)
	type probe struct {
		name, path string
		info       *ResourceInfo
	}
	var probes []probe
	for _, l := range lists {
		gv, _ := schema.ParseGroupVersion(l.GroupVersion)
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "watch") {
				continue
			}
			name := r.Name + "." + gv.Version + "." + gv.Group
			info, err := m.Resolve(t.Context(), name)
			if err != nil {
				t.Fatalf("Resolve(%s): %v", name, err)
			}
			probes = append(probes, probe{name, resourcePath(info.GVR), info})
		}
	}
	candidates := append(candidateFields(), "spec.color", "spec.size", "spec.enabled", "spec.pool.name")
	var mu sync.Mutex
	var diffs []string
	var wg sync.WaitGroup
	work := make(chan probe)
	for range 4 {
		wg.Go(func() {
			for p := range work {
				for _, f := range candidates {
					sel := f + "=x"
					err := hc.Get().AbsPath(p.path).Param("fieldSelector", sel).Param("limit", "1").Do(t.Context()).Error()
					var apiOK bool
					switch {
					case err == nil:
						apiOK = true
					case apierrors.IsBadRequest(err):
					default:
						t.Errorf("%s %s: %v", p.name, sel, err)
						continue
					}
					_, gwErr := ParseFilter(p.info, "", "", sel)
					if apiOK != (gwErr == nil) {
						mu.Lock()
						diffs = append(diffs, fmt.Sprintf("%s %s: kube-apiserver accepts: %v, gateway: %v", p.name, f, apiOK, gwErr))
						mu.Unlock()
					}
				}
			}
		})
	}
	for _, p := range probes {
		work <- p
	}
	close(work)
	wg.Wait()
	sort.Strings(diffs)
	for _, d := range diffs {
		t.Error(d)
	}
	if len(probes) < 40 {
		t.Fatalf("probed only %d resources", len(probes))
	}
}

// TestFieldSelectorsSelectAsKubeAPIServer: the cache selects exactly what
// kube-apiserver selects, for values the served JSON leaves out (false,
// 0, ""), values computed from several fields, fields kube-apiserver
// accepts but gives no value, and a CRD's selectableFields.
func TestFieldSelectorsSelectAsKubeAPIServer(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	group := "fields.kubegate.io"
	env.EnsureCRD(t, selectableCRD(group))
	ns := env.Namespace(t)
	cs := env.Client
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	pod := func(name string, spec corev1.PodSpec) *corev1.Pod {
		spec.Containers = []corev1.Container{{Name: "c", Image: "busybox"}}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	}
	must(cs.CoreV1().Pods(ns).Create(ctx, pod("p1", corev1.PodSpec{NodeName: "n1", HostNetwork: true, RestartPolicy: corev1.RestartPolicyNever}), metav1.CreateOptions{}))
	must(cs.CoreV1().Pods(ns).Create(ctx, pod("p2", corev1.PodSpec{}), metav1.CreateOptions{}))
	p1, err := cs.CoreV1().Pods(ns).Get(ctx, "p1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p1.Status.Phase = corev1.PodRunning
	p1.Status.PodIP, p1.Status.PodIPs = "10.0.0.1", []corev1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}}
	must(cs.CoreV1().Pods(ns).UpdateStatus(ctx, p1, metav1.UpdateOptions{}))
	p2, err := cs.CoreV1().Pods(ns).Get(ctx, "p2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p2.Status.NominatedNodeName = "n2" // only for pods not bound to a node
	must(cs.CoreV1().Pods(ns).UpdateStatus(ctx, p2, metav1.UpdateOptions{}))

	suffix := ns[len(ns)-5:]
	node := func(name string, unschedulable bool) {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + suffix}, Spec: corev1.NodeSpec{Unschedulable: unschedulable}}
		must(cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}))
		t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{}) })
	}
	node("cordoned", true)
	node("open", false)

	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j1"}, Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}
	must(cs.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}))

	must(cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s1"}, Type: "example.com/custom"}, metav1.CreateOptions{}))
	must(cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s2"}}, metav1.CreateOptions{}))
	svc, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	must(cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "headless"},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{}))

	ref := corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "p1", APIVersion: "v1"}
	must(cs.CoreV1().Events(ns).Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e1"}, InvolvedObject: ref,
		Reason: "Started", Type: "Normal", Source: corev1.EventSource{Component: "kubelet"}}, metav1.CreateOptions{}))
	must(cs.CoreV1().Events(ns).Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e2"}, InvolvedObject: ref,
		Reason: "Scheduled", Type: "Warning", ReportingController: "example.com/ctrl", ReportingInstance: "i1",
		Action: "Bind", EventTime: metav1.NowMicro()}, metav1.CreateOptions{}))

	slice := func(name string, spec resourcev1.ResourceSliceSpec) {
		s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + suffix}, Spec: spec}
		must(cs.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{}))
		t.Cleanup(func() {
			_ = cs.ResourceV1().ResourceSlices().Delete(context.Background(), s.Name, metav1.DeleteOptions{})
		})
	}
	slice("on-n1", resourcev1.ResourceSliceSpec{Driver: "gpu.example.com", NodeName: ptr.To("n1"),
		Pool: resourcev1.ResourcePool{Name: "pool-a", ResourceSliceCount: 1}})
	slice("everywhere", resourcev1.ResourceSliceSpec{Driver: "net.example.com", AllNodes: ptr.To(true),
		Pool: resourcev1.ResourcePool{Name: "pool-b", ResourceSliceCount: 1}})

	gauges := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "gauges"}
	for name, spec := range map[string]map[string]any{
		"g1": {"color": "red", "size": int64(3), "enabled": true, "pool": map[string]any{"name": "a"}},
		"g2": {"color": "blue", "size": int64(0), "enabled": false},
		"g3": {},
	} {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Gauge",
			"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec}}
		must(env.Dynamic.Resource(gauges).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}))
	}

	m := startManager(t, env.Config, nil)
	hc := quietClient(t, env)
	for _, tc := range []struct {
		resource  string
		namespace string // "" for cluster-scoped
		selectors []string
	}{
		{"pods", ns, []string{"spec.nodeName=n1", "spec.nodeName=", "spec.nodeName!=n1", "spec.host=n1",
			"spec.hostNetwork=false", "spec.hostNetwork=true", "spec.restartPolicy=Never", "spec.restartPolicy=Always",
			"spec.schedulerName=default-scheduler", "spec.serviceAccountName=default", "status.phase=Running",
			"status.phase=Pending", "status.podIP=10.0.0.1", "status.podIP=", "status.podIPs=10.0.0.1",
			"status.podIPs!=10.0.0.1", "status.podIPs=", "status.nominatedNodeName=n2", "spec.nodeName=n1,status.phase=Running",
			"metadata.name=p2", "metadata.namespace=" + ns}},
		{"nodes", "", []string{"spec.unschedulable=true", "spec.unschedulable=false", "spec.unschedulable!=true"}},
		{"jobs.batch", ns, []string{"status.successful=0", "status.successful=1", "status.successful!=0"}},
		{"secrets", ns, []string{"type=Opaque", "type=example.com/custom", "type!=Opaque"}},
		{"services", ns, []string{"spec.type=ClusterIP", "spec.clusterIP=" + svc.Spec.ClusterIP, "spec.clusterIP=None", "spec.type=NodePort"}},
		{"events", ns, []string{"source=kubelet", "source=example.com/ctrl", "source=", "reportingComponent=example.com/ctrl",
			"reportingComponent=", "involvedObject.name=p1", "involvedObject.kind=Pod", "reason=Started", "type=Warning"}},
		{"events.v1.events.k8s.io", ns, []string{"regarding.name=p1", "regarding.kind=Pod", "reportingController=example.com/ctrl",
			"reportingController=", "reason=Scheduled", "type=Normal"}},
		{"namespaces", "", []string{"status.phase=Active", "metadata.name=" + ns}},
		{"resourceslices.v1.resource.k8s.io", "", []string{"spec.nodeName=n1", "spec.nodeName=", "spec.driver=net.example.com",
			"spec.pool.name=pool-a", "spec.pool.name!=pool-a"}},
		{"gauges." + group, ns, []string{"spec.color=red", "spec.color=", "spec.size=3", "spec.size=0", "spec.enabled=true",
			"spec.enabled=false", "spec.enabled=", "spec.pool.name=a", "spec.pool.name!=a"}},
	} {
		t.Run(tc.resource, func(t *testing.T) {
			r := syncedResource(t, m, tc.resource)
			path := resourcePath(r.Info.GVR)
			if tc.namespace != "" {
				path = strings.TrimSuffix(path, "/"+r.Info.GVR.Resource) + "/namespaces/" + tc.namespace + "/" + r.Info.GVR.Resource
			}
			// Only this test's objects count, cluster-wide.
			ours := func(name string) bool {
				return tc.namespace != "" || strings.HasSuffix(name, suffix) || name == ns
			}
			apiNames := func(sel string) ([]string, uint64) {
				var l metav1.PartialObjectMetadataList
				err := hc.Get().AbsPath(path).Param("fieldSelector", sel).
					SetHeader("Accept", "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io").Do(ctx).Into(&l)
				if err != nil {
					t.Fatalf("kube-apiserver, %s: %v", sel, err)
				}
				// The list's own resourceVersion is etcd's, which other
				// resources' writes move on (kube-apiserver's leases do,
				// every 10 s): the cache of this resource reaches it only
				// with its next change or bookmark. What the list saw of
				// this resource is its items' newest version.
				var names []string
				var newest uint64
				for _, o := range l.Items {
					var v uint64
					fmt.Sscan(o.ResourceVersion, &v)
					newest = max(newest, v)
					if ours(o.Name) {
						names = append(names, o.Name)
					}
				}
				sort.Strings(names)
				return names, newest
			}
			cacheNames := func(sel string) ([]string, uint64) {
				f, err := ParseFilter(r.Info, tc.namespace, "", sel)
				if err != nil {
					t.Fatalf("gateway, %s: %v", sel, err)
				}
				objs, rv := r.List(&f)
				var names []string
				for _, o := range objs {
					if ours(o.Name) {
						names = append(names, o.Name)
					}
				}
				sort.Strings(names)
				return names, rv
			}
			for _, sel := range tc.selectors {
				want, listRV := apiNames(sel)
				// The cache has seen at least what the list saw.
				if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, testenv.WaitLimit, true, func(context.Context) (bool, error) {
					_, crv := cacheNames(sel)
					return crv >= listRV, nil
				}); err != nil {
					t.Fatalf("%s: the cache never reached %d, the newest version the list held", sel, listRV)
				}
				got, _ := cacheNames(sel)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s (-kube-apiserver +gateway):\n%s", sel, diff)
				}
			}
		})
	}
}

// TestCRDSelectableFieldsFollowTheCRD: when a CRD's selectableFields are
// edited, kube-apiserver rebuilds its storage, which ends the watch; the
// informer reads the CRD as it watches again, lists again extracting the
// new fields, and serves them.
func TestCRDSelectableFieldsFollowTheCRD(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	group := "refields.kubegate.io"
	crd := selectableCRD(group)
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	versions[0].(map[string]any)["selectableFields"] = []any{map[string]any{"jsonPath": ".spec.color"}}
	_ = unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions")
	env.CreateCRD(t, crd)
	ns := env.Namespace(t)
	gauges := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "gauges"}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Gauge",
		"metadata": map[string]any{"name": "g1", "namespace": ns}, "spec": map[string]any{"color": "red", "size": int64(3)}}}
	if _, err := env.Dynamic.Resource(gauges).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	m, logs := observedManager(t, env.Config, nil)
	r := syncedResource(t, m, "gauges."+group)
	if diff := cmp.Diff([]string{"metadata.name", "metadata.namespace", "spec.color"}, r.Info.SelectableFields()); diff != "" {
		t.Fatalf("fields (-want +got):\n%s", diff)
	}
	if _, err := ParseFilter(r.Info, ns, "", "spec.size=3"); err == nil {
		t.Fatal("spec.size accepted before the CRD selects it")
	}

	crds := env.Dynamic.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	cur, err := crds.Get(ctx, crd.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	versions, _, _ = unstructured.NestedSlice(cur.Object, "spec", "versions")
	versions[0].(map[string]any)["selectableFields"] = []any{map[string]any{"jsonPath": ".spec.color"}, map[string]any{"jsonPath": ".spec.size"}}
	_ = unstructured.SetNestedSlice(cur.Object, versions, "spec", "versions")
	if _, err := crds.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		info, err := m.Resolve(ctx, "gauges."+group)
		if err != nil {
			return false, err
		}
		f, err := ParseFilter(info, ns, "", "spec.size=3")
		if err != nil {
			return false, nil
		}
		objs, _ := r.List(&f)
		return len(objs) == 1 && objs[0].Name == "g1", nil
	})
	if err != nil {
		t.Fatalf("spec.size never selected g1: fields %v: %v", r.Info.SelectableFields(), err)
	}
	if logs.FilterMessageSnippet("selectableFields changed").Len() == 0 {
		t.Fatal("the change was not logged")
	}
}
