package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	"k8s.io/client-go/rest"

	"kubegate/internal/testenv"
)

// TestTierDiscovery: a gateway reading from another serves the same
// discovery as the first, to the byte, aggregated and legacy: the
// apiserver's groups in the apiserver's order, with its preferred
// versions. The second tier's only discovery is the first tier's, so any
// order the first made up would be passed on. Its OpenAPI documents are
// the apiserver's too, read through the first tier.
func TestTierDiscovery(t *testing.T) {
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := startFirstTier(t, ctx, env)
	c.startSecondTier(t, ctx, "--authentication-kubeconfig", c.apiserverKubeconfig, "--authorization-kubeconfig", c.apiserverKubeconfig)
	hc, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	var etag string
	read := func(hc *http.Client, url, accept string) string {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+env.Config.BearerToken)
		req.Header.Set("User-Agent", "kubegate-test") // kube-apiserver indents for curl
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %v %.300s", url, resp.StatusCode, err, b)
		}
		etag = resp.Header.Get("ETag")
		return string(b)
	}
	const agg = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
	groupOrder := func(doc string) (names []string, preferred map[string]string) {
		t.Helper()
		var l apidiscoveryv2.APIGroupDiscoveryList
		if err := json.Unmarshal([]byte(doc), &l); err != nil {
			t.Fatal(err)
		}
		preferred = map[string]string{}
		for _, g := range l.Items {
			names = append(names, g.Name)
			preferred[g.Name] = g.Versions[0].Version
		}
		return names, preferred
	}
	apiNames, apiPreferred := groupOrder(read(hc, env.Config.Host+"/apis", agg))
	for range 10 {
		for _, tc := range []struct{ path, accept string }{
			{"/apis", agg}, {"/api", agg}, {"/apis", ""}, {"/apis/autoscaling", ""}, {"/apis/autoscaling/v2", ""},
		} {
			a := read(http.DefaultClient, c.firstBase+tc.path, tc.accept)
			b := read(http.DefaultClient, c.secondBase+tc.path, tc.accept)
			if a != b {
				t.Fatalf("%s (%s): the second tier's differs from the first's:\nsecond: %.600s\nfirst:  %.600s", tc.path, tc.accept, b, a)
			}
		}
		names, preferred := groupOrder(read(http.DefaultClient, c.secondBase+"/apis", agg))
		if !slices.Equal(names, apiNames) {
			t.Fatalf("second tier's groups %v, want the apiserver's %v", names, apiNames)
		}
		for _, n := range names {
			if preferred[n] != apiPreferred[n] {
				t.Fatalf("second tier prefers %s/%s, the apiserver %s/%s", n, preferred[n], n, apiPreferred[n])
			}
		}
		if preferred["autoscaling"] != "v2" {
			t.Fatalf("second tier prefers autoscaling/%s", preferred["autoscaling"])
		}
	}

	const pb = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
	want := read(hc, env.Config.Host+"/openapi/v2", pb)
	wantETag := etag
	if got := read(http.DefaultClient, c.secondBase+"/openapi/v2", pb); got != want || etag != wantETag {
		t.Fatalf("/openapi/v2 through two tiers: ETag %s and %d bytes, want the apiserver's %s and %d bytes", etag, len(got), wantETag, len(want))
	}
}
