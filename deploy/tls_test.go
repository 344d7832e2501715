package deploy_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	certutil "k8s.io/client-go/util/cert"

	"kubegate/internal/config"
	"kubegate/internal/testenv"
)

// TestTLSOverlay checks that deploy/overlays/tls serves HTTPS from the
// Secret its Certificate fills: the Deployment mounts that Secret whole,
// its args (parsed by the gateway's own parser) name the Secret's
// tls.crt and tls.key, and a gateway started with those files, holding
// a certificate for the Certificate's DNS names, is reached at the
// Service's name over HTTP/2. Probes, Service and NetworkPolicy use the
// https port.
func TestTLSOverlay(t *testing.T) {
	env := testenv.Get(t)
	objs := render(t, "../deploy/overlays/tls")
	crt := findNamed(t, objs, "Certificate", "kubegate-serving")
	if crt.GetAPIVersion() != "cert-manager.io/v1" || crt.GetNamespace() != "kubegate" {
		t.Fatalf("Certificate %s in namespace %q", crt.GetAPIVersion(), crt.GetNamespace())
	}
	secretName, _, _ := unstructured.NestedString(crt.Object, "spec", "secretName")
	dnsNames, _, _ := unstructured.NestedStringSlice(crt.Object, "spec", "dnsNames")
	issuer, _, _ := unstructured.NestedString(crt.Object, "spec", "issuerRef", "name")
	if secretName == "" || issuer == "" {
		t.Fatalf("Certificate secretName %q, issuerRef.name %q", secretName, issuer)
	}
	svc := convert[corev1.Service](t, find(t, objs, "Service"))
	svcDNS := svc.Name + "." + svc.Namespace + ".svc"
	for _, n := range []string{svc.Name, svc.Name + "." + svc.Namespace, svcDNS, svcDNS + ".cluster.local"} {
		if !slices.Contains(dnsNames, n) {
			t.Errorf("the Certificate's dnsNames %q lack the Service's name %s", dnsNames, n)
		}
	}

	dep := convert[appsv1.Deployment](t, find(t, objs, "Deployment"))
	c := dep.Spec.Template.Spec.Containers[0]
	var mountPath string
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Secret == nil || v.Secret.SecretName != secretName {
			continue
		}
		for _, m := range c.VolumeMounts {
			if m.Name == v.Name {
				if m.SubPath != "" {
					t.Errorf("the Secret is mounted with subPath %q: the kubelet would never update it", m.SubPath)
				}
				mountPath = m.MountPath
			}
		}
	}
	if mountPath == "" {
		t.Fatalf("the Secret %s is not mounted", secretName)
	}

	// The files as the kubelet would mount them, holding what
	// cert-manager would issue for the Certificate.
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(svcDNS, nil, dnsNames)
	if err != nil {
		t.Fatal(err)
	}
	secretDir := t.TempDir()
	for name, b := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(secretDir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	cm := convert[corev1.ConfigMap](t, find(t, objs, "ConfigMap"))
	if err := os.WriteFile(cfgFile, []byte(cm.Data["config.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, a := range c.Args {
		a = strings.Replace(a, "=/etc/kubegate/config.yaml", "="+cfgFile, 1)
		args = append(args, strings.Replace(a, "="+mountPath+"/", "="+secretDir+"/", 1))
	}
	cfg, err := config.Parse(flag.NewFlagSet("gateway", flag.ContinueOnError), args)
	if err != nil {
		t.Fatalf("args %q: %v", c.Args, err)
	}
	if cfg.TLS.CertFile != filepath.Join(secretDir, "tls.crt") || cfg.TLS.PrivateKeyFile != filepath.Join(secretDir, "tls.key") {
		t.Fatalf("args %q serve %+v, not the Secret's tls.crt and tls.key", c.Args, cfg.TLS)
	}
	gw := startGateway(t, env.Config, gatewayOptions{TLS: cfg.TLS})
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(certPEM)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: svcDNS}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, gw.url+"/healthz", nil)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatalf("GET /healthz as %s: %v", svcDNS, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 {
		t.Fatalf("GET /healthz as %s: %s %s %s", svcDNS, resp.Proto, resp.Status, body)
	}

	// Every way in uses the https port.
	var port *corev1.ContainerPort
	for i, p := range c.Ports {
		if p.Name == "https" {
			port = &c.Ports[i]
		}
	}
	if port == nil || len(c.Ports) != 1 {
		t.Fatalf("container ports %+v, want one named https", c.Ports)
	}
	for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe, "startup": c.StartupProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Scheme != corev1.URISchemeHTTPS || p.HTTPGet.Port != intstr.FromString("https") {
			t.Errorf("%s probe %+v, want HTTPS on port https", name, p)
		}
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 || svc.Spec.Ports[0].TargetPort != intstr.FromString("https") {
		t.Errorf("Service ports %+v, want 443 to https", svc.Spec.Ports)
	}
	np := convert[networkingv1.NetworkPolicy](t, find(t, objs, "NetworkPolicy"))
	if p := np.Spec.Ingress[0].Ports[0].Port; p == nil || *p != intstr.FromString("https") {
		t.Errorf("NetworkPolicy admits port %v, want https", p)
	}
}
