package informer

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

func resourceList(gv string, names ...string) *metav1.APIResourceList {
	l := &metav1.APIResourceList{GroupVersion: gv}
	for _, n := range names {
		l.APIResources = append(l.APIResources, metav1.APIResource{Name: n, Kind: "K" + n, Namespaced: true,
			Verbs: metav1.Verbs{"get", "list", "watch"}})
	}
	return l
}

// TestDiscoveryRefresh: the discovery document served to clients
// follows the apiserver's within the refresh interval (a CRD created
// after the first request appears), and an apiserver that cannot be
// reached leaves the last document served and names resolvable.
func TestDiscoveryRefresh(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	fd := &fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{}}
	fd.Resources = []*metav1.APIResourceList{resourceList("v1", "configmaps")}
	r := newResolver(fd, 1/5.0, clk) // a refresh every 5s at most
	served := func() []string {
		t.Helper()
		d, err := r.Discovery(context.Background())
		if err != nil {
			t.Fatalf("Discovery: %v", err)
		}
		var out []string
		for _, g := range append(append([]apidiscoveryv2.APIGroupDiscovery(nil), d.Core...), d.Groups...) {
			for _, v := range g.Versions {
				for _, res := range v.Resources {
					out = append(out, schema.GroupVersion{Group: g.Name, Version: v.Version}.String()+"/"+res.Resource)
				}
			}
		}
		slices.Sort(out)
		return out
	}
	if diff := cmp.Diff([]string{"v1/configmaps"}, served()); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}

	fd.Resources = append(fd.Resources, resourceList("example.com/v1", "widgets"))
	if diff := cmp.Diff([]string{"v1/configmaps"}, served()); diff != "" {
		t.Fatalf("within the refresh interval: (-want +got):\n%s", diff)
	}
	clk.Step(5 * time.Second)
	want := []string{"example.com/v1/widgets", "v1/configmaps"}
	if diff := cmp.Diff(want, served()); diff != "" {
		t.Fatalf("after the refresh interval: (-want +got):\n%s", diff)
	}
	// The refresh reached the names too: no further refresh is needed
	// (nor allowed yet) to resolve the new resource.
	if _, err := r.Resolve(context.Background(), "widgets"); err != nil {
		t.Fatalf("Resolve(widgets) after the refresh: %v", err)
	}

	fd.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	clk.Step(5 * time.Second)
	if diff := cmp.Diff(want, served()); diff != "" {
		t.Fatalf("apiserver unreachable: (-want +got):\n%s", diff)
	}
	if _, err := r.Resolve(context.Background(), "configmaps"); err != nil {
		t.Fatalf("Resolve(configmaps) while the apiserver is unreachable: %v", err)
	}
}
