package demo

import (
	"fmt"
	"strconv"
	"testing"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kubegate/internal/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{})
}

func TestRun(t *testing.T) {
	env := testenv.Get(t)
	ctx := t.Context()
	kinds := map[string]int{}
	var changed []change
	opts := Options{
		Namespaces:       2,
		NamespacePrefix:  "run-",
		PodsPerNamespace: 7,
		// The rate only bounds the pace; nothing waits on it.
		Rate:       2000,
		MaxChanges: 80,
		Log:        zaptest.NewLogger(t),
		seed:       42,
		onChange: func(c change) {
			kinds[c.kind]++
			changed = append(changed, c)
		},
	}
	if err := Run(ctx, env.Client, env.Dynamic, opts); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(changed) != opts.MaxChanges {
		t.Fatalf("Run made %d changes, want %d", len(changed), opts.MaxChanges)
	}
	for _, k := range []string{"pod", "pod-recreate", "configmap", "widget", "deployment"} {
		if kinds[k] == 0 {
			t.Errorf("no %s change among %v", k, kinds)
		}
	}
	checkObjects(t, env, opts)

	// The changes reached the apiserver.
	for _, c := range changed {
		switch c.kind {
		case "configmap":
			cm, err := env.Client.CoreV1().ConfigMaps(c.namespace).Get(ctx, c.name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if rev, _ := strconv.Atoi(cm.Data["revision"]); rev == 0 {
				t.Errorf("configmap %s/%s changed but still at revision 0", c.namespace, c.name)
			}
		case "widget":
			wd, err := env.Dynamic.Resource(WidgetGVR).Namespace(c.namespace).Get(ctx, c.name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			observed, _, _ := unstructured.NestedInt64(wd.Object, "status", "observedGeneration")
			if wd.GetGeneration() < 2 || observed != wd.GetGeneration() {
				t.Errorf("widget %s/%s: generation %d, observedGeneration %d", c.namespace, c.name, wd.GetGeneration(), observed)
			}
		}
	}

	t.Run("restart is idempotent", func(t *testing.T) {
		again := opts
		again.MaxChanges = 5
		again.seed = 7
		again.onChange = nil
		if err := Run(ctx, env.Client, env.Dynamic, again); err != nil {
			t.Fatalf("second Run: %v", err)
		}
		checkObjects(t, env, again)
	})
}

// checkObjects checks that every namespace holds the demo's objects, one
// live pod per slot, and that the kubelet's part was played.
func checkObjects(t *testing.T, env *testenv.Env, opts Options) {
	t.Helper()
	ctx := t.Context()
	sel := metav1.ListOptions{LabelSelector: partOfLabel + "=" + partOfValue}
	running := 0
	for i := 1; i <= opts.Namespaces; i++ {
		ns := fmt.Sprintf("%s%d", opts.NamespacePrefix, i)
		nsObj, err := env.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("namespace %s: %v", ns, err)
		}
		if nsObj.Labels[partOfLabel] != partOfValue {
			t.Errorf("namespace %s labels %v", ns, nsObj.Labels)
		}
		pods, err := env.Client.CoreV1().Pods(ns).List(ctx, sel)
		if err != nil {
			t.Fatal(err)
		}
		slots := map[string]bool{}
		for _, p := range pods.Items {
			if slots[p.Labels[slotLabel]] {
				t.Errorf("%s: two pods in slot %s", ns, p.Labels[slotLabel])
			}
			slots[p.Labels[slotLabel]] = true
			if p.Labels["app"] == "" || p.Labels["tier"] == "" || len(p.Spec.Containers) == 0 {
				t.Errorf("pod %s/%s lacks labels or containers: %v", ns, p.Name, p.Labels)
			}
			if p.Status.Phase == corev1.PodRunning {
				running++
				if p.Status.PodIP == "" || len(p.Status.Conditions) == 0 {
					t.Errorf("running pod %s/%s without IP or conditions", ns, p.Name)
				}
			}
		}
		if len(pods.Items) != opts.PodsPerNamespace {
			t.Errorf("%s has %d pods, want %d", ns, len(pods.Items), opts.PodsPerNamespace)
		}
		deps, err := env.Client.AppsV1().Deployments(ns).List(ctx, sel)
		if err != nil {
			t.Fatal(err)
		}
		cms, err := env.Client.CoreV1().ConfigMaps(ns).List(ctx, sel)
		if err != nil {
			t.Fatal(err)
		}
		if want := min(opts.PodsPerNamespace, len(apps)); len(deps.Items) != want || len(cms.Items) != want {
			t.Errorf("%s has %d deployments and %d configmaps, want %d each", ns, len(deps.Items), len(cms.Items), want)
		}
		widgets, err := env.Dynamic.Resource(WidgetGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(widgets.Items) != len(widgetNames) {
			t.Errorf("%s has %d widgets, want %d", ns, len(widgets.Items), len(widgetNames))
		}
	}
	if running == 0 {
		t.Error("no pod is running")
	}

	crd, err := env.Dynamic.Resource(crdGVR).Get(ctx, "widgets.demo.kubegate.io", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	short, _, _ := unstructured.NestedStringSlice(crd.Object, "spec", "names", "shortNames")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if len(short) != 1 || short[0] != "wd" || len(versions) != 1 {
		t.Fatalf("CRD names %v, versions %d", short, len(versions))
	}
	cols, _, _ := unstructured.NestedSlice(versions[0].(map[string]any), "additionalPrinterColumns")
	if len(cols) < 2 {
		t.Errorf("CRD has %d printer columns", len(cols))
	}
}

func TestOptionsDefaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Options
		want Options
	}{
		{name: "zero", in: Options{}, want: Options{Namespaces: 3, NamespacePrefix: "demo-", PodsPerNamespace: 10, Rate: 5}},
		{name: "set", in: Options{Namespaces: 1, NamespacePrefix: "x-", PodsPerNamespace: 2, Rate: 0.5, MaxChanges: 9},
			want: Options{Namespaces: 1, NamespacePrefix: "x-", PodsPerNamespace: 2, Rate: 0.5, MaxChanges: 9}},
		{name: "negative", in: Options{Namespaces: -1, PodsPerNamespace: -1, Rate: -1},
			want: Options{Namespaces: 3, NamespacePrefix: "demo-", PodsPerNamespace: 10, Rate: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.in.withDefaults()
			if got.Log == nil || got.clock == nil || got.seed == 0 {
				t.Errorf("hooks not defaulted: %+v", got)
			}
			got.Log, got.clock, got.seed = nil, nil, 0
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("withDefaults() = %+v, want %+v", got, tc.want)
			}
		})
	}
}
