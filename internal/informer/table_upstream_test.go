package informer

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"kubegate/internal/testenv"
)

// proxied is one request the proxy saw for its collection.
type proxied struct {
	watch  bool
	accept string
	query  url.Values
}

func (p proxied) table() bool { return strings.Contains(p.accept, "as=Table") }

// upstreamProxy is an HTTPS reverse proxy to the test apiserver, with the
// admin's credentials. Requests for its collection path are recorded, and
// first shown to hook, which may change them or answer them itself.
// Handlers run on the server's goroutines; mu guards reqs and hook.
type upstreamProxy struct {
	srv  *httptest.Server
	path string
	mu   sync.Mutex
	reqs []proxied
	// hook returns true when it has answered the request.
	hook func(w http.ResponseWriter, r *http.Request) bool
}

func newUpstreamProxy(t *testing.T, cfg *rest.Config, path string) *upstreamProxy {
	t.Helper()
	upstream, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := &upstreamProxy{path: path}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(upstream) },
		Transport:     transport,
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == p.path {
			p.mu.Lock()
			p.reqs = append(p.reqs, proxied{watch: r.URL.Query().Get("watch") == "true", accept: r.Header.Get("Accept"), query: r.URL.Query()})
			hook := p.hook
			p.mu.Unlock()
			if hook != nil && hook(w, r) {
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	p.srv.EnableHTTP2 = true
	p.srv.StartTLS()
	t.Cleanup(func() {
		p.srv.CloseClientConnections()
		p.srv.Close()
	})
	return p
}

func (p *upstreamProxy) setHook(h func(w http.ResponseWriter, r *http.Request) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hook = h
}

func (p *upstreamProxy) requests() []proxied {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.reqs)
}

// config reaches the apiserver through the proxy.
func (p *upstreamProxy) config() *rest.Config {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.srv.Certificate().Raw})
	return &rest.Config{Host: p.srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
}

// plainRequest makes r a request for plain JSON objects, as an upstream
// without Tables would read it.
func plainRequest(r *http.Request) {
	r.Header.Set("Accept", "application/json")
	q := r.URL.Query()
	q.Del("includeObject")
	r.URL.RawQuery = q.Encode()
}

func writeStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	st := err.ErrStatus
	st.Kind, st.APIVersion = "Status", "v1"
	b, _ := json.Marshal(st)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	_, _ = w.Write(b)
}

// observedManager starts a Manager whose log the test reads.
func observedManager(t *testing.T, cfg *rest.Config, mod func(*Options)) (*Manager, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	m := startManager(t, cfg, func(o *Options) {
		o.Logger = zap.New(core)
		if mod != nil {
			mod(o)
		}
	})
	return m, logs
}

func createConfigMaps(t *testing.T, env *testenv.Env, ns string, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

const plainMessage = "the upstream does not serve this resource as a Table with its objects"

// TestTableFallbackToPlainJSON: an upstream that does not answer a Table
// with the objects is read as plain JSON, as before, without cells, and
// says so once.
func TestTableFallbackToPlainJSON(t *testing.T) {
	env := testenv.Get(t)
	for _, tc := range []struct {
		name string
		hook func(w http.ResponseWriter, r *http.Request) bool
	}{
		{"plain answers", func(w http.ResponseWriter, r *http.Request) bool { plainRequest(r); return false }},
		{"metadata rows", func(w http.ResponseWriter, r *http.Request) bool {
			q := r.URL.Query()
			q.Del("includeObject") // kube-apiserver's default: PartialObjectMetadata
			r.URL.RawQuery = q.Encode()
			return false
		}},
		{"406", func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.Contains(r.Header.Get("Accept"), "as=Table") {
				return false
			}
			writeStatus(w, apierrors.NewGenericServerResponse(http.StatusNotAcceptable, "get", schema.GroupResource{}, "", "only application/json", 0, false))
			return true
		}},
		{"plain watches", func(w http.ResponseWriter, r *http.Request) bool {
			if r.URL.Query().Get("watch") == "true" {
				plainRequest(r)
			}
			return false
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			createConfigMaps(t, env, ns, "a", "b")
			proxy := newUpstreamProxy(t, env.Config, "/api/v1/configmaps")
			proxy.setHook(tc.hook)
			m, logs := observedManager(t, proxy.config(), nil)
			r := syncedResource(t, m, "configmaps")
			c := listen(t, r, ListenerOptions{Filter: Filter{Namespace: ns}, SendInitialEvents: true})
			c.until(t, "snapshot", hasEnd)
			createConfigMaps(t, env, ns, "c")
			got := c.until(t, "ADDED c", func(ns []Notification) bool { return slices.Contains(changesOf(ns, "c"), "ADDED") })
			if tc.name == "plain watches" {
				// The Table list came first; the plain watch relists.
				got = c.until(t, "the relist's MODIFIED a", func(ns []Notification) bool {
					return slices.ContainsFunc(ns, func(n Notification) bool { return n.Type == Modified && n.Object.Name == "a" && n.Object.Cells == nil })
				})
			}
			if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true,
				func(context.Context) (bool, error) { return r.Columns() == nil, nil }); err != nil {
				t.Fatalf("Columns() = %p, want nil", r.Columns())
			}
			for _, name := range []string{"a", "b", "c"} {
				o, ok := r.Get(ns, name)
				if !ok || o.Cells != nil || o.Columns != nil || !strings.Contains(string(o.Raw), `"kind":"ConfigMap"`) {
					t.Fatalf("%s: cached %v, cells %s, columns %p", name, ok, o.Cells, o.Columns)
				}
			}
			for _, n := range got {
				if n.Type == Added && n.Object.Name == "c" && n.Object.Cells != nil {
					t.Fatalf("ADDED c has cells %s", n.Object.Cells)
				}
			}
			if n := logs.FilterMessageSnippet(plainMessage).Len(); n != 1 {
				t.Fatalf("logged %d times that the upstream has no Tables, want once", n)
			}
			// From then on, nothing asks for a Table.
			reqs := proxy.requests()
			last := slices.IndexFunc(reqs, func(p proxied) bool { return !p.table() })
			if last < 0 || slices.ContainsFunc(reqs[last:], proxied.table) {
				t.Fatalf("requests after the fallback asked for Tables: %+v", reqs)
			}
		})
	}
}

// TestTableListRestartsWhenItsContinueExpires: a Table list's pages come
// from one consistent list; when a continue token has expired (410), the
// list starts over from its first page.
func TestTableListRestartsWhenItsContinueExpires(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	createConfigMaps(t, env, ns, "a", "b", "c", "d", "e")
	proxy := newUpstreamProxy(t, env.Config, "/api/v1/configmaps")
	var once sync.Once
	proxy.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		answered := false
		if r.URL.Query().Get("continue") != "" {
			once.Do(func() {
				// As kube-apiserver answers a continue token whose
				// version was compacted.
				writeStatus(w, apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result. (injected)"))
				answered = true
			})
		}
		return answered
	})
	m, logs := observedManager(t, proxy.config(), func(o *Options) { o.tablePageSize = 2 })
	r := syncedResource(t, m, "configmaps")
	objs, _ := r.List(&Filter{Namespace: ns})
	if len(objs) != 5 {
		t.Fatalf("cached %d configmaps in the namespace, want 5", len(objs))
	}
	for _, o := range objs {
		if o.Cells == nil || o.Columns != r.Columns() {
			t.Fatalf("%s: cells %s, columns %p (resource %p)", o.Name, o.Cells, o.Columns, r.Columns())
		}
	}
	var firstPages, continued int
	for _, p := range proxy.requests() {
		if p.watch {
			continue
		}
		if !p.table() || p.query.Get("limit") != "2" || p.query.Get("resourceVersion") != "" || p.query.Get("includeObject") != "Object" {
			t.Fatalf("list request %+v: want a Table page, limit 2, no resourceVersion", p)
		}
		if p.query.Get("continue") == "" {
			firstPages++
		} else {
			continued++
		}
	}
	if firstPages != 2 || continued < 2 {
		t.Fatalf("%d first pages and %d continued ones, want the list started over once", firstPages, continued)
	}
	if logs.FilterMessage("listing again from the first page").Len() != 1 {
		t.Fatal("the restart was not logged")
	}
}

// TestTableWatchExpiredRelists: a Table watch whose version has been
// compacted gets an ERROR 410 event, a plain Status as in plain watches
// (kube-apiserver's, as captured in testdata/tables), and the reflector
// lists again.
func TestTableWatchExpiredRelists(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	createConfigMaps(t, env, ns, "a")
	proxy := newUpstreamProxy(t, env.Config, "/api/v1/configmaps")
	var once sync.Once
	proxy.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		answered := false
		if r.URL.Query().Get("watch") == "true" {
			once.Do(func() {
				st := apierrors.NewResourceExpired("too old resource version: " + r.URL.Query().Get("resourceVersion") + " (injected)").ErrStatus
				st.Kind, st.APIVersion = "Status", "v1"
				ev, _ := json.Marshal(map[string]any{"type": "ERROR", "object": st})
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(append(ev, '\n'))
				answered = true
			})
		}
		return answered
	})
	m := startManager(t, proxy.config(), nil)
	r := syncedResource(t, m, "configmaps")
	cols := r.Columns()
	c := listen(t, r, ListenerOptions{Filter: Filter{Namespace: ns}})
	createConfigMaps(t, env, ns, "b")
	got := c.until(t, "ADDED b", func(ns []Notification) bool { return slices.Contains(changesOf(ns, "b"), "ADDED") })
	if o := got[len(got)-1].Object; o.Cells == nil || o.Columns != cols {
		t.Fatalf("ADDED b: cells %s, columns %p, want the resource's %p", o.Cells, o.Columns, cols)
	}
	lists := 0
	for _, p := range proxy.requests() {
		if !p.watch {
			lists++
		}
	}
	if lists < 2 {
		t.Fatalf("%d lists: the expired watch did not relist", lists)
	}
	if r.Columns() != cols {
		t.Fatal("a relist with the same columns changed the Columns pointer")
	}
}

// TestTableWatchReconnectsAndBookmarks: each watch connection's first
// Table carries the columns again; equal ones keep the resource's
// *Columns, without a relist. Bookmarks (Tables whose row prints an empty
// object) move the cache's version.
func TestTableWatchReconnectsAndBookmarks(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	createConfigMaps(t, env, ns, "a")
	proxy := newUpstreamProxy(t, env.Config, "/api/v1/configmaps")
	proxy.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Query().Get("watch") == "true" {
			// kube-apiserver sends a bookmark 2 s before a watch's end,
			// then ends it; the reflector watches again.
			q := r.URL.Query()
			q.Set("timeoutSeconds", "3")
			r.URL.RawQuery = q.Encode()
		}
		return false
	})
	m := startManager(t, proxy.config(), nil)
	r := syncedResource(t, m, "configmaps")
	cols := r.Columns()
	all := listen(t, r, ListenerOptions{})

	// A change elsewhere, which the configmaps' watch cache learns of
	// when a consistent read of configmaps makes it ask etcd for progress.
	s, err := env.Client.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var target uint64
	if _, err := fmt.Sscan(s.ResourceVersion, &target); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if _, err := env.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			return false, err
		}
		_, rv := r.List(&Filter{Namespace: "none"})
		return rv >= target, nil
	})
	if err != nil {
		_, rv := r.List(&Filter{Namespace: "none"})
		t.Fatalf("the cache's version %d never reached %d by bookmarks: %v", rv, target, err)
	}
	watches := 0
	for _, p := range proxy.requests() {
		if p.watch {
			watches++
		}
	}
	if len(all.l.Pop(nil)) != 0 {
		t.Fatal("configmaps changed meanwhile: the version may not have come from bookmarks")
	}
	// Wait for at least two reconnects, then a change on the latest.
	err = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		n := 0
		for _, p := range proxy.requests() {
			if p.watch {
				n++
			}
		}
		return n >= max(3, watches+1), nil
	})
	if err != nil {
		t.Fatal("the watch did not reconnect")
	}
	c := listen(t, r, ListenerOptions{Filter: Filter{Namespace: ns}})
	createConfigMaps(t, env, ns, "b")
	got := c.until(t, "ADDED b", func(ns []Notification) bool { return slices.Contains(changesOf(ns, "b"), "ADDED") })
	if o := got[len(got)-1].Object; o.Columns != cols || r.Columns() != cols {
		t.Fatalf("after reconnects: ADDED b has columns %p, the resource %p; want the first list's %p", o.Columns, r.Columns(), cols)
	}
	lists := 0
	for _, p := range proxy.requests() {
		if !p.watch {
			lists++
		}
	}
	if lists != 1 {
		t.Fatalf("%d lists, want 1: reconnecting watches with the same columns must not relist", lists)
	}
}

// TestTableColumnsChangeRelists: editing a CRD's printer columns makes
// kube-apiserver rebuild its storage, which ends the watch; the next
// watch's first Table has the new columns, and the informer relists so
// that every object follows them. Listeners see each object MODIFIED,
// even those resumed past the objects' versions.
func TestTableColumnsChangeRelists(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	group := "columns.kubegate.io"
	crd := widgetsCRD(group)
	env.CreateCRD(t, crd)
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
	ns := env.Namespace(t)
	client := env.Dynamic.Resource(gvr).Namespace(ns)
	for _, name := range []string{"a", "b"} {
		w := widget(ns, name, map[string]any{"replicas": int64(2), "color": "red"})
		w.SetAPIVersion(group + "/v1")
		if _, err := client.Create(ctx, w, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	m, logs := observedManager(t, env.Config, nil)
	r := syncedResource(t, m, "widgets."+group)
	before := r.Columns()
	_, rv := r.List(nil)
	resumed := listen(t, r, ListenerOptions{Filter: Filter{Namespace: ns}, ResourceVersion: fmt.Sprint(rv)})

	// Add a Color column.
	crds := env.Dynamic.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	cur, err := crds.Get(ctx, crd.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(cur.Object, "spec", "versions")
	v := versions[0].(map[string]any)
	v["additionalPrinterColumns"] = append(v["additionalPrinterColumns"].([]any),
		map[string]any{"name": "Color", "type": "string", "jsonPath": ".spec.color"})
	if err := unstructured.SetNestedSlice(cur.Object, versions, "spec", "versions"); err != nil {
		t.Fatal(err)
	}
	if _, err := crds.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A change, so that the new watch's first event comes soon (else the
	// next bookmark brings the columns, within a minute).
	i := 0
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if r.Columns() != before {
			return true, nil
		}
		i++
		_, err := client.Patch(ctx, "trigger", "application/merge-patch+json", fmt.Appendf(nil, `{"spec":{"i":%d}}`, i), metav1.PatchOptions{})
		if apierrors.IsNotFound(err) {
			w := widget(ns, "trigger", map[string]any{})
			w.SetAPIVersion(group + "/v1")
			_, err = client.Create(ctx, w, metav1.CreateOptions{})
		}
		return false, err
	})
	if err != nil {
		t.Fatalf("Columns() never changed: %v", err)
	}
	after := r.Columns()
	if len(after.Definitions) != len(before.Definitions)+1 || after.Definitions[len(after.Definitions)-1].Name != "Color" {
		t.Fatalf("columns after the edit: %+v", after.Definitions)
	}
	served, rows := newAPITables(t, env.Config).list(t, "/apis/"+group+"/v1/namespaces/"+ns+"/widgets")
	for _, row := range rows {
		o, ok := r.Get(ns, row.Name)
		if !ok {
			t.Fatalf("%s not cached", row.Name)
		}
		if o.Columns != after {
			t.Errorf("%s: columns %p, want the new %p", row.Name, o.Columns, after)
		}
		if o.ResourceVersion == row.RV {
			if err := sameCells(served.ColumnDefinitions, o.Cells, row.Cells); err != nil {
				t.Errorf("%s: %v", row.Name, err)
			}
		}
	}
	got := resumed.until(t, "a and b with the new columns", func(ns []Notification) bool {
		n := 0
		for _, x := range ns {
			if x.Type == Modified && (x.Object.Name == "a" || x.Object.Name == "b") && x.Object.Columns == after {
				n++
			}
		}
		return n == 2
	})
	for _, x := range got {
		if (x.Object.Name == "a" || x.Object.Name == "b") && x.Type != Modified {
			t.Fatalf("unexpected %s %s", x.Type, x.Object.Name)
		}
	}
	if logs.FilterMessage("the resource's Table columns changed").Len() == 0 {
		t.Fatal("the change of columns was not logged")
	}
}
