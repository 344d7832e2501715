package gateway_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubegate/internal/gateway"
	"kubegate/internal/gateway/gatewaytest"
)

// TestLongRequestURIs: a path over 2048 bytes or a query over 8192 gets
// 414 with a complete Status on every route, REST and /ws alike, up to a
// request head of 1 MiB (a 1 MB filter among them); past that, the HTTP
// server itself refuses the head with 431, as kube-apiserver's does.
func TestLongRequestURIs(t *testing.T) {
	cfg := gatewaytest.Config()
	cfg.Auth.Authn, cfg.Auth.Authz = "none", "always-allow"
	gw := gatewaytest.Start(t, cfg, gateway.Options{}).URL()
	list := gw + "/api/v1/namespaces/default/configmaps"
	for _, tc := range []struct {
		name, u  string
		mentions string
	}{
		{"path", gw + "/api/v1/namespaces/x/pods/" + strings.Repeat("a", 3000), "path longer than 2048 bytes"},
		{"query just over the bound", list + "?labelSelector=" + strings.Repeat("a", 8193-len("labelSelector=")), "query longer than 8192 bytes"},
		{"1 MB filter", list + "?sort=metadata.name&filter=" + strings.Repeat("x", 1_000_000), "query longer than 8192 bytes"},
		{"WebSocket", gw + "/ws?x=" + strings.Repeat("a", 9000), "query longer than 8192 bytes"},
		{"1 MB WebSocket query", gw + "/ws?x=" + strings.Repeat("a", 1_000_000), "query longer than 8192 bytes"},
		{"health", gw + "/healthz?" + strings.Repeat("a", 9000), "query longer than 8192 bytes"},
		{"web", gw + "/" + strings.Repeat("a", 3000), "path longer than 2048 bytes"},
	} {
		r := do(t, "GET", tc.u)
		if r.code != http.StatusRequestURITooLong {
			t.Errorf("%s: %d %s %.200s, want 414", tc.name, r.code, r.hdr.Get("Content-Type"), r.body)
			continue
		}
		st := r.status(t)
		if st.Reason != metav1.StatusReasonBadRequest || st.Status != metav1.StatusFailure || st.APIVersion != "v1" ||
			!strings.Contains(st.Message, tc.mentions) {
			t.Errorf("%s: Status %+v, want BadRequest mentioning %q", tc.name, st, tc.mentions)
		}
	}
	// Within the bounds, the same routes answer as usual.
	if r := do(t, "GET", gw+"/healthz?"+strings.Repeat("a", 8192)); r.code != http.StatusOK {
		t.Errorf("a query of 8192 bytes: %d %.200s", r.code, r.body)
	}
	if r := do(t, "GET", list+"?labelSelector="+strings.Repeat("a", 5000)); r.code != http.StatusBadRequest ||
		!strings.Contains(r.status(t).Message, "invalid labelSelector: longer than 4096 bytes") {
		t.Errorf("a query of 5000 bytes: %d %.200s, want the list's own 400", r.code, r.body)
	}
	// Past a 1 MiB head, as kube-apiserver: 431 from the HTTP server,
	// which answers before the request is all sent, and hangs up.
	conn, err := net.Dial("tcp", strings.TrimPrefix(gw, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	go func() {
		_, _ = io.WriteString(conn, "GET /api/v1/configmaps?filter="+strings.Repeat("x", 1<<20+4096)+" HTTP/1.1\r\nHost: x\r\n\r\n")
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("a head over 1 MiB: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a head over 1 MiB: %s, want 431", resp.Status)
	}
}

type response struct {
	code int
	body []byte
	hdr  http.Header
}

func (r response) status(t *testing.T) metav1.Status {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal(r.body, &st); err != nil || st.Kind != "Status" {
		t.Fatalf("want a Status, got %d %s", r.code, r.body)
	}
	if int(st.Code) != r.code {
		t.Errorf("Status code %d, HTTP code %d", st.Code, r.code)
	}
	return st
}

func do(t *testing.T, method, u string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{resp.StatusCode, body, resp.Header}
}
