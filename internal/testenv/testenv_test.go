package testenv_test

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"kubegate/internal/controlplane"
	"kubegate/internal/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{
		Users: []controlplane.User{{Name: "viewer", Groups: []string{"viewers"}}},
	})
}

func TestKubectl(t *testing.T) {
	env := testenv.Get(t)
	bin := env.Kubectl(t)
	if filepath.Dir(bin) != env.CP.AssetsDir() {
		t.Errorf("kubectl %s is not from the assets directory %s", bin, env.CP.AssetsDir())
	}
	if out, err := exec.Command(bin, "version", "--client").CombinedOutput(); err != nil {
		t.Fatalf("kubectl version --client: %v\n%s", err, out)
	}
	_, err := env.CP.Binary("no-such-binary")
	if !errors.Is(err, controlplane.ErrMissingBinary) || !strings.Contains(err.Error(), "make bins") {
		t.Fatalf("missing binary: err = %v, want ErrMissingBinary with instructions", err)
	}
}

func TestNamespace(t *testing.T) {
	env := testenv.Get(t)
	var names []string
	for _, sub := range []string{"first", "Second/With Spaces_and-a-very-long-name-that-needs-to-be-cut-down"} {
		t.Run(sub, func(t *testing.T) {
			ns := env.Namespace(t)
			names = append(names, ns)
			if len(ns) > 63 || !strings.HasPrefix(ns, "t-testnamespace-") {
				t.Errorf("namespace name %q", ns)
			}
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
			if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create in %s: %v", ns, err)
			}
		})
	}
	if len(names) != 2 || names[0] == names[1] {
		t.Fatalf("namespaces %v are not distinct", names)
	}
	for _, ns := range names {
		got, err := env.Client.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			t.Fatal(err)
		case got.DeletionTimestamp == nil:
			t.Errorf("namespace %s not deleted after its test", ns)
		}
	}
}

func TestClients(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	list, err := env.Dynamic.Resource(gvr).Namespace(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("dynamic list: %v", err)
	}
	if len(list.Items) != 0 {
		t.Errorf("fresh namespace has %d configmaps", len(list.Items))
	}

	viewer, err := kubernetes.NewForConfig(env.CP.UserConfig("viewer"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = viewer.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("viewer without RBAC grant: got %v, want Forbidden", err)
	}
}
