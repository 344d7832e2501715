package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"kubegate/internal/testenv"
	"kubegate/internal/webhook"
)

// TestGatewayWebhooksReload runs the binary with a webhook, then changes
// the webhook's URL in the config file and sends SIGHUP: later events go
// to the new URL, and a broken file leaves the webhook running.
func TestGatewayWebhooksReload(t *testing.T) {
	env := testenv.Get(t)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := env.CP.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	key, _ := webhook.DecodeSecret(secret)
	secretPath := filepath.Join(dir, "secret")
	if err := os.WriteFile(secretPath, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	type hit struct{ path, name string }
	hits := make(chan hit, 100)
	quit := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := webhook.Verify([][]byte{key}, r.Header, body, time.Minute); err != nil {
			t.Errorf("signature: %v", err)
		}
		var ev struct {
			Data struct {
				Metadata struct{ Name string } `json:"metadata"`
			} `json:"data"`
		}
		_ = json.Unmarshal(body, &ev)
		select {
		case hits <- hit{r.URL.Path, ev.Data.Metadata.Name}:
		case <-quit:
		}
	}))
	defer srv.Close()
	defer close(quit)

	ns := env.Namespace(t)
	cfgPath := filepath.Join(dir, "config.yaml")
	writeConfig := func(path string) {
		t.Helper()
		body := `webhooks:
- name: cms
  url: ` + srv.URL + path + `
  resources: [{resource: configmaps, namespace: ` + ns + `}]
  eventTypes: [added]
  secretFile: ` + secretPath + `
  allowAddresses: [127.0.0.0/8]
`
		if err := os.WriteFile(cfgPath, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeConfig("/v1")
	g := startGateway(t, gatewayBinary(t), "--kubeconfig", kubeconfig, "--listen", freeAddr(t), "--config", cfgPath, "--log-format", "json")

	ctx := context.Background()
	create := func(name string) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(want hit) {
		t.Helper()
		for {
			select {
			case got := <-hits:
				if strings.HasPrefix(got.name, "first-") {
					continue // a late event from the start-up loop
				}
				if got != want {
					t.Fatalf("got %+v, want %+v", got, want)
				}
				return
			case <-time.After(60 * time.Second):
				t.Fatalf("no webhook request for %+v", want)
			}
		}
	}
	// The webhook starts after the gateway has synced; keep creating until
	// the first event arrives.
	deadline := time.After(90 * time.Second)
	for i := 0; ; i++ {
		create("first-" + string(rune('a'+i%26)) + strings.Repeat("x", i/26))
		select {
		case got := <-hits:
			if got.path != "/v1" {
				t.Fatalf("got %+v", got)
			}
		case <-time.After(2 * time.Second):
			continue
		case <-deadline:
			t.Fatalf("no webhook request; gateway output:\n%s", g.out.String())
		}
		break
	}

	// A broken file: logged, the webhook keeps its URL.
	if err := os.WriteFile(cfgPath, []byte("webhooks: [{name: BAD}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, g, "webhooks not reloaded")
	create("second")
	expect(hit{"/v1", "second"})

	writeConfig("/v2")
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, g, "webhooks reloaded")
	create("third")
	expect(hit{"/v2", "third"})
}

// waitFor waits until the gateway's output contains s.
func waitFor(t *testing.T, g *gatewayProcess, s string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return strings.Contains(g.out.String(), s), nil })
	if err != nil {
		t.Fatalf("gateway never logged %q:\n%s", s, g.out.String())
	}
}
