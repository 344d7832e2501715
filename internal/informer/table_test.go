package informer

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"kubegate/internal/testenv"
)

// apiRow is one row of a Table kube-apiserver served, with what the
// comparisons need of its object.
type apiRow struct {
	Type  string // the watch event's type; "" in a list
	Name  string
	RV    string
	Cells []any
}

// apiTables reads Tables from kube-apiserver directly, as the oracle of
// what the gateway's cache must hold.
type apiTables struct {
	client *http.Client
	host   string
}

func newAPITables(t *testing.T, cfg *rest.Config) *apiTables {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.CloseIdleConnections)
	return &apiTables{client: hc, host: cfg.Host}
}

type tableJSON struct {
	Metadata          metav1.ListMeta                `json:"metadata"`
	ColumnDefinitions []metav1.TableColumnDefinition `json:"columnDefinitions"`
	Rows              []struct {
		Cells  []any `json:"cells"`
		Object struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		} `json:"object"`
	} `json:"rows"`
}

func (a *apiTables) get(ctx context.Context, path string, q url.Values) (*http.Response, error) {
	q.Set("includeObject", "Object")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.host+path+"?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s: %s", path, resp.Status, b)
	}
	return resp, nil
}

// list returns the Table of the collection at path, and its rows.
func (a *apiTables) list(t *testing.T, path string) (tableJSON, []apiRow) {
	t.Helper()
	resp, err := a.get(t.Context(), path, url.Values{})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tbl tableJSON
	if err := json.NewDecoder(resp.Body).Decode(&tbl); err != nil {
		t.Fatal(err)
	}
	var rows []apiRow
	for _, r := range tbl.Rows {
		rows = append(rows, apiRow{Name: r.Object.Metadata.Name, RV: r.Object.Metadata.ResourceVersion, Cells: r.Cells})
	}
	return tbl, rows
}

// watcher is a Table watch on kube-apiserver, recording its events.
type watcher struct {
	mu     sync.Mutex
	events []apiRow
	done   chan struct{}
}

func (a *apiTables) watch(t *testing.T, path, rv string) *watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := a.get(ctx, path, url.Values{"watch": {"true"}, "resourceVersion": {rv}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	w := &watcher{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer resp.Body.Close()
		dec := json.NewDecoder(bufio.NewReader(resp.Body))
		for {
			var e struct {
				Type   string
				Object tableJSON
			}
			if dec.Decode(&e) != nil {
				return
			}
			for _, r := range e.Object.Rows {
				w.mu.Lock()
				w.events = append(w.events, apiRow{Type: e.Type, Name: r.Object.Metadata.Name, RV: r.Object.Metadata.ResourceVersion, Cells: r.Cells})
				w.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-w.done
	})
	return w
}

// find returns the event of type typ for name at rv, waiting for it.
func (w *watcher) find(t *testing.T, typ, name, rv string) apiRow {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		w.mu.Lock()
		i := slices.IndexFunc(w.events, func(r apiRow) bool { return r.Type == typ && r.Name == name && r.RV == rv })
		var r apiRow
		if i >= 0 {
			r = w.events[i]
		}
		w.mu.Unlock()
		if i >= 0 {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("kube-apiserver's watch has no %s event for %s at %s", typ, name, rv)
		}
		select {
		case <-w.done:
			t.Fatalf("kube-apiserver's watch ended without a %s event for %s at %s", typ, name, rv)
		case <-time.After(20 * time.Millisecond): // polls a real condition, bounded above
		}
	}
}

// relative matches the cells kube-apiserver computes at send time from a
// time (ages, CRD date columns): they may differ between two answers.
var relative = regexp.MustCompile(`^(([0-9]+[smhdy])+|<invalid>|<unknown>)$`)

// sameCells compares cells, relative ones (columns of type date, and
// built-in types' Age) by kind only.
func sameCells(cols []metav1.TableColumnDefinition, got []byte, want []any) error {
	var g []any
	if err := json.Unmarshal(got, &g); err != nil {
		return fmt.Errorf("cells %s: %w", got, err)
	}
	if len(g) != len(want) || len(g) != len(cols) {
		return fmt.Errorf("cells %s, want %v (%d columns)", got, want, len(cols))
	}
	for i, c := range cols {
		if c.Type == "date" || c.Name == "Age" {
			gs, gok := g[i].(string)
			ws, wok := want[i].(string)
			if gok != wok || g[i] == nil != (want[i] == nil) || gok && (!relative.MatchString(gs) || !relative.MatchString(ws)) {
				return fmt.Errorf("cell %d (%s): %v, want %v", i, c.Name, g[i], want[i])
			}
			continue
		}
		if !cmp.Equal(g[i], want[i]) {
			return fmt.Errorf("cell %d (%s): %#v, want %#v", i, c.Name, g[i], want[i])
		}
	}
	return nil
}

// widgetsCRD has printer columns of every type; its objects leave some
// of them unset (null cells).
func widgetsCRD(group string) *unstructured.Unstructured {
	crd := testenv.NewCRD(group, "widgets", "Widget")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	v := versions[0].(map[string]any)
	v["additionalPrinterColumns"] = []any{
		map[string]any{"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
		map[string]any{"name": "Owner", "type": "string", "jsonPath": ".spec.owner", "description": "who owns it"},
		map[string]any{"name": "Expires", "type": "date", "jsonPath": ".spec.expires"},
		map[string]any{"name": "Ratio", "type": "number", "jsonPath": ".spec.ratio", "priority": int64(1)},
		map[string]any{"name": "Enabled", "type": "boolean", "jsonPath": ".spec.enabled", "priority": int64(1)},
		map[string]any{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
	}
	_ = unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions")
	return crd
}

func widget(ns, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "", "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     spec,
	}}
}

// TestTableCellsEqualKubeAPIServer checks that every cached object's row
// is kube-apiserver's, for built-in types and a custom resource with
// columns of every type: after the list, and for each watch event
// (ADDED, MODIFIED, DELETED), against kube-apiserver's own Table watch.
func TestTableCellsEqualKubeAPIServer(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	group := "tables.kubegate.io"
	env.EnsureCRD(t, widgetsCRD(group))
	widgets := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
	m := startManager(t, env.Config, nil)
	api := newAPITables(t, env.Config)

	type step struct {
		typ  string
		name string
		do   func() error
	}
	for _, tc := range []struct {
		resource string
		path     string // of the collection in a namespace, %s
		// create, update and delete one object named name
		create, update, remove func(ns, name string) error
	}{{
		resource: "pods", path: "/api/v1/namespaces/%s/pods",
		create: func(ns, name string) error {
			_, err := env.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}, {Name: "d", Image: "busybox"}}}}, metav1.CreateOptions{})
			return err
		},
		update: func(ns, name string) error {
			_, err := env.Client.CoreV1().Pods(ns).Patch(ctx, name, "application/merge-patch+json", []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
			return err
		},
		remove: func(ns, name string) error {
			return env.Client.CoreV1().Pods(ns).Delete(ctx, name, *metav1.NewDeleteOptions(0))
		},
	}, {
		resource: "configmaps", path: "/api/v1/namespaces/%s/configmaps",
		create: func(ns, name string) error {
			_, err := env.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"a": "1"}}, metav1.CreateOptions{})
			return err
		},
		update: func(ns, name string) error {
			_, err := env.Client.CoreV1().ConfigMaps(ns).Patch(ctx, name, "application/merge-patch+json", []byte(`{"data":{"b":"2","c":"3"}}`), metav1.PatchOptions{})
			return err
		},
		remove: func(ns, name string) error {
			return env.Client.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{})
		},
	}, {
		resource: "widgets." + group, path: "/apis/" + group + "/v1/namespaces/%s/widgets",
		create: func(ns, name string) error {
			w := widget(ns, name, map[string]any{"replicas": int64(3), "ratio": 1.5, "owner": "team-a", "expires": "2020-01-01T00:00:00Z", "enabled": true})
			w.SetAPIVersion(group + "/v1")
			_, err := env.Dynamic.Resource(widgets).Namespace(ns).Create(ctx, w, metav1.CreateOptions{})
			return err
		},
		update: func(ns, name string) error {
			_, err := env.Dynamic.Resource(widgets).Namespace(ns).Patch(ctx, name, "application/merge-patch+json",
				[]byte(`{"spec":{"replicas":0,"ratio":null,"enabled":false,"expires":"2999-01-01T00:00:00Z"}}`), metav1.PatchOptions{})
			return err
		},
		remove: func(ns, name string) error {
			return env.Dynamic.Resource(widgets).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{})
		},
	}} {
		t.Run(tc.resource, func(t *testing.T) {
			ns := env.Namespace(t)
			// Objects before the list, one with every column unset.
			for _, name := range []string{"before-a", "before-b"} {
				if err := tc.create(ns, name); err != nil {
					t.Fatal(err)
				}
			}
			if tc.resource != "pods" && tc.resource != "configmaps" {
				w := widget(ns, "unset", map[string]any{})
				w.SetAPIVersion(group + "/v1")
				if _, err := env.Dynamic.Resource(widgets).Namespace(ns).Create(ctx, w, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			r := syncedResource(t, m, tc.resource)
			cols := r.Columns()
			if cols == nil {
				t.Fatal("Columns() = nil: the resource is not read as a Table")
			}
			path := fmt.Sprintf(tc.path, ns)
			served, rows := api.list(t, path)
			if diff := cmp.Diff(served.ColumnDefinitions, cols.Definitions); diff != "" {
				t.Fatalf("Columns (-kube-apiserver +cache):\n%s", diff)
			}
			// The cache holds what the list held (nothing changed since).
			cached, _ := r.List(&Filter{Namespace: ns})
			if len(cached) != len(rows) {
				t.Fatalf("cache holds %d objects, kube-apiserver %d", len(cached), len(rows))
			}
			for _, row := range rows {
				o, ok := r.Get(ns, row.Name)
				if !ok || o.ResourceVersion != row.RV {
					t.Fatalf("%s not cached at %s", row.Name, row.RV)
				}
				if o.Columns != cols {
					t.Errorf("%s: Columns %p, want the resource's %p", row.Name, o.Columns, cols)
				}
				if err := sameCells(cols.Definitions, o.Cells, row.Cells); err != nil {
					t.Errorf("listed %s: %v", row.Name, err)
				}
			}

			_, rv := r.List(&Filter{Namespace: ns})
			oracle := api.watch(t, path, fmt.Sprint(rv))
			c := listen(t, r, ListenerOptions{Filter: Filter{Namespace: ns}})
			for _, s := range []step{
				{"ADDED", "x", func() error { return tc.create(ns, "x") }},
				{"MODIFIED", "x", func() error { return tc.update(ns, "x") }},
				{"MODIFIED", "before-a", func() error { return tc.update(ns, "before-a") }},
				{"DELETED", "x", func() error { return tc.remove(ns, "x") }},
			} {
				n := len(c.got)
				if err := s.do(); err != nil {
					t.Fatal(err)
				}
				got := c.until(t, s.typ+" "+s.name, func(ns []Notification) bool {
					return slices.ContainsFunc(ns[n:], func(x Notification) bool { return x.Type.String() == s.typ && x.Object.Name == s.name })
				})
				i := slices.IndexFunc(got[n:], func(x Notification) bool { return x.Type.String() == s.typ && x.Object.Name == s.name })
				o := got[n+i].Object
				want := oracle.find(t, s.typ, s.name, o.ResourceVersion)
				if o.Columns != cols {
					t.Errorf("%s %s: Columns %p, want the resource's %p", s.typ, s.name, o.Columns, cols)
				}
				if err := sameCells(cols.Definitions, o.Cells, want.Cells); err != nil {
					t.Errorf("%s %s: %v", s.typ, s.name, err)
				}
			}
		})
	}
}
