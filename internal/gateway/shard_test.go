package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"kubegate/internal/controlplane"
	"kubegate/internal/gateway"
	"kubegate/internal/gateway/gatewaytest"
	"kubegate/internal/testenv"
)

// shard is one third of the 64-bit hash space, as a selector and as the
// range the test checks hashes against (hash/fnv, apart from the
// gateway's code).
type shard struct {
	selector string
	lo, hi   uint64 // [lo, hi); hi 0 is 2^64
}

func thirds(field string) []shard {
	return []shard{
		{fmt.Sprintf("shardRange(%s, '0x0000000000000000', '0x5555555555555555')", field), 0, 0x5555555555555555},
		{fmt.Sprintf("shardRange(%s, '0x5555555555555555', '0xaaaaaaaaaaaaaaaa')", field), 0x5555555555555555, 0xaaaaaaaaaaaaaaaa},
		{fmt.Sprintf("shardRange(%s, '0xaaaaaaaaaaaaaaaa', '0x10000000000000000')", field), 0xaaaaaaaaaaaaaaaa, 0},
	}
}

func fnvHash(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

func (s shard) holds(value string) bool {
	h := fnvHash(value)
	return h >= s.lo && (s.hi == 0 || h < s.hi)
}

// shardOf returns the index of the shard of shards that holds value.
func shardOf(shards []shard, value string) int {
	for i, s := range shards {
		if s.holds(value) {
			return i
		}
	}
	return -1
}

// change is one change to one object, as a watcher saw it.
type change struct {
	deleted bool
	name    string
	uid     string
	rv      uint64
}

// changes is a watcher's record.
type changes struct {
	mu   sync.Mutex
	list []change
	// unknown counts deletions whose final state was unknown (a relist):
	// their version cannot be checked.
	unknown int
}

func (c *changes) add(deleted bool, obj any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		c.unknown++
		obj = d.Obj
	}
	cm := obj.(*corev1.ConfigMap)
	rv, _ := strconv.ParseUint(cm.ResourceVersion, 10, 64)
	c.list = append(c.list, change{deleted: deleted, name: cm.Name, uid: string(cm.UID), rv: rv})
}

func (c *changes) get() ([]change, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.list), c.unknown
}

// stateAt is the objects (name to uid@rv) that changes leave at version
// rv.
func stateAt(cs []change, rv uint64) map[string]string {
	out := map[string]string{}
	for _, c := range cs {
		if c.rv > rv {
			continue
		}
		if c.deleted {
			delete(out, c.name)
		} else {
			out[c.name] = fmt.Sprintf("%s@%d", c.uid, c.rv)
		}
	}
	return out
}

// TestShardedInformers: three client-go informers, each given a third of
// the UID hash space as its shardSelector, read one resource through the
// gateway (from its cache; the test apiserver does not have the
// ShardedListAndWatch gate) while a random workload creates, updates and
// deletes objects. Every object goes to the one shard its UID hashes to,
// and at every resourceVersion of the apiserver's history the three
// shards' states put together are the apiserver's state, nothing lost and
// nothing twice.
func TestShardedInformers(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cms := env.Client.CoreV1().ConfigMaps(ns)
	for i := range 30 {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%02d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := gatewaytest.Config()
	cfg.Auth.Authn, cfg.Auth.Authz = "none", "always-allow"
	g := gatewaytest.Start(t, cfg, gateway.Options{})

	// The apiserver's history, from before the shards start.
	initial, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref := &changes{}
	for i := range initial.Items {
		ref.add(false, &initial.Items[i])
	}
	rw, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: initial.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Stop()
	refDone := make(chan struct{})
	go func() {
		defer close(refDone)
		for ev := range rw.ResultChan() {
			if ev.Type == watch.Added || ev.Type == watch.Modified || ev.Type == watch.Deleted {
				ref.add(ev.Type == watch.Deleted, ev.Object)
			}
		}
	}()
	defer func() { rw.Stop(); <-refDone }()

	shards := thirds("object.metadata.uid")
	gcs, err := kubernetes.NewForConfig(&rest.Config{Host: g.URL()})
	if err != nil {
		t.Fatal(err)
	}
	seen := make([]*changes, len(shards))
	infCtx, stopInformers := context.WithCancel(ctx)
	var informersDone sync.WaitGroup
	defer func() { stopInformers(); informersDone.Wait() }()
	for i, s := range shards {
		seen[i] = &changes{}
		f := informers.NewSharedInformerFactoryWithOptions(gcs, 0, informers.WithNamespace(ns),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.ShardSelector = s.selector }))
		inf := f.Core().V1().ConfigMaps().Informer()
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { seen[i].add(false, obj) },
			UpdateFunc: func(_, obj any) { seen[i].add(false, obj) },
			DeleteFunc: func(obj any) { seen[i].add(true, obj) },
		}); err != nil {
			t.Fatal(err)
		}
		informersDone.Add(1)
		go func() { defer informersDone.Done(); inf.RunWithContext(infCtx) }()
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			t.Fatalf("shard %d never synced", i)
		}
	}

	// The workload: three writers, creates, updates and deletes at
	// random over a pool of names (a name deleted and created again gets
	// a new UID, and may change shards).
	seed := uint64(time.Now().UnixNano())
	t.Logf("workload seed %d", seed)
	var writers sync.WaitGroup
	errs := make(chan error, 3)
	for w := range 3 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for range 80 {
				name := fmt.Sprintf("cm-%02d", rng.IntN(45))
				var err error
				switch rng.IntN(3) {
				case 0:
					_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
				case 1:
					var cm *corev1.ConfigMap
					if cm, err = cms.Get(ctx, name, metav1.GetOptions{}); err == nil {
						cm.Data = map[string]string{"v": strconv.Itoa(rng.IntN(1000))}
						_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
					}
				case 2:
					err = cms.Delete(ctx, name, metav1.DeleteOptions{})
				}
				if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err) {
					errs <- err
					return
				}
			}
		}()
	}
	writers.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// The end: the reference has seen the apiserver's last version, and
	// the shards together hold its state.
	final, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	finalRV, _ := strconv.ParseUint(final.ResourceVersion, 10, 64)
	want := map[string]string{}
	for _, cm := range final.Items {
		want[cm.Name] = fmt.Sprintf("%s@%s", cm.UID, cm.ResourceVersion)
	}
	union := func() map[string]string {
		out := map[string]string{}
		for _, s := range seen {
			cs, _ := s.get()
			for k, v := range stateAt(cs, finalRV) {
				out[k] = v
			}
		}
		return out
	}
	testenv.Eventually(t, "the shards together reach the apiserver's final state", func() bool {
		refCs, _ := ref.get()
		return fmt.Sprint(stateAt(refCs, finalRV)) == fmt.Sprint(want) && fmt.Sprint(union()) == fmt.Sprint(want)
	})

	refCs, _ := ref.get()
	for i, s := range seen {
		cs, unknown := s.get()
		if unknown > 0 {
			t.Errorf("shard %d relisted: %d deletions of unknown state", i, unknown)
		}
		for _, c := range cs {
			if !shards[i].holds(c.uid) {
				t.Fatalf("shard %d got %s (uid %s, hash %#x), outside [%#x, %#x)", i, c.name, c.uid, fnvHash(c.uid), shards[i].lo, shards[i].hi)
			}
		}
	}
	// At every version of the apiserver's history since the shards
	// started, the shards' states are disjoint and add up to the
	// apiserver's.
	versions := map[uint64]bool{}
	for _, c := range refCs {
		if c.rv >= mustRV(t, initial.ResourceVersion) {
			versions[c.rv] = true
		}
	}
	versions[finalRV] = true
	checked := 0
	for rv := range versions {
		wantAt := stateAt(refCs, rv)
		got := map[string]string{}
		for i, s := range seen {
			cs, _ := s.get()
			for name, v := range stateAt(cs, rv) {
				if prev, dup := got[name]; dup {
					t.Fatalf("at %d, %s is in two shards (%s and, in shard %d, %s)", rv, name, prev, i, v)
				}
				got[name] = v
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(wantAt) {
			t.Fatalf("at resourceVersion %d the shards hold\n%v\nthe apiserver held\n%v", rv, got, wantAt)
		}
		checked++
	}
	if checked < 100 {
		t.Fatalf("only %d versions checked: the workload did too little", checked)
	}
	t.Logf("%d versions checked, %d changes", checked, len(refCs))
}

func mustRV(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// listAnswer is the part of a list answer these tests read.
type listAnswer struct {
	Kind     string `json:"kind"`
	Metadata struct {
		ResourceVersion string `json:"resourceVersion"`
		Continue        string `json:"continue"`
		ShardInfo       *struct {
			Selector string `json:"selector"`
		} `json:"shardInfo"`
	} `json:"metadata"`
	Items []struct {
		Metadata struct {
			Name, Namespace, UID, ResourceVersion string
		} `json:"metadata"`
	} `json:"items"`
	Rows []json.RawMessage `json:"rows"`
}

func getList(t *testing.T, hc *http.Client, u, accept string) (int, listAnswer, []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	req.Header.Set("User-Agent", "kubegate-test")
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var l listAnswer
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, &l); err != nil {
			t.Fatalf("%s: %v: %.300s", u, err, b)
		}
	}
	return resp.StatusCode, l, b
}

func names(l listAnswer) []string {
	var out []string
	for _, it := range l.Items {
		out = append(out, it.Metadata.Namespace+"/"+it.Metadata.Name)
	}
	slices.Sort(out)
	return out
}

// TestShardSelectorLists: lists with a shardSelector, served from the
// cache of a gateway whose apiserver does not have the feature gate:
// shards by UID and by namespace partition the collection, each object
// in the shard its field hashes to; metadata.shardInfo echoes the
// selector in kube-apiserver's canonical form (lists of objects only, as
// kube-apiserver); pages of a shard add up to it; and bad selectors are
// 400 with a complete Status.
func TestShardSelectorLists(t *testing.T) {
	env := testenv.Get(t)
	label := fmt.Sprintf("shard-test-%d", time.Now().UnixNano())
	var namespaces []string
	for range 6 {
		ns := env.Namespace(t)
		namespaces = append(namespaces, ns)
		for i := range 7 {
			if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("cm-%d", i), Labels: map[string]string{"test": label}}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	cfg := gatewaytest.Config()
	cfg.Auth.Authn, cfg.Auth.Authz = "none", "always-allow"
	gw := gatewaytest.Start(t, cfg, gateway.Options{}).URL()
	base := gw + "/api/v1/configmaps?labelSelector=test%3D" + label
	code, whole, body := getList(t, http.DefaultClient, base, "")
	if code != 200 || len(whole.Items) != 42 || whole.Metadata.ShardInfo != nil {
		t.Fatalf("whole list: %d, %d items, shardInfo %v: %.300s", code, len(whole.Items), whole.Metadata.ShardInfo, body)
	}
	uids := map[string]string{}
	for _, it := range whole.Items {
		uids[it.Metadata.Namespace+"/"+it.Metadata.Name] = it.Metadata.UID
	}

	for _, field := range []string{"object.metadata.uid", "object.metadata.namespace"} {
		shards := thirds(field)
		var union []string
		for i, s := range shards {
			q := "&shardSelector=" + url.QueryEscape(s.selector)
			code, l, body := getList(t, http.DefaultClient, base+q, "")
			if code != 200 || l.Metadata.ShardInfo == nil || l.Metadata.ShardInfo.Selector != s.selector {
				t.Fatalf("%s: %d %.300s", s.selector, code, body)
			}
			for _, it := range l.Items {
				value := it.Metadata.UID
				if field == "object.metadata.namespace" {
					value = it.Metadata.Namespace
				}
				if shardOf(shards, value) != i {
					t.Fatalf("%s holds %s/%s, whose %s hashes to shard %d", s.selector, it.Metadata.Namespace, it.Metadata.Name, field, shardOf(shards, value))
				}
			}
			union = append(union, names(l)...)

			// Pages of the shard add up to it, each echoing the selector.
			var paged []string
			cont := ""
			for {
				u := base + q + "&limit=4"
				if cont != "" {
					u += "&continue=" + url.QueryEscape(cont)
				}
				code, page, body := getList(t, http.DefaultClient, u, "")
				if code != 200 || page.Metadata.ShardInfo == nil || page.Metadata.ShardInfo.Selector != s.selector {
					t.Fatalf("page of %s: %d %.300s", s.selector, code, body)
				}
				paged = append(paged, names(page)...)
				if cont = page.Metadata.Continue; cont == "" {
					break
				}
				// A continue token belongs to its selector.
				other := "&shardSelector=" + url.QueryEscape(shards[(i+1)%3].selector)
				if code, _, body := getList(t, http.DefaultClient, base+other+"&limit=4&continue="+url.QueryEscape(cont), ""); code != http.StatusBadRequest {
					t.Fatalf("continue with another shardSelector: %d %.300s", code, body)
				}
			}
			slices.Sort(paged)
			if !slices.Equal(paged, names(l)) {
				t.Fatalf("pages of %s: %v, want %v", s.selector, paged, names(l))
			}

			// Tables and metadata lists are sharded too; kube-apiserver
			// builds them without shardInfo, and so does the gateway.
			code, table, body := getList(t, http.DefaultClient, base+q, "application/json;as=Table;v=v1;g=meta.k8s.io")
			if code != 200 || len(table.Rows) != len(l.Items) || strings.Contains(string(body), "shardInfo") {
				t.Fatalf("Table of %s: %d, %d rows for %d items: %.300s", s.selector, code, len(table.Rows), len(l.Items), body)
			}
			code, meta, body := getList(t, http.DefaultClient, base+q, "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io")
			if code != 200 || !slices.Equal(names(meta), names(l)) || strings.Contains(string(body), "shardInfo") {
				t.Fatalf("metadata list of %s: %d %.300s", s.selector, code, body)
			}
		}
		slices.Sort(union)
		if !slices.Equal(union, names(whole)) {
			t.Fatalf("shards by %s put together: %v, want %v", field, union, names(whole))
		}
	}

	// Several ranges in one selector, and the canonical form echoed for
	// a selector written otherwise.
	two := `shardRange(object.metadata.uid, "0x0000000000000000", '0x5555555555555555') || shardRange(object.metadata.uid, '0xaaaaaaaaaaaaaaaa', '0x10000000000000000')`
	code, l, body := getList(t, http.DefaultClient, base+"&shardSelector="+url.QueryEscape(two), "")
	canonical := "shardRange(object.metadata.uid, '0x0000000000000000', '0x5555555555555555') || shardRange(object.metadata.uid, '0xaaaaaaaaaaaaaaaa', '0x10000000000000000')"
	if code != 200 || l.Metadata.ShardInfo == nil || l.Metadata.ShardInfo.Selector != canonical {
		t.Fatalf("two ranges: %d %.300s", code, body)
	}
	for _, it := range l.Items {
		if shardOf(thirds(""), it.Metadata.UID) == 1 {
			t.Fatalf("two ranges hold %s, in the middle third", it.Metadata.Name)
		}
	}

	ns := namespaces[0]
	for _, tc := range []struct{ selector, says string }{
		{"bogus", "invalid shard selector: "},
		{"shardRange(object.metadata.uid, '0x0', '0x8000000000000000')", `hexStart must be a 0x-prefixed 16-digit hex value, got "0x0" (did you mean "0x0000000000000000"?)`},
		{"shardRange(object.metadata.name, '0x0000000000000000', '0x8000000000000000')", `unsupported field path "object.metadata.name"`},
		{"shardRange(object.metadata.uid, '0x8000000000000000', '0x0000000000000000')", "must be less than end"},
		{"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')", "all shard ranges must use the same field"},
		{"shardRange(object.metadata.uid, '0x0000000000000000', '0x20000000000000000')", "0x10000000000000000"},
		{"size(object.metadata.uid) > 3", "only shardRange() and || are allowed"},
		{strings.Repeat(" ", 5000), "longer than 4096 bytes"},
	} {
		for _, path := range []string{"/api/v1/namespaces/" + ns + "/configmaps", "/api/v1/namespaces/" + ns + "/configmaps?watch=1&x=1"} {
			sep := "?"
			if strings.Contains(path, "?") {
				sep = "&"
			}
			r := do(t, "GET", gw+path+sep+"shardSelector="+url.QueryEscape(tc.selector))
			st := r.status(t)
			if r.code != http.StatusBadRequest || st.Reason != metav1.StatusReasonBadRequest || st.Status != metav1.StatusFailure ||
				st.APIVersion != "v1" || !strings.Contains(st.Message, tc.says) {
				t.Errorf("%s %q: %d %s, want 400 saying %q", path, tc.selector, r.code, r.body, tc.says)
			}
		}
	}
	sel := url.QueryEscape(thirds("object.metadata.uid")[0].selector)
	for _, tc := range []struct{ query, says string }{
		{"shardSelector=" + sel + "&shardSelector=" + sel, `query parameter "shardSelector" given 2 times`},
		{"shardSelector=" + sel + "&sort=metadata.name", "shardSelector cannot be combined with sort, order or filter"},
	} {
		r := do(t, "GET", gw+"/api/v1/namespaces/"+ns+"/configmaps?"+tc.query)
		if st := r.status(t); r.code != http.StatusBadRequest || !strings.Contains(st.Message, tc.says) {
			t.Errorf("%s: %d %s, want 400 saying %q", tc.query, r.code, r.body, tc.says)
		}
	}
}

// TestShardSelectorAsKubeAPIServer: against a kube-apiserver with the
// ShardedListAndWatch feature gate, the gateway's sharded lists (from its
// cache) hold the objects the apiserver's own sharded lists hold, and
// echo the same shardInfo, in every form; the one difference is the
// answer to a bad selector, 400 from the gateway where kube-apiserver
// v1.37 answers 500.
func TestShardSelectorAsKubeAPIServer(t *testing.T) {
	testenv.SkipShort(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{ExtraAPIServerFlags: map[string]string{"--feature-gates": "ShardedListAndWatch=true"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	admin := cp.AdminConfig()
	hc, err := rest.HTTPClientFor(admin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.CloseIdleConnections)
	cs, err := kubernetes.NewForConfigAndClient(admin, hc)
	if err != nil {
		t.Fatal(err)
	}
	for n := range 4 {
		ns := fmt.Sprintf("shards-%d", n)
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for i := range 8 {
			if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("cm-%d", i), Labels: map[string]string{"test": "shards"}}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	cfg := gatewaytest.Config()
	cfg.Auth.Authn, cfg.Auth.Authz = "none", "always-allow"
	gw := gatewaytest.Start(t, cfg, gateway.Options{RESTConfig: admin}).URL()
	path := "/api/v1/configmaps?labelSelector=test%3Dshards"
	// The gateway's cache has the objects once its list has them all.
	testenv.Eventually(t, "the gateway lists the 32 config maps", func() bool {
		code, l, _ := getList(t, http.DefaultClient, gw+path, "")
		return code == 200 && len(l.Items) == 32
	})
	selectors := []string{
		"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
		"shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
		`shardRange(object.metadata.namespace, "0x0000000000000000", '0x8000000000000000')`,
		"shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000') || shardRange(object.metadata.namespace, '0x0000000000000000', '0x1000000000000000')",
	}
	for _, sel := range selectors {
		for _, accept := range []string{"", "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"} {
			u := path + "&shardSelector=" + url.QueryEscape(sel)
			wantCode, want, wantBody := getList(t, hc, admin.Host+u, accept)
			gotCode, got, gotBody := getList(t, http.DefaultClient, gw+u, accept)
			if wantCode != 200 || gotCode != 200 {
				t.Fatalf("%s: apiserver %d %.300s, gateway %d %.300s", sel, wantCode, wantBody, gotCode, gotBody)
			}
			if !slices.Equal(names(got), names(want)) || fmt.Sprint(got.Metadata.ShardInfo) != fmt.Sprint(want.Metadata.ShardInfo) {
				t.Fatalf("%s (%q):\ngateway:   %v shardInfo %v\napiserver: %v shardInfo %v", sel, accept,
					names(got), got.Metadata.ShardInfo, names(want), want.Metadata.ShardInfo)
			}
			if accept == "" && (want.Metadata.ShardInfo == nil || got.Metadata.ShardInfo.Selector != want.Metadata.ShardInfo.Selector) {
				t.Fatalf("%s: shardInfo %v, apiserver's %v", sel, got.Metadata.ShardInfo, want.Metadata.ShardInfo)
			}
		}
	}
	u := path + "&shardSelector=" + url.QueryEscape("shardRange(object.metadata.uid, '0x0', '0x1')")
	if code, _, body := getList(t, hc, admin.Host+u, ""); code != http.StatusInternalServerError || !strings.Contains(string(body), "invalid shard selector") {
		t.Fatalf("a bad selector from kube-apiserver: %d %.300s (if it is no longer 500, update docs/rest.md)", code, body)
	}
	if code, _, body := getList(t, http.DefaultClient, gw+u, ""); code != http.StatusBadRequest {
		t.Fatalf("a bad selector from the gateway: %d %.300s", code, body)
	}
}
