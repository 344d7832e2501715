package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"crypto/tls"
	"encoding/pem"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"

	"kubegate/internal/testenv"
)

// seen is what a test server learnt of one request.
type seen struct {
	proto       string
	credentials []string // headers that would identify a caller
	clientCerts int
}

// TestPassThroughTransportsCarryNoCredential: the pass-through transports
// trust what the gateway's client trusts and send nothing of its
// identity, whatever credentials its configuration holds: no bearer
// token (given or from a file), basic auth, impersonation, client
// certificate, exec plugin or wrapped transport. The normal one speaks
// HTTP/2 where offered; the upgrade one HTTP/1.1, so that an upgrade
// (SPDY here, which Go would otherwise send over HTTP/2) works.
func TestPassThroughTransportsCarryNoCredential(t *testing.T) {
	var mu sync.Mutex
	var got []seen
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := seen{proto: r.Proto, clientCerts: len(r.TLS.PeerCertificates)}
		for k := range r.Header {
			if k == "Authorization" || strings.HasPrefix(k, "Impersonate-") {
				s.credentials = append(s.credentials, k+": "+r.Header.Get(k))
			}
		}
		mu.Lock()
		got = append(got, s)
		mu.Unlock()
		if r.Header.Get("Upgrade") != "" {
			hj, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				http.Error(w, "cannot upgrade over "+r.Proto, http.StatusBadRequest)
				return
			}
			defer hj.Close()
			_, _ = io.WriteString(hj, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.EnableHTTP2 = true
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	srv.StartTLS()
	defer srv.Close()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	clientCert, clientKey, err := certutil.GenerateSelfSignedCertKey("kubegate-gateway", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("gateway-token-from-file"), 0o600); err != nil {
		t.Fatal(err)
	}
	var wrapped atomic.Bool
	kc := &rest.Config{
		Host:            srv.URL,
		BearerToken:     "gateway-token",
		BearerTokenFile: tokenFile,
		Username:        "gateway",
		Password:        "secret",
		Impersonate:     rest.ImpersonationConfig{UserName: "system:admin", Groups: []string{"system:masters"}},
		TLSClientConfig: rest.TLSClientConfig{CAData: caPEM, CertData: clientCert, KeyData: clientKey},
		ExecProvider:    &clientcmdapi.ExecConfig{Command: "/bin/false", APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode},
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper {
			wrapped.Store(true)
			return rt
		},
	}
	normal, upgrade, err := passThroughTransports(kc)
	if err != nil {
		t.Fatal(err)
	}
	defer utilnet.CloseIdleConnectionsFor(normal)
	defer utilnet.CloseIdleConnectionsFor(upgrade)

	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/namespaces/ns/configmaps", strings.NewReader("{}"))
	resp, err := normal.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("normal: %s", resp.Status)
	}

	req, _ = http.NewRequest(http.MethodPost, srv.URL+"/api/v1/namespaces/ns/pods/p/exec", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "SPDY/3.1")
	resp, err = upgrade.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("upgrade: %s %s", resp.Status, b)
	}
	resp.Body.Close()

	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("server saw %d requests", len(got))
	}
	for i, s := range got {
		if len(s.credentials) > 0 || s.clientCerts > 0 {
			t.Errorf("request %d carried the gateway's credentials: %v, %d client certificates", i, s.credentials, s.clientCerts)
		}
	}
	if got[0].proto != "HTTP/2.0" || got[1].proto != "HTTP/1.1" {
		t.Errorf("protocols %s and %s, want HTTP/2.0 (normal) and HTTP/1.1 (upgrade)", got[0].proto, got[1].proto)
	}
	if wrapped.Load() {
		t.Error("the gateway's WrapTransport was applied")
	}
}

// TestPassThroughTransportAnonymous: against kube-apiserver, a request
// sent by the pass-through transports without a token is anonymous,
// though the gateway's own configuration is system:masters; with a
// user's token it is that user.
func TestPassThroughTransportAnonymous(t *testing.T) {
	env := testenv.Get(t)
	normal, upgrade, err := passThroughTransports(env.Config) // the admin's token and CA
	if err != nil {
		t.Fatal(err)
	}
	defer utilnet.CloseIdleConnectionsFor(normal)
	defer utilnet.CloseIdleConnectionsFor(upgrade)
	review := func(token string) (int, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, env.Config.Host+"/apis/authentication.k8s.io/v1/selfsubjectreviews",
			strings.NewReader(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := normal.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(bufio.NewReader(resp.Body))
		return resp.StatusCode, string(b)
	}
	code, body := review("")
	if code != http.StatusForbidden || !strings.Contains(body, `User \"system:anonymous\" cannot create resource \"selfsubjectreviews\"`) {
		t.Fatalf("without a token: %d %s, want 403 for system:anonymous", code, body)
	}
	code, body = review(env.CP.AdminConfig().BearerToken)
	var r struct {
		Status struct {
			UserInfo struct {
				Username string `json:"username"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(body), &r); code != http.StatusCreated || err != nil || r.Status.UserInfo.Username != "kubegate-admin" {
		t.Fatalf("with the admin's token: %d %s", code, body)
	}
}
