package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"kubegate/internal/testenv"
)

// TestGatewayAuthModes runs the binary with --authn=token-file and checks
// the wiring of authentication and /login, and that anonymous mode is
// refused off loopback.
func TestGatewayAuthModes(t *testing.T) {
	env := testenv.Get(t)
	bin := gatewayBinary(t)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := env.CP.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte("file-token-1,alice,alice-1,\"devs\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("token file", func(t *testing.T) {
		addr := freeAddr(t)
		startGateway(t, bin, "--kubeconfig", kubeconfig, "--listen", addr, "--authn=token-file", "--token-file", tokens, "--authz=always-allow")
		base := "http://" + addr
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
			code, _, err := get(ctx, base+"/healthz")
			return err == nil && code == http.StatusOK, nil
		}); err != nil {
			t.Fatalf("gateway never answered: %v", err)
		}
		do := func(method, path, token, body string) *http.Response {
			t.Helper()
			req, _ := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			if body != "" {
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp
		}
		if resp := do(http.MethodGet, "/ws", "", ""); resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
			t.Fatalf("no token: %d", resp.StatusCode)
		}
		if resp := do(http.MethodGet, "/ws", "wrong", ""); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong token: %d", resp.StatusCode)
		}
		// Authenticated: the WebSocket handler answers (400: no upgrade).
		if resp := do(http.MethodGet, "/ws", "file-token-1", ""); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("file token: %d, want the ws handler's 400", resp.StatusCode)
		}
		if resp := do(http.MethodGet, "/ws?token=file-token-1", "", ""); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("token in the URL: %d, want 400", resp.StatusCode)
		}
		resp := do(http.MethodPost, "/login", "", "token=file-token-1")
		if resp.StatusCode != http.StatusOK || len(resp.Cookies()) != 1 || !resp.Cookies()[0].HttpOnly {
			t.Fatalf("login: %d %v", resp.StatusCode, resp.Cookies())
		}
	})

	t.Run("anonymous off loopback is refused", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "--kubeconfig", kubeconfig, "--authn=none", "--listen", "0.0.0.0:0")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		_ = cmd.Run()
		if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(stderr.String(), "--insecure-allow-anonymous") {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
	})

	t.Run("missing token file", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "--kubeconfig", kubeconfig, "--listen", freeAddr(t), "--authn=token-file", "--token-file", filepath.Join(dir, "nope.csv"))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		_ = cmd.Run()
		if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(stderr.String(), "nope.csv") {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
	})
}
