package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"kubegate/internal/gateway"
	"kubegate/internal/gateway/gatewaytest"
	"kubegate/internal/testenv"
)

const aggregatedAccept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// The gateway's discovery is kube-apiserver's, cut to what the gateway
// serves (docs/rest.md, Discovery). These are the cuts, written apart from
// the gateway's code: every group, version and resource stays; a
// resource's verbs are those of get, list and watch it has if it can be
// listed and watched, else none; no subresources; no storageVersionHash;
// and the server address of /api is the gateway's.

func readVerbs(verbs []string) []string {
	out := []string{}
	if !slices.Contains(verbs, "list") || !slices.Contains(verbs, "watch") {
		return out
	}
	for _, v := range verbs {
		if v == "get" || v == "list" || v == "watch" {
			out = append(out, v)
		}
	}
	return out
}

func cutAggregated(l *apidiscoveryv2.APIGroupDiscoveryList) {
	for i := range l.Items {
		for j := range l.Items[i].Versions {
			rs := l.Items[i].Versions[j].Resources
			for k := range rs {
				rs[k].Verbs, rs[k].Subresources = readVerbs(rs[k].Verbs), nil
			}
		}
	}
}

func cutResources(l *metav1.APIResourceList) {
	rs := []metav1.APIResource{}
	for _, r := range l.APIResources {
		if !strings.Contains(r.Name, "/") {
			r.Verbs, r.StorageVersionHash = readVerbs(r.Verbs), ""
			rs = append(rs, r)
		}
	}
	l.APIResources = rs
}

// exactJSON unmarshals b into v and checks that v marshals back to b
// exactly, so that what the cuts leave is compared to the byte.
func exactJSON(t *testing.T, what string, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v: %.300s", what, err, b)
	}
	again, _ := json.Marshal(v)
	if !bytes.Equal(append(again, '\n'), b) {
		t.Fatalf("%s does not survive decoding; the comparison would not be exact:\n%s\n%s", what, b, again)
	}
}

func marshalLine(v any) []byte {
	b, _ := json.Marshal(v)
	return append(b, '\n')
}

func get(t *testing.T, hc *http.Client, url, accept string) []byte {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	// Not curl: kube-apiserver indents JSON for curl and browsers.
	req.Header.Set("User-Agent", "kubegate-test")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v %.300s", url, resp.StatusCode, err, b)
	}
	return b
}

// TestDiscoveryIsTheAPIServers: every discovery answer of the gateway,
// aggregated (what kubectl and client-go read) and legacy, is
// kube-apiserver's with the documented cuts, to the byte: the same groups
// in the same order, the same preferred versions (autoscaling/v2), the
// same resources in the same order. And it stays so over 100 rounds, each
// fetched afresh from the apiserver. The gateway once rebuilt its
// document from a map on every fetch: the order, and the preferred
// version of groups with two versions, changed from one fetch to the
// next.
func TestDiscoveryIsTheAPIServers(t *testing.T) {
	env := testenv.Get(t)
	cfg := gatewaytest.Config()
	cfg.Auth.Authn, cfg.Auth.Authz = "none", "always-allow"
	// Every request fetches the apiserver's discovery again.
	gw := gatewaytest.Start(t, cfg, gateway.Options{DiscoveryRefreshInterval: time.Millisecond}).URL()
	hc, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	api := env.Config.Host

	// What the gateway must answer, from kube-apiserver's answers.
	want := map[string][]byte{} // by "path accept"
	for _, path := range []string{"/api", "/apis"} {
		var l apidiscoveryv2.APIGroupDiscoveryList
		exactJSON(t, path+" aggregated", get(t, hc, api+path, aggregatedAccept), &l)
		cutAggregated(&l)
		want[path+" aggregated"] = marshalLine(&l)
	}
	var versions metav1.APIVersions
	exactJSON(t, "/api", get(t, hc, api+"/api", ""), &versions)
	versions.ServerAddressByClientCIDRs = []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: strings.TrimPrefix(gw, "http://")}}
	want["/api"] = marshalLine(&versions)
	var core metav1.APIResourceList
	exactJSON(t, "/api/v1", get(t, hc, api+"/api/v1", ""), &core)
	cutResources(&core)
	want["/api/v1"] = marshalLine(&core)
	var groups metav1.APIGroupList
	exactJSON(t, "/apis", get(t, hc, api+"/apis", ""), &groups)
	want["/apis"] = marshalLine(&groups)
	for _, g := range groups.Groups {
		for _, v := range g.Versions {
			var l metav1.APIResourceList
			path := "/apis/" + v.GroupVersion
			exactJSON(t, path, get(t, hc, api+path, ""), &l)
			cutResources(&l)
			want[path] = marshalLine(&l)
		}
		g.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
		want["/apis/"+g.Name] = marshalLine(&g)
	}
	if !bytes.Contains(want["/apis/autoscaling"], []byte(`"preferredVersion":{"groupVersion":"autoscaling/v2"`)) {
		t.Fatalf("kube-apiserver does not prefer autoscaling/v2: %s", want["/apis/autoscaling"])
	}

	check := func(key string) {
		t.Helper()
		path, accept, _ := strings.Cut(key, " ")
		if accept == "aggregated" {
			accept = aggregatedAccept
		}
		got := get(t, http.DefaultClient, gw+path, accept)
		if !bytes.Equal(got, want[key]) {
			t.Fatalf("%s differs from kube-apiserver's:\ngateway:        %s\nkube-apiserver: %s", key, got, want[key])
		}
	}
	for key := range want {
		check(key)
	}
	// The answers that carry the order, over and over.
	for range 100 {
		for _, key := range []string{"/apis aggregated", "/api aggregated", "/apis"} {
			check(key)
		}
	}

	// Aggregated answers carry an ETag, and If-None-Match with it gets
	// 304, as from kube-apiserver.
	for _, base := range []struct {
		hc  *http.Client
		url string
	}{{hc, api}, {http.DefaultClient, gw}} {
		first := getResponse(t, base.hc, base.url+"/apis", aggregatedAccept, "")
		etag := first.Header.Get("ETag")
		again := getResponse(t, base.hc, base.url+"/apis", aggregatedAccept, etag)
		if etag == "" || again.StatusCode != http.StatusNotModified || again.Header.Get("ETag") != etag {
			t.Fatalf("%s/apis with If-None-Match %q: %s, ETag %q", base.url, etag, again.Status, again.Header.Get("ETag"))
		}
	}
}

func getResponse(t *testing.T, hc *http.Client, url, accept, inm string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	req.Header.Set("Accept", accept)
	if inm != "" {
		req.Header.Set("If-None-Match", inm)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestKubectlResolvesPreferredVersions: kubectl, which reads the
// gateway's aggregated discovery, resolves "hpa" to autoscaling/v2, the
// version kube-apiserver prefers, every time.
func TestKubectlResolvesPreferredVersions(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	minReplicas := int32(1)
	if _, err := env.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(t.Context(), &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    &minReplicas, MaxReplicas: 3,
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := gatewaytest.Config()
	cfg.Auth.Authn, cfg.Auth.Authz = "none", "always-allow"
	gw := gatewaytest.Start(t, cfg, gateway.Options{DiscoveryRefreshInterval: time.Millisecond}).URL()
	kubectl := env.Kubectl(t)
	dir := t.TempDir()
	for i := range 5 {
		// A cache directory of its own each time: every run reads
		// discovery afresh.
		args := []string{"--server", gw, "--cache-dir", filepath.Join(dir, fmt.Sprint(i)), "--request-timeout", "30s",
			"get", "hpa", "web", "-n", ns, "-o", "jsonpath={.apiVersion}", "-v=6"}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		cmd := exec.CommandContext(ctx, kubectl, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(dir, "none"), "HOME="+dir)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		cancel()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errb.String())
		}
		if out.String() != "autoscaling/v2" || !strings.Contains(errb.String(), "/apis/autoscaling/v2/namespaces/"+ns+"/horizontalpodautoscalers/web") {
			t.Fatalf("run %d: kubectl read %q, want autoscaling/v2:\n%s", i, out.String(), errb.String())
		}
	}
}
