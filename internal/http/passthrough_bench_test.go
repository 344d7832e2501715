package httpapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkPassThroughWrite is one small write through the gateway's
// handler to an upstream that answers at once: the pass-through's own
// cost (authentication from the token cache, routing, the proxy), with
// the client's and upstream's loopback round trips. Compare with
// path=direct, the same write to the upstream without the gateway.
func BenchmarkPassThroughWrite(b *testing.B) {
	up := newUpstream(b, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c"}}`)
	})
	up.record = false
	s := passServer(b, up, nil, nil)
	gw := httptest.NewServer(s.Handler())
	defer gw.Close()
	const body = `{"data":{"n":"1"}}`
	for _, tc := range []struct{ name, base string }{{"direct", up.srv.URL}, {"gateway", gw.URL}} {
		b.Run("path="+tc.name, func(b *testing.B) {
			c := &http.Client{Transport: &http.Transport{}}
			defer c.CloseIdleConnections()
			b.ReportAllocs()
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodPatch, tc.base+"/api/v1/namespaces/ns/configmaps/c", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer good")
				req.Header.Set("Content-Type", "application/merge-patch+json")
				resp, err := c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatal(resp.Status)
				}
			}
		})
	}
}
