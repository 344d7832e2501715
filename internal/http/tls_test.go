package httpapi

import (
	"crypto/tls"
	"slices"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestServerTLSConfig pins kube-apiserver's secure serving defaults,
// whatever Go's defaults may become: TLS 1.2 at least, Go's default
// cipher suites, HTTP/2 offered first.
func TestServerTLSConfig(t *testing.T) {
	want := &tls.Certificate{}
	c := serverTLSConfig(func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return want, nil })
	if c.MinVersion != tls.VersionTLS12 || c.CipherSuites != nil || !slices.Equal(c.NextProtos, []string{"h2", "http/1.1"}) {
		t.Fatalf("min version %s, cipher suites %v, ALPN %q", tls.VersionName(c.MinVersion), c.CipherSuites, c.NextProtos)
	}
	if got, err := c.GetCertificate(nil); got != want || err != nil {
		t.Fatalf("GetCertificate: %p, %v", got, err)
	}
}

// TestTLSHandshakeErrorsAreDebug: a failed handshake (a TCP health check,
// a port scan) is logged at debug level, other server errors at info.
func TestTLSHandshakeErrorsAreDebug(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	w := serverLog{zap.New(core)}
	for _, line := range []string{
		"http: TLS handshake error from 10.0.0.7:51234: EOF\n",
		"http: superfluous response.WriteHeader call\n",
	} {
		if _, err := w.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, e := range logs.All() {
		got = append(got, e.Level.String()+" "+e.Message)
	}
	want := []string{"debug http: TLS handshake error from 10.0.0.7:51234: EOF", "info http: superfluous response.WriteHeader call"}
	if !slices.Equal(got, want) {
		t.Fatalf("logged %q, want %q", got, want)
	}
}
