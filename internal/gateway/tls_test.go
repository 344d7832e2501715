package gateway_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"

	"kubegate/internal/auth"
	"kubegate/internal/config"
	"kubegate/internal/gateway"
	"kubegate/internal/gateway/gatewaytest"
	"kubegate/internal/servingcert"
	"kubegate/internal/testenv"
	"kubegate/internal/ws"
)

// servingPair is a serving certificate for 127.0.0.1, signed by a CA of
// its own: cert holds the certificate, then the CA.
type servingPair struct{ cert, key []byte }

func newServingPair(t *testing.T) servingPair {
	t.Helper()
	cert, key, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", nil, []string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	return servingPair{cert, key}
}

func (p servingPair) write(t *testing.T, certFile, keyFile string) {
	t.Helper()
	if err := os.WriteFile(certFile, p.cert, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, p.key, 0o600); err != nil {
		t.Fatal(err)
	}
}

// leaf is the DER of the serving certificate (the first in cert).
func (p servingPair) leaf(t *testing.T) []byte {
	t.Helper()
	b, _ := pem.Decode(p.cert)
	if b == nil {
		t.Fatal("no PEM in the certificate")
	}
	return b.Bytes
}

// pool trusts the CAs of the given pairs.
func pool(t *testing.T, pairs ...servingPair) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	for _, sp := range pairs {
		if !p.AppendCertsFromPEM(sp.cert) {
			t.Fatal("no certificates to trust")
		}
	}
	return p
}

// tlsGateway is a gateway serving HTTPS from certificate files, with the
// WebSocket server and the login cookie, and a token-file user.
type tlsGateway struct {
	addr              string
	first             servingPair // the pair it started with
	certFile, keyFile string
	certs             *servingcert.Pair
}

const tlsToken = "tls-test-token"

func startTLSGateway(t *testing.T) *tlsGateway {
	t.Helper()
	testenv.SkipShort(t)
	g := &tlsGateway{first: newServingPair(t)}
	dir := t.TempDir()
	g.certFile, g.keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	g.first.write(t, g.certFile, g.keyFile)
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(tlsToken+",tls-user,u-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := gatewaytest.Config()
	cfg.TLS = config.TLS{CertFile: g.certFile, PrivateKeyFile: g.keyFile}
	cfg.Auth.Authn, cfg.Auth.TokenFile, cfg.Auth.Authz = "token-file", tokens, "always-allow"
	cfg.ShutdownTimeout = config.Duration(5 * time.Second)
	gw := gatewaytest.Start(t, cfg, gateway.Options{})
	g.addr, g.certs = gw.Addr().String(), gw.ServingCertificate()
	return g
}

// protocols records, by path, how every response came: its protocol and
// ALPN ("HTTP/2.0 h2") and the server's certificate.
type protocols struct {
	rt     http.RoundTripper
	mu     sync.Mutex
	by     map[string][]string
	leaves map[string][][]byte
}

func (p *protocols) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := p.rt.RoundTrip(r)
	if err == nil {
		alpn, leaf := "no TLS", []byte(nil)
		if resp.TLS != nil {
			alpn, leaf = resp.TLS.NegotiatedProtocol, resp.TLS.PeerCertificates[0].Raw
		}
		p.mu.Lock()
		p.by[r.URL.Path] = append(p.by[r.URL.Path], resp.Proto+" "+alpn)
		p.leaves[r.URL.Path] = append(p.leaves[r.URL.Path], leaf)
		p.mu.Unlock()
	}
	return resp, err
}

func (p *protocols) WrappedRoundTripper() http.RoundTripper { return p.rt }

func (p *protocols) of(path string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.by[path])
}

// lastLeaf is the server certificate of the last response for path.
func (p *protocols) lastLeaf(path string) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.leaves[path]
	if len(l) == 0 {
		return nil
	}
	return l[len(l)-1]
}

// clientGo is a client-go clientset for the gateway that trusts the CAs
// of pairs, what it negotiated, and a function that closes its idle
// connections.
func clientGo(t *testing.T, addr string, pairs ...servingPair) (kubernetes.Interface, *protocols, func()) {
	t.Helper()
	var ca []byte
	for _, p := range pairs {
		ca = append(ca, p.cert...)
	}
	rec := &protocols{by: map[string][]string{}, leaves: map[string][][]byte{}}
	cfg := &rest.Config{Host: "https://" + addr, BearerToken: tlsToken, TLSClientConfig: rest.TLSClientConfig{CAData: ca},
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper { rec.rt = rt; return rec }}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	closeIdle := func() { utilnet.CloseIdleConnectionsFor(hc.Transport) }
	t.Cleanup(closeIdle)
	cs, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	return cs, rec, closeIdle
}

// TestTLSClientGoOverHTTP2: client-go lists and watches over TLS, on
// HTTP/2, trusting the CA of the serving certificate.
func TestTLSClientGoOverHTTP2(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	g := startTLSGateway(t)
	cs, rec, _ := clientGo(t, g.addr, g.first)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	createConfigMaps(t, env.Client, ns, nil, "before")
	list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "before" {
		t.Fatalf("list: %+v", list.Items)
	}
	w, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	createConfigMaps(t, env.Client, ns, nil, "after")
	select {
	case e := <-w.ResultChan():
		if cm, ok := e.Object.(*corev1.ConfigMap); e.Type != watch.Added || !ok || cm.Name != "after" {
			t.Fatalf("watch: %s %+v", e.Type, e.Object)
		}
	case <-ctx.Done():
		t.Fatal("no watch event")
	}
	path := "/api/v1/namespaces/" + ns + "/configmaps"
	if got := rec.of(path); len(got) != 2 || got[0] != "HTTP/2.0 h2" || got[1] != "HTTP/2.0 h2" {
		t.Fatalf("list and watch came over %q, want HTTP/2 negotiated by ALPN", got)
	}
}

// TestTLSWebSocket: a wss:// subscription works. The handshake is
// HTTP/1.1, on a connection of its own.
func TestTLSWebSocket(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	g := startTLSGateway(t)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool(t, g.first)}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "wss://"+g.addr+"/ws", &websocket.DialOptions{
		HTTPClient:   &http.Client{Transport: tr},
		HTTPHeader:   http.Header{"Authorization": {"Bearer " + tlsToken}},
		Subprotocols: []string{ws.Subprotocol},
	})
	if err != nil {
		t.Fatalf("dial wss: %v", err)
	}
	defer c.CloseNow()
	if resp.TLS == nil || resp.ProtoMajor != 1 {
		t.Fatalf("handshake over %s, TLS %v; want HTTP/1.1 over TLS", resp.Proto, resp.TLS != nil)
	}
	sub := `{"type":"subscribe","id":"cms","resource":"configmaps","namespace":"` + ns + `"}`
	if err := c.Write(ctx, websocket.MessageText, []byte(sub)); err != nil {
		t.Fatal(err)
	}
	createConfigMaps(t, env.Client, ns, nil, "over-wss")
	for seen := false; !seen; {
		_, data, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		frames := []json.RawMessage{data}
		var batch struct {
			Type   string            `json:"type"`
			Events []json.RawMessage `json:"events"`
		}
		if json.Unmarshal(data, &batch) == nil && batch.Type == "batch" {
			frames = batch.Events
		}
		for _, raw := range frames {
			var f struct {
				Type   string `json:"type"`
				Object struct {
					Metadata struct{ Name string } `json:"metadata"`
				} `json:"object"`
			}
			if err := json.Unmarshal(raw, &f); err != nil {
				t.Fatal(err)
			}
			if f.Type == "error" {
				t.Fatalf("error frame: %s", raw)
			}
			seen = seen || f.Type == "ADDED" && f.Object.Metadata.Name == "over-wss"
		}
	}
	_ = c.Close(websocket.StatusNormalClosure, "")
}

// TestTLSVersions: TLS 1.1 and older are refused, TLS 1.2 and 1.3 are
// served with Go's default cipher suites, and a plain HTTP request gets
// no answer but a 400.
func TestTLSVersions(t *testing.T) {
	g := startTLSGateway(t)
	dial := func(min, max uint16) (tls.ConnectionState, error) {
		d := &tls.Dialer{Config: &tls.Config{RootCAs: pool(t, g.first), MinVersion: min, MaxVersion: max,
			NextProtos: []string{"h2", "http/1.1"}, ServerName: "127.0.0.1"}}
		c, err := d.DialContext(t.Context(), "tcp", g.addr)
		if err != nil {
			return tls.ConnectionState{}, err
		}
		defer c.Close()
		return c.(*tls.Conn).ConnectionState(), nil
	}
	for _, v := range []uint16{tls.VersionTLS10, tls.VersionTLS11} {
		if _, err := dial(v, v); err == nil || !strings.Contains(err.Error(), "protocol version") {
			t.Errorf("%s: err = %v, want the handshake refused", tls.VersionName(v), err)
		}
	}
	secure := map[uint16]bool{}
	for _, cs := range tls.CipherSuites() {
		secure[cs.ID] = true
	}
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		st, err := dial(v, v)
		if err != nil {
			t.Errorf("%s: %v", tls.VersionName(v), err)
			continue
		}
		if st.Version != v || st.NegotiatedProtocol != "h2" || !secure[st.CipherSuite] {
			t.Errorf("%s: version %s, ALPN %q, cipher suite %s", tls.VersionName(v), tls.VersionName(st.Version),
				st.NegotiatedProtocol, tls.CipherSuiteName(st.CipherSuite))
		}
	}
	resp, err := http.Get("http://" + g.addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("plain HTTP: %s, want 400", resp.Status)
	}
	http.DefaultClient.CloseIdleConnections()
}

// TestTLSCertificateRotation: once the rotated files are checked, new
// connections get the new certificate, while a connection opened before
// goes on with the old one.
func TestTLSCertificateRotation(t *testing.T) {
	g := startTLSGateway(t)
	served := func() []byte {
		c, err := (&tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}}).DialContext(t.Context(), "tcp", g.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.(*tls.Conn).ConnectionState().PeerCertificates[0].Raw
	}
	const path = "/api/v1/namespaces/default/configmaps"
	list := func(cs kubernetes.Interface) error {
		_, err := cs.CoreV1().ConfigMaps("default").List(t.Context(), metav1.ListOptions{Limit: 1})
		return err
	}
	if !bytes.Equal(served(), g.first.leaf(t)) {
		t.Fatal("not serving the first certificate")
	}
	old, oldRec, closeOld := clientGo(t, g.addr, g.first)
	if err := list(old); err != nil {
		t.Fatal(err)
	}

	second := newServingPair(t)
	second.write(t, g.certFile, g.keyFile)
	if !bytes.Equal(served(), g.first.leaf(t)) {
		t.Fatal("the new files were served before they were checked")
	}
	if changed, err := g.certs.Check(); !changed || err != nil {
		t.Fatalf("check: changed %v, err %v", changed, err)
	}
	if !bytes.Equal(served(), second.leaf(t)) {
		t.Fatal("a new connection did not get the new certificate")
	}
	// The client's HTTP/2 connection from before still works, with the
	// certificate it was opened with.
	if err := list(old); err != nil {
		t.Fatalf("list on the connection opened before the rotation: %v", err)
	}
	if !bytes.Equal(oldRec.lastLeaf(path), g.first.leaf(t)) {
		t.Fatal("the list after the rotation did not reuse the connection opened before it")
	}
	// Its next connection gets the new certificate, which a client that
	// trusts only the old CA refuses, and one that trusts the new CA
	// takes.
	closeOld()
	if err := list(old); err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Fatalf("a new connection trusting only the old CA: err = %v", err)
	}
	cs, rec, _ := clientGo(t, g.addr, second)
	if err := list(cs); err != nil {
		t.Fatalf("list trusting the new CA: %v", err)
	}
	if got := rec.of(path); len(got) != 1 || got[0] != "HTTP/2.0 h2" || !bytes.Equal(rec.lastLeaf(path), second.leaf(t)) {
		t.Fatalf("list came over %q, with the new certificate: %v", got, bytes.Equal(rec.lastLeaf(path), second.leaf(t)))
	}
}

// TestTLSLoginCookieIsSecure: over TLS the login cookie is Secure.
func TestTLSLoginCookieIsSecure(t *testing.T) {
	g := startTLSGateway(t)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool(t, g.first)}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	resp, err := hc.PostForm("https://"+g.addr+"/login", url.Values{"token": {tlsToken}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cookies := resp.Cookies()
	if resp.StatusCode != http.StatusOK || len(cookies) != 1 || !cookies[0].Secure || !cookies[0].HttpOnly || cookies[0].Name != auth.CookieName {
		t.Fatalf("login: %s, cookies %+v", resp.Status, cookies)
	}
}

func createConfigMaps(t *testing.T, cs kubernetes.Interface, ns string, labels map[string]string, names ...string) {
	t.Helper()
	for _, n := range names {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: labels}, Data: map[string]string{"k": n}}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLongRequestURIsOverHTTP2: over TLS, where REST calls share an
// HTTP/2 connection, a 1 MB query gets the same 414 Status; a head over
// 1 MiB is past the header list size the server announces, and Go's
// client refuses to send it.
func TestLongRequestURIsOverHTTP2(t *testing.T) {
	g := startTLSGateway(t)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool(t, g.first)}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	// Errors without the URL, which is megabytes long.
	cause := func(err error) error {
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			return ue.Err
		}
		return err
	}
	resp, err := c.Get("https://" + g.addr + "/api/v1/configmaps?filter=" + strings.Repeat("x", 1_000_000))
	if err != nil {
		t.Fatalf("a 1 MB query: %v", cause(err))
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var st metav1.Status
	_ = json.Unmarshal(body, &st)
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusRequestURITooLong || st.Kind != "Status" ||
		!strings.Contains(st.Message, "query longer than 8192 bytes") {
		t.Errorf("a 1 MB query over %s: %d %.200s, want 414 with a Status", resp.Proto, resp.StatusCode, body)
	}
	resp, err = c.Get("https://" + g.addr + "/api/v1/configmaps?filter=" + strings.Repeat("x", 1<<20+4096))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a head over 1 MiB over %s: %s, want the client to refuse it", resp.Proto, resp.Status)
	}
	if !strings.Contains(err.Error(), "larger than peer's advertised limit") {
		t.Errorf("a head over 1 MiB: %v, want the client to refuse it", cause(err))
	}
}
