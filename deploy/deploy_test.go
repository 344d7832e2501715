// Package deploy_test checks the manifests in deploy/ against a real
// kube-apiserver: they render, the apiserver accepts them, the shipped
// config parses, and the shipped ClusterRole is exactly what the gateway
// needs.
package deploy_test

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"

	"kubegate/internal/config"
	"kubegate/internal/controlplane"
	"kubegate/internal/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Users: []controlplane.User{{Name: "alice", Groups: []string{"kubegate:readers"}}}})
}

// kubectl is the kubectl binary `make bins` builds next to the control
// plane's binaries.
func kubectl(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("KUBEGATE_ASSETS")
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(cache, "kubegate", "k8s-v1.37.2")
	}
	bin := filepath.Join(dir, "kubectl")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("kubectl not found (%v); run `make bins`", err)
	}
	return bin
}

// render runs `kubectl kustomize dir` and decodes the objects.
func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(kubectl(t), "kustomize", dir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr.String())
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode %s: %v", dir, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	return objs
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind {
			return o
		}
	}
	t.Fatalf("no %s in the rendered manifests", kind)
	return nil
}

// findNamed is find for a kind with several objects.
func findNamed(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s in the rendered manifests", kind, name)
	return nil
}

func convert[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return out
}

// realKinds are applied for real: they need no kubelet or controllers.
// Everything else is applied with server-side dry-run only.
var realKinds = map[string]bool{
	"Namespace": true, "ServiceAccount": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"ConfigMap": true, "Service": true,
}

// overlays are the shipped variants of the base.
var overlays = []string{"../deploy/overlays/restricted", "../deploy/overlays/tls"}

// TestManifestsApply applies the base and the overlays to the apiserver
// with server-side apply, so schema, defaulting and admission (Pod
// Security "restricted" on the namespace included) catch mistakes.
// cert-manager's Certificate is not known to the test apiserver;
// TestTLSOverlay checks it.
func TestManifestsApply(t *testing.T) {
	env := testenv.Get(t)
	ctx := t.Context()
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(env.Client.Discovery()))
	for _, dir := range append([]string{"../deploy"}, overlays...) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			objs := render(t, dir)
			kinds := map[string]bool{}
			for _, o := range objs {
				kinds[o.GetKind()] = true
				if o.GroupVersionKind().Group == "cert-manager.io" {
					continue
				}
				mapping, err := mapper.RESTMapping(o.GroupVersionKind().GroupKind(), o.GroupVersionKind().Version)
				if err != nil {
					t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
				}
				opts := metav1.ApplyOptions{FieldManager: "kubegate-deploy-test", Force: true}
				// The base is applied for real; the overlay, which
				// replaces the same objects, only as a dry-run.
				if !realKinds[o.GetKind()] || dir != "../deploy" {
					opts.DryRun = []string{metav1.DryRunAll}
				}
				if _, err := env.Dynamic.Resource(mapping.Resource).Namespace(o.GetNamespace()).Apply(ctx, o.GetName(), o, opts); err != nil {
					t.Errorf("apply %s %s/%s (dryRun=%v): %v", o.GetKind(), o.GetNamespace(), o.GetName(), opts.DryRun, err)
				}
			}
			for _, k := range []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy"} {
				if !kinds[k] {
					t.Errorf("no %s in %s", k, dir)
				}
			}
		})
	}

	// The Deployment's Pod passes the namespace's Pod Security level:
	// a dry-run create of the Pod it would make runs the admission.
	var pod *corev1.Pod
	for _, dir := range append([]string{"../deploy"}, overlays...) {
		dep := convert[appsv1.Deployment](t, find(t, render(t, dir), "Deployment"))
		pod = &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "kubegate-pod-check", Namespace: dep.Namespace, Labels: dep.Spec.Template.Labels},
			Spec:       dep.Spec.Template.Spec,
		}
		if _, err := env.Client.CoreV1().Pods(dep.Namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("%s: the Deployment's Pod is refused: %v", dir, err)
		}
	}
	// And the namespace does enforce it: the same Pod, allowed to
	// escalate privileges, is refused.
	loose := pod.DeepCopy()
	loose.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = new(true)
	if _, err := env.Client.CoreV1().Pods(loose.Namespace).Create(ctx, loose, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err == nil {
		t.Error("a Pod allowing privilege escalation was admitted; Pod Security is not enforced on the namespace")
	}
}

// TestDeploymentShape pins what docs/deploy.md promises of the Deployment, so an
// edit that loosens it fails here rather than in a cluster.
func TestDeploymentShape(t *testing.T) {
	objs := render(t, "../deploy")
	dep := convert[appsv1.Deployment](t, find(t, objs, "Deployment"))
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 2 {
		t.Errorf("replicas = %v, want 2", dep.Spec.Replicas)
	}
	ps := dep.Spec.Template.Spec
	if ps.ServiceAccountName != "kubegate" {
		t.Errorf("serviceAccountName = %q", ps.ServiceAccountName)
	}
	if len(ps.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(ps.Containers))
	}
	c := ps.Containers[0]
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Fatal("no container securityContext")
	case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
		t.Error("runAsNonRoot not set")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("readOnlyRootFilesystem not set")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("allowPrivilegeEscalation not false")
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}):
		t.Error("capabilities do not drop ALL")
	case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Error("seccompProfile is not RuntimeDefault")
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Error("liveness probe is not GET /healthz")
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Error("readiness probe is not GET /readyz")
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources = %+v, want cpu and memory requests and a memory limit", c.Resources)
	}
	if !slices.Contains(c.Args, "--config=/etc/kubegate/config.yaml") {
		t.Errorf("args %q do not load the ConfigMap's config", c.Args)
	}
	cm := find(t, objs, "ConfigMap")
	var mounted bool
	for _, v := range ps.Volumes {
		mounted = mounted || (v.ConfigMap != nil && v.ConfigMap.Name == cm.GetName())
	}
	if !mounted {
		t.Errorf("the ConfigMap %s is not mounted", cm.GetName())
	}
}

// shippedConfig parses the config in a rendered ConfigMap exactly as the
// gateway in the Pod does: `gateway --config=...`.
func shippedConfig(t *testing.T, objs []*unstructured.Unstructured) config.Config {
	t.Helper()
	cm := convert[corev1.ConfigMap](t, find(t, objs, "ConfigMap"))
	data, ok := cm.Data["config.yaml"]
	if !ok {
		t.Fatalf("ConfigMap %s has no config.yaml", cm.Name)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(flag.NewFlagSet("gateway", flag.ContinueOnError), []string{"--config=" + path})
	if err != nil {
		t.Fatalf("the shipped config does not load: %v", err)
	}
	return cfg
}

func TestConfigParses(t *testing.T) {
	for _, dir := range append([]string{"../deploy"}, overlays...) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			cfg := shippedConfig(t, render(t, dir))
			if cfg.Listen != "0.0.0.0:8080" {
				t.Errorf("listen = %q; the Pod's port is 8080 on every interface", cfg.Listen)
			}
			if cfg.Log.Format != "json" {
				t.Errorf("log format = %q, want json", cfg.Log.Format)
			}
			if cfg.Auth.Authn != "kubernetes" || cfg.Auth.Authz != "rbac" {
				t.Errorf("auth = %s/%s, want kubernetes/rbac", cfg.Auth.Authn, cfg.Auth.Authz)
			}
			if len(cfg.Cache.Resources) == 0 {
				t.Error("cache.resources is empty")
			}
			if !slices.Contains(cfg.Cache.Resources, "namespaces") {
				t.Error("cache.resources lacks namespaces, which authz narrows cluster-wide requests with")
			}
		})
	}
}

// clusterRole returns the ClusterRole and the cache resources shipped in
// dir.
func clusterRole(t *testing.T, dir string) (*rbacv1.ClusterRole, []string) {
	t.Helper()
	objs := render(t, dir)
	return convert[rbacv1.ClusterRole](t, findNamed(t, objs, "ClusterRole", "kubegate")), shippedConfig(t, objs).Cache.Resources
}
