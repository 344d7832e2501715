package gateway_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubegate/internal/config"
	"kubegate/internal/gateway"
	"kubegate/internal/testenv"
)

// fakeKubelet is what kube-apiserver reaches for a Pod's logs, exec,
// attach and port-forward: a Node whose address is an HTTPS server of the
// test's (kube-apiserver does not check kubelets' certificates unless
// told to). Logs are two lines; with follow, the second waits for
// release. exec and attach are refused with 400, as a kubelet without
// the container would, so that kube-apiserver's own handling of them
// (upgrade, then its error on the stream) is what the tests compare.
// portForward over WebSocket, which kube-apiserver tunnels to the
// kubelet as it is, echoes every message back, as a port would.
type fakeKubelet struct {
	node    string
	release chan struct{}
	once    sync.Once
}

func startFakeKubelet(t *testing.T, ns string) *fakeKubelet {
	t.Helper()
	env := testenv.Get(t)
	k := &fakeKubelet{node: "kubelet-" + ns, release: make(chan struct{})}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/portForward/") && r.Header.Get("Upgrade") == "websocket" {
			c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"v4.channel.k8s.io"}, InsecureSkipVerify: true})
			if err != nil {
				return
			}
			defer c.CloseNow()
			for {
				typ, msg, err := c.Read(r.Context())
				if err != nil {
					return
				}
				if err := c.Write(r.Context(), typ, msg); err != nil {
					return
				}
			}
		}
		if !strings.HasPrefix(r.URL.Path, "/containerLogs/") {
			http.Error(w, "fake kubelet: no container runtime for "+strings.Split(r.URL.Path, "/")[1], http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "line 1\n")
		if r.URL.Query().Get("follow") == "true" {
			w.(http.Flusher).Flush()
			select {
			case <-k.release:
			case <-r.Context().Done():
				return
			}
		}
		_, _ = io.WriteString(w, "line 2\n")
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // kube-apiserver's aborted handshakes
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = ln
	srv.StartTLS()
	t.Cleanup(srv.Close)
	t.Cleanup(k.Release)
	port, _ := strconv.Atoi(strings.TrimPrefix(ln.Addr().String(), "127.0.0.1:"))

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	node, err := env.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: k.node}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.CoreV1().Nodes().Delete(context.Background(), k.node, metav1.DeleteOptions{})
	})
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
	if _, err := env.Client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return k
}

// Release lets followed logs end.
func (k *fakeKubelet) Release() { k.once.Do(func() { close(k.release) }) }

// createPod creates a Pod with one container "c" on node ("" for none).
func createPod(t *testing.T, ns, name, node string) {
	t.Helper()
	_, err := testenv.Get(t).Client.CoreV1().Pods(ns).Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// target is one server a raw request goes to: the gateway or
// kube-apiserver, with the CA that signed it.
type target struct {
	name, url string
	ca        []byte
}

func (g *passGateway) targets(t *testing.T) []target {
	env := testenv.Get(t)
	return []target{{"gateway", g.url, g.ca}, {"kube-apiserver", env.CP.URL(), env.CP.CAData()}}
}

func (tg target) client(t *testing.T) *http.Client {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(tg.ca) {
		t.Fatal("no CA")
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// answer is a response's status, the headers that matter and its body.
type answer struct {
	code        int
	contentType string
	body        string
	audited     bool // carries kube-apiserver's Audit-Id
}

func (tg target) do(t *testing.T, method, path, token string) answer {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), method, tg.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := tg.client(t).Do(req)
	if err != nil {
		t.Fatalf("%s %s on %s: %v", method, path, tg.name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header.Get("Content-Type"), string(b), resp.Header.Get("Audit-Id") != ""}
}

// session is what a WebSocket client saw of an exec or attach: the
// negotiated subprotocol, every message, and how it ended (or the
// refused handshake's status and body).
type session struct {
	code        int
	subprotocol string
	messages    []string
	end         string
}

func (tg target) webSocket(t *testing.T, path, token string) session {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	hdr := http.Header{"Authorization": {"Bearer " + token}}
	c, resp, err := websocket.Dial(ctx, strings.Replace(tg.url, "https://", "wss://", 1)+path,
		&websocket.DialOptions{HTTPClient: tg.client(t), HTTPHeader: hdr, Subprotocols: []string{"v5.channel.k8s.io"}})
	if err != nil {
		if resp == nil {
			t.Fatalf("%s: %v", tg.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		return session{code: resp.StatusCode, end: string(b)}
	}
	defer c.CloseNow()
	s := session{code: resp.StatusCode, subprotocol: c.Subprotocol()}
	for {
		_, msg, err := c.Read(ctx)
		if err != nil {
			s.end = fmt.Sprint(websocket.CloseStatus(err))
			if errors.Is(err, io.EOF) || websocket.CloseStatus(err) == -1 {
				s.end = "closed without a close frame"
			}
			return s
		}
		s.messages = append(s.messages, fmt.Sprintf("%q", msg))
	}
}

// TestPassThroughLogsAndExec: logs, exec, attach and port-forward reach
// kube-apiserver through the gateway and come back as kube-apiserver
// answers them directly: the kubelet's log lines (streamed as they come
// with follow), kube-apiserver's answer for a Pod without a node, and,
// for exec and attach over WebSocket, the upgrade and every message
// kube-apiserver then sends. kubectl logs and exec (WebSocket, and SPDY
// where WebSockets are turned off) print the same through both.
func TestPassThroughLogsAndExec(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	grantEdit(t, ns, ptWriter)
	k := startFakeKubelet(t, ns)
	createPod(t, ns, "on-node", k.node)
	createPod(t, ns, "no-node", "")
	g := startPassGateway(t, nil, gateway.Options{})
	token := env.CP.UserConfig(ptWriter).BearerToken

	if r := g.both(t, ptWriter, "", "-n", ns, "logs", "on-node"); r.code != 0 || r.stdout != "line 1\nline 2\n" {
		t.Errorf("kubectl logs: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	for _, args := range [][]string{
		{"logs", "no-node"},
		{"logs", "on-node", "-c", "nope"},
		{"exec", "on-node", "--", "ls"},
		{"exec", "no-node", "--", "ls"},
		{"attach", "on-node"},
	} {
		g.both(t, ptWriter, "", append([]string{"-n", ns}, args...)...)
	}
	// kubectl falls back to SPDY when told not to use WebSockets:
	// an HTTP/1.1 upgrade of another kind.
	if r := g.bothEnv(t, []string{"KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false"}, ptWriter, "", "-n", ns, "exec", "on-node", "--", "ls"); r.code == 0 {
		t.Errorf("kubectl exec over SPDY with no container runtime: exit 0")
	}

	// Raw answers, byte for byte: status, type and body.
	for _, path := range []string{
		"/api/v1/namespaces/" + ns + "/pods/on-node/log",
		"/api/v1/namespaces/" + ns + "/pods/no-node/log",
		"/api/v1/namespaces/" + ns + "/pods/missing/log",
	} {
		tgs := g.targets(t)
		viaGW, direct := tgs[0].do(t, http.MethodGet, path, token), tgs[1].do(t, http.MethodGet, path, token)
		if viaGW != direct || !viaGW.audited {
			t.Errorf("GET %s:\nthrough the gateway %+v\nfrom kube-apiserver %+v", path, viaGW, direct)
		}
	}
	// Exec and attach over WebSocket: kube-apiserver's upgrade, then
	// what it sends, as it sends it.
	for _, path := range []string{
		"/api/v1/namespaces/" + ns + "/pods/on-node/exec?command=ls&stdout=true&stderr=true",
		"/api/v1/namespaces/" + ns + "/pods/on-node/attach?stdout=true",
		"/api/v1/namespaces/" + ns + "/pods/no-node/exec?command=ls&stdout=true",
		"/api/v1/namespaces/" + ns + "/pods/no-node/portforward?ports=80",
	} {
		tgs := g.targets(t)
		viaGW, direct := tgs[0].webSocket(t, path, token), tgs[1].webSocket(t, path, token)
		if fmt.Sprint(viaGW) != fmt.Sprint(direct) {
			t.Errorf("WebSocket %s:\nthrough the gateway %+v\nfrom kube-apiserver %+v", path, viaGW, direct)
		}
		if strings.Contains(path, "on-node/exec") && (viaGW.code != http.StatusSwitchingProtocols || len(viaGW.messages) == 0) {
			t.Errorf("exec: %+v, want an upgrade and kube-apiserver's messages", viaGW)
		}
	}

	// Port-forward: a session both ways, through the gateway to the
	// kubelet kube-apiserver tunnels it to.
	for _, tg := range g.targets(t) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		c, resp, err := websocket.Dial(ctx, strings.Replace(tg.url, "https://", "wss://", 1)+"/api/v1/namespaces/"+ns+"/pods/on-node/portforward?ports=80",
			&websocket.DialOptions{HTTPClient: tg.client(t), HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}, Subprotocols: []string{"v4.channel.k8s.io"}})
		if err != nil {
			cancel()
			t.Fatalf("port-forward on %s: %v (%v)", tg.name, err, resp)
		}
		for i := range 3 {
			sent := fmt.Sprintf("\x00bytes for port 80, %d", i)
			if err := c.Write(ctx, websocket.MessageBinary, []byte(sent)); err != nil {
				t.Fatalf("port-forward on %s: %v", tg.name, err)
			}
			if _, got, err := c.Read(ctx); err != nil || string(got) != sent {
				t.Fatalf("port-forward on %s: read %q, %v; want %q back", tg.name, got, err, sent)
			}
		}
		_ = c.Close(websocket.StatusNormalClosure, "")
		cancel()
	}

	// logs -f: the first line arrives while the kubelet holds the second.
	tg := g.targets(t)[0]
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, tg.url+"/api/v1/namespaces/"+ns+"/pods/on-node/log?follow=true", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := tg.client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "line 1\n" {
		t.Fatalf("first followed line %q, %v", line, err)
	}
	k.Release()
	if rest, err := io.ReadAll(br); err != nil || string(rest) != "line 2\n" {
		t.Fatalf("rest of the followed log %q, %v", rest, err)
	}
}

// TestPassThroughStreamHoldsInflight: a stream counts against its user's
// in-flight limit for as long as it is open, as the gateway's own watches
// do.
func TestPassThroughStreamHoldsInflight(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	grantEdit(t, ns, ptWriter)
	k := startFakeKubelet(t, ns)
	createPod(t, ns, "p", k.node)
	g := startPassGateway(t, func(c *config.Config) { c.Auth.UserMaxInflight = 1 }, gateway.Options{})
	token := env.CP.UserConfig(ptWriter).BearerToken
	tg := g.targets(t)[0]
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, tg.url+"/api/v1/namespaces/"+ns+"/pods/p/log?follow=true", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := tg.client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "line 1\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	path := "/api/v1/namespaces/" + ns + "/pods/p/log"
	if a := tg.do(t, http.MethodGet, path, token); a.code != http.StatusTooManyRequests || a.audited {
		t.Errorf("a second request while the stream is open: %+v, want the gateway's 429", a)
	}
	k.Release()
	_, _ = io.Copy(io.Discard, br)
	resp.Body.Close()
	if a := tg.do(t, http.MethodGet, path, token); a.code != http.StatusOK {
		t.Errorf("after the stream ended: %+v", a)
	}
}
