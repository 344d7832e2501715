package gateway

import (
	"fmt"
	"net/http"
	"slices"
	"time"

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
func passThrough(cfg config.Config, kc *rest.Config) (pt *httpapi.PassThrough, transports []http.RoundTripper, off string, err error) {
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
	}, []http.RoundTripper{normal, upgrade}, "", nil
}

// passThroughTransports returns two round trippers to kc's apiserver
// with its TLS trust and no credential: normal (HTTP/2 where the
// apiserver offers it, as client-go's) and upgrade (HTTP/1.1 only, for
// protocol upgrades: Go's transport keeps WebSocket handshakes off
// HTTP/2 but not SPDY's, which HTTP/2 cannot carry).
//
// They are client-go's transports (transport.New) for a configuration
// that holds only what kc says to trust (CA, server name, insecure), its
// proxy and dialer, so that they follow a rotated CA file as the
// gateway's own client does; the credentials beside those fields in kc
// (bearer token and its file, basic auth, client certificate and key,
// exec and auth-provider plugins, impersonation, WrapTransport) are not
// copied, and transport.New adds a wrapper only for what the
// configuration holds.
func passThroughTransports(kc *rest.Config) (normal, upgrade http.RoundTripper, err error) {
	config := func(nextProtos ...string) *transport.Config {
		c := &transport.Config{
			TLS: transport.TLSConfig{
				CAFile:     kc.CAFile,
				CAData:     slices.Clone(kc.CAData),
				ServerName: kc.ServerName,
				Insecure:   kc.Insecure,
				NextProtos: nextProtos,
			},
			Proxy: kc.Proxy,
			// The caller's Accept-Encoding goes as it is, and the
			// answer comes back as kube-apiserver encoded it.
			DisableCompression: true,
		}
		if kc.Dial != nil {
			c.DialHolder = &transport.DialHolder{Dial: kc.Dial}
		}
		return c
	}
	if normal, err = transport.New(config()); err != nil {
		return nil, nil, err
	}
	// NextProtos without h2 keeps HTTP/2 off the upgrade transport.
	if upgrade, err = transport.New(config("http/1.1")); err != nil {
		return nil, nil, err
	}
	return normal, upgrade, nil
}
