package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"kubegate/internal/auth"
	"kubegate/internal/testenv"
)

// TestGatewayServesWebSocket checks the /ws wiring of the real binary: a
// browser-style handshake (kubegate.v1 plus a bearer-token subprotocol,
// checked with TokenReview and RBAC) gets kubegate.v1 back, a subscription sees a ConfigMap created with
// client-go, and SIGTERM closes the socket with 1001.
func TestGatewayServesWebSocket(t *testing.T) {
	env := testenv.Get(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.CP.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	addr := freeAddr(t)
	g := startGateway(t, gatewayBinary(t), "--kubeconfig", kubeconfig, "--listen", addr, "--resources", "configmaps")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		code, _, err := get(ctx, "http://"+addr+"/readyz")
		return err == nil && code == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("gateway never became ready: %v", err)
	}

	c, resp, err := websocket.Dial(ctx, "ws://"+addr+"/ws", &websocket.DialOptions{
		Subprotocols: []string{auth.BearerProtocolPrefix + base64.RawURLEncoding.EncodeToString([]byte(env.Config.BearerToken)), "kubegate.v1"},
	})
	if err != nil {
		t.Fatalf("dial /ws: %v", err)
	}
	defer c.CloseNow()
	if got := resp.Header.Get("Sec-WebSocket-Protocol"); got != "kubegate.v1" {
		t.Fatalf("selected subprotocol %q, want kubegate.v1", got)
	}
	c.SetReadLimit(-1)
	sub := `{"type":"subscribe","id":"cms","resource":"configmaps","namespace":"` + ns + `"}`
	if err := c.Write(ctx, websocket.MessageText, []byte(sub)); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "over-ws"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The object arrives either in the snapshot or as a live event.
	for seen := false; !seen; {
		_, data, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		var f struct {
			Type   string            `json:"type"`
			Events []json.RawMessage `json:"events"`
			Object struct {
				Metadata struct{ Name string } `json:"metadata"`
			} `json:"object"`
		}
		frames := []json.RawMessage{data}
		if json.Unmarshal(data, &f) == nil && f.Type == "batch" {
			frames = f.Events
		}
		for _, raw := range frames {
			if err := json.Unmarshal(raw, &f); err != nil {
				t.Fatal(err)
			}
			if f.Type == "error" {
				t.Fatalf("error frame: %s", raw)
			}
			seen = seen || f.Type == "ADDED" && f.Object.Metadata.Name == "over-ws"
		}
	}

	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for {
		if _, _, err := c.Read(ctx); err != nil {
			if code := websocket.CloseStatus(err); code != websocket.StatusGoingAway {
				t.Fatalf("socket ended with %v, want close 1001", err)
			}
			break
		}
	}
	select {
	case err := <-g.done:
		g.done <- err
		if err != nil {
			t.Fatalf("gateway exited with %v after SIGTERM", err)
		}
	case <-ctx.Done():
		t.Fatal("gateway did not exit after SIGTERM")
	}
}
