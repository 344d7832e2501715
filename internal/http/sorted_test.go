package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubegate/internal/auth"
	"kubegate/internal/namespaces"
	"kubegate/internal/testenv"
)

// modelCM is a ConfigMap as the model of sorted lists sees it.
type modelCM struct {
	ns, name string
	data     int
	created  time.Time
}

func (c modelCM) key() string { return c.ns + "/" + c.name }

func modelCMs(items []corev1.ConfigMap) []modelCM {
	out := make([]modelCM, len(items))
	for i, cm := range items {
		out[i] = modelCM{ns: cm.Namespace, name: cm.Name, data: len(cm.Data) + len(cm.BinaryData), created: cm.CreationTimestamp.Time}
	}
	return out
}

// modelCompare orders ConfigMaps as a sorted list must: by the key
// ("name", "ns", "data" or "created"), reversed when desc, then by namespace
// and name, ascending.
func modelCompare(key string, desc bool) func(a, b modelCM) int {
	return func(a, b modelCM) int {
		var c int
		switch key {
		case "name":
			c = strings.Compare(a.name, b.name)
		case "ns":
			c = strings.Compare(a.ns, b.ns)
		case "data":
			c = cmp.Compare(a.data, b.data)
		case "created":
			c = a.created.Compare(b.created)
		default:
			panic("model: unknown key " + key)
		}
		if desc {
			c = -c
		}
		return cmp.Or(c, cmp.Compare(a.ns, b.ns), cmp.Compare(a.name, b.name))
	}
}

// modelList is "filter, then sort": the ConfigMaps in namespace ns (""
// for all) whose name contains text (ignoring case), sorted.
func modelList(cms []modelCM, ns, text, key string, desc bool) []string {
	var sel []modelCM
	for _, c := range cms {
		if (ns == "" || c.ns == ns) && strings.Contains(c.name, strings.ToLower(text)) {
			sel = append(sel, c)
		}
	}
	slices.SortFunc(sel, modelCompare(key, desc))
	out := make([]string, len(sel))
	for i, c := range sel {
		out[i] = c.key()
	}
	return out
}

// keys returns a list's items as namespace/name.
func (l list) keys() []string {
	out := make([]string, len(l.Items))
	for i, it := range l.Items {
		out[i] = it.Metadata.Namespace + "/" + it.Metadata.Name
	}
	return out
}

// pageThrough reads a sorted list page by page from u (which has its
// limit), following continue from cont ("" for the first page), and
// returns every page. It checks that no page but the last lacks
// continue, and that the last has no remainingItemCount.
func pageThrough(t *testing.T, u, cont string) []list {
	t.Helper()
	var pages []list
	next := u
	if cont != "" {
		next = u + "&continue=" + url.QueryEscape(cont)
	}
	for {
		l := getList(t, next)
		pages = append(pages, l)
		if l.Metadata.Continue == "" {
			if l.Metadata.RemainingItemCount != nil {
				t.Errorf("%s: last page with remainingItemCount %d", u, *l.Metadata.RemainingItemCount)
			}
			return pages
		}
		if len(pages) > 500 {
			t.Fatalf("%s: more than 500 pages", u)
		}
		next = u + "&continue=" + url.QueryEscape(l.Metadata.Continue)
	}
}

// flatten returns the items of pages, in order.
func flatten(pages []list) []string {
	var out []string
	for _, p := range pages {
		out = append(out, p.keys()...)
	}
	return out
}

// createManyConfigMaps creates ConfigMaps in parallel; each gets label
// and its own data entries.
func createManyConfigMaps(t *testing.T, cs kubernetes.Interface, cms []*corev1.ConfigMap) {
	t.Helper()
	g, ctx := errgroup.WithContext(t.Context())
	g.SetLimit(8)
	for _, cm := range cms {
		g.Go(func() error {
			_, err := cs.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

// TestSortedListsEqualTheApiserversSortedList pages through sorted lists
// of 320 ConfigMaps in two namespaces (the same names in both, data of
// 0 to 4 entries, creation times a second apart at most, so keys tie)
// with several sorts, orders, selectors, text filters, namespace paths
// and limits, and compares the pages joined to the apiserver's list at
// the version the gateway read, filtered and sorted by the test.
func TestSortedListsEqualTheApiserversSortedList(t *testing.T) {
	env := testenv.Get(t)
	ns1, ns2 := env.Namespace(t), env.Namespace(t)
	id := "sorted-" + ns1
	colors := []string{"red", "blue", "green", "yellow"}
	var cms []*corev1.ConfigMap
	for _, ns := range []string{ns1, ns2} {
		for i := range 160 {
			team := []string{"a", "b", "c"}[i%3]
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns,
				Name:   fmt.Sprintf("cm-%s-%03d", colors[i%len(colors)], (i*37)%160),
				Labels: map[string]string{"sorted": id, "team": team}}, Data: map[string]string{}}
			for k := range (i * 7) % 5 {
				cm.Data[strconv.Itoa(k)] = "v"
			}
			cms = append(cms, cm)
		}
	}
	createManyConfigMaps(t, env.Client, cms)
	gw := startGateway(t, func(o *Options) { o.wholeSortedWindow = 16 })
	base := gw + "/api/v1/configmaps?labelSelector=" + url.QueryEscape("sorted="+id)
	testenv.Eventually(t, "the gateway to hold every ConfigMap", func() bool { return len(getList(t, base).Items) == len(cms) })

	// The apiserver's list at the version the gateway serves; nothing
	// changes the ConfigMaps from here on.
	first := getList(t, base+"&sort=metadata.name&limit=1")
	all, err := env.Client.CoreV1().ConfigMaps("").List(t.Context(), metav1.ListOptions{LabelSelector: "sorted=" + id,
		ResourceVersion: first.Metadata.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	if err != nil {
		t.Fatal(err)
	}
	model := modelCMs(all.Items)
	teamA, err := env.Client.CoreV1().ConfigMaps("").List(t.Context(), metav1.ListOptions{LabelSelector: "sorted=" + id + ",team=a",
		ResourceVersion: first.Metadata.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name, path, query string
		limit             int
		model             []modelCM
		ns, text, key     string
		desc              bool
	}{
		{name: "name", query: "sort=metadata.name", limit: 25, key: "name"},
		{name: "column desc", query: "sort=DATA&order=desc", limit: 7, key: "data", desc: true},
		{name: "column asc, whole", query: "sort=data", key: "data"},
		{name: "created, label selector", query: "sort=.metadata.creationTimestamp&labelSelector=" + url.QueryEscape("sorted="+id+",team=a"),
			limit: 40, key: "created", model: modelCMs(teamA.Items)},
		{name: "created desc, namespace, text", path: "/api/v1/namespaces/" + ns1 + "/configmaps",
			query: "sort=metadata.creationTimestamp&order=desc&filter=BLU", limit: 5, ns: ns1, text: "blu", key: "created", desc: true},
		// Age ascending is the youngest first.
		{name: "age, text", query: "sort=age&filter=blu", limit: 50, text: "blu", key: "created", desc: true},
		{name: "age desc, whole", query: "sort=Age&order=desc", key: "created"},
		{name: "default sort, text only", query: "filter=green", limit: 30, text: "green", key: "ns"},
		{name: "namespace desc", query: "sort=metadata.namespace&order=desc", limit: 100, key: "ns", desc: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := base + "&" + tc.query
			if tc.path != "" {
				u = gw + tc.path + "?labelSelector=" + url.QueryEscape("sorted="+id) + "&" + tc.query
			}
			if strings.Contains(tc.query, "labelSelector") {
				u = gw + "/api/v1/configmaps?" + tc.query
			}
			if tc.limit > 0 {
				u += "&limit=" + strconv.Itoa(tc.limit)
			}
			m := tc.model
			if m == nil {
				m = model
			}
			want := modelList(m, tc.ns, tc.text, tc.key, tc.desc)
			if len(want) < 10 {
				t.Fatalf("the model selects %d ConfigMaps: the case tests too little", len(want))
			}
			pages := pageThrough(t, u, "")
			if diff := gocmp.Diff(want, flatten(pages)); diff != "" {
				t.Errorf("pages joined (-want +got):\n%s", diff)
			}
			wantPages := 1
			if tc.limit > 0 {
				wantPages = (len(want) + tc.limit - 1) / tc.limit
			}
			if len(pages) != wantPages {
				t.Errorf("%d pages, want %d", len(pages), wantPages)
			}
			seen := 0
			for i, p := range pages {
				seen += len(p.Items)
				if p.Metadata.Continue != "" && (p.Metadata.RemainingItemCount == nil || int(*p.Metadata.RemainingItemCount) != len(want)-seen) {
					t.Errorf("page %d: remainingItemCount %s, want %d", i, ptrString(p.Metadata.RemainingItemCount), len(want)-seen)
				}
				if rv, err := strconv.ParseUint(p.Metadata.ResourceVersion, 10, 64); err != nil || rv == 0 {
					t.Errorf("page %d: resourceVersion %q", i, p.Metadata.ResourceVersion)
				}
				if p.Kind != "ConfigMapList" {
					t.Errorf("page %d: kind %q", i, p.Kind)
				}
				for _, it := range p.Items {
					if len(it.Data) != modelData(m, it.Metadata.Namespace, it.Metadata.Name) {
						t.Errorf("page %d: %s/%s has %d data entries", i, it.Metadata.Namespace, it.Metadata.Name, len(it.Data))
					}
				}
			}
		})
	}
}

func ptrString(p *int64) string {
	if p == nil {
		return "absent"
	}
	return strconv.FormatInt(*p, 10)
}

func modelData(cms []modelCM, ns, name string) int {
	for _, c := range cms {
		if c.ns == ns && c.name == name {
			return c.data
		}
	}
	return -1
}

// TestSortedListContinueIsCursorConsistent changes the ConfigMaps between
// two pages of a sorted list: the rows seen and the rows not yet seen
// that keep their sort keys are neither repeated nor skipped, and the
// pages after the change are the apiserver's list at their version,
// from just past the last row of the page before. Paging by offset
// would skip rows here: two rows already seen are deleted.
func TestSortedListContinueIsCursorConsistent(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	var cms []*corev1.ConfigMap
	for i := range 40 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cm-%02d", i)}, Data: map[string]string{}}
		for k := range i % 4 {
			cm.Data[strconv.Itoa(k)] = "v"
		}
		cms = append(cms, cm)
	}
	createManyConfigMaps(t, env.Client, cms)
	gw := startGateway(t, nil)
	cs := env.Client.CoreV1().ConfigMaps(ns)
	setData := func(name string, n int) {
		t.Helper()
		cm, err := cs.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data = map[string]string{}
		for k := range n {
			cm.Data[strconv.Itoa(k)] = "v"
		}
		if _, err := cs.Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	del := func(name string) {
		t.Helper()
		if err := cs.Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	gwList := func(q string) list { return getList(t, gw+"/api/v1/namespaces/"+ns+"/configmaps?"+q) }
	testenv.Eventually(t, "the gateway to hold every ConfigMap", func() bool { return len(gwList("sort=data").Items) == len(cms) })

	tests := []struct {
		name, query, key string
		desc             bool
		// change runs between the first page and the rest; settled
		// holds once the gateway serves its result.
		change  func()
		settled func(list) bool
		// moved are the rows whose sort key change moves: they may be
		// met twice or not at all.
		moved []string
		// behind are rows created before the cursor: never met.
		behind []string
	}{{
		name: "name", query: "sort=metadata.name", key: "name",
		change: func() {
			del("cm-03")
			del("cm-04")
			createConfigMaps(t, env.Client, ns, nil, "cm-09a", "cm-05a") // one ahead, one behind
			setData("cm-20", 7)
		},
		settled: func(l list) bool {
			k := l.keys()
			return slices.Contains(k, ns+"/cm-09a") && slices.Contains(k, ns+"/cm-05a") && !slices.Contains(k, ns+"/cm-04")
		},
		behind: []string{"cm-05a"},
	}, {
		name: "data desc", query: "sort=data&order=desc", key: "data", desc: true,
		change: func() {
			// The first page is cm-20 (data 7, since the case above),
			// then cm-07 to cm-31 (data 3).
			del("cm-07")
			del("cm-11")
			setData("cm-31", 0) // seen; moves to the end
			setData("cm-01", 9) // not seen; moves to the top
		},
		settled: func(l list) bool { return len(l.Items) == 38 && l.Items[0].Metadata.Name == "cm-01" },
		moved:   []string{"cm-31", "cm-01"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := "?" + tc.query + "&limit=8"
			first := gwList(tc.query + "&limit=8")
			tc.change()
			var now list
			testenv.Eventually(t, "the gateway to serve the change", func() bool {
				now = gwList(tc.query)
				return tc.settled(now)
			})
			rest := pageThrough(t, gw+"/api/v1/namespaces/"+ns+"/configmaps"+base, first.Metadata.Continue)

			// The rows after the first page's last one, as the apiserver
			// holds them at the version of the second page.
			at, err := cs.List(t.Context(), metav1.ListOptions{ResourceVersion: rest[0].Metadata.ResourceVersion,
				ResourceVersionMatch: metav1.ResourceVersionMatchExact})
			if err != nil {
				t.Fatal(err)
			}
			model := modelCMs(at.Items)
			last := first.Items[len(first.Items)-1]
			cursor := modelCM{ns: ns, name: last.Metadata.Name, data: len(last.Data)}
			order := modelCompare(tc.key, tc.desc)
			var want []string
			for _, c := range modelList(model, "", "", tc.key, tc.desc) {
				i := slices.IndexFunc(model, func(m modelCM) bool { return m.key() == c })
				if order(model[i], cursor) > 0 {
					want = append(want, c)
				}
			}
			if diff := gocmp.Diff(want, flatten(rest)); diff != "" {
				t.Errorf("pages after the change (-want +got):\n%s", diff)
			}

			// Every row that kept its key is met exactly once.
			got := append(first.keys(), flatten(rest)...)
			for _, it := range now.Items {
				k := it.Metadata.Namespace + "/" + it.Metadata.Name
				switch {
				case slices.Contains(tc.moved, it.Metadata.Name):
				case slices.Contains(tc.behind, it.Metadata.Name):
					if n := count(got, k); n != 0 {
						t.Errorf("%s, created behind the cursor, met %d times", k, n)
					}
				default:
					if n := count(got, k); n != 1 {
						t.Errorf("%s met %d times", k, n)
					}
				}
			}
		})
	}
}

func count(s []string, v string) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

// getListAs is getList with a bearer token.
func getListAs(t *testing.T, u, token string) (list, response) {
	t.Helper()
	r := do(t, "GET", u, "Authorization", "Bearer "+token)
	var l list
	if r.code == http.StatusOK {
		if err := json.Unmarshal(r.body, &l); err != nil {
			t.Fatalf("GET %s: %v in %s", u, err, r.body)
		}
	}
	return l, r
}

// TestSortedListRBAC runs sorted lists as a ServiceAccount that the real
// apiserver's RBAC lets list ConfigMaps in one namespace only: its
// cluster-wide sorted list holds that namespace's rows only, in order,
// on every page, and a sorted list in another namespace is forbidden.
func TestSortedListRBAC(t *testing.T) {
	env := testenv.Get(t)
	mine, other := env.Namespace(t), env.Namespace(t)
	cs := env.Client
	ctx := t.Context()
	id := "sorted-rbac-" + mine
	var cms []*corev1.ConfigMap
	for _, ns := range []string{mine, other} {
		for i := range 12 {
			cms = append(cms, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cm-%02d", i),
				Labels: map[string]string{"sorted": id}}})
		}
	}
	createManyConfigMaps(t, cs, cms)
	if _, err := cs.RbacV1().Roles(mine).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "cm-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings(mine).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "cm-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "cm-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "reader", Namespace: mine}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token := serviceAccountToken(t, cs, mine, "reader")
	tr, err := auth.NewTokenReview(auth.TokenReviewOptions{Client: cs, SuccessTTL: -1, FailureTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	bearer, err := auth.NewBearer(auth.BearerOptions{Tokens: tr})
	if err != nil {
		t.Fatal(err)
	}
	gw := startGateway(t, func(o *Options) {
		sar, err := auth.NewSubjectAccessReview(auth.SubjectAccessReviewOptions{Client: cs, Namespaces: namespaces.FromInformer(o.Manager),
			AllowTTL: -1, DenyTTL: -1, ScanTTL: -1, Logger: zaptest.NewLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		o.Authenticator, o.Authorizer = bearer, sar
	})

	u := gw + "/api/v1/configmaps?labelSelector=" + url.QueryEscape("sorted="+id) + "&sort=metadata.name&order=desc"
	var want []string
	for i := 11; i >= 0; i-- {
		want = append(want, fmt.Sprintf("%s/cm-%02d", mine, i))
	}
	// The binding takes effect once the apiserver's RBAC cache has it.
	var l list
	var last response
	testenv.Eventually(t, "the reader's sorted list", func() bool {
		l, last = getListAs(t, u, token)
		return last.code == http.StatusOK
	})
	if diff := gocmp.Diff(want, l.keys()); diff != "" {
		t.Errorf("cluster-wide sorted list (-want +got):\n%s", diff)
	}
	var got []string
	for cont := ""; ; {
		next := u + "&limit=5"
		if cont != "" {
			next += "&continue=" + url.QueryEscape(cont)
		}
		page, r := getListAs(t, next, token)
		if r.code != http.StatusOK {
			t.Fatalf("page: %d %s", r.code, r.body)
		}
		got = append(got, page.keys()...)
		if cont = page.Metadata.Continue; cont == "" {
			break
		}
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("cluster-wide sorted pages (-want +got):\n%s", diff)
	}
	_, r := getListAs(t, gw+"/api/v1/namespaces/"+other+"/configmaps?sort=metadata.name", token)
	if st := r.status(t); r.code != http.StatusForbidden || st.Reason != metav1.StatusReasonForbidden {
		t.Errorf("sorted list in another namespace: %d %s", r.code, r.body)
	}
}

const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io"

// TestSortedListTable asks for sorted pages as Tables, as kubectl asks
// for lists: the columns are those kube-apiserver serves for the
// resource, and the rows come in the sorted order, page after page. The
// JSON list that kubectl get --raw reads is sorted too.
func TestSortedListTable(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	var cms []*corev1.ConfigMap
	for i := range 12 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cm-%02d", i)}, Data: map[string]string{}}
		for k := range (i * 7) % 5 {
			cm.Data[strconv.Itoa(k)] = "v"
		}
		cms = append(cms, cm)
	}
	createManyConfigMaps(t, env.Client, cms)
	gw := startGateway(t, nil)
	path := "/api/v1/namespaces/" + ns + "/configmaps"
	testenv.Eventually(t, "the gateway to hold every ConfigMap", func() bool { return len(getList(t, gw+path+"?sort=data").Items) == len(cms) })

	apiserver, err := env.Client.CoreV1().RESTClient().Get().AbsPath(path).SetHeader("Accept", tableAccept).DoRaw(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var upstream metav1.Table
	if err := json.Unmarshal(apiserver, &upstream); err != nil {
		t.Fatal(err)
	}
	columns := func(tb metav1.Table) []string {
		var out []string
		for _, c := range tb.ColumnDefinitions {
			out = append(out, c.Name+"/"+c.Type+"/"+strconv.Itoa(int(c.Priority)))
		}
		return out
	}
	all, err := env.Client.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := modelList(modelCMs(all.Items), ns, "", "data", true)

	gwc, err := kubernetes.NewForConfig(&rest.Config{Host: gw})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var pages int
	for cont := ""; ; pages++ {
		req := gwc.CoreV1().RESTClient().Get().AbsPath(path).Param("sort", "data").Param("order", "desc").Param("limit", "5").
			SetHeader("Accept", tableAccept)
		if cont != "" {
			req = req.Param("continue", cont)
		}
		b, err := req.DoRaw(t.Context())
		if err != nil {
			t.Fatalf("page %d: %v %s", pages, err, b)
		}
		var tb metav1.Table
		if err := json.Unmarshal(b, &tb); err != nil {
			t.Fatal(err)
		}
		if tb.Kind != "Table" || tb.APIVersion != "meta.k8s.io/v1" {
			t.Errorf("page %d: kind %q apiVersion %q", pages, tb.Kind, tb.APIVersion)
		}
		if diff := gocmp.Diff(columns(upstream), columns(tb)); diff != "" {
			t.Errorf("page %d: columns (-apiserver +gateway):\n%s", pages, diff)
		}
		for _, row := range tb.Rows {
			var m metav1.PartialObjectMetadata
			if err := json.Unmarshal(row.Object.Raw, &m); err != nil {
				t.Fatalf("row object: %v in %s", err, row.Object.Raw)
			}
			if name, _ := row.Cells[0].(string); name != m.Name {
				t.Errorf("row of %s shows name %v", m.Name, row.Cells[0])
			}
			if n, _ := row.Cells[1].(float64); int(n) != modelData(modelCMs(all.Items), ns, m.Name) {
				t.Errorf("row of %s shows data %v", m.Name, row.Cells[1])
			}
			got = append(got, m.Namespace+"/"+m.Name)
		}
		// As in the JSON form, and in kube-apiserver's Table: the
		// objects after the page.
		if left := int64(len(want) - len(got)); tb.Continue != "" && (tb.RemainingItemCount == nil || *tb.RemainingItemCount != left) {
			t.Errorf("page %d: remainingItemCount %s, want %d", pages, ptrString(tb.RemainingItemCount), left)
		}
		if cont = tb.Continue; cont == "" {
			break
		}
	}
	// A plain Table page carries it too, as kube-apiserver's does.
	for name, c := range map[string]kubernetes.Interface{"apiserver": env.Client, "gateway": gwc} {
		b, err := c.CoreV1().RESTClient().Get().AbsPath(path).Param("limit", "5").SetHeader("Accept", tableAccept).DoRaw(t.Context())
		if err != nil {
			t.Fatalf("%s: %v %s", name, err, b)
		}
		var tb metav1.Table
		if err := json.Unmarshal(b, &tb); err != nil {
			t.Fatal(err)
		}
		if tb.Continue == "" || tb.RemainingItemCount == nil || *tb.RemainingItemCount != int64(len(cms)-5) {
			t.Errorf("%s: a plain Table page of 5 of %d: continue %q, remainingItemCount %s", name, len(cms), tb.Continue, ptrString(tb.RemainingItemCount))
		}
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("Table rows (-want +got):\n%s", diff)
	}
	if pages != 2 {
		t.Errorf("%d pages after the first, want 2", pages)
	}

	dir := t.TempDir()
	cmd := exec.CommandContext(t.Context(), env.Kubectl(t), "--server", gw, "--cache-dir", filepath.Join(dir, "cache"),
		"get", "--raw", path+"?sort=data&order=desc")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(dir, "none"), "HOME="+dir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl get --raw: %v %s", err, out)
	}
	var l list
	if err := json.Unmarshal(out, &l); err != nil {
		t.Fatalf("kubectl get --raw: %v in %s", err, out)
	}
	if diff := gocmp.Diff(want, l.keys()); diff != "" {
		t.Errorf("kubectl get --raw (-want +got):\n%s", diff)
	}
}

// TestSortedListBadInput: every refused sorted list gets a complete
// Status naming what is wrong, including a continue token sent to the
// other kind of list.
func TestSortedListBadInput(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	createConfigMaps(t, env.Client, ns, nil, "a", "b", "c")
	gw := startGateway(t, nil)
	path := gw + "/api/v1/namespaces/" + ns + "/configmaps"
	testenv.Eventually(t, "the gateway to hold every ConfigMap", func() bool { return len(getList(t, path+"?sort=metadata.name").Items) == 3 })
	token := func(q string) string {
		t.Helper()
		c := getList(t, path+"?"+q).Metadata.Continue
		if c == "" {
			t.Fatalf("%s: no continue token", q)
		}
		return url.QueryEscape(c)
	}
	byName, byData, byAge, plain := token("sort=metadata.name&limit=1"), token("sort=data&limit=1"),
		token("sort=age&limit=1"), token("limit=1")

	tests := []struct {
		name, query string
		code        int
		reason      metav1.StatusReason
		msg         string
	}{
		{"unknown sort key", "sort=spec.containers", 400, metav1.StatusReasonBadRequest,
			`invalid sort: "spec.containers" is not a sort key of configmaps; sort by a column (Name, Data, Age), metadata.name`},
		{"bad order", "sort=data&order=up", 400, metav1.StatusReasonBadRequest, `invalid order: "up" is neither "asc" nor "desc"`},
		{"order alone", "order=sideways", 400, metav1.StatusReasonBadRequest, `invalid order: "sideways"`},
		{"long filter", "filter=" + strings.Repeat("x", 257), 400, metav1.StatusReasonBadRequest, "invalid filter: longer than 256 bytes"},
		{"NUL in filter", "filter=a%00b", 400, metav1.StatusReasonBadRequest, "invalid filter: text contains a NUL byte"},
		{"long sort", "sort=" + strings.Repeat("x", 254), 400, metav1.StatusReasonBadRequest, "invalid sort: longer than 253 bytes"},
		{"limit above 1000", "sort=data&limit=1001", 400, metav1.StatusReasonBadRequest,
			"invalid limit 1001: a sorted list (sort, order or filter) pages at most 1000 items"},
		{"negative limit", "sort=data&limit=-1", 400, metav1.StatusReasonBadRequest, `invalid limit "-1"`},
		{"garbage continue", "sort=metadata.name&continue=%25%25", 400, metav1.StatusReasonBadRequest,
			"invalid continue token: not a cursor this gateway issued"},
		{"another sort's continue", "sort=metadata.name&continue=" + byData, 400, metav1.StatusReasonBadRequest,
			"invalid continue token: it continues a list sorted with sort=Data and order=asc"},
		{"another order's continue", "sort=metadata.name&order=desc&continue=" + byName, 400, metav1.StatusReasonBadRequest,
			"invalid continue token: it continues a list sorted with sort=metadata.name and order=asc"},
		// Age ascending is the creation time descending: the message
		// speaks as the client asked.
		{"an age sort's continue", "sort=data&continue=" + byAge, 400, metav1.StatusReasonBadRequest,
			"invalid continue token: it continues a list sorted with sort=Age and order=asc"},
		{"a plain list's continue", "sort=metadata.name&continue=" + plain, 400, metav1.StatusReasonBadRequest,
			"invalid continue token: it continues a list without sort, order and filter"},
		{"a sorted list's continue, unsorted", "continue=" + byName, 400, metav1.StatusReasonBadRequest,
			"invalid continue token: it continues a sorted list (sort=metadata.name, order=asc)"},
		// timeoutSeconds ends a watch served by mistake.
		{"watch", "watch=true&timeoutSeconds=2&sort=metadata.name", 400, metav1.StatusReasonBadRequest,
			"sort, order and filter apply to lists only"},
		{"watch with filter", "watch=1&timeoutSeconds=2&filter=a", 400, metav1.StatusReasonBadRequest, "subscribe to a window over the WebSocket /ws"},
		{"exact version", "sort=data&resourceVersion=1&resourceVersionMatch=Exact", 400, metav1.StatusReasonBadRequest,
			"resourceVersionMatch=Exact cannot be combined with sort, order or filter"},
		{"version with continue", "sort=metadata.name&resourceVersion=5&continue=" + byName, 400, metav1.StatusReasonBadRequest,
			"specifying resourceVersion is not allowed when using continue"},
		{"repeated sort", "sort=data&sort=metadata.name", 400, metav1.StatusReasonBadRequest, `query parameter "sort" given 2 times`},
		{"future version", "sort=data&resourceVersion=999999999", 504, metav1.StatusReasonTimeout, "Too large resource version: 999999999"},
	}
	// Deprecated watch paths are not served, sorted or not.
	if r := do(t, "GET", gw+"/api/v1/watch/namespaces/"+ns+"/configmaps?sort=metadata.name"); r.code != http.StatusNotFound {
		t.Errorf("a /watch/ path: %d %s", r.code, r.body)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, "GET", path+"?"+tc.query)
			st := r.status(t)
			if r.code != tc.code || st.Reason != tc.reason || st.Status != metav1.StatusFailure || st.APIVersion != "v1" ||
				!strings.Contains(st.Message, tc.msg) {
				t.Errorf("%d %s, want %d %s …%s…", r.code, r.body, tc.code, tc.reason, tc.msg)
			}
		})
	}
}

// TestSortedListOrdersValuesByType: a CRD's printer column holding
// quantities as text sorts them numerically, and a date column sorts by
// the age it shows, youngest first; objects without a value come last
// ascending and first descending, in both.
func TestSortedListOrdersValuesByType(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	gvr := schema.GroupVersionResource{Group: "typed.rest.kubegate.test", Version: "v1", Resource: "widgets"}
	crd := testenv.NewCRD(gvr.Group, gvr.Resource, "Widget")
	crd.Object["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any)["additionalPrinterColumns"] = []any{
		map[string]any{"name": "Size", "type": "string", "jsonPath": ".spec.size"},
		map[string]any{"name": "Seen", "type": "date", "jsonPath": ".spec.seen"},
	}
	env.CreateCRD(t, crd)
	now := time.Now().UTC().Truncate(time.Second)
	// name: size, seen hours ago (0: unset).
	widgets := []struct {
		name, size string
		seen       int
	}{{"a", "100Mi", 3}, {"b", "1", 0}, {"c", "2Gi", 1}, {"d", "500m", 0}, {"e", "1.5", 2}, {"f", "3k", 5}, {"g", "", 4}}
	for _, w := range widgets {
		spec := map[string]any{}
		if w.size != "" {
			spec["size"] = w.size
		}
		if w.seen != 0 {
			spec["seen"] = now.Add(-time.Duration(w.seen) * time.Hour).Format(time.RFC3339)
		}
		o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": gvr.GroupVersion().String(), "kind": "Widget",
			"metadata": map[string]any{"name": w.name}, "spec": spec}}
		if _, err := env.Dynamic.Resource(gvr).Namespace(ns).Create(t.Context(), o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	gw := startGateway(t, nil)
	path := gw + "/apis/" + gvr.GroupVersion().String() + "/namespaces/" + ns + "/" + gvr.Resource
	testenv.Eventually(t, "the gateway to hold every widget", func() bool { return len(getList(t, path+"?sort=size").Items) == len(widgets) })
	names := func(q string) []string {
		t.Helper()
		var out []string
		for _, it := range getList(t, path+"?"+q).Items {
			out = append(out, it.Metadata.Name)
		}
		return out
	}
	for q, want := range map[string][]string{
		// 500m, 1, 1.5, 3k, 100Mi, 2Gi, then no size.
		"sort=size":            {"d", "b", "e", "f", "a", "c", "g"},
		"sort=size&order=desc": {"g", "c", "a", "f", "e", "b", "d"},
		// Seen 1h ago, 2h, 3h, 4h, 5h, then never.
		"sort=seen":            {"c", "e", "a", "g", "f", "b", "d"},
		"sort=seen&order=desc": {"b", "d", "f", "g", "a", "e", "c"},
		// A page at a time, the same.
		"sort=seen&limit=5": {"c", "e", "a", "g", "f"},
	} {
		if got := names(q); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", q, got, want)
		}
	}
	// The next page of the date column starts past its last dated row,
	// at the rows without a date.
	l := getList(t, path+"?sort=seen&limit=5")
	var rest []string
	for _, it := range getList(t, path+"?sort=seen&limit=5&continue="+url.QueryEscape(l.Metadata.Continue)).Items {
		rest = append(rest, it.Metadata.Name)
	}
	if want := []string{"b", "d"}; !slices.Equal(rest, want) {
		t.Errorf("second page by seen: %v, want %v", rest, want)
	}
}

// TestWholeSortedListListsEachObjectOnce reads a sorted list without
// limit, in windows of 4 rows, and moves a row already read ahead of the
// next window while it is read: the row is met again, and listed once.
func TestWholeSortedListListsEachObjectOnce(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	var cms []*corev1.ConfigMap
	for i := range 12 {
		cms = append(cms, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cm-%02d", i)},
			Data: map[string]string{"k": "v"}})
	}
	cms[0].Data = nil // cm-00 comes first by data
	createManyConfigMaps(t, env.Client, cms)
	var gw string
	var moved atomic.Bool
	gw = startGateway(t, func(o *Options) {
		o.wholeSortedWindow = 4
		o.wholeSortedRead = func(window int) {
			if window != 0 || moved.Swap(true) {
				return
			}
			cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "cm-00", metav1.GetOptions{})
			if err != nil {
				t.Error(err)
				return
			}
			cm.Data = map[string]string{"a": "1", "b": "2"}
			if _, err := env.Client.CoreV1().ConfigMaps(ns).Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
				t.Error(err)
				return
			}
			// On the request's goroutine: no t.Fatal.
			err = wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true,
				func(ctx context.Context) (bool, error) {
					resp, err := http.Get(gw + "/api/v1/namespaces/" + ns + "/configmaps?sort=data&order=desc&limit=1")
					if err != nil {
						return false, err
					}
					defer resp.Body.Close()
					b, err := io.ReadAll(resp.Body)
					return strings.Contains(string(b), `"name":"cm-00"`), err
				})
			if err != nil {
				t.Errorf("the gateway did not move cm-00: %v", err)
			}
		}
	})
	testenv.Eventually(t, "the gateway to hold every ConfigMap", func() bool {
		return len(getList(t, gw+"/api/v1/namespaces/"+ns+"/configmaps").Items) == len(cms)
	})
	l := getList(t, gw+"/api/v1/namespaces/"+ns+"/configmaps?sort=data")
	if !moved.Load() {
		t.Fatal("the list was read in one window")
	}
	var want []string
	for _, cm := range cms {
		want = append(want, ns+"/"+cm.Name)
	}
	if diff := gocmp.Diff(want, l.keys()); diff != "" {
		t.Errorf("whole list (-want +got):\n%s", diff)
	}
}
