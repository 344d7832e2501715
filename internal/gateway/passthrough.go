package gateway

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"

	"kubegate/internal/config"
	httpapi "kubegate/internal/http"
)

// passThrough builds the pass-through cfg asks for, or says why there is
// none (for the Status that refuses what would have passed).
//
// Its transports reach kc's apiserver as the gateway's own client does
// (its address, the CA it trusts, the server name it checks, its proxy
// and dialer) and carry nothing of the gateway's identity: built from
// kc's TLS trust alone, they have no bearer token, basic auth, client
// certificate, exec or auth-provider plugin, impersonation or
// WrapTransport. rest.TransportFor would add those; it is not used.
func passThrough(cfg config.Config, kc *rest.Config) (pt *httpapi.PassThrough, transports []*http.Transport, off string, err error) {
	switch {
	case !cfg.PassThrough.Enabled:
		return nil, nil, "pass-through to kube-apiserver is turned off (passThrough.enabled: false, --pass-through=false): send this request to kube-apiserver", nil
	case cfg.Auth.Authn == "token-file":
		return nil, nil, "pass-through to kube-apiserver needs --authn=kubernetes: with token-file, callers' tokens are the gateway's own, not credentials kube-apiserver accepts; send this request to kube-apiserver", nil
	case cfg.Auth.Authn != "kubernetes":
		return nil, nil, "pass-through to kube-apiserver needs --authn=kubernetes: with authn " + cfg.Auth.Authn + ", callers carry no credential to pass on; send this request to kube-apiserver", nil
	}
	base, _, err := rest.DefaultServerUrlFor(kc)
	if err != nil {
		return nil, nil, "", fmt.Errorf("pass-through: apiserver address %q: %w", kc.Host, err)
	}
	normal, upgrade, err := passThroughTransports(kc)
	if err != nil {
		return nil, nil, "", fmt.Errorf("pass-through: %w", err)
	}
	return &httpapi.PassThrough{
		Upstream:         base,
		Transport:        normal,
		UpgradeTransport: upgrade,
		AllowedOrigins:   cfg.WebSocket.AllowedOrigins,
		MaxBodyBytes:     cfg.PassThrough.MaxBodyBytes,
		Timeout:          time.Duration(cfg.PassThrough.Timeout),
	}, []*http.Transport{normal, upgrade}, "", nil
}

// passThroughTransports returns two transports to kc's apiserver with
// its TLS trust and no credential: normal (HTTP/2 where the apiserver
// offers it, as client-go's) and upgrade (HTTP/1.1 only, for protocol
// upgrades: Go's transport keeps WebSocket handshakes off HTTP/2 but not
// SPDY's, which HTTP/2 cannot carry).
func passThroughTransports(kc *rest.Config) (normal, upgrade *http.Transport, err error) {
	// Only the fields that say whom to trust are copied; the
	// credentials beside them in kc.TLSClientConfig (CertFile,
	// CertData, KeyFile, KeyData) are not.
	tc := &transport.Config{TLS: transport.TLSConfig{
		CAFile:     kc.CAFile,
		CAData:     kc.CAData,
		ServerName: kc.ServerName,
		Insecure:   kc.Insecure,
	}}
	tlsConfig, err := transport.TLSConfigFor(tc)
	if err != nil {
		return nil, nil, err
	}
	if tlsConfig == nil {
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if tlsConfig.GetClientCertificate != nil || len(tlsConfig.Certificates) > 0 {
		// transport.TLSConfigFor sets these only for client
		// certificates, which tc does not hold: never send one.
		return nil, nil, fmt.Errorf("internal error: a client certificate in the pass-through TLS configuration")
	}
	dial := (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	if kc.Dial != nil {
		dial = kc.Dial
	}
	mk := func(tlsConfig *tls.Config) *http.Transport {
		return &http.Transport{
			Proxy:               kc.Proxy, // nil: the environment's (SetOldTransportDefaults)
			DialContext:         dial,
			TLSClientConfig:     tlsConfig,
			TLSHandshakeTimeout: 10 * time.Second,
			MaxIdleConnsPerHost: 25,
			// The caller's Accept-Encoding goes as it is, and the
			// answer comes back as kube-apiserver encoded it.
			DisableCompression: true,
		}
	}
	normal = utilnet.SetTransportDefaults(mk(tlsConfig.Clone()))
	h1 := tlsConfig.Clone()
	h1.NextProtos = []string{"http/1.1"}
	upgrade = mk(h1)
	// A non-nil empty map keeps HTTP/2 off this transport.
	upgrade.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	upgrade = utilnet.SetOldTransportDefaults(upgrade)
	return normal, upgrade, nil
}
