package servingcert

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
	"k8s.io/apimachinery/pkg/util/wait"
	certutil "k8s.io/client-go/util/cert"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type pair struct{ cert, key []byte }

// newPair makes a serving certificate for host, signed by a CA of its own.
func newPair(t *testing.T, host string) pair {
	t.Helper()
	cert, key, err := certutil.GenerateSelfSignedCertKey(host, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return pair{cert, key}
}

// write replaces the files' content.
func (p pair) write(t *testing.T, certFile, keyFile string) {
	t.Helper()
	if err := os.WriteFile(certFile, p.cert, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, p.key, 0o600); err != nil {
		t.Fatal(err)
	}
}

func files(t *testing.T) (string, string) {
	dir := t.TempDir()
	return filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
}

// served is the DNS name of the certificate a handshake would get.
func served(t *testing.T, p *Pair) string {
	t.Helper()
	c, err := p.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	return c.Leaf.DNSNames[0]
}

func TestNewRefusesWhatDoesNotLoad(t *testing.T) {
	certFile, keyFile := files(t)
	a, b := newPair(t, "a.example"), newPair(t, "b.example")
	a.write(t, certFile, keyFile)
	if _, err := New(Options{CertFile: certFile, KeyFile: keyFile}); err != nil {
		t.Fatalf("a valid pair: %v", err)
	}
	if err := os.WriteFile(keyFile, b.key, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, cert, key, want string
	}{
		{"key of another certificate", certFile, keyFile, "private key does not match public key"},
		{"no certificate file", certFile + ".missing", keyFile, "tls.crt.missing: no such file"},
		{"no key file", certFile, keyFile + ".missing", "tls.key.missing: no such file"},
		{"key given as certificate", keyFile, keyFile, "PEM inputs may have been switched"},
		{"no files", "", "", "CertFile and Options.KeyFile are required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Options{CertFile: tc.cert, KeyFile: tc.key})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestCheckTakesUpARotatedPair(t *testing.T) {
	certFile, keyFile := files(t)
	a, b, c := newPair(t, "a.example"), newPair(t, "b.example"), newPair(t, "c.example")
	a.write(t, certFile, keyFile)
	p, err := New(Options{CertFile: certFile, KeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	if changed, err := p.Check(); changed || err != nil {
		t.Fatalf("unchanged files: changed %v, err %v", changed, err)
	}
	b.write(t, certFile, keyFile)
	if changed, err := p.Check(); !changed || err != nil {
		t.Fatalf("rotated files: changed %v, err %v", changed, err)
	}
	if got := served(t, p); got != "b.example" {
		t.Fatalf("serving %s after the rotation, want b.example", got)
	}
	// Half-way through the next rotation the key is new and the
	// certificate is not: b stays until both are c.
	if err := os.WriteFile(keyFile, c.key, 0o600); err != nil {
		t.Fatal(err)
	}
	if changed, err := p.Check(); changed || err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("mismatched files: changed %v, err %v", changed, err)
	}
	if got := served(t, p); got != "b.example" {
		t.Fatalf("serving %s with mismatched files, want b.example still", got)
	}
	if err := os.WriteFile(certFile, c.cert, 0o600); err != nil {
		t.Fatal(err)
	}
	if changed, err := p.Check(); !changed || err != nil {
		t.Fatalf("second rotation: changed %v, err %v", changed, err)
	}
	if got := served(t, p); got != "c.example" {
		t.Fatalf("serving %s, want c.example", got)
	}
}

// TestStartChecksEveryInterval drives Start with a fake clock: nothing is
// read again before the interval, and the rotated pair is served after it.
func TestStartChecksEveryInterval(t *testing.T) {
	certFile, keyFile := files(t)
	a, b := newPair(t, "a.example"), newPair(t, "b.example")
	a.write(t, certFile, keyFile)
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p, err := New(Options{CertFile: certFile, KeyFile: keyFile, CheckInterval: 10 * time.Second,
		Logger: zaptest.NewLogger(t), clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	}()
	waitCtx, waitCancel := context.WithTimeout(ctx, 30*time.Second)
	defer waitCancel()
	if err := wait.PollUntilContextCancel(waitCtx, time.Millisecond, true, func(context.Context) (bool, error) {
		return clk.HasWaiters(), nil
	}); err != nil {
		t.Fatal("Start never set its ticker")
	}

	b.write(t, certFile, keyFile)
	clk.Step(9 * time.Second)
	if got := served(t, p); got != "a.example" {
		t.Fatalf("serving %s before the interval passed, want a.example", got)
	}
	clk.Step(time.Second)
	if err := wait.PollUntilContextCancel(waitCtx, time.Millisecond, true, func(context.Context) (bool, error) {
		return served(t, p) == "b.example", nil
	}); err != nil {
		t.Fatalf("still serving %s after the interval", served(t, p))
	}
}
