package httpapi

import (
	"fmt"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"kubegate/internal/testenv"
)

var gizmosGVR = schema.GroupVersionResource{Group: "gone.kubegate.test", Version: "v1", Resource: "gizmos"}

const gizmosCRD = "gizmos.gone.kubegate.test"

func createGizmo(t *testing.T, env *testenv.Env, ns, name string) {
	t.Helper()
	g := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "gone.kubegate.test/v1", "kind": "Gizmo",
		"metadata": map[string]any{"name": name}}}
	if _, err := env.Dynamic.Resource(gizmosGVR).Namespace(ns).Create(t.Context(), g, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// events reads w until the server ends it, returning "TYPE name" for
// each event.
func events(t *testing.T, w watch.Interface) []string {
	t.Helper()
	var out []string
	timeout := time.After(60 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				slices.Sort(out)
				return out
			}
			name := ""
			if u, isObj := ev.Object.(*unstructured.Unstructured); isObj {
				name = u.GetName()
			} else if st, isStatus := ev.Object.(*metav1.Status); isStatus {
				name = fmt.Sprintf("%d %s", st.Code, st.Reason)
			}
			out = append(out, string(ev.Type)+" "+name)
		case <-timeout:
			t.Fatalf("the watch did not end; events so far: %v", out)
		}
	}
}

// TestWatchEndsWhenItsResourceGoes deletes a CRD while client-go watches
// its objects through the gateway and directly from kube-apiserver. Both
// watches get the same events (a DELETED per object) and then end, with
// no ERROR event; a list then answers 404 from both. Once the CRD is back
// the gateway serves the new objects.
func TestWatchEndsWhenItsResourceGoes(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	env.CreateCRD(t, testenv.NewCRD(gizmosGVR.Group, gizmosGVR.Resource, "Gizmo"))
	createGizmo(t, env, ns, "g1")
	createGizmo(t, env, ns, "g2")
	gw := startGateway(t, nil)
	viaGateway, err := dynamic.NewForConfig(&rest.Config{Host: gw})
	if err != nil {
		t.Fatal(err)
	}
	clients := map[string]dynamic.Interface{"gateway": viaGateway, "apiserver": env.Dynamic}
	watches := map[string]watch.Interface{}
	for name, c := range clients {
		l, err := c.Resource(gizmosGVR).Namespace(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil || len(l.Items) != 2 {
			t.Fatalf("%s: list: %v, %d items", name, err, len(l.Items))
		}
		w, err := c.Resource(gizmosGVR).Namespace(ns).Watch(t.Context(), metav1.ListOptions{ResourceVersion: l.GetResourceVersion()})
		if err != nil {
			t.Fatalf("%s: watch: %v", name, err)
		}
		t.Cleanup(w.Stop)
		watches[name] = w
	}

	env.DeleteCRD(t, gizmosCRD)
	want := []string{"DELETED g1", "DELETED g2"}
	for name, w := range watches {
		if got := events(t, w); !slices.Equal(got, want) {
			t.Errorf("%s: the watch got %v before it ended, want %v", name, got, want)
		}
	}
	for name, c := range clients {
		_, err := c.Resource(gizmosGVR).Namespace(ns).List(t.Context(), metav1.ListOptions{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s: list after the CRD was deleted: %v, want 404", name, err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	env.CreateCRD(t, testenv.NewCRD(gizmosGVR.Group, gizmosGVR.Resource, "Gizmo"))
	createGizmo(t, env, ns, "g3")
	// The gateway looks unknown names up in discovery at most every 5s.
	testenv.Eventually(t, "the gateway to serve the new gizmos", func() bool {
		l, err := viaGateway.Resource(gizmosGVR).Namespace(ns).List(t.Context(), metav1.ListOptions{})
		return err == nil && len(l.Items) == 1 && l.Items[0].GetName() == "g3"
	})
}
