package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	certutil "k8s.io/client-go/util/cert"

	"kubegate/internal/testenv"
)

// TestGatewayTLS runs the binary with --tls-cert-file and
// --tls-private-key-file: it serves HTTPS on HTTP/2, and a pair that does
// not load stops it at start with one line naming the files.
func TestGatewayTLS(t *testing.T) {
	env := testenv.Get(t)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := env.CP.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, otherKey, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, wrongKey := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "other.key")
	for name, b := range map[string][]byte{certFile: certPEM, keyFile: keyPEM, wrongKey: otherKey} {
		if err := os.WriteFile(name, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("serves HTTPS", func(t *testing.T) {
		addr := freeAddr(t)
		startGateway(t, gatewayBinary(t), "--kubeconfig", kubeconfig, "--listen", addr,
			"--tls-cert-file", certFile, "--tls-private-key-file", keyFile)
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(certPEM)
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true}
		defer tr.CloseIdleConnections()
		hc := &http.Client{Transport: tr}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var resp *http.Response
		if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/api/v1/namespaces/default/configmaps", nil)
			req.Header.Set("Authorization", "Bearer "+env.Config.BearerToken)
			r, err := hc.Do(req)
			if err != nil {
				return false, nil
			}
			_, _ = io.Copy(io.Discard, r.Body)
			r.Body.Close()
			resp = r
			return r.StatusCode == http.StatusOK, nil
		}); err != nil {
			t.Fatalf("no list over HTTPS: %v (last: %v)", err, resp)
		}
		if resp.ProtoMajor != 2 || resp.TLS == nil || resp.TLS.NegotiatedProtocol != "h2" {
			t.Fatalf("list came over %s", resp.Proto)
		}
	})

	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"key of another certificate", []string{"--tls-cert-file", certFile, "--tls-private-key-file", wrongKey}, 1,
			"--tls-cert-file, --tls-private-key-file: serving certificate " + certFile + " with key " + wrongKey + ": tls: private key does not match public key"},
		{"missing certificate", []string{"--tls-cert-file", certFile + ".missing", "--tls-private-key-file", keyFile}, 1,
			"tls.crt.missing: no such file or directory"},
		{"certificate without key", []string{"--tls-cert-file", certFile}, 2, "--tls-cert-file and --tls-private-key-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, gatewayBinary(t), append([]string{"--kubeconfig", kubeconfig, "--listen", freeAddr(t)}, tc.args...)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			if ctx.Err() != nil {
				t.Fatalf("hung: %s", stderr.String())
			}
			if code := cmd.ProcessState.ExitCode(); err == nil || code != tc.code {
				t.Fatalf("exit code %d (%v), want %d; stderr:\n%s", code, err, tc.code, stderr.String())
			}
			if last := lastLine(stderr.String()); !strings.Contains(last, tc.want) {
				t.Fatalf("last stderr line %q does not mention %q", last, tc.want)
			}
		})
	}
}
