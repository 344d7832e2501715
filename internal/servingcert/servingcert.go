// Package servingcert serves the gateway's TLS certificate from a
// certificate file and a key file, and takes up a rotated pair without a
// restart: once the files change, new connections get the new
// certificate while open ones keep theirs.
//
// The files are read again every CheckInterval and the pair is swapped in
// when their content changed and they hold a valid pair, as
// k8s.io/apiserver's dynamiccertificates does for kube-apiserver's
// --tls-cert-file (which also watches the files with fsnotify; a period
// of a minute is well inside the renewal margin of cert-manager and of a
// kubelet's Secret volume updates).
package servingcert

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"k8s.io/utils/clock"
)

// DefaultCheckInterval is how often the files are read again:
// dynamiccertificates.FileRefreshDuration.
const DefaultCheckInterval = time.Minute

// Options configures New.
type Options struct {
	// CertFile holds the PEM certificate, followed by any intermediates.
	// Required.
	CertFile string
	// KeyFile holds the certificate's PEM private key. Required.
	KeyFile string
	// CheckInterval is how often Start reads the files again. Default
	// DefaultCheckInterval.
	CheckInterval time.Duration
	// Logger. Default: no logging.
	Logger *zap.Logger

	clock clock.WithTicker // test hook; default the real clock
}

// Pair is the serving certificate. GetCertificate may be called from any
// goroutine (every TLS handshake calls it); Check and Start replace the
// certificate it returns.
type Pair struct {
	opts Options
	log  *zap.Logger
	cur  atomic.Pointer[content]
}

// content is one loaded pair with the bytes it was parsed from, to tell
// whether the files changed.
type content struct {
	certPEM, keyPEM []byte
	cert            *tls.Certificate
}

// New loads the pair, or says why it does not load: a missing or
// unreadable file, PEM that holds no certificate or key, or a key that
// does not match the certificate.
func New(opts Options) (*Pair, error) {
	if opts.CertFile == "" || opts.KeyFile == "" {
		return nil, errors.New("servingcert: Options.CertFile and Options.KeyFile are required")
	}
	if opts.CheckInterval <= 0 {
		opts.CheckInterval = DefaultCheckInterval
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.clock == nil {
		opts.clock = clock.RealClock{}
	}
	p := &Pair{opts: opts, log: opts.Logger}
	c, err := p.load()
	if err != nil {
		return nil, err
	}
	p.cur.Store(c)
	return p, nil
}

// load reads and parses both files.
func (p *Pair) load() (*content, error) {
	certPEM, err := os.ReadFile(p.opts.CertFile)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(p.opts.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("serving certificate key: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("serving certificate %s with key %s: %w", p.opts.CertFile, p.opts.KeyFile, err)
	}
	return &content{certPEM: certPEM, keyPEM: keyPEM, cert: &cert}, nil
}

// GetCertificate returns the current certificate, for
// tls.Config.GetCertificate.
func (p *Pair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return p.cur.Load().cert, nil
}

// Certificate returns the current certificate. It must not be modified.
func (p *Pair) Certificate() *tls.Certificate { return p.cur.Load().cert }

// Check reads the files again. When their content changed and they hold
// a valid pair, the next handshakes get it and Check reports true. A pair
// that does not load leaves the current one in place and is returned as
// the error: during a rotation one file may already be new and the other
// still old, and a later check sees both.
func (p *Pair) Check() (bool, error) {
	c, err := p.load()
	if err != nil {
		return false, err
	}
	old := p.cur.Load()
	if bytes.Equal(old.certPEM, c.certPEM) && bytes.Equal(old.keyPEM, c.keyPEM) {
		return false, nil
	}
	p.cur.Store(c)
	return true, nil
}

// Start checks the files every CheckInterval until ctx ends, logging
// each change and each pair that does not load.
func (p *Pair) Start(ctx context.Context) error {
	t := p.opts.clock.NewTicker(p.opts.CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
		changed, err := p.Check()
		switch {
		case err != nil:
			p.log.Warn("serving certificate files do not load; still serving the previous pair", zap.Error(err))
		case changed:
			fields := []zap.Field{zap.String("certFile", p.opts.CertFile)}
			if leaf := p.Certificate().Leaf; leaf != nil {
				fields = append(fields, zap.String("subject", leaf.Subject.String()),
					zap.Strings("dnsNames", leaf.DNSNames), zap.Time("notAfter", leaf.NotAfter))
			}
			p.log.Info("serving certificate reloaded", fields...)
		}
	}
}
