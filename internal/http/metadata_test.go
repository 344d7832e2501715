package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"kubegate/internal/testenv"
)

// TestMetadataOnly serves PartialObjectMetadata(List) as the apiserver
// does: raw, through client-go's metadata client (list, paged list, get,
// watch) and through a metadata informer.
func TestMetadataOnly(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	for _, n := range []string{"m-0", "m-1", "m-2"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"app": "m"},
			Annotations: map[string]string{"note": n}}, Data: map[string]string{"big": "secret-ish payload"}}
		if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	gw := startGateway(t, nil)
	cmGVR := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	mc, err := metadata.NewForConfig(&rest.Config{Host: gw})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the ConfigMaps in the cache", func() bool {
		return len(getList(t, gw+"/api/v1/namespaces/"+ns+"/configmaps").Items) == 3
	})

	t.Run("raw", func(t *testing.T) {
		const accept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
		r := do(t, "GET", gw+"/api/v1/namespaces/"+ns+"/configmaps?limit=2", "Accept", accept)
		var l struct {
			Kind       string `json:"kind"`
			APIVersion string `json:"apiVersion"`
			Metadata   struct {
				Continue string `json:"continue"`
			} `json:"metadata"`
			Items []map[string]json.RawMessage `json:"items"`
		}
		if r.code != 200 || json.Unmarshal(r.body, &l) != nil {
			t.Fatalf("list: %d %s", r.code, r.body)
		}
		if l.Kind != "PartialObjectMetadataList" || l.APIVersion != "meta.k8s.io/v1" || len(l.Items) != 2 || l.Metadata.Continue == "" {
			t.Errorf("list envelope: %s", r.body)
		}
		for _, it := range l.Items {
			keys := slices.Sorted(func(yield func(string) bool) {
				for k := range it {
					if !yield(k) {
						return
					}
				}
			})
			if !slices.Equal(keys, []string{"apiVersion", "kind", "metadata"}) ||
				string(it["kind"]) != `"PartialObjectMetadata"` || string(it["apiVersion"]) != `"meta.k8s.io/v1"` {
				t.Errorf("item: %v in %s", keys, r.body)
			}
		}
		r = do(t, "GET", gw+"/api/v1/namespaces/"+ns+"/configmaps/m-1", "Accept",
			"application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1")
		var o map[string]json.RawMessage
		if r.code != 200 || json.Unmarshal(r.body, &o) != nil || len(o) != 3 || string(o["kind"]) != `"PartialObjectMetadata"` ||
			string(o["apiVersion"]) != `"meta.k8s.io/v1"` {
			t.Errorf("get: %d %s", r.code, r.body)
		}
		// Table rows carry the same metadata (kubectl reads it for
		// -A, --show-labels and -L).
		r = do(t, "GET", gw+"/api/v1/namespaces/"+ns+"/configmaps/m-1", "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
		var tbl metav1.Table
		var rowMeta metav1.PartialObjectMetadata
		if r.code != 200 || json.Unmarshal(r.body, &tbl) != nil || len(tbl.Rows) != 1 ||
			json.Unmarshal(tbl.Rows[0].Object.Raw, &rowMeta) != nil || rowMeta.Kind != "PartialObjectMetadata" ||
			rowMeta.Annotations["note"] != "m-1" || rowMeta.Labels["app"] != "m" {
			t.Errorf("table row metadata: %d %s", r.code, r.body)
		}
		r = do(t, "GET", gw+"/api/v1/namespaces/"+ns+"/configmaps/m-1", "Accept", accept)
		if st := r.status(t); r.code != http.StatusNotAcceptable || st.Reason != metav1.StatusReasonNotAcceptable {
			t.Errorf("list form for a get: %d %s", r.code, r.body)
		}
		// A form asked for in a malformed entry is not answered with
		// the objects, on lists and watches too.
		for _, path := range []string{"/configmaps/m-1", "/configmaps", "/configmaps?watch=true"} {
			r = do(t, "GET", gw+"/api/v1/namespaces/"+ns+path, "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io;;")
			if st := r.status(t); r.code != http.StatusNotAcceptable || st.Reason != metav1.StatusReasonNotAcceptable ||
				st.APIVersion != "v1" || st.Status != metav1.StatusFailure || !strings.Contains(st.Message, "malformed") {
				t.Errorf("malformed Accept on %s: %d %s", path, r.code, r.body)
			}
		}
	})

	t.Run("client", func(t *testing.T) {
		l, err := mc.Resource(cmGVR).Namespace(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "app=m"})
		if err != nil {
			t.Fatal(err)
		}
		// (The client's decoder drops kind and apiVersion; "raw" checks them.)
		if len(l.Items) != 3 {
			t.Fatalf("list: %+v", l)
		}
		for i, it := range l.Items {
			if it.Name != "m-"+string(rune('0'+i)) ||
				it.Annotations["note"] != it.Name || it.UID == "" || it.ResourceVersion == "" {
				t.Errorf("item %d: %+v", i, it)
			}
		}
		p1, err := mc.Resource(cmGVR).Namespace(ns).List(t.Context(), metav1.ListOptions{Limit: 2})
		if err != nil || len(p1.Items) != 2 || p1.Continue == "" {
			t.Fatalf("page 1: %v %+v", err, p1)
		}
		p2, err := mc.Resource(cmGVR).Namespace(ns).List(t.Context(), metav1.ListOptions{Limit: 2, Continue: p1.Continue})
		if err != nil || len(p2.Items) != 1 || p2.Items[0].Name != "m-2" {
			t.Fatalf("page 2: %v %+v", err, p2)
		}
		o, err := mc.Resource(cmGVR).Namespace(ns).Get(t.Context(), "m-1", metav1.GetOptions{})
		if err != nil || o.Name != "m-1" || o.Annotations["note"] != "m-1" {
			t.Fatalf("get: %v %+v", err, o)
		}

		w, err := mc.Resource(cmGVR).Namespace(ns).Watch(t.Context(), metav1.ListOptions{
			ResourceVersion: l.ResourceVersion, AllowWatchBookmarks: true})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "m-3", Annotations: map[string]string{"note": "m-3"}}}
		if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-w.ResultChan():
			m, ok := ev.Object.(*metav1.PartialObjectMetadata)
			if ev.Type != watch.Added || !ok || m.Name != "m-3" || m.Annotations["note"] != "m-3" {
				t.Errorf("watch event: %s %#v", ev.Type, ev.Object)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no watch event")
		}
	})

	t.Run("informer", func(t *testing.T) {
		f := metadatainformer.NewFilteredSharedInformerFactory(mc, 0, ns, nil)
		inf := f.ForResource(cmGVR).Informer()
		added := make(chan string, 16)
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
			if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
				added <- m.Name
			}
		}}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		f.Start(ctx.Done())
		defer f.Shutdown() // after cancel: waits for the informer's goroutines
		defer cancel()
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			t.Fatal("metadata informer did not sync")
		}
		if n := len(inf.GetStore().List()); n < 3 {
			t.Errorf("informer holds %d objects, want at least 3", n)
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "m-4"}}
		if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		deadline := time.After(30 * time.Second)
		for {
			select {
			case n := <-added:
				if n == "m-4" {
					return
				}
			case <-deadline:
				t.Fatal("the metadata informer never saw m-4")
			}
		}
	})
}
