package scenario

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"kubegate/bench/workload"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100..1, unsorted
	}
	for _, tc := range []struct {
		name    string
		samples []time.Duration
		q       float64
		want    time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one", ms(7), 0.99, 7 * time.Millisecond},
		{"median of odd", ms(3, 1, 2), 0.5, 2 * time.Millisecond},
		{"median of even is the lower", ms(4, 1, 3, 2), 0.5, 2 * time.Millisecond},
		{"p99 of 20 is the maximum", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20), 0.99, 20 * time.Millisecond},
		{"p99 of 100", ms(hundred...), 0.99, 99 * time.Millisecond},
		{"p50 of 100", ms(hundred...), 0.50, 50 * time.Millisecond},
		{"p100", ms(5, 9, 1), 1, 9 * time.Millisecond},
		{"tiny q is the minimum", ms(5, 9, 1), 0.0001, 1 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percentile(tc.samples, tc.q); got != tc.want {
				t.Errorf("Percentile(%v) = %v, want %v", tc.q, got, tc.want)
			}
		})
	}
}

func TestListContinue(t *testing.T) {
	for _, tc := range []struct {
		name, head, want, err string
	}{
		{name: "gateway page", head: `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"12","continue":"abc_-","remainingItemCount":3},"items":[{"metadata":`, want: "abc_-"},
		{name: "apiserver last page", head: `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"12"},"items":[{"metadata":{"name":"x","managedFields":[`, want: ""},
		{name: "whole small list", head: `{"kind":"PodList","apiVersion":"v1","metadata":{"continue":"k"},"items":[]}` + "\n", want: "k"},
		{name: "nested objects before metadata", head: `{"x":{"a":[1,{"b":2}]},"metadata":{"continue":"k"}}`, want: "k"},
		{name: "items first", head: `{"kind":"PodList","items":[],"metadata":{}}`, err: "before its metadata"},
		{name: "metadata cut off", head: `{"kind":"PodList","metadata":{"resourceVersion":"1","contin`, err: "not within the first"},
		{name: "not an object", head: `[1,2]`, err: "not a JSON object"},
		{name: "status", head: `{"kind":"Status","apiVersion":"v1","status":"Failure"}`, err: "no metadata"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := listContinue([]byte(tc.head))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("listContinue = %q, %v; want error containing %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("listContinue = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestHeadWriter(t *testing.T) {
	w := headWriter{head: make([]byte, 0, 4)}
	for _, s := range []string{"ab", "cdef", "gh"} {
		if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if string(w.head) != "abcd" || w.n != 8 {
		t.Errorf("head %q, n %d; want \"abcd\", 8", w.head, w.n)
	}
}

func TestSameNames(t *testing.T) {
	if err := sameNames("a", []string{"x/1", "x/2"}, "b", []string{"x/2", "x/1"}); err != nil {
		t.Errorf("same sets in another order: %v", err)
	}
	for _, tc := range []struct {
		name string
		a, b []string
		want []string
	}{
		{"missing", []string{"x/1"}, []string{"x/1", "x/2"}, []string{"a has 1 items, b 2", "only b has 1: x/2"}},
		{"duplicate", []string{"x/1", "x/1"}, []string{"x/1", "x/2"}, []string{"a lists 1 items more than once", "only b has 1: x/2"}},
		{"different", []string{"x/1"}, []string{"x/2"}, []string{"only a has 1: x/1", "only b has 1: x/2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := sameNames("a", tc.a, "b", tc.b)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// fakeLister serves /api/v1/pods and /api/v1/namespaces/{ns}/pods from a
// fixed list of Pods, with labelSelector (any selector keeps every other
// Pod), limit and continue (an offset), metadata written before items as
// both real servers do.
type fakeLister struct {
	pods  []workload.PodKey
	extra string // a Pod only this server lists, in every answer

	mu      sync.Mutex // guards queries
	queries []string
}

func (f *fakeLister) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.queries = append(f.queries, r.URL.RawQuery)
	f.mu.Unlock()
	if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		http.Error(w, "gzip was asked for", http.StatusBadRequest)
		return
	}
	ns := ""
	switch {
	case r.URL.Path == "/api/v1/pods":
	case strings.HasPrefix(r.URL.Path, "/api/v1/namespaces/") && strings.HasSuffix(r.URL.Path, "/pods"):
		ns = strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/api/v1/namespaces/"), "/pods")
	default:
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	var items []workload.PodKey
	for i, p := range f.pods {
		if (ns == "" || p.Namespace == ns) && (q.Get("labelSelector") == "" || i%2 == 0) {
			items = append(items, p)
		}
	}
	if f.extra != "" {
		items = append(items, workload.PodKey{Namespace: "extra", Name: f.extra})
	}
	from, _ := strconv.Atoi(q.Get("continue"))
	items = items[from:]
	cont := ""
	if limit, _ := strconv.Atoi(q.Get("limit")); limit > 0 && limit < len(items) {
		items = items[:limit]
		cont = strconv.Itoa(from + limit)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"7","continue":%q},"items":[`, cont)
	for i, p := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"metadata":{"namespace":%q,"name":%q},"spec":{"padding":%q}}`, p.Namespace, p.Name, strings.Repeat("x", 1000))
	}
	b.WriteString("]}\n")
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(b.String()))
}

// fakeEnv serves gw as the gateway and api as kube-apiserver, both
// "processes" being this test's.
func fakeEnv(t *testing.T, gw, api http.Handler) *Env {
	gs := httptest.NewServer(gw)
	t.Cleanup(gs.Close)
	as := httptest.NewServer(api)
	t.Cleanup(as.Close)
	return &Env{
		GatewayURL:   gs.URL,
		APIServer:    &rest.Config{Host: as.URL},
		Namespaces:   []string{workload.NamespaceName(0), workload.NamespaceName(1)},
		Selector:     "shard=0",
		GatewayPID:   os.Getpid(),
		APIServerPID: os.Getpid(),
	}
}

func fakePods(n int) []workload.PodKey {
	var pods []workload.PodKey
	for j := range n {
		pods = append(pods, workload.PodAt(j, 2))
	}
	return pods
}

func TestRunRESTFake(t *testing.T) {
	gw, api := &fakeLister{pods: fakePods(25)}, &fakeLister{pods: fakePods(25)}
	env := fakeEnv(t, gw, api)
	var log strings.Builder
	figs, err := RunREST(t.Context(), env, RESTOptions{Reps: 5, PageSize: 10, Concurrency: 2, Log: &log})
	if err != nil {
		t.Fatalf("RunREST: %v\n%s", err, log.String())
	}
	t.Logf("\n%s", log.String())

	got := map[string]float64{}
	for _, f := range figs {
		if f.Scenario != ScenarioREST {
			t.Errorf("figure %+v: scenario is not %q", f, ScenarioREST)
		}
		got[f.Arm+"|"+f.Metric] = f.Value
	}
	for _, arm := range []string{ArmGateway, ArmAPIServerRVUnset, ArmAPIServerRV0} {
		for _, c := range []struct {
			name  string
			items float64
		}{{"list all", 25}, {"list namespace", 13}, {"list selector", 13}, {"list all limit=10", 25}} {
			if v := got[arm+"|"+c.name+" items"]; v != c.items {
				t.Errorf("%s %s items = %v, want %v", arm, c.name, v, c.items)
			}
			for _, m := range []string{"p50", "p99", "size"} {
				if v, ok := got[arm+"|"+c.name+" "+m]; !ok || v <= 0 {
					t.Errorf("%s %s %s = %v (present %v), want > 0", arm, c.name, m, v, ok)
				}
			}
			if _, ok := got[arm+"|"+c.name+" CPU/list"]; !ok {
				t.Errorf("%s %s CPU/list missing", arm, c.name)
			}
		}
		if v := got[arm+"|list all limit=10 pages"]; v != 3 {
			t.Errorf("%s pages = %v, want 3", arm, v)
		}
		if p50, p99 := got[arm+"|list all p50"], got[arm+"|list all p99"]; p99 < p50 {
			t.Errorf("%s p99 %v < p50 %v", arm, p99, p50)
		}
	}
	if g, a := got[ArmGateway+"|list all size"], got[ArmAPIServerRV0+"|list all size"]; g != a || g < 25 {
		t.Errorf("list all size: gateway %v KiB, apiserver %v KiB; want equal and >= 25 KiB", g, a)
	}

	// The gateway is never sent resourceVersion on measured lists; the
	// apiserver gets "0" on one arm, on first pages only.
	var rv0, rv0Cont int
	for _, q := range api.queries {
		if strings.Contains(q, "resourceVersion=0") {
			rv0++
			if strings.Contains(q, "continue=") {
				rv0Cont++
			}
		}
	}
	if rv0 == 0 || rv0Cont != 0 {
		t.Errorf("apiserver got resourceVersion=0 %d times, %d of them with continue; want some, none", rv0, rv0Cont)
	}
	if lines := goalLines(RESTGoals(figs)); len(lines) != 3 || !strings.Contains(lines[2], "p99 <= 50 ms") {
		t.Errorf("RESTGoals = %q", lines)
	}
}

func TestRESTGoals(t *testing.T) {
	fig := func(arm, metric string, v float64) Figure {
		return Figure{Scenario: ScenarioREST, Arm: arm, Metric: metric, Unit: "ms", Value: v}
	}
	figs := []Figure{
		fig(ArmGateway, "list all p50", 40), fig(ArmGateway, "list all p99", 60),
		fig(ArmGateway, "list all CPU/list", 20), fig(ArmGateway, "list all items", 10000),
		fig(ArmAPIServerRVUnset, "list all p50", 800), fig(ArmAPIServerRVUnset, "list all CPU/list", 1000),
		fig(ArmAPIServerRV0, "list all p50", 200), fig(ArmAPIServerRV0, "list all CPU/list", 500),
	}
	want := []string{
		"goal: list of all 10000 Pods >= 10x faster than apiserver rv=unset: gateway p50 40.0 ms, apiserver rv=unset p50 800.0 ms: 20.0x, met (CPU per list 20.0 ms vs 1000.0 ms: 50.0x)",
		"goal: list of all 10000 Pods >= 10x faster than apiserver rv=0: gateway p50 40.0 ms, apiserver rv=0 p50 200.0 ms: 5.0x, MISSED (CPU per list 20.0 ms vs 500.0 ms: 25.0x)",
		"goal: list of all 10000 Pods p99 <= 50 ms: gateway p99 60.0 ms, MISSED",
	}
	if diff := cmp.Diff(want, goalLines(RESTGoals(figs))); diff != "" {
		t.Errorf("RESTGoals (-want +got):\n%s", diff)
	}
	if got := RESTGoals(figs[4:]); got != nil {
		t.Errorf("RESTGoals without the gateway's figures = %q, want none", got)
	}
}

func TestRunRESTMismatch(t *testing.T) {
	env := fakeEnv(t, &fakeLister{pods: fakePods(6)}, &fakeLister{pods: fakePods(6), extra: "ghost"})
	_, err := RunREST(t.Context(), env, RESTOptions{Reps: 1, VerifyTimeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "only apiserver rv=unset has 1: extra/ghost") {
		t.Fatalf("RunREST = %v, want the extra Pod named", err)
	}
}

func TestRunRESTServerError(t *testing.T) {
	gw := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"kind":"Status","code":503}`, http.StatusServiceUnavailable)
	})
	env := fakeEnv(t, gw, &fakeLister{pods: fakePods(3)})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := RunREST(ctx, env, RESTOptions{Reps: 1})
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("RunREST = %v, want the 503", err)
	}
}
