package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"kubegate/internal/testenv"
)

// getAs is get with a bearer token.
func getAs(ctx context.Context, url, token string) (int, string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// TestGatewayMetricsAuth checks the --metrics-auth wiring of the binary:
// by default /metrics wants a token its RBAC allows (the test's admin is
// system:masters), and --metrics-auth=none opens it.
func TestGatewayMetricsAuth(t *testing.T) {
	env := testenv.Get(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.CP.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		args        []string
		anonymous   int // the answer without a token
		withMetrics bool
	}{
		{"default", nil, http.StatusUnauthorized, false},
		{"none", []string{"--metrics-auth=none"}, http.StatusOK, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := freeAddr(t)
			base := "http://" + addr
			startGateway(t, gatewayBinary(t), append([]string{"--kubeconfig", kubeconfig, "--listen", addr}, tc.args...)...)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
				code, _, err := get(ctx, base+"/readyz")
				return err == nil && code == http.StatusOK, nil
			}); err != nil {
				t.Fatalf("gateway never became ready: %v", err)
			}
			code, body, err := get(ctx, base+"/metrics")
			if err != nil || code != tc.anonymous || strings.Contains(body, "go_goroutines") != tc.withMetrics {
				t.Errorf("/metrics without a token: %d %v %.200s", code, err, body)
			}
			code, body, err = getAs(ctx, base+"/metrics", env.Config.BearerToken)
			if err != nil || code != http.StatusOK || !strings.Contains(body, "go_goroutines") {
				t.Errorf("/metrics as admin: %d %v %.200s", code, err, body)
			}
			if code, _, err := get(ctx, base+"/healthz"); err != nil || code != http.StatusOK {
				t.Errorf("/healthz without a token: %d %v", code, err)
			}
		})
	}
}
