package rows

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/utils/ptr"

	"kubegate/internal/cell"
	"kubegate/internal/informer"
)

// typedString shows a typed value as kind:text.
func typedString(v cell.Value) string {
	switch v.Kind() {
	case cell.KindNumber:
		return "number:" + v.String()
	case cell.KindTime:
		return "time:" + v.String()
	case cell.KindString:
		return "string:" + v.String()
	}
	return "missing"
}

// goldenRow is a row as the golden files of testdata/rows show it: as
// encoded for WebSocket, and its typed values.
type goldenRow struct {
	Row   json.RawMessage `json:"row"`
	Typed []string        `json:"typed"`
}

// checkRows checks p's rows of objs: relative cells only in relative
// columns, shown at now as their time since, and the encoded row and
// typed values against testdata/rows/<name>.json.
func checkRows(t *testing.T, name string, p *Printer, objs []*informer.Object) {
	t.Helper()
	var got []goldenRow
	for _, o := range objs {
		r := p.Row(o)
		if len(r.Cells) != len(p.Columns()) {
			t.Fatalf("%s: %d cells for %d columns", o.Name, len(r.Cells), len(p.Columns()))
		}
		var g goldenRow
		for i, c := range r.Cells {
			if c.Relative() {
				if !p.Columns()[i].Relative {
					t.Errorf("%s: relative cell in column %s, not marked relative", o.Name, p.Columns()[i].Name)
				}
				want := c.Prefix + duration.HumanDuration(goldenNow.Sub(c.Since)) + c.Suffix
				if d := c.Display(goldenNow); d != want {
					t.Errorf("%s: relative cell %s shows %v, want %q", o.Name, p.Columns()[i].Name, d, want)
				}
			}
			g.Typed = append(g.Typed, typedString(c.Typed))
		}
		g.Row = p.Encoded(o)
		got = append(got, g)
	}
	golden(t, filepath.Join("rows", name+".json"), got)
}

// TestBuiltinRows checks the rows of every built-in printer as sent over
// WebSocket (relative cells as the time they count from) and their typed
// values, against testdata/rows/<resource>.json.
func TestBuiltinRows(t *testing.T) {
	for _, gvr := range Builtin() {
		t.Run(gvr.Resource, func(t *testing.T) {
			checkRows(t, gvr.Resource, New(&informer.ResourceInfo{GVR: gvr}, nil), fixtureObjects(t, gvr.Resource))
		})
	}
}

// TestRelativeCellsAreTimes spells out the relative cells of a few
// fixtures: encoded as the times they count from, typed as those times,
// or as numbers where the column counts something.
func TestRelativeCellsAreTimes(t *testing.T) {
	cell := func(resource, name, column string) (Cell, Column) {
		t.Helper()
		p := New(&informer.ResourceInfo{GVR: gvrOf(t, resource)}, nil)
		for _, o := range fixtureObjects(t, resource) {
			if o.Name != name {
				continue
			}
			for i, c := range p.Columns() {
				if c.Name == column {
					return p.Row(o).Cells[i], c
				}
			}
		}
		t.Fatalf("no cell %s of %s %s", column, resource, name)
		return Cell{}, Column{}
	}
	at := func(d time.Duration) string { return goldenNow.Add(-d).UTC().Format(time.RFC3339) }
	for _, c := range []struct {
		resource, name, column string
		json                   string
		typed                  string
	}{
		{"pods", "running", "Age", `{"since":"` + at(3*time.Hour) + `"}`, "time:" + at(3*time.Hour)},
		{"pods", "running", "Restarts", `{"prefix":"2 (","since":"` + at(time.Hour) + `","suffix":" ago)"}`, "number:2"},
		{"pods", "pending", "Restarts", `"0"`, "number:0"},
		{"jobs", "busy", "Duration", `{"since":"` + at(40*time.Second) + `"}`, "time:" + at(40*time.Second)},
		{"jobs", "done", "Duration", `"10m"`, "number:600"},
		{"jobs", "paused", "Duration", `""`, "missing"},
		{"cronjobs", "nightly", "Last Schedule", `{"since":"` + at(9*time.Hour) + `"}`, "time:" + at(9*time.Hour)},
		{"cronjobs", "never", "Last Schedule", `"<none>"`, "missing"},
		{"events", "web.1", "Last Seen", `{"since":"` + at(2*time.Minute) + `"}`, "time:" + at(2*time.Minute)},
		{"events", "web.2", "Last Seen", `{"since":"` + at(5*time.Second) + `"}`, "time:" + at(5*time.Second)},
		{"events", "web.2", "First Seen", `{"since":"` + at(time.Minute) + `"}`, "time:" + at(time.Minute)},
	} {
		got, col := cell(c.resource, c.name, c.column)
		b, err := got.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.json || typedString(got.Typed) != c.typed || !col.Relative {
			t.Errorf("%s %s %s: %s typed %s (column relative %v), want %s typed %s in a relative column",
				c.resource, c.name, c.column, b, typedString(got.Typed), col.Relative, c.json, c.typed)
		}
	}
}

func gvrOf(t *testing.T, resource string) schema.GroupVersionResource {
	t.Helper()
	for _, gvr := range Builtin() {
		if gvr.Resource == resource {
			return gvr
		}
	}
	t.Fatalf("no built-in printer for %s", resource)
	return schema.GroupVersionResource{}
}

// gizmoColumns are printer columns of every type.
var gizmoColumns = []PrinterColumn{
	{Name: "Phase", Type: "string", JSONPath: ".status.phase"},
	{Name: "Count", Type: "integer", JSONPath: ".spec.count"},
	{Name: "Ratio", Type: "number", JSONPath: ".spec.ratio"},
	{Name: "On", Type: "boolean", JSONPath: ".spec.on"},
	{Name: "Seen", Type: "date", JSONPath: ".status.seen"},
	{Name: "Obj", Type: "string", JSONPath: ".spec.obj", Priority: 1},
	{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
}

func gizmos(t *testing.T) []*informer.Object {
	t.Helper()
	var objs []*informer.Object
	for _, raw := range []string{
		`{"apiVersion":"example.com/v1","kind":"Gizmo","metadata":{"name":"g1","namespace":"demo","uid":"u1","resourceVersion":"7","creationTimestamp":"2026-11-23T10:00:00Z"},
		  "spec":{"count":3,"ratio":0.25,"on":true,"obj":{"a":1}},"status":{"phase":"Ready","seen":"2026-11-23T11:59:00Z"}}`,
		`{"apiVersion":"example.com/v1","kind":"Gizmo","metadata":{"name":"g2","namespace":"demo","creationTimestamp":"2026-11-20T10:00:00Z"},
		  "spec":{"count":3.7,"ratio":12},"status":{"seen":"not a date"}}`,
		`{"apiVersion":"example.com/v1","kind":"Gizmo","metadata":{"name":"g3"}}`,
	} {
		var m struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if err := json.Unmarshal([]byte(raw), &m); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, &informer.Object{ObjectMeta: m.Metadata, Raw: []byte(raw)})
	}
	return objs
}

// TestCRDRows checks rows with a CRD's printer columns: date columns are
// relative, numbers typed as numbers; with and without an Age column of
// the CRD's own.
func TestCRDRows(t *testing.T) {
	info := &informer.ResourceInfo{GVR: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gizmos"}}
	p := New(info, gizmoColumns)
	var names []string
	for _, c := range p.Columns() {
		names = append(names, c.Name)
		if c.Relative != (c.Name == "Seen" || c.Name == "Age") {
			t.Errorf("column %s: relative %v", c.Name, c.Relative)
		}
	}
	if want := []string{"Name", "Phase", "Count", "Ratio", "On", "Seen", "Obj", "Age"}; !slices.Equal(names, want) {
		t.Errorf("columns %v, want %v", names, want)
	}
	checkRows(t, "gizmos", p, gizmos(t))
	// Without a creationTimestamp column, an Age column is added.
	checkRows(t, "gizmos-no-age", New(info, gizmoColumns[:2]), gizmos(t))
}

// TestCRDQuantityColumn: a printer column holding quantities, as text
// ("500m", "2Gi") or as JSON numbers, types them as numbers, so that
// they sort numerically, and keeps them searchable as they are shown.
func TestCRDQuantityColumn(t *testing.T) {
	info := &informer.ResourceInfo{GVR: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gizmos"}}
	for _, typ := range []string{"string", "number"} {
		p := New(info, []PrinterColumn{{Name: "Size", Type: typ, JSONPath: ".spec.size"}})
		var typed []cell.Value
		for i, size := range []string{`"100Mi"`, `"2Gi"`, `1.5`, `"3k"`, `"500m"`, `"1"`, `"big"`} {
			raw := fmt.Sprintf(`{"metadata":{"name":"g%d"},"spec":{"size":%s}}`, i, size)
			c := p.Row(&informer.Object{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("g%d", i)}, Raw: []byte(raw)}).Cells[1]
			typed = append(typed, c.Typed)
			if s := strings.Trim(size, `"`); size[0] == '"' && c.Typed.String() != s {
				t.Errorf("%s column: %s is searched as %q", typ, size, c.Typed.String())
			}
		}
		slices.SortStableFunc(typed, cell.Compare)
		var got []string
		for _, v := range typed {
			got = append(got, typedString(v))
		}
		want := []string{"number:500m", "number:1", "number:1500m", "number:3k", "number:100Mi", "number:2Gi", "string:big"}
		if !slices.Equal(got, want) {
			t.Errorf("%s column sorted %v, want %v", typ, got, want)
		}
	}
}

// TestEncodedOncePerObjectVersion checks that a printer encodes an
// object version's row once, whoever asks, and a new version again.
func TestEncodedOncePerObjectVersion(t *testing.T) {
	p := New(&informer.ResourceInfo{GVR: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gizmos"}},
		gizmoColumns)
	objs := gizmos(t)
	first := p.Encoded(objs[0])
	for range 10 {
		if b := p.Encoded(objs[0]); &b[0] != &first[0] {
			t.Fatal("a second Encoded of one object version encoded it again")
		}
	}
	if n := p.Encodes(); n != 1 {
		t.Errorf("%d encodes of one object version", n)
	}
	p.Encoded(objs[0].DeepCopyObject().(*informer.Object))
	if n := p.Encodes(); n != 2 {
		t.Errorf("%d encodes after a new object version, want 2", n)
	}
}

// typicalPod is a Deployment's running pod as kube-apiserver serves it
// (managedFields stripped, as the gateway stores it).
func typicalPod() *corev1.Pod {
	started := ago(3 * time.Hour)
	cond := func(t corev1.PodConditionType) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: started}
	}
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "web-7d9c5b8f4d-x2k8q", GenerateName: "web-7d9c5b8f4d-", Namespace: "shop",
			UID: "0b4f3c2e-5d6a-4e8b-9c1d-2e3f4a5b6c7d", ResourceVersion: "48213917", CreationTimestamp: started,
			Labels: map[string]string{"app": "web", "pod-template-hash": "7d9c5b8f4d"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9c5b8f4d",
				UID: "5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "web", Image: "registry.example.com/shop/web:1.42.0",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}},
				VolumeMounts: []corev1.VolumeMount{{Name: "kube-api-access-7xkq2", ReadOnly: true,
					MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}},
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				ImagePullPolicy: corev1.PullIfNotPresent}},
			Volumes: []corev1.Volume{{Name: "kube-api-access-7xkq2", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				DefaultMode: ptr.To[int32](420), Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To[int64](3607), Path: "token"}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
						Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
						FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}}}}}}},
			RestartPolicy: corev1.RestartPolicyAlways, TerminationGracePeriodSeconds: ptr.To[int64](30),
			DNSPolicy: corev1.DNSClusterFirst, ServiceAccountName: "default", NodeName: "worker-3",
			SecurityContext: &corev1.PodSecurityContext{}, SchedulerName: "default-scheduler",
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)}},
			Priority: ptr.To[int32](0), EnableServiceLinks: ptr.To(true), PreemptionPolicy: ptr.To(corev1.PreemptLowerPriority),
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, HostIP: "172.18.0.5", HostIPs: []corev1.HostIP{{IP: "172.18.0.5"}},
			PodIP: "10.244.3.17", PodIPs: []corev1.PodIP{{IP: "10.244.3.17"}}, StartTime: &started, QOSClass: corev1.PodQOSBurstable,
			Conditions: []corev1.PodCondition{cond("PodReadyToStartContainers"), cond(corev1.PodInitialized), cond(corev1.PodReady),
				cond(corev1.ContainersReady), cond(corev1.PodScheduled)},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "web", Ready: true, Started: ptr.To(true),
				Image: "registry.example.com/shop/web:1.42.0", ImageID: "registry.example.com/shop/web@sha256:3f1c2b5e8d9a7c6b4e2f1a0d9c8b7a6e5f4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b",
				ContainerID: "containerd://8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b",
				State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}}},
	}
}

// TestRowIsSmall measures a typical pod's row against its JSON: a row is
// what a subscription with rows sends in place of the object.
func TestRowIsSmall(t *testing.T) {
	o := cached(t, typicalPod())
	row := New(&informer.ResourceInfo{GVR: schema.GroupVersionResource{Version: "v1", Resource: "pods"}}, nil).Encoded(o)
	t.Logf("typical pod: object %d bytes, row %d bytes (%.1f×smaller): %s", len(o.Raw), len(row),
		float64(len(o.Raw))/float64(len(row)), row)
	if len(row)*8 > len(o.Raw) {
		t.Errorf("row of %d bytes for an object of %d", len(row), len(o.Raw))
	}
}

// TestRowEncodedComputesOnce: the first reader of an object version gets
// its row and caches its encoding from one computation; readers of the
// encoding after it compute nothing.
func TestRowEncodedComputesOnce(t *testing.T) {
	info := informer.NewResourceInfo(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, true)
	p := ForResource(context.Background(), nil, info) // built-in: no Manager needed
	raw := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","resourceVersion":"5","uid":"u"},"data":{"k":"v"}}`
	o := &informer.Object{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "n", ResourceVersion: "5", UID: "u"}, Raw: []byte(raw)}
	before := p.Encodes()
	r, b := p.RowEncoded(o)
	if len(r.Cells) != 3 || string(b) != string(p.Encoded(o)) {
		t.Fatalf("row %v, encoding %s; Encoded %s", r.Cells, b, p.Encoded(o))
	}
	if n := p.Encodes() - before; n != 1 {
		t.Errorf("%d encodings for one object version, want 1", n)
	}
	r2, b2 := p.RowEncoded(o) // cached: the row is computed again, the encoding not
	if len(r2.Cells) != 3 || &b2[0] != &b[0] || p.Encodes()-before != 1 {
		t.Errorf("a second RowEncoded encoded again (%d) or returned other bytes", p.Encodes()-before)
	}
}
