package httpapi

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

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
	eventually(t, "the gateway to hold every ConfigMap", func() bool {
		return len(getList(t, base+"&sort=metadata.name").Items) == len(cms)
	})

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
					t.Errorf("page %d: remainingItemCount %v, want %d", i, p.Metadata.RemainingItemCount, len(want)-seen)
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
	eventually(t, "the gateway to hold every ConfigMap", func() bool { return len(gwList("sort=data").Items) == len(cms) })

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
			del("cm-39")        // data 3, seen
			del("cm-35")        // data 3, seen
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
			eventually(t, "the gateway to serve the change", func() bool {
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
