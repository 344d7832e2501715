package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kubegate/internal/gateway"
	"kubegate/internal/gateway/gatewaytest"
	"kubegate/internal/testenv"
)

// TestReadyWithLiveTables: the live table of a configured resource is
// built as its cache syncs, and /readyz waits for it, so that a first
// window on it after readiness builds only its own view.
func TestReadyWithLiveTables(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	for _, name := range []string{"a", "b", "c"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := gatewaytest.Config()
	cfg.Auth.Authn, cfg.Auth.Authz, cfg.Auth.Metrics = "none", "always-allow", "none"
	cfg.Cache.Resources = []string{"configmaps"}
	g := gatewaytest.Start(t, cfg, gateway.Options{})

	var body string
	testenv.EventuallyShowing(t, "/readyz 200", func() bool {
		resp, err := http.Get(g.URL() + "/readyz?verbose")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		if resp.StatusCode != http.StatusOK {
			return false
		}
		// Checked as readyz says ready, before anything else runs: the
		// table, once built, stays built.
		r, ok := g.Informers().Started(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"})
		if !ok || !g.Tables().Built(r) {
			t.Errorf("/readyz is 200 before the configmaps' live table is built:\n%s", body)
		}
		return true
	}, func() string { return body })
	if !strings.Contains(body, "[+]live tables ok\n") {
		t.Errorf("/readyz?verbose has no live tables line:\n%s", body)
	}
	// A resource started on first use gates nothing, its table neither.
	if r, err := g.Informers().Resource(t.Context(), "namespaces"); err != nil || r.WaitForSync(t.Context()) != nil {
		t.Fatalf("namespaces: %v", err)
	} else if g.Tables().Built(r) {
		t.Error("a resource started on first use has a live table with no window")
	}
}
