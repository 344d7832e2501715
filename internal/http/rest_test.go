package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	listpager "k8s.io/client-go/tools/pager"

	"kubegate/internal/auth"
	"kubegate/internal/informer"
	"kubegate/internal/livequery/wire"
	"kubegate/internal/testenv"
)

// startGateway runs a Manager and a Server against the test apiserver
// until the test ends, and returns the server's base URL.
func startGateway(t *testing.T, mod func(*Options)) string {
	t.Helper()
	u, _ := startStoppableGateway(t, mod)
	return u
}

// startStoppableGateway is startGateway that also returns a function that
// shuts the gateway down and waits for it (idempotent).
func startStoppableGateway(t *testing.T, mod func(*Options)) (string, func()) {
	t.Helper()
	env := testenv.Get(t)
	mgr, err := informer.New(informer.Options{Config: env.Config, Logger: zaptest.NewLogger(t).Named("informer")})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := zaptest.NewLogger(t)
	opts := Options{Manager: mgr, Listener: ln, Logger: log.Named("http"), ShutdownTimeout: 5 * time.Second}
	if mod != nil {
		mod(&opts)
	}
	if opts.Tables == nil {
		opts.Tables = wire.NewTables(mgr, log.Named("livequery"), wire.ViewLimits{})
		// Stopped after the server (cleanups run last first).
		t.Cleanup(opts.Tables.Run())
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	go func() {
		defer wg.Done()
		if err := s.Start(ctx); err != nil {
			t.Errorf("server: %v", err)
		}
	}()
	stop := func() {
		cancel()
		wg.Wait()
		http.DefaultClient.CloseIdleConnections()
	}
	t.Cleanup(stop)
	return "http://" + ln.Addr().String(), stop
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

func do(t *testing.T, method, u string, hdr ...string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{resp.StatusCode, b, resp.Header}
}

type list struct {
	Kind     string `json:"kind"`
	Metadata struct {
		ResourceVersion    string `json:"resourceVersion"`
		Continue           string `json:"continue"`
		RemainingItemCount *int64 `json:"remainingItemCount"`
	} `json:"metadata"`
	Items []struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
		Data     map[string]string `json:"data"`
	} `json:"items"`
}

func getList(t *testing.T, u string) list {
	t.Helper()
	r := do(t, "GET", u)
	if r.code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", u, r.code, r.body)
	}
	var l list
	if err := json.Unmarshal(r.body, &l); err != nil {
		t.Fatalf("GET %s: %v in %s", u, err, r.body)
	}
	return l
}

func (l list) names() []string {
	var out []string
	for _, it := range l.Items {
		out = append(out, it.Metadata.Name)
	}
	return out
}

func createConfigMaps(t *testing.T, cs kubernetes.Interface, ns string, labels map[string]string, names ...string) {
	t.Helper()
	for _, n := range names {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: labels}, Data: map[string]string{"k": n}}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRESTListAndGet(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	createConfigMaps(t, env.Client, ns, map[string]string{"app": "x"}, "cm-0", "cm-1", "cm-2")
	createConfigMaps(t, env.Client, ns, map[string]string{"app": "y"}, "cm-3", "cm-4")
	gw := startGateway(t, nil)
	base := gw + "/api/v1/namespaces/" + ns + "/configmaps"

	t.Run("same objects as the apiserver", func(t *testing.T) {
		want, err := env.Client.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var wantNames []string
		for _, cm := range want.Items {
			wantNames = append(wantNames, cm.Name)
		}
		var got list
		testenv.Eventually(t, "the gateway to list the configmaps", func() bool {
			got = getList(t, base)
			return slices.Equal(got.names(), wantNames)
		})
		if got.Kind != "ConfigMapList" || got.Metadata.ResourceVersion == "" || got.Items[0].Data["k"] != "cm-0" {
			t.Errorf("list envelope: kind %q rv %q item %+v", got.Kind, got.Metadata.ResourceVersion, got.Items[0])
		}
	})
	t.Run("selectors", func(t *testing.T) {
		for q, want := range map[string][]string{
			"labelSelector=app%3Dx":                    {"cm-0", "cm-1", "cm-2"},
			"labelSelector=app+in+(y)":                 {"cm-3", "cm-4"},
			"fieldSelector=metadata.name%3Dcm-1":       {"cm-1"},
			"fieldSelector=metadata.namespace%3D" + ns: {"cm-0", "cm-1", "cm-2", "cm-3", "cm-4"},
		} {
			if got := getList(t, base+"?"+q).names(); !slices.Equal(got, want) {
				t.Errorf("%s: got %v, want %v", q, got, want)
			}
		}
		// Cluster-wide with a selector finds exactly ours.
		got := getList(t, gw+"/api/v1/configmaps?fieldSelector=metadata.namespace%3D"+ns+"&labelSelector=app%3Dy").names()
		if !slices.Equal(got, []string{"cm-3", "cm-4"}) {
			t.Errorf("cluster-wide: %v", got)
		}
	})
	t.Run("get", func(t *testing.T) {
		r := do(t, "GET", base+"/cm-3")
		var cm corev1.ConfigMap
		if r.code != 200 || json.Unmarshal(r.body, &cm) != nil || cm.Name != "cm-3" || cm.Kind != "ConfigMap" || cm.Data["k"] != "cm-3" {
			t.Fatalf("get: %d %s", r.code, r.body)
		}
		r = do(t, "GET", gw+"/api/v1/namespaces/"+ns)
		if r.code != 200 || !strings.Contains(string(r.body), `"kind":"Namespace"`) {
			t.Errorf("get namespace: %d %s", r.code, r.body)
		}
		r = do(t, "GET", base+"/cm-3?pretty=true")
		if r.code != 200 || !strings.Contains(string(r.body), "\n  \"metadata\": {") {
			t.Errorf("pretty: %s", r.body)
		}
	})
	t.Run("group path", func(t *testing.T) {
		l := getList(t, gw+"/apis/apps/v1/namespaces/"+ns+"/deployments")
		if l.Kind != "DeploymentList" || len(l.Items) != 0 {
			t.Errorf("deployments: %+v", l)
		}
	})
	t.Run("paging over one snapshot", func(t *testing.T) {
		p1 := getList(t, base+"?limit=2")
		if !slices.Equal(p1.names(), []string{"cm-0", "cm-1"}) || p1.Metadata.Continue == "" ||
			p1.Metadata.RemainingItemCount == nil || *p1.Metadata.RemainingItemCount != 3 {
			t.Fatalf("page 1: %+v", p1)
		}
		// A change after the first page does not show in later pages.
		createConfigMaps(t, env.Client, ns, nil, "cm-25")
		testenv.Eventually(t, "cm-25 in the cache", func() bool { return do(t, "GET", base+"/cm-25").code == 200 })
		p2 := getList(t, base+"?limit=2&continue="+url.QueryEscape(p1.Metadata.Continue))
		p3 := getList(t, base+"?limit=2&continue="+url.QueryEscape(p2.Metadata.Continue))
		if !slices.Equal(p2.names(), []string{"cm-2", "cm-3"}) || !slices.Equal(p3.names(), []string{"cm-4"}) ||
			p3.Metadata.Continue != "" || p2.Metadata.ResourceVersion != p1.Metadata.ResourceVersion {
			t.Fatalf("pages 2, 3: %v %v (continue %q)", p2.names(), p3.names(), p3.Metadata.Continue)
		}
		// The token belongs to this request only.
		for name, u := range map[string]string{
			"other resource": gw + "/api/v1/namespaces/" + ns + "/secrets?limit=2&continue=" + url.QueryEscape(p1.Metadata.Continue),
			"other selector": base + "?limit=2&labelSelector=app%3Dx&continue=" + url.QueryEscape(p1.Metadata.Continue),
			"forged":         base + "?limit=2&continue=" + url.QueryEscape(p1.Metadata.Continue[:20]+"AAAA"+p1.Metadata.Continue[24:]),
			"garbage":        base + "?continue=%00%ff",
		} {
			r := do(t, "GET", u)
			if st := r.status(t); r.code != 400 || !strings.Contains(st.Message, "continue") {
				t.Errorf("%s: %d %s", name, r.code, r.body)
			}
		}
	})
	t.Run("bad input", func(t *testing.T) {
		for _, c := range []struct {
			method, u string
			code      int
			reason    metav1.StatusReason
			mentions  string
		}{
			{"GET", base + "?labelSelector=app+in+(", 400, metav1.StatusReasonBadRequest, "labelSelector"},
			{"GET", base + "?fieldSelector=data.k%3Dx", 400, metav1.StatusReasonBadRequest, "metadata.name, metadata.namespace"},
			{"GET", gw + "/api/v1/pods?fieldSelector=spec.bogus%3Dx", 400, metav1.StatusReasonBadRequest, "spec.nodeName"},
			{"GET", base + "?labelSelector=" + strings.Repeat("a", 5000), 400, metav1.StatusReasonBadRequest, "longer"},
			{"GET", base + "?limit=-1", 400, metav1.StatusReasonBadRequest, "limit"},
			{"GET", base + "?limit=abc", 400, metav1.StatusReasonBadRequest, "limit"},
			{"GET", base + "?limit=99999999999", 400, metav1.StatusReasonBadRequest, "limit"},
			{"GET", base + "?resourceVersion=abc", 400, metav1.StatusReasonBadRequest, "resourceVersion"},
			{"GET", base + "?resourceVersionMatch=Exact", 400, metav1.StatusReasonBadRequest, "resourceVersionMatch"},
			{"GET", base + "?resourceVersion=999999999", 504, metav1.StatusReasonTimeout, "Too large resource version"},
			{"GET", base + "?resourceVersion=1&resourceVersionMatch=Exact", 410, metav1.StatusReasonExpired, "Exact"},
			{"GET", base + "?watch=maybe", 400, metav1.StatusReasonBadRequest, "watch"},
			{"GET", base + "/nope", 404, metav1.StatusReasonNotFound, `"nope" not found`},
			{"GET", gw + "/api/v1/nosuchthings", 404, metav1.StatusReasonNotFound, "nosuchthings"},
			{"GET", gw + "/api/v1/po", 404, metav1.StatusReasonNotFound, "po"},
			{"GET", gw + "/api/v2/pods", 404, metav1.StatusReasonNotFound, "pods"},
			{"GET", gw + "/apis/apps/v1/pods", 404, metav1.StatusReasonNotFound, "pods"},
			{"GET", base + "/cm-0/status", 404, metav1.StatusReasonNotFound, ""},
			{"GET", gw + "/api/v1/pods/x", 404, metav1.StatusReasonNotFound, "namespaced"},
			{"GET", gw + "/api/v1/namespaces/" + ns + "/nodes", 404, metav1.StatusReasonNotFound, "cluster-scoped"},
			{"GET", gw + "/api/v1/namespaces/x/pods/" + strings.Repeat("a", 3000), 414, metav1.StatusReasonBadRequest, "too long"},
			{"POST", base, 405, metav1.StatusReasonMethodNotAllowed, "POST"},
			{"PUT", base + "/cm-0", 405, metav1.StatusReasonMethodNotAllowed, "PUT"},
			{"DELETE", base + "/cm-0", 405, metav1.StatusReasonMethodNotAllowed, "DELETE"},
			{"PATCH", base + "/cm-0", 405, metav1.StatusReasonMethodNotAllowed, "PATCH"},
		} {
			r := do(t, c.method, c.u)
			st := r.status(t)
			if r.code != c.code || st.Reason != c.reason || !strings.Contains(st.Message, c.mentions) {
				t.Errorf("%s %.120s: %d %s", c.method, c.u, r.code, r.body)
			}
		}
		if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(t.Context(), "cm-0", metav1.GetOptions{}); err != nil {
			t.Errorf("the DELETE reached the apiserver: %v", err)
		}
	})
	t.Run("metrics by route template", func(t *testing.T) {
		r := do(t, "GET", gw+"/metrics")
		for _, want := range []string{
			`route="/api/{version}/namespaces/{namespace}/{resource} list"`,
			`route="/api/{version}/namespaces/{namespace}/{resource}/{name} get"`,
			`route="/apis/{group}/{version}/namespaces/{namespace}/{resource} list"`,
		} {
			if !strings.Contains(string(r.body), want) {
				t.Errorf("metrics lack %s", want)
			}
		}
		if strings.Contains(string(r.body), "cm-3") {
			t.Error("an object name became a label value")
		}
	})
	t.Run("table", func(t *testing.T) {
		r := do(t, "GET", base+"?labelSelector=app%3Dx", "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
		var tbl metav1.Table
		if r.code != 200 || json.Unmarshal(r.body, &tbl) != nil || tbl.Kind != "Table" {
			t.Fatalf("table: %d %s", r.code, r.body)
		}
		var cols []string
		for _, c := range tbl.ColumnDefinitions {
			cols = append(cols, c.Name)
		}
		// ConfigMaps have kube-apiserver's columns (see internal/rows).
		if !slices.Equal(cols, []string{"Name", "Data", "Age"}) || len(tbl.Rows) != 3 ||
			tbl.Rows[0].Cells[0] != "cm-0" || tbl.Rows[0].Cells[1] != float64(1) {
			t.Fatalf("table: %s", r.body)
		}
		// Every resource has kube-apiserver's own columns, in one
		// namespace and cluster-wide alike (kubectl -A adds NAMESPACE
		// itself, from the rows' metadata).
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "sa-0"}}
		if _, err := env.Client.CoreV1().ServiceAccounts(ns).Create(t.Context(), sa, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var inNS metav1.Table
		testenv.Eventually(t, "sa-0 in the cache", func() bool {
			r := do(t, "GET", gw+"/api/v1/namespaces/"+ns+"/serviceaccounts", "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
			return r.code == 200 && json.Unmarshal(r.body, &inNS) == nil && len(inNS.Rows) > 0
		})
		want, err := env.Client.CoreV1().RESTClient().Get().Namespace(ns).Resource("serviceaccounts").
			SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var fromAPIServer metav1.Table
		if err := json.Unmarshal(want, &fromAPIServer); err != nil {
			t.Fatal(err)
		}
		r = do(t, "GET", gw+"/api/v1/serviceaccounts", "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
		var all metav1.Table
		if r.code != 200 || json.Unmarshal(r.body, &all) != nil {
			t.Fatalf("cluster-wide table: %d %.300s", r.code, r.body)
		}
		if !cmp.Equal(inNS.ColumnDefinitions, fromAPIServer.ColumnDefinitions) || !cmp.Equal(all.ColumnDefinitions, fromAPIServer.ColumnDefinitions) {
			t.Errorf("serviceaccounts' columns: in a namespace %v, cluster-wide %v; kube-apiserver's %v",
				inNS.ColumnDefinitions, all.ColumnDefinitions, fromAPIServer.ColumnDefinitions)
		}
		var meta metav1.PartialObjectMetadata
		if err := json.Unmarshal(tbl.Rows[0].Object.Raw, &meta); err != nil || meta.Name != "cm-0" || meta.Namespace != ns {
			t.Errorf("row object: %s", tbl.Rows[0].Object.Raw)
		}
	})
}

func TestRESTContinueTokenExpires(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	createConfigMaps(t, env.Client, ns, nil, "a", "b", "c")
	gw := startGateway(t, func(o *Options) { o.PageTTL = time.Nanosecond })
	base := gw + "/api/v1/namespaces/" + ns + "/configmaps"
	p1 := getList(t, base+"?limit=1")
	if p1.Metadata.Continue == "" {
		t.Fatalf("no continue: %+v", p1)
	}
	r := do(t, "GET", base+"?limit=1&continue="+url.QueryEscape(p1.Metadata.Continue))
	if st := r.status(t); r.code != 410 || st.Reason != metav1.StatusReasonExpired || !strings.Contains(st.Message, "expired") {
		t.Errorf("expired token: %d %s", r.code, r.body)
	}
}

// TestRESTContinueAcrossReplicas starts a paged list on one gateway and
// continues it on another (as after a reconnect behind a Service, or a
// restart): the second answers 410 Expired, and client-go's pager falls
// back to a full list by itself. A malformed token stays 400.
func TestRESTContinueAcrossReplicas(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	names := []string{"a", "b", "c", "d", "e"}
	createConfigMaps(t, env.Client, ns, nil, names...)
	gws := []string{startGateway(t, nil), startGateway(t, nil)}
	clients := make([]kubernetes.Interface, len(gws))
	for i, gw := range gws {
		cs, err := kubernetes.NewForConfig(&rest.Config{Host: gw})
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = cs
	}
	for i, gw := range gws {
		testenv.Eventually(t, fmt.Sprintf("gateway %d to cache the ConfigMaps", i), func() bool {
			return len(getList(t, gw+"/api/v1/namespaces/"+ns+"/configmaps").Items) == len(names)
		})
	}

	t.Run("raw", func(t *testing.T) {
		base := "/api/v1/namespaces/" + ns + "/configmaps?limit=2"
		p1 := getList(t, gws[0]+base)
		if p1.Metadata.Continue == "" {
			t.Fatalf("no continue token: %+v", p1)
		}
		r := do(t, "GET", gws[1]+base+"&continue="+url.QueryEscape(p1.Metadata.Continue))
		st := r.status(t)
		if r.code != http.StatusGone || st.Reason != metav1.StatusReasonExpired ||
			!strings.Contains(st.Message, "another gateway replica") || !strings.Contains(st.Message, "start the list again") {
			t.Errorf("token from another replica: %d %s", r.code, r.body)
		}
		for _, bad := range []string{"not-a-token", p1.Metadata.Continue[:20]} {
			r := do(t, "GET", gws[1]+base+"&continue="+url.QueryEscape(bad))
			if st := r.status(t); r.code != http.StatusBadRequest || st.Reason != metav1.StatusReasonBadRequest {
				t.Errorf("malformed token %q: %d %s", bad, r.code, r.body)
			}
		}
		// The issuing replica still serves its own sequence.
		p2 := getList(t, gws[0]+base+"&continue="+url.QueryEscape(p1.Metadata.Continue))
		if got := append(p1.names(), p2.names()...); !slices.Equal(got, names[:4]) {
			t.Errorf("pages on the issuing replica: %v", got)
		}
	})

	t.Run("client-go pager", func(t *testing.T) {
		// The first page comes from replica 0, every later request goes
		// to replica 1.
		var calls []metav1.ListOptions
		var errs []error
		lp := listpager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			cs := clients[min(len(calls), 1)]
			calls = append(calls, opts)
			l, err := cs.CoreV1().ConfigMaps(ns).List(ctx, opts)
			errs = append(errs, err)
			return l, err
		})
		lp.PageSize = 2
		obj, _, err := lp.List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("pager: %v (calls %+v)", err, calls)
		}
		var got []string
		if err := meta.EachListItem(obj, func(o runtime.Object) error {
			m, err := meta.Accessor(o)
			if err == nil {
				got = append(got, m.GetName())
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, names) {
			t.Errorf("pager listed %v, want %v", got, names)
		}
		// Page 1 on replica 0, the continue on replica 1 (410), then the
		// pager's own full list.
		if len(calls) != 3 || calls[0].Limit != 2 || calls[1].Continue == "" || !apierrors.IsResourceExpired(errs[1]) ||
			calls[2].Limit != 0 || calls[2].Continue != "" {
			t.Errorf("requests %+v, errors %v: want page, expired continue, full list", calls, errs)
		}
	})
}

// watcher reads a watch stream's events.
type watcher struct {
	t      *testing.T
	events chan watchEvent
	body   io.Closer
}

type watchEvent struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

func (e watchEvent) meta() metav1.ObjectMeta {
	var o struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	_ = json.Unmarshal(e.Object, &o)
	return o.Metadata
}

func startWatch(t *testing.T, u string, hdr ...string) (*watcher, *http.Response) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", u, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	w := &watcher{t: t, events: make(chan watchEvent, 100), body: resp.Body}
	sse := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(w.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if sse {
				data, ok := strings.CutPrefix(string(line), "data: ")
				if !ok {
					continue
				}
				line = []byte(data)
			}
			var e watchEvent
			if err := json.Unmarshal(line, &e); err != nil {
				t.Errorf("bad watch line %q: %v", line, err)
				return
			}
			w.events <- e
		}
	}()
	t.Cleanup(func() { resp.Body.Close(); <-done })
	return w, resp
}

// next returns the next event, failing after 30s; ok is false at the end
// of the stream.
func (w *watcher) next() (watchEvent, bool) {
	w.t.Helper()
	select {
	case e, ok := <-w.events:
		return e, ok
	case <-time.After(30 * time.Second):
		w.t.Fatal("timed out waiting for a watch event")
	}
	return watchEvent{}, false
}

// until skips events until one matches.
func (w *watcher) until(what string, match func(watchEvent) bool) watchEvent {
	w.t.Helper()
	for {
		e, ok := w.next()
		if !ok {
			w.t.Fatalf("stream ended before %s", what)
		}
		if match(e) {
			return e
		}
	}
}

func named(typ, name string) func(watchEvent) bool {
	return func(e watchEvent) bool { return e.Type == typ && e.meta().Name == name }
}

func TestRESTWatch(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	createConfigMaps(t, env.Client, ns, map[string]string{"app": "x"}, "old")
	gw := startGateway(t, nil)
	base := gw + "/api/v1/namespaces/" + ns + "/configmaps"
	l := getList(t, base)

	t.Run("from a list's resourceVersion", func(t *testing.T) {
		w, resp := startWatch(t, base+"?watch=1&resourceVersion="+l.Metadata.ResourceVersion)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("watch: %d %v", resp.StatusCode, resp.Header)
		}
		createConfigMaps(t, env.Client, ns, nil, "w1")
		e := w.until("ADDED w1", named("ADDED", "w1"))
		if e.meta().Namespace != ns {
			t.Errorf("event: %s", e.Object)
		}
		if err := env.Client.CoreV1().ConfigMaps(ns).Delete(t.Context(), "w1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		w.until("DELETED w1", named("DELETED", "w1"))
	})
	t.Run("legacy initial events", func(t *testing.T) {
		w, _ := startWatch(t, base+"?watch=true&labelSelector=app%3Dx")
		if e, _ := w.next(); e.Type != "ADDED" || e.meta().Name != "old" {
			t.Fatalf("first event: %+v", e)
		}
	})
	t.Run("sendInitialEvents", func(t *testing.T) {
		w, _ := startWatch(t, base+"?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan")
		w.until("ADDED old", named("ADDED", "old"))
		e := w.until("the initial-events-end bookmark", func(e watchEvent) bool { return e.Type == "BOOKMARK" })
		m := e.meta()
		if m.Annotations[metav1.InitialEventsAnnotationKey] != "true" || m.ResourceVersion == "" {
			t.Errorf("bookmark: %s", e.Object)
		}
		r := do(t, "GET", base+"?watch=true&sendInitialEvents=true")
		if r.status(t); r.code != 400 {
			t.Errorf("sendInitialEvents without resourceVersionMatch: %d %s", r.code, r.body)
		}
	})
	t.Run("expired resourceVersion", func(t *testing.T) {
		w, resp := startWatch(t, base+"?watch=true&resourceVersion=1")
		e, ok := w.next()
		var st metav1.Status
		if !ok || resp.StatusCode != 200 || e.Type != "ERROR" || json.Unmarshal(e.Object, &st) != nil ||
			st.Code != 410 || st.Reason != metav1.StatusReasonExpired {
			t.Fatalf("got %d %+v", resp.StatusCode, e)
		}
		if _, ok := w.next(); ok {
			t.Error("the stream went on after the ERROR event")
		}
	})
	t.Run("timeoutSeconds ends the stream", func(t *testing.T) {
		w, _ := startWatch(t, base+"?watch=true&timeoutSeconds=1&resourceVersion="+l.Metadata.ResourceVersion)
		for {
			if _, ok := w.next(); !ok {
				break
			}
		}
	})
	t.Run("server-sent events", func(t *testing.T) {
		w, resp := startWatch(t, base+"?watch=1", "Accept", "text/event-stream")
		if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Fatalf("content type %q", ct)
		}
		w.until("ADDED old", named("ADDED", "old"))
	})
	t.Run("server-sent events resume from Last-Event-ID", func(t *testing.T) {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", base+"?watch=1", nil)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		// Read the snapshot up to the id that ends it.
		sc := bufio.NewScanner(resp.Body)
		var lastID string
		for lastID == "" && sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "id: ") {
				lastID = strings.TrimPrefix(line, "id: ")
			}
		}
		resp.Body.Close()
		if lastID == "" {
			t.Fatal("no id after the snapshot")
		}
		createConfigMaps(t, env.Client, ns, nil, "sse-after")
		w, _ := startWatch(t, base+"?watch=1", "Accept", "text/event-stream", "Last-Event-ID", lastID)
		if e, _ := w.next(); e.Type != "ADDED" || e.meta().Name != "sse-after" {
			t.Errorf("after reconnecting: %s %s, want ADDED sse-after only", e.Type, e.meta().Name)
		}
	})
	t.Run("one object", func(t *testing.T) {
		w, _ := startWatch(t, base+"/old?watch=1")
		w.until("ADDED old", named("ADDED", "old"))
		createConfigMaps(t, env.Client, ns, nil, "w2")
		if _, err := env.Client.CoreV1().ConfigMaps(ns).Patch(t.Context(), "old", "application/merge-patch+json",
			[]byte(`{"data":{"k":"new"}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if e, _ := w.next(); e.Type != "MODIFIED" || e.meta().Name != "old" {
			t.Errorf("got %s %s, want MODIFIED old only", e.Type, e.meta().Name)
		}
	})
}

// switchAuthorizer allows reads restricted to allowed namespaces until
// denied is set, and answers 503 while unavailable is set.
type switchAuthorizer struct {
	mu          sync.Mutex
	allowed     sets.Set[string]
	denied      bool
	unavailable bool
	calls       []auth.Request
}

func (a *switchAuthorizer) Authorize(_ context.Context, _ *auth.User, req auth.Request) (auth.Decision, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, req)
	if a.unavailable {
		return auth.Decision{}, apierrors.NewServiceUnavailable("authorization is unavailable: the apiserver could not be asked; try again")
	}
	if a.denied {
		return auth.Decision{}, apierrors.NewForbidden(req.Resource.GroupResource(), req.Name, fmt.Errorf("%s denied", req.Verb))
	}
	if req.Namespace == "" && req.Namespaced {
		return auth.Decision{Namespaces: a.allowed}, nil
	}
	if !a.allowed.Has(req.Namespace) {
		return auth.Decision{}, apierrors.NewForbidden(req.Resource.GroupResource(), req.Name, fmt.Errorf("namespace %s", req.Namespace))
	}
	return auth.Decision{}, nil
}

// AuthorizeNonResource denies: the tests that use switchAuthorizer do not
// read /metrics.
func (a *switchAuthorizer) AuthorizeNonResource(_ context.Context, u *auth.User, verb, path string) error {
	return apierrors.NewForbidden(schema.GroupResource{}, "", fmt.Errorf("User %q cannot %s path %q", u.Name, verb, path))
}

func (a *switchAuthorizer) setUnavailable(v bool) {
	a.mu.Lock()
	a.unavailable = v
	a.mu.Unlock()
}

func (a *switchAuthorizer) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.calls)
}

func (a *switchAuthorizer) deny() {
	a.mu.Lock()
	a.denied = true
	a.mu.Unlock()
}

func TestRESTAuthorization(t *testing.T) {
	env := testenv.Get(t)
	mine, other := env.Namespace(t), env.Namespace(t)
	createConfigMaps(t, env.Client, mine, map[string]string{"authz": "t"}, "mine")
	createConfigMaps(t, env.Client, other, map[string]string{"authz": "t"}, "theirs")
	az := &switchAuthorizer{allowed: sets.New(mine)}
	gw := startGateway(t, func(o *Options) { o.Authorizer = az; o.RecheckInterval = 50 * time.Millisecond })

	if got := getList(t, gw+"/api/v1/configmaps?labelSelector=authz%3Dt").names(); !slices.Equal(got, []string{"mine"}) {
		t.Errorf("cluster-wide list: %v, want only mine", got)
	}
	r := do(t, "GET", gw+"/api/v1/namespaces/"+other+"/configmaps/theirs")
	if st := r.status(t); r.code != 403 || st.Reason != metav1.StatusReasonForbidden {
		t.Errorf("get in another namespace: %d %s", r.code, r.body)
	}
	az.mu.Lock()
	verbs := map[string]bool{}
	for _, c := range az.calls {
		verbs[c.Verb] = true
	}
	az.mu.Unlock()
	if !verbs["list"] || !verbs["get"] {
		t.Errorf("authorizer calls: %v", verbs)
	}

	w, _ := startWatch(t, gw+"/api/v1/configmaps?watch=1&labelSelector=authz%3Dt")
	if e, _ := w.next(); e.Type != "ADDED" || e.meta().Name != "mine" {
		t.Fatalf("watch: first event %+v", e)
	}
	az.deny()
	e := w.until("a 403 ERROR event", func(e watchEvent) bool { return e.Type == "ERROR" })
	var st metav1.Status
	if json.Unmarshal(e.Object, &st) != nil || st.Code != 403 {
		t.Errorf("ERROR event: %s", e.Object)
	}
	if _, ok := w.next(); ok {
		t.Error("the stream went on after the 403")
	}
}

// TestRESTWatchRidesOutAnUnavailableAuthorizer: a watch whose re-checks
// cannot be made (503) goes on within RecheckGrace and ends with the 503
// past it; a denial ends it at once (TestRESTAuthorization).
func TestRESTWatchRidesOutAnUnavailableAuthorizer(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	createConfigMaps(t, env.Client, ns, nil, "one")
	for _, tc := range []struct {
		name  string
		grace time.Duration
	}{{"within grace", time.Hour}, {"past grace", 100 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			az := &switchAuthorizer{allowed: sets.New(ns)}
			gw := startGateway(t, func(o *Options) {
				o.Authorizer = az
				o.RecheckInterval = 20 * time.Millisecond
				o.RecheckGrace = tc.grace
			})
			w, _ := startWatch(t, gw+"/api/v1/namespaces/"+ns+"/configmaps?watch=1")
			w.until("ADDED one", named("ADDED", "one"))
			az.setUnavailable(true)
			if tc.grace < time.Hour {
				e := w.until("an ERROR event", func(e watchEvent) bool { return e.Type == "ERROR" })
				var st metav1.Status
				if json.Unmarshal(e.Object, &st) != nil || st.Code != 503 {
					t.Errorf("ERROR event: %s", e.Object)
				}
				if _, ok := w.next(); ok {
					t.Error("the stream went on after the 503")
				}
				return
			}
			n := az.count() + 5
			if err := wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, 30*time.Second, true,
				func(context.Context) (bool, error) { return az.count() >= n, nil }); err != nil {
				t.Fatal("no re-checks")
			}
			name := "during-outage-" + strings.ReplaceAll(tc.name, " ", "-")
			createConfigMaps(t, env.Client, ns, nil, name)
			if e, _ := w.next(); e.Type != "ADDED" || e.meta().Name != name {
				t.Fatalf("watch: got %+v, want ADDED %s", e, name)
			}
		})
	}
}

// TestRESTWatchEndsAtShutdown: a server shutdown ends open watches
// promptly instead of waiting for the shutdown timeout.
func TestRESTWatchEndsAtShutdown(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	createConfigMaps(t, env.Client, ns, nil, "one")
	gw, stop := startStoppableGateway(t, func(o *Options) { o.ShutdownTimeout = time.Minute })
	w, _ := startWatch(t, gw+"/api/v1/namespaces/"+ns+"/configmaps?watch=1")
	w.until("ADDED one", named("ADDED", "one"))
	r := do(t, "GET", gw+"/metrics")
	if !strings.Contains(string(r.body), `kubegate_rest_watches{resource="configmaps"} 1`) {
		t.Errorf("metrics: no open watch counted")
	}
	if !strings.Contains(string(r.body), `kubegate_http_requests_in_flight 2`) {
		t.Errorf("metrics: the watch and the metrics request are not in flight")
	}
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	if _, ok := w.next(); ok {
		t.Error("an event after shutdown began")
	}
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("shutdown waited for the watch")
	}
}
