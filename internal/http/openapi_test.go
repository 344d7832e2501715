package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"kubegate/internal/auth"
	"kubegate/internal/informer"
	"kubegate/internal/livequery/wire"
)

// TestOpenAPIAuthorization: /openapi/v2, /openapi/v3 and below are
// authenticated like the API and authorized as non-resource URLs with
// verb get, the way kube-apiserver authorizes them.
func TestOpenAPIAuthorization(t *testing.T) {
	tokens, err := auth.ParseTokenFile(strings.NewReader("reader-token,reader,u1\nother-token,other,u2\n"))
	if err != nil {
		t.Fatal(err)
	}
	bearer, err := auth.NewBearer(auth.BearerOptions{Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	az := &pathAuthorizer{allowed: map[string]bool{"reader": true}}
	served := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("spec of " + r.URL.Path)) })
	gw := startGateway(t, func(o *Options) { o.Authenticator, o.Authorizer, o.OpenAPI = bearer, az, served })

	for _, path := range []string{"/openapi/v2", "/openapi/v3", "/openapi/v3/apis/apps/v1"} {
		if r := do(t, "GET", gw+path); r.code != http.StatusUnauthorized {
			t.Errorf("%s without a token: %d %s", path, r.code, r.body)
		}
		r := do(t, "GET", gw+path, "Authorization", "Bearer other-token")
		want := `forbidden: User "other" cannot get path "` + path + `"`
		if st := r.status(t); r.code != http.StatusForbidden || st.Reason != metav1.StatusReasonForbidden || st.Message != want {
			t.Errorf("%s as other: %d %s, want 403 %q", path, r.code, r.body, want)
		}
		if r := do(t, "GET", gw+path, "Authorization", "Bearer reader-token"); r.code != http.StatusOK || string(r.body) != "spec of "+path {
			t.Errorf("%s as reader: %d %s", path, r.code, r.body)
		}
	}
	az.mu.Lock()
	defer az.mu.Unlock()
	if !strings.Contains(strings.Join(az.asked, "\n"), "reader get /openapi/v3/apis/apps/v1") {
		t.Errorf("asked: %v", az.asked)
	}
}

// An authorizer that cannot answer for /openapi is refused at New.
func TestOpenAPINeedsANonResourceAuthorizer(t *testing.T) {
	mgr, err := informer.New(informer.Options{Config: &rest.Config{Host: "http://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(Options{Manager: mgr, Tables: wire.NewTables(mgr, zap.NewNop(), wire.ViewLimits{}), Authorizer: resourceOnly{}, Listener: nopListener{},
		OpenMetrics: true, OpenAPI: http.NotFoundHandler()})
	if err == nil || !strings.Contains(err.Error(), "cannot authorize /openapi") {
		t.Fatalf("err = %v", err)
	}
}
