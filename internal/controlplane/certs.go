package controlplane

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// File names inside the data directory's pki folder.
const (
	caCertFile        = "ca.crt"
	servingCertFile   = "apiserver.crt"
	servingKeyFile    = "apiserver.key"
	serviceAccountKey = "sa.key"
	tokenFile         = "tokens.csv"
)

// certValidity is long enough for a development cluster left up for weeks.
const certValidity = 365 * 24 * time.Hour

// writePKI creates a CA, a serving certificate for 127.0.0.1, ::1 and
// localhost signed by it, and an RSA service-account signing key, all under
// dir. It returns the CA certificate in PEM form.
func writePKI(dir string) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create pki dir: %w", err)
	}
	now := time.Now()

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{CommonName: "kubegate-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}

	servingKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate serving key: %w", err)
	}
	servingTmpl := &x509.Certificate{
		SerialNumber: randomSerial(),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
	}
	servingDER, err := x509.CreateCertificate(rand.Reader, servingTmpl, caCert, servingKey.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("create serving certificate: %w", err)
	}

	// kube-apiserver verifies service-account tokens with RSA or ECDSA keys;
	// RSA matches what real clusters use.
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("generate service-account key: %w", err)
	}

	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	files := []struct {
		name string
		data func() ([]byte, error)
	}{
		{caCertFile, func() ([]byte, error) { return caPEM, nil }},
		{servingCertFile, func() ([]byte, error) {
			return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: servingDER}), nil
		}},
		{servingKeyFile, func() ([]byte, error) { return keyPEM(servingKey) }},
		{serviceAccountKey, func() ([]byte, error) { return keyPEM(saKey) }},
	}
	for _, f := range files {
		data, err := f.data()
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", f.name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, f.name), data, 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", f.name, err)
		}
	}
	return caPEM, nil
}

func keyPEM(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func randomSerial() *big.Int {
	// 2^127: well below the 20-octet limit and still unique enough.
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	return n
}
