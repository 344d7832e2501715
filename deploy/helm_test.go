package deploy_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/yaml"

	"kubegate/internal/config"
	"kubegate/internal/controlplane"
	httpapi "kubegate/internal/http"
	"kubegate/internal/testenv"
	"kubegate/internal/webhook"
)

// chart is the Helm chart, relative to this package.
const chart = "helm/kubegate"

// helmBin is the helm binary `make bins` builds next to the control
// plane's binaries. Like kubectl, a missing helm fails the test with
// instructions; only under -short is the test skipped instead.
func helmBin(t *testing.T) string {
	t.Helper()
	bin, err := testenv.Get(t).CP.Binary(controlplane.HelmBinary)
	if err != nil {
		if testing.Short() {
			t.Skipf("-short: %v", err)
		}
		t.Fatal(err)
	}
	return bin
}

// runHelm runs helm with its own empty home, so nothing of the user's
// helm configuration or repositories takes part. It returns stdout, or
// an error holding stderr.
func runHelm(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(helmBin(t), args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
	)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stderr.Bytes(), out)
	}
	return out, nil
}

// valuesFile writes values (YAML) to a file for helm's -f.
func valuesFile(t *testing.T, values string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(path, []byte(values), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// helmTemplate renders the chart as release kubegate in namespace ns.
func helmTemplate(t *testing.T, ns, values string) ([]*unstructured.Unstructured, error) {
	t.Helper()
	return helmTemplateAs(t, "kubegate", ns, values)
}

// helmTemplateAs renders the chart as release in namespace ns.
func helmTemplateAs(t *testing.T, release, ns, values string) ([]*unstructured.Unstructured, error) {
	t.Helper()
	out, err := runHelm(t, "template", release, chart, "--namespace", ns, "-f", valuesFile(t, values))
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode helm template: %v", err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	return objs, nil
}

func renderChart(t *testing.T, ns, values string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := helmTemplate(t, ns, values)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// chartValueSet is one way to install the chart.
type chartValueSet struct {
	name   string
	values string
	// kinds must be rendered, beyond the default's.
	kinds []string
}

// chartValueSets are the value sets the tests render, lint, apply and
// load: the defaults and one per optional part.
var chartValueSets = []chartValueSet{
	{name: "default"},
	{name: "tls-existing-secret", values: `
tls: {enabled: true, existingSecret: kubegate-serving}
ingress: {enabled: true, className: nginx}
`, kinds: []string{"Ingress"}},
	{name: "tls-cert-manager", values: `
tls:
  enabled: true
  certManager: {enabled: true, extraDnsNames: [kubegate.example.com]}
serviceMonitor: {enabled: true}
`, kinds: []string{"Certificate", "ServiceMonitor"}},
	{name: "ingress", values: `
ingress:
  enabled: true
  className: nginx
  hosts: [{host: kubegate.example.com, paths: [{path: /, pathType: Prefix}]}]
  tls: [{hosts: [kubegate.example.com], secretName: kubegate-ingress-tls}]
config:
  allowedHosts: [dash.example.com]
  trustedProxies: [10.244.0.0/16]
`, kinds: []string{"Ingress"}},
	{name: "hpa-sockets", values: `
autoscaling:
  enabled: true
  minReplicas: 2
  maxReplicas: 6
  sockets: {enabled: true, averageValue: "500"}
`, kinds: []string{"HorizontalPodAutoscaler"}},
	{name: "monitoring", values: `
serviceMonitor: {enabled: true, labels: {release: prometheus}, interval: 30s}
prometheusRule: {enabled: true, labels: {release: prometheus}}
metricsReader:
  subjects: [{kind: ServiceAccount, name: prometheus, namespace: monitoring}]
`, kinds: []string{"ServiceMonitor", "PrometheusRule"}},
	{name: "webhooks", values: `
webhooks:
  - name: audit
    url: https://receiver.example/hooks/kube
    resources:
      - {resource: configmaps, namespace: team-a}
      - {resource: deployments.apps}
    existingSecret: audit-webhook
  - name: second
    url: http://receiver.receivers.svc/hooks
    resources: [{resource: secrets, labelSelector: app=web}]
    format: watch
    existingSecret: other-webhook
    existingSecretKey: signing
    allowAddresses: [10.96.0.0/12]
`},
	{name: "token-file", values: `
config:
  listen: 0.0.0.0:9443
  auth: {authn: token-file, authz: always-allow, metrics: none}
  cache: {resources: [pods, deployments.v1.apps]}
tokenFile: {existingSecret: kubegate-tokens}
service: {port: 8080}
podDisruptionBudget: {minAvailable: null, maxUnavailable: 1}
extraArgs: [--log-level=debug, --user-qps=20]
`},
}

// chartSecrets are the Secrets the value sets name, as the kubelet would
// find them.
func chartSecrets(t *testing.T) map[string]map[string][]byte {
	t.Helper()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("kubegate.kubegate.svc", nil, []string{"kubegate.kubegate.svc"})
	if err != nil {
		t.Fatal(err)
	}
	whsec := func(b byte) []byte {
		return []byte("whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32)) + "\n")
	}
	tlsSecret := map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM, "ca.crt": certPEM}
	return map[string]map[string][]byte{
		"kubegate-serving":     tlsSecret,
		"kubegate-serving-tls": tlsSecret, // cert-manager's
		"audit-webhook":        {"secret": whsec(1)},
		"other-webhook":        {"signing": whsec(2), "unrelated": []byte("x")},
		"kubegate-tokens":      {"tokens.csv": []byte("t0k3n,alice,alice,\"readers\"\n")},
	}
}

// TestHelmLint: helm lint --strict passes for every value set.
func TestHelmLint(t *testing.T) {
	for _, vs := range chartValueSets {
		t.Run(vs.name, func(t *testing.T) {
			out, err := runHelm(t, "lint", "--strict", chart, "-f", valuesFile(t, vs.values))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(out, []byte("0 chart(s) failed")) {
				t.Fatalf("helm lint --strict:\n%s", out)
			}
		})
	}
}

// chartCRDs are the custom resources the chart renders when asked, as
// CRDs that hold any fields: the test apiserver has neither the Prometheus
// Operator nor cert-manager. Their shape is checked by the tests below.
func chartCRDs() []*unstructured.Unstructured {
	return []*unstructured.Unstructured{
		testenv.NewCRD("monitoring.coreos.com", "servicemonitors", "ServiceMonitor"),
		testenv.NewCRD("monitoring.coreos.com", "prometheusrules", "PrometheusRule"),
		testenv.NewCRD("cert-manager.io", "certificates", "Certificate"),
	}
}

// TestHelmApply renders every value set into a namespace of its own that
// enforces Pod Security "restricted", and applies each object with a
// server-side dry-run, so schema, defaulting and admission catch
// mistakes; the Deployment's Pod is dry-run created too.
func TestHelmApply(t *testing.T) {
	env := testenv.Get(t)
	ctx := t.Context()
	for _, crd := range chartCRDs() {
		env.EnsureCRD(t, crd)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(env.Client.Discovery()))
	for _, vs := range chartValueSets {
		t.Run(vs.name, func(t *testing.T) {
			ns := env.Namespace(t)
			nsObj, err := env.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			nsObj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
			if _, err := env.Client.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			objs := renderChart(t, ns, vs.values)
			kinds := map[string]bool{}
			for _, o := range objs {
				kinds[o.GetKind()] = true
				if o.GetNamespace() != "" && o.GetNamespace() != ns {
					t.Errorf("%s %s is in namespace %q, not the release's %q", o.GetKind(), o.GetName(), o.GetNamespace(), ns)
				}
				mapping, err := mapper.RESTMapping(o.GroupVersionKind().GroupKind(), o.GroupVersionKind().Version)
				if err != nil {
					t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
				}
				opts := metav1.ApplyOptions{FieldManager: "kubegate-helm-test", Force: true, DryRun: []string{metav1.DryRunAll}}
				if _, err := env.Dynamic.Resource(mapping.Resource).Namespace(o.GetNamespace()).Apply(ctx, o.GetName(), o, opts); err != nil {
					t.Errorf("apply %s %s/%s (dry-run): %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
				}
			}
			for _, k := range append([]string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy"}, vs.kinds...) {
				if !kinds[k] {
					t.Errorf("no %s rendered", k)
				}
			}
			dep := convert[appsv1.Deployment](t, find(t, objs, "Deployment"))
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "kubegate-pod-check", Namespace: ns, Labels: dep.Spec.Template.Labels},
				Spec:       dep.Spec.Template.Spec,
			}
			if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
				t.Errorf("the Deployment's Pod is refused: %v", err)
			}
		})
	}
}

// TestHelmMatchesKustomize: with default values the chart renders what
// deploy/ renders, where it matters: the ClusterRoles, the config, the
// Deployment's Pod (args, ports, probes, resources, security contexts,
// mounts, spreading), the Service, the PodDisruptionBudget and the
// NetworkPolicy. Names and labels differ (the chart adds Helm's).
func TestHelmMatchesKustomize(t *testing.T) {
	base := render(t, "../deploy")
	helm := renderChart(t, "kubegate", "")

	for _, name := range []string{"kubegate", "kubegate-metrics-reader"} {
		want := convert[rbacv1.ClusterRole](t, findNamed(t, base, "ClusterRole", name)).Rules
		got := convert[rbacv1.ClusterRole](t, findNamed(t, helm, "ClusterRole", name)).Rules
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ClusterRole %s differs (-kustomize +helm):\n%s", name, diff)
		}
	}
	baseCfg, helmCfg := shippedConfig(t, base), shippedConfig(t, helm)
	baseCfg.ConfigPath, helmCfg.ConfigPath = "", ""
	if diff := cmp.Diff(baseCfg, helmCfg); diff != "" {
		t.Errorf("config differs (-kustomize +helm):\n%s", diff)
	}

	bd := convert[appsv1.Deployment](t, find(t, base, "Deployment"))
	hd := convert[appsv1.Deployment](t, find(t, helm, "Deployment"))
	if diff := cmp.Diff(bd.Spec.Replicas, hd.Spec.Replicas); diff != "" {
		t.Errorf("replicas differ: %s", diff)
	}
	if diff := cmp.Diff(bd.Spec.Strategy, hd.Spec.Strategy); diff != "" {
		t.Errorf("strategy differs (-kustomize +helm):\n%s", diff)
	}
	bp, hp := *bd.Spec.Template.Spec.DeepCopy(), *hd.Spec.Template.Spec.DeepCopy()
	// The ConfigMap's name is kustomize's hash in one and the release's in
	// the other; the rest of the Pod is the same.
	for _, ps := range []*corev1.PodSpec{&bp, &hp} {
		for i := range ps.Volumes {
			if ps.Volumes[i].ConfigMap != nil {
				ps.Volumes[i].ConfigMap.Name = "<config>"
			}
		}
		// Each selects its own Pods; checked below.
		for i := range ps.TopologySpreadConstraints {
			ps.TopologySpreadConstraints[i].LabelSelector = nil
		}
	}
	if diff := cmp.Diff(bp, hp); diff != "" {
		t.Errorf("Pod spec differs (-kustomize +helm):\n%s", diff)
	}
	podLabels := labels.Set(hd.Spec.Template.Labels)
	for i, c := range hd.Spec.Template.Spec.TopologySpreadConstraints {
		sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
		if err != nil || !sel.Matches(podLabels) || sel.Empty() {
			t.Errorf("topologySpreadConstraints[%d] selects %v (%v), not the Pods %v", i, c.LabelSelector, err, podLabels)
		}
	}
	for name, sel := range map[string]*metav1.LabelSelector{"Deployment": hd.Spec.Selector} {
		if s, err := metav1.LabelSelectorAsSelector(sel); err != nil || !s.Matches(podLabels) {
			t.Errorf("the %s's selector %v does not select its Pods %v", name, sel, podLabels)
		}
	}

	bs := convert[corev1.Service](t, find(t, base, "Service"))
	hs := convert[corev1.Service](t, find(t, helm, "Service"))
	if diff := cmp.Diff(bs.Spec.Ports, hs.Spec.Ports); diff != "" || bs.Spec.Type != hs.Spec.Type {
		t.Errorf("Service differs (-kustomize +helm): type %s/%s\n%s", bs.Spec.Type, hs.Spec.Type, diff)
	}
	if !labels.SelectorFromSet(hs.Spec.Selector).Matches(podLabels) {
		t.Errorf("the Service selects %v, not the Pods %v", hs.Spec.Selector, podLabels)
	}
	bb := convert[policyv1.PodDisruptionBudget](t, find(t, base, "PodDisruptionBudget"))
	hb := convert[policyv1.PodDisruptionBudget](t, find(t, helm, "PodDisruptionBudget"))
	if diff := cmp.Diff(bb.Spec.MinAvailable, hb.Spec.MinAvailable); diff != "" || hb.Spec.MaxUnavailable != nil {
		t.Errorf("PodDisruptionBudget differs (-kustomize +helm): %s, maxUnavailable %v", diff, hb.Spec.MaxUnavailable)
	}
	if s, err := metav1.LabelSelectorAsSelector(hb.Spec.Selector); err != nil || !s.Matches(podLabels) {
		t.Errorf("the PodDisruptionBudget selects %v, not the Pods %v", hb.Spec.Selector, podLabels)
	}
	bn := convert[networkingv1.NetworkPolicy](t, find(t, base, "NetworkPolicy"))
	hn := convert[networkingv1.NetworkPolicy](t, find(t, helm, "NetworkPolicy"))
	if diff := cmp.Diff(bn.Spec.Ingress, hn.Spec.Ingress); diff != "" || !slices.Equal(bn.Spec.PolicyTypes, hn.Spec.PolicyTypes) {
		t.Errorf("NetworkPolicy differs (-kustomize +helm): %v/%v\n%s", bn.Spec.PolicyTypes, hn.Spec.PolicyTypes, diff)
	}
	if s, err := metav1.LabelSelectorAsSelector(&hn.Spec.PodSelector); err != nil || !s.Matches(podLabels) || s.Empty() {
		t.Errorf("the NetworkPolicy selects %v, not the Pods %v", hn.Spec.PodSelector, podLabels)
	}
}

// watchedResources are the resources a rendered config makes the gateway
// list and watch: the cached ones and the webhooks'.
func watchedResources(cfg config.Config) []string {
	names := slices.Clone(cfg.Cache.Resources)
	for _, w := range cfg.Webhooks {
		for _, r := range w.Resources {
			if !slices.Contains(names, r.Resource) {
				names = append(names, r.Resource)
			}
		}
	}
	return names
}

// TestHelmClusterRoleExactlyEnough runs the checks of
// TestClusterRoleExactlyEnough on the chart's ClusterRole: for the
// defaults, and for values that drop most resources, name one with its
// version, add a CRD and have a webhook watch one more. The role follows
// the values and is, each time, exactly enough.
func TestHelmClusterRoleExactlyEnough(t *testing.T) {
	env := testenv.Get(t)
	env.EnsureCRD(t, testenv.NewCRD("helmtest.kubegate.io", "widgets", "Widget"))
	ns, alice := alicePodReader(t, env)
	for _, vs := range []chartValueSet{
		{name: "default"},
		{name: "crd-and-webhook", values: `
config:
  cache:
    resources: [namespaces, pods, deployments.v1.apps, widgets.helmtest.kubegate.io]
webhooks:
  - name: audit
    url: https://receiver.example/hooks
    resources: [{resource: configmaps}, {resource: pods}]
    existingSecret: audit-webhook
`},
	} {
		t.Run(vs.name, func(t *testing.T) {
			objs := renderChart(t, "kubegate", vs.values)
			role := convert[rbacv1.ClusterRole](t, findNamed(t, objs, "ClusterRole", "kubegate"))
			resources := watchedResources(loadChartConfig(t, objs))
			t.Logf("resources %q, rules %v", resources, role.Rules)
			exactlyEnough(t, env, "helm "+vs.name, role, resources, ns, alice)
		})
	}
}

// podFiles writes the files the kubelet would mount into the gateway's
// container, from the rendered ConfigMap and from secrets, under a
// temporary directory, and returns the container's args and the config
// file with the mount paths moved there. A Secret key the Pod mounts and
// secrets lack fails the test.
func podFiles(t *testing.T, objs []*unstructured.Unstructured, secrets map[string]map[string][]byte) []string {
	t.Helper()
	dep := convert[appsv1.Deployment](t, find(t, objs, "Deployment"))
	ps := dep.Spec.Template.Spec
	c := ps.Containers[0]
	root := t.TempDir()
	volumes := map[string]corev1.Volume{}
	for _, v := range ps.Volumes {
		volumes[v.Name] = v
	}
	var pairs []string
	for _, m := range c.VolumeMounts {
		pairs = append(pairs, m.MountPath+"/", filepath.Join(root, m.Name)+"/")
	}
	moved := strings.NewReplacer(pairs...)
	for _, m := range c.VolumeMounts {
		if m.SubPath != "" {
			t.Errorf("volume %s is mounted with subPath %q: the kubelet would never update it", m.Name, m.SubPath)
		}
		dir := filepath.Join(root, m.Name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		v, ok := volumes[m.Name]
		if !ok {
			t.Fatalf("volumeMount %s has no volume", m.Name)
		}
		files := map[string][]byte{}
		switch {
		case v.ConfigMap != nil:
			cm := convert[corev1.ConfigMap](t, findNamed(t, objs, "ConfigMap", v.ConfigMap.Name))
			for k, data := range cm.Data {
				files[k] = []byte(moved.Replace(data))
			}
		case v.Secret != nil:
			data, ok := secrets[v.Secret.SecretName]
			if !ok {
				t.Fatalf("volume %s mounts Secret %s, which the test does not know", v.Name, v.Secret.SecretName)
			}
			if len(v.Secret.Items) == 0 {
				files = data
			}
			for _, it := range v.Secret.Items {
				b, ok := data[it.Key]
				if !ok {
					t.Fatalf("volume %s mounts key %s of Secret %s, which it lacks", v.Name, it.Key, v.Secret.SecretName)
				}
				files[it.Path] = b
			}
		default:
			t.Fatalf("volume %s is neither a ConfigMap nor a Secret", v.Name)
		}
		for name, b := range files {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	var args []string
	for _, a := range c.Args {
		args = append(args, moved.Replace(a))
	}
	return args
}

// loadChartConfig parses the rendered ConfigMap's config as the gateway
// does, without the files it names (shippedConfig without validation
// of those): for the resources it watches.
func loadChartConfig(t *testing.T, objs []*unstructured.Unstructured) config.Config {
	t.Helper()
	cm := convert[corev1.ConfigMap](t, find(t, objs, "ConfigMap"))
	cfg := config.Default()
	if err := yaml.UnmarshalStrict([]byte(cm.Data["config.yaml"]), &cfg); err != nil {
		t.Fatalf("the rendered config does not load: %v", err)
	}
	return cfg
}

// TestHelmConfig: for every value set the rendered Deployment's args,
// with the files its volumes hold, are accepted by the gateway's own
// parser (every flag known, the config strict and valid, every secret
// readable). TLS, the token file and the webhooks' secrets come from the
// Secrets the values name, mounted whole.
func TestHelmConfig(t *testing.T) {
	secrets := chartSecrets(t)
	for _, vs := range chartValueSets {
		t.Run(vs.name, func(t *testing.T) {
			objs := renderChart(t, "kubegate", vs.values)
			args := podFiles(t, objs, secrets)
			cfg, err := config.Parse(flag.NewFlagSet("gateway", flag.ContinueOnError), args)
			if err != nil {
				t.Fatalf("the gateway refuses args %q: %v", args, err)
			}
			dep := convert[appsv1.Deployment](t, find(t, objs, "Deployment"))
			c := dep.Spec.Template.Spec.Containers[0]
			if len(c.Ports) != 1 || !strings.HasSuffix(cfg.Listen, ":"+strconv.Itoa(int(c.Ports[0].ContainerPort))) || config.IsLoopback(cfg.Listen) {
				t.Errorf("the gateway listens on %s, the Pod's port is %+v", cfg.Listen, c.Ports)
			}
			var values struct {
				TLS struct {
					Enabled        bool   `json:"enabled"`
					ExistingSecret string `json:"existingSecret"`
				} `json:"tls"`
				Webhooks []struct {
					Name              string `json:"name"`
					ExistingSecret    string `json:"existingSecret"`
					ExistingSecretKey string `json:"existingSecretKey"`
				} `json:"webhooks"`
				TokenFile struct {
					ExistingSecret string `json:"existingSecret"`
				} `json:"tokenFile"`
			}
			if err := yaml.Unmarshal([]byte(vs.values), &values); err != nil {
				t.Fatal(err)
			}
			if values.TLS.Enabled {
				if cfg.TLS.CertFile == "" || cfg.TLS.PrivateKeyFile == "" {
					t.Fatalf("tls.enabled, but the gateway serves HTTP: %+v", cfg.TLS)
				}
				secret := values.TLS.ExistingSecret
				if secret == "" {
					secret = "kubegate-serving-tls"
				}
				for path, key := range map[string]string{cfg.TLS.CertFile: "tls.crt", cfg.TLS.PrivateKeyFile: "tls.key"} {
					if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, secrets[secret][key]) {
						t.Errorf("%s is not %s of Secret %s (%v)", path, key, secret, err)
					}
				}
			} else if cfg.TLS.CertFile != "" {
				t.Errorf("tls not enabled, but the gateway serves %+v", cfg.TLS)
			}
			if len(cfg.Webhooks) != len(values.Webhooks) {
				t.Fatalf("%d webhooks in the config, %d in the values", len(cfg.Webhooks), len(values.Webhooks))
			}
			for i, w := range cfg.Webhooks {
				key := values.Webhooks[i].ExistingSecretKey
				if key == "" {
					key = "secret"
				}
				b, err := os.ReadFile(w.SecretFile)
				if err != nil || !bytes.Equal(b, secrets[values.Webhooks[i].ExistingSecret][key]) || w.SecretEnv != "" {
					t.Errorf("webhook %s: secretFile %s is not key %s of Secret %s (%v)", w.Name, w.SecretFile, key, values.Webhooks[i].ExistingSecret, err)
				}
			}
			if s := values.TokenFile.ExistingSecret; s != "" {
				if b, err := os.ReadFile(cfg.Auth.TokenFile); err != nil || !bytes.Equal(b, secrets[s]["tokens.csv"]) {
					t.Errorf("auth.tokenFile %s is not tokens.csv of Secret %s (%v)", cfg.Auth.TokenFile, s, err)
				}
			}
			checkServedNames(t, objs, cfg)
		})
	}
}

// checkServedNames: every name clients reach the gateway by (its
// Service's, the Ingress's hosts, the certificate's names) passes the
// gateway's Host check with the rendered config, and other names do
// not.
func checkServedNames(t *testing.T, objs []*unstructured.Unstructured, cfg config.Config) {
	t.Helper()
	svc := find(t, objs, "Service")
	fullname, ns := svc.GetName(), svc.GetNamespace()
	names := []string{fullname, fullname + "." + ns, fullname + "." + ns + ".svc", fullname + "." + ns + ".svc.cluster.local"}
	for _, o := range objs {
		switch o.GetKind() {
		case "Ingress":
			rules, _, _ := unstructured.NestedSlice(o.Object, "spec", "rules")
			for _, r := range rules {
				names = append(names, r.(map[string]any)["host"].(string))
			}
		case "Certificate":
			dns, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "dnsNames")
			names = append(names, dns...)
		}
	}
	policy := &httpapi.HostPolicy{Patterns: cfg.AllowedHosts, AnyAddress: cfg.Auth.Authn != "none"}
	for _, n := range names {
		if !policy.Allows(n + ":443") {
			t.Errorf("clients reach the gateway as %s, which its Host check refuses (allowedHosts %q)", n, cfg.AllowedHosts)
		}
	}
	for _, n := range []string{"rebind.example", fullname + ".rebind.example"} {
		if policy.Allows(n) {
			t.Errorf("the Host check accepts %s (allowedHosts %q)", n, cfg.AllowedHosts)
		}
	}
}

// TestHelmTLS: with TLS on, every way in uses the https port and scheme,
// and the Certificate covers the Service's names.
func TestHelmTLS(t *testing.T) {
	for _, vs := range chartValueSets {
		if !strings.Contains(vs.name, "tls") {
			continue
		}
		t.Run(vs.name, func(t *testing.T) {
			objs := renderChart(t, "kubegate", vs.values)
			c := convert[appsv1.Deployment](t, find(t, objs, "Deployment")).Spec.Template.Spec.Containers[0]
			if len(c.Ports) != 1 || c.Ports[0].Name != "https" {
				t.Errorf("container ports %+v, want one named https", c.Ports)
			}
			for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe, "startup": c.StartupProbe} {
				if p == nil || p.HTTPGet == nil || p.HTTPGet.Scheme != corev1.URISchemeHTTPS || p.HTTPGet.Port != intstr.FromString("https") {
					t.Errorf("%s probe %+v, want HTTPS on port https", name, p)
				}
			}
			svc := convert[corev1.Service](t, find(t, objs, "Service"))
			if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 || svc.Spec.Ports[0].TargetPort != intstr.FromString("https") {
				t.Errorf("Service ports %+v, want 443 to https", svc.Spec.Ports)
			}
			np := convert[networkingv1.NetworkPolicy](t, find(t, objs, "NetworkPolicy"))
			if p := np.Spec.Ingress[0].Ports[0].Port; p == nil || *p != intstr.FromString("https") {
				t.Errorf("NetworkPolicy admits port %v, want https", p)
			}
			for _, o := range objs {
				switch o.GetKind() {
				case "Ingress":
					ing := convert[networkingv1.Ingress](t, o)
					if ing.Annotations["nginx.ingress.kubernetes.io/backend-protocol"] != "HTTPS" {
						t.Errorf("Ingress annotations %v: ingress-nginx would speak HTTP to an HTTPS port", ing.Annotations)
					}
					if port := ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Port; port.Name != "https" {
						t.Errorf("Ingress backend port %+v, want https", port)
					}
				case "Certificate":
					dnsNames, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "dnsNames")
					secretName, _, _ := unstructured.NestedString(o.Object, "spec", "secretName")
					issuer, _, _ := unstructured.NestedString(o.Object, "spec", "issuerRef", "name")
					svcDNS := svc.Name + "." + svc.Namespace + ".svc"
					for _, n := range []string{svc.Name, svc.Name + "." + svc.Namespace, svcDNS, svcDNS + ".cluster.local", "kubegate.example.com"} {
						if !slices.Contains(dnsNames, n) {
							t.Errorf("the Certificate's dnsNames %q lack %s", dnsNames, n)
						}
					}
					if secretName != "kubegate-serving-tls" || issuer == "" {
						t.Errorf("Certificate secretName %q, issuerRef.name %q", secretName, issuer)
					}
				case "ServiceMonitor":
					eps, _, _ := unstructured.NestedSlice(o.Object, "spec", "endpoints")
					if len(eps) != 1 {
						t.Fatalf("ServiceMonitor endpoints %v, want one", eps)
					}
					ep, _ := eps[0].(map[string]any)
					scheme, _ := ep["scheme"].(string)
					ca, _, _ := unstructured.NestedString(ep, "tlsConfig", "ca", "secret", "name")
					if scheme != "https" || ep["port"] != "https" || ca != "kubegate-serving-tls" {
						t.Errorf("ServiceMonitor endpoint %v, want https on port https trusting the serving Secret's CA", ep)
					}
				}
			}
		})
	}
}

// TestHelmMonitoring: the ServiceMonitor selects the Service and scrapes
// it as job kubegate, which the alert rules query, whatever the release
// is called, with a token; the
// PrometheusRule carries rules.yaml's groups, and the chart's copy of
// rules.yaml is identical to deploy/monitoring's; the HPA scales on a
// metric the gateway exports.
func TestHelmMonitoring(t *testing.T) {
	chartRules, err := os.ReadFile(chart + "/files/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rules, err := os.ReadFile(monitoring + "rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(chartRules, rules) {
		t.Errorf("%s/files/rules.yaml differs from %srules.yaml: copy it over (cp deploy/monitoring/rules.yaml deploy/helm/kubegate/files/)", chart, monitoring)
	}

	var vs chartValueSet
	for _, v := range chartValueSets {
		if v.name == "monitoring" {
			vs = v
		}
	}
	// A release named otherwise than the chart: its objects are named
	// gw-kubegate.
	objs, err := helmTemplateAs(t, "gw", "kubegate", vs.values)
	if err != nil {
		t.Fatal(err)
	}
	var plain ruleFile
	readYAML(t, monitoring+"rules.yaml", &plain)
	pr := find(t, objs, "PrometheusRule")
	spec, err := json.Marshal(pr.Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	var got ruleFile
	if err := yaml.UnmarshalStrict(spec, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(plain, got); diff != "" {
		t.Errorf("the PrometheusRule's spec differs from rules.yaml (-rules.yaml +spec):\n%s", diff)
	}
	if pr.GetLabels()["release"] != "prometheus" {
		t.Errorf("PrometheusRule labels %v lack prometheusRule.labels", pr.GetLabels())
	}

	svc := convert[corev1.Service](t, find(t, objs, "Service"))
	sm := find(t, objs, "ServiceMonitor")
	jobLabel, _, _ := unstructured.NestedString(sm.Object, "spec", "jobLabel")
	if job := svc.Labels[jobLabel]; job != "kubegate" {
		t.Errorf("the ServiceMonitor's job is the Service's label %q, %q; the rules query job=\"kubegate\"", jobLabel, job)
	}
	selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	if len(selector) == 0 || !labels.SelectorFromSet(selector).Matches(labels.Set(svc.Labels)) {
		t.Errorf("the ServiceMonitor selects %v, not the Service's labels %v", selector, svc.Labels)
	}
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(eps) != 1 {
		t.Fatalf("ServiceMonitor endpoints %v, want one", eps)
	}
	ep, _ := eps[0].(map[string]any)
	if ep["port"] != svc.Spec.Ports[0].Name || ep["path"] != "/metrics" || ep["bearerTokenFile"] == nil || ep["interval"] != "30s" {
		t.Errorf("ServiceMonitor endpoint %v, want the Service's port %s, /metrics, a bearer token and the interval", ep, svc.Spec.Ports[0].Name)
	}
	if sm.GetLabels()["release"] != "prometheus" {
		t.Errorf("ServiceMonitor labels %v lack serviceMonitor.labels", sm.GetLabels())
	}
	crb := convert[rbacv1.ClusterRoleBinding](t, findNamed(t, objs, "ClusterRoleBinding", "gw-kubegate-metrics-reader"))
	if crb.RoleRef.Name != "gw-kubegate-metrics-reader" || len(crb.Subjects) != 1 || crb.Subjects[0].Name != "prometheus" {
		t.Errorf("metrics reader binding %+v, want the reader role bound to metricsReader.subjects", crb)
	}

	for _, v := range chartValueSets {
		if v.name == "hpa-sockets" {
			vs = v
		}
	}
	objs = renderChart(t, "kubegate", vs.values)
	hpa := convert[autoscalingv2.HorizontalPodAutoscaler](t, find(t, objs, "HorizontalPodAutoscaler"))
	dep := convert[appsv1.Deployment](t, find(t, objs, "Deployment"))
	if dep.Spec.Replicas != nil {
		t.Errorf("the Deployment sets replicas %d beside a HorizontalPodAutoscaler", *dep.Spec.Replicas)
	}
	if hpa.Spec.ScaleTargetRef.Kind != "Deployment" || hpa.Spec.ScaleTargetRef.Name != dep.Name {
		t.Errorf("HPA scales %+v, not the Deployment %s", hpa.Spec.ScaleTargetRef, dep.Name)
	}
	exported := gatewayMetrics(t, testenv.Get(t))
	var cpu, sockets bool
	for _, m := range hpa.Spec.Metrics {
		switch m.Type {
		case autoscalingv2.ResourceMetricSourceType:
			cpu = m.Resource.Name == corev1.ResourceCPU && m.Resource.Target.AverageUtilization != nil
		case autoscalingv2.PodsMetricSourceType:
			sockets = m.Pods.Target.AverageValue != nil && m.Pods.Target.AverageValue.String() == "500"
			if !exported[m.Pods.Metric.Name] {
				t.Errorf("the HPA scales on %s, which the gateway does not export", m.Pods.Metric.Name)
			}
		}
	}
	if !cpu || !sockets {
		t.Errorf("HPA metrics %+v, want CPU utilization and open sockets per Pod", hpa.Spec.Metrics)
	}
}

// TestHelmRejects: bad values fail `helm template` (and so an install)
// with a message naming the value: the schema's checks and the
// templates' own.
func TestHelmRejects(t *testing.T) {
	for _, tc := range []struct {
		name, values string
		want         []string // all in the error
	}{
		{"unknown top-level key", `replicas: 3`, []string{"additional properties 'replicas' not allowed"}},
		{"unknown config key", `config: {cache: {resource: [pods]}}`, []string{"/config/cache", "'resource' not allowed"}},
		{"negative replicas", `replicaCount: -1`, []string{"/replicaCount", "minimum"}},
		{"bad log level", `config: {log: {level: loud}}`, []string{"/config/log/level", "debug"}},
		{"duration without unit", `config: {shutdownTimeout: 20}`, []string{"/config/shutdownTimeout", "want string"}},
		{"kind as resource", `config: {cache: {resources: [namespaces, Pod]}}`, []string{"/config/cache/resources/1", "'Pod' does not match"}},
		{"webhook without secret", `webhooks: [{name: a, url: "https://x.example", resources: [{resource: pods}]}]`, []string{"/webhooks/0", "existingSecret"}},
		{"webhook secretFile", `webhooks: [{name: a, url: "https://x.example", resources: [{resource: pods}], existingSecret: s, secretFile: /x}]`, []string{"/webhooks/0", "'secretFile' not allowed"}},
		{"bad pull policy", `image: {pullPolicy: Sometimes}`, []string{"/image/pullPolicy"}},
		{"ingress path", `ingress: {enabled: true, hosts: [{host: a.example, paths: [{path: api}]}]}`, []string{"/ingress/hosts/0/paths/0/path"}},
		{"socket target", `autoscaling: {sockets: {averageValue: lots}}`, []string{"/autoscaling/sockets/averageValue"}},
		{"extra arg", `extraArgs: [log-level=debug]`, []string{"/extraArgs/0"}},
		// The templates' checks.
		{"webhooks in config", `config: {webhooks: [{name: a}]}`, []string{"config.webhooks", "top-level value webhooks"}},
		{"tls in config", `config: {tls: {certFile: /x}}`, []string{"config.tls", "tls.enabled"}},
		{"tls without a certificate", `tls: {enabled: true}`, []string{"tls", "tls.existingSecret", "tls.certManager.enabled"}},
		{"tls two certificates", `tls: {enabled: true, existingSecret: a, certManager: {enabled: true}}`, []string{"exactly one of tls.existingSecret and tls.certManager.enabled"}},
		{"certificate without tls", `tls: {existingSecret: a}`, []string{"tls.enabled"}},
		{"token-file without secret", `config: {auth: {authn: token-file}}`, []string{"tokenFile.existingSecret"}},
		{"token secret without token-file", `tokenFile: {existingSecret: t}`, []string{"tokenFile.existingSecret", "token-file"}},
		{"rbac without namespaces", `config: {cache: {resources: [pods]}}`, []string{"config.cache.resources", "namespaces"}},
		{"loopback listen", `config: {listen: "127.0.0.1:8080"}`, []string{"config.listen", "0.0.0.0"}},
		{"pdb both", `podDisruptionBudget: {minAvailable: 1, maxUnavailable: 1}`, []string{"podDisruptionBudget", "exactly one"}},
		{"hpa without metrics", `autoscaling: {enabled: true, targetCPUUtilizationPercentage: null}`, []string{"autoscaling", "targetCPUUtilizationPercentage", "sockets.enabled"}},
		{"hpa min above max", `autoscaling: {enabled: true, minReplicas: 5, maxReplicas: 3}`, []string{"autoscaling.minReplicas"}},
		{"no service account", `serviceAccount: {create: false}`, []string{"serviceAccount.name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := helmTemplate(t, "kubegate", tc.values)
			if err == nil {
				t.Fatalf("values %s rendered", tc.values)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestHelmSchemaMatchesConfig: the schema of config in values.schema.json
// has exactly the keys of the gateway's config (internal/config), level by
// level, so a key the gateway gains or loses shows up here, and the
// schema's webhook is the config's with an existing Secret instead of
// secretFile and secretEnv.
func TestHelmSchemaMatchesConfig(t *testing.T) {
	b, err := os.ReadFile(chart + "/values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	type schema struct {
		Schema               string             `json:"$schema"`
		Ref                  string             `json:"$ref"`
		AdditionalProperties json.RawMessage    `json:"additionalProperties"`
		Properties           map[string]*schema `json:"properties"`
		Items                *schema            `json:"items"`
		Definitions          map[string]*schema `json:"definitions"`
	}
	var root schema
	if err := json.Unmarshal(b, &root); err != nil {
		t.Fatal(err)
	}
	if root.Schema != "http://json-schema.org/draft-07/schema#" {
		t.Errorf("$schema %q, want draft-07", root.Schema)
	}
	deref := func(s *schema) *schema {
		if s != nil && s.Ref != "" {
			return root.Definitions[strings.TrimPrefix(s.Ref, "#/definitions/")]
		}
		return s
	}
	// compare walks typ's JSON fields beside s's properties.
	var compare func(path string, typ reflect.Type, s *schema, skip, extra []string)
	compare = func(path string, typ reflect.Type, s *schema, skip, extra []string) {
		s = deref(s)
		if s == nil {
			t.Errorf("%s: not in the schema", path)
			return
		}
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
			typ = typ.Elem()
			if s.Items != nil {
				s = deref(s.Items)
			}
		}
		if typ.Kind() != reflect.Struct || typ == reflect.TypeFor[config.Duration]() || typ == reflect.TypeFor[metav1.Duration]() {
			return
		}
		if string(s.AdditionalProperties) != "false" {
			t.Errorf("%s: the schema allows unknown keys", path)
		}
		want := slices.Clone(extra)
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" || slices.Contains(skip, name) {
				continue
			}
			want = append(want, name)
			if p, ok := s.Properties[name]; ok && p.Properties == nil && p.Ref == "" && p.Items == nil {
				continue // documented as set elsewhere (tls, webhooks)
			}
			compare(path+"."+name, f.Type, s.Properties[name], nil, nil)
		}
		var got []string
		for k := range s.Properties {
			got = append(got, k)
		}
		slices.Sort(got)
		slices.Sort(want)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: the schema's keys differ from the config's (-config +schema):\n%s", path, diff)
		}
	}
	compare("config", reflect.TypeFor[config.Config](), root.Properties["config"], nil, nil)
	compare("webhooks", reflect.TypeFor[webhook.Spec](), root.Properties["webhooks"].Items,
		[]string{"secretFile", "secretEnv"}, []string{"existingSecret", "existingSecretKey"})
	var walk func(path string, s *schema)
	walk = func(path string, s *schema) {
		if s == nil {
			return
		}
		if s.Properties != nil && string(s.AdditionalProperties) != "false" {
			t.Errorf("%s: an object the chart defines allows unknown keys", path)
		}
		for k, p := range s.Properties {
			walk(path+"."+k, p)
		}
		walk(path+"[]", s.Items)
	}
	walk("values", &root)
	for k, d := range root.Definitions {
		walk("definitions."+k, d)
	}
}
