package informer

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// The fixtures in testdata/discovery are kube-apiserver v1.37's own
// answers: aggregated-api.json and aggregated-apis.json to
// "Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
// and legacy/ the plain JSON of /api, /apis, /api/v1 and every
// /apis/<group>/<version> (legacy/apis_<group>_<version>.json), all read
// from one apiserver at one time.

// discoveryServer serves the fixtures: the aggregated form when asked
// for it, unless legacyOnly (an apiserver, or a proxy, that knows only
// the legacy form).
func discoveryServer(t *testing.T, legacyOnly bool) *httptest.Server {
	t.Helper()
	dir := filepath.Join("testdata", "discovery")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		aggregated := !legacyOnly && strings.Contains(r.Header.Get("Accept"), "as=APIGroupDiscoveryList")
		var file string
		switch {
		case aggregated && r.URL.Path == "/api":
			file = "aggregated-api.json"
		case aggregated && r.URL.Path == "/apis":
			file = "aggregated-apis.json"
		default:
			file = filepath.Join("legacy", strings.ReplaceAll(strings.Trim(r.URL.Path, "/"), "/", "_")+".json")
		}
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		if aggregated {
			w.Header().Set("Content-Type", discovery.AcceptV2)
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func fixtureAggregated(t *testing.T) *Discovery {
	t.Helper()
	read := func(name string) []apidiscoveryv2.APIGroupDiscovery {
		b, err := os.ReadFile(filepath.Join("testdata", "discovery", name))
		if err != nil {
			t.Fatal(err)
		}
		var l apidiscoveryv2.APIGroupDiscoveryList
		if err := json.Unmarshal(b, &l); err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	return &Discovery{Core: read("aggregated-api.json"), Groups: read("aggregated-apis.json")}
}

func discoveryClient(t *testing.T, url string) discovery.DiscoveryInterface {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: url})
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

// TestDiscoveryKeepsTheAPIServersOrder: the document the gateway serves
// from is the apiserver's, in its order: groups in priority order, each
// group's preferred version first (autoscaling/v2, not v1), resources as
// listed, and the same document, to the byte, however often it is
// fetched. It was once rebuilt from client-go's resources by group
// version, a map: every fetch had another order, and another preferred
// version for groups with two.
func TestDiscoveryKeepsTheAPIServersOrder(t *testing.T) {
	srv := discoveryServer(t, false)
	want := fixtureAggregated(t)
	dc := discoveryClient(t, srv.URL)
	var first []byte
	for i := range 100 {
		d, err := fetchDiscovery(context.Background(), dc)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if diff := cmp.Diff(want, d); diff != "" {
				t.Fatalf("the document differs from the apiserver's (-want +got):\n%s", diff)
			}
			first = b
			continue
		}
		if !bytes.Equal(b, first) {
			t.Fatalf("fetch %d differs from the first", i)
		}
	}
	for _, g := range want.Groups {
		if g.Name == "autoscaling" && g.Versions[0].Version != "v2" {
			t.Fatalf("fixture: autoscaling prefers %s", g.Versions[0].Version)
		}
	}
}

// TestDiscoveryFromLegacy: an apiserver (or a proxy in front of one) that
// answers only the legacy form gives the same document, built as
// kube-apiserver builds its aggregated one: the legacy answers of
// kube-apiserver put in the aggregated form are its aggregated answer.
func TestDiscoveryFromLegacy(t *testing.T) {
	srv := discoveryServer(t, true)
	d, err := fetchDiscovery(context.Background(), discoveryClient(t, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fixtureAggregated(t), d); diff != "" {
		t.Fatalf("legacy discovery in the aggregated form differs from kube-apiserver's aggregated (-want +got):\n%s", diff)
	}
}
