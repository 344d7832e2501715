package feed

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"

	"kubegate/internal/livequery"
	"kubegate/internal/testenv"
)

var (
	workloadSeed  = flag.Uint64("feed.seed", 1, "seed of TestWindowsEqualTheApiserversSortedList's workload")
	workloadSteps = flag.Int("feed.steps", 300, "changes made by TestWindowsEqualTheApiserversSortedList")
)

// TestWindowsEqualTheApiserversSortedList runs a seeded random workload
// on ConfigMaps in three namespaces (creations in bursts, so that
// creation timestamps, which have a second's resolution, tie; label and
// data updates; deletions) with windows of every kind open, and now and
// then a reset of the feeder's listener. After every change, once each
// window's Pop reports the change's resourceVersion, each consumer's copy
// (built only from the operations it popped) must equal the apiserver's
// list at exactly that resourceVersion, filtered, sorted and sliced, and
// its count and offset must match.
func TestWindowsEqualTheApiserversSortedList(t *testing.T) {
	env := testenv.Get(t)
	nss := []string{env.Namespace(t), env.Namespace(t), env.Namespace(t)}
	m := startManager(t, env.Config)
	r := resource(t, m, "configmaps")
	var resetNext atomic.Bool
	ts := startTables(t, Options{beforeDrain: func(f *feeder) {
		if resetNext.CompareAndSwap(true, false) {
			f.l.Reset() // the change that woke the feeder comes in the snapshot
		}
	}})

	all3 := sets.New(nss...)
	queries := map[string]livequery.Query{
		"name": {Sort: livequery.SortSpec{Key: "metadata.name"}, Range: livequery.Range{Limit: 10}},
		"created-desc": {Sort: livequery.SortSpec{Key: "metadata.creationTimestamp", Desc: true},
			Filter: livequery.Filter{Namespaces: all3}, Range: livequery.Range{Offset: 2, Limit: 7}},
		"team-a": {Sort: livequery.SortSpec{Key: "metadata.name"},
			Filter: livequery.Filter{Namespaces: all3, Label: labels.SelectorFromSet(labels.Set{"team": "a"})}, Range: livequery.Range{Limit: 5}},
		"rbac-created": {Sort: livequery.SortSpec{Key: "metadata.creationTimestamp"},
			Filter: livequery.Filter{Namespaces: sets.New(nss[0], nss[1])}, Range: livequery.Range{Offset: 3, Limit: 6}},
		"cursor": {Sort: livequery.SortSpec{Key: "metadata.name"}, Filter: livequery.Filter{Namespaces: all3},
			Range: livequery.Range{Limit: 8, Cursor: &livequery.Cursor{Value: livequery.String("cm-10"), Namespace: nss[1], Name: "cm-10"}}},
		"tier-created-desc": {Sort: livequery.SortSpec{Key: "metadata.creationTimestamp", Desc: true},
			Filter: livequery.Filter{Namespaces: sets.New(nss[1], nss[2]), Label: mustSelector(t, "tier in (x,y)")},
			Range:  livequery.Range{Offset: 1, Limit: 4}},
		"field-name-desc": {Sort: livequery.SortSpec{Key: "metadata.name", Desc: true},
			Filter: livequery.Filter{Namespaces: sets.New(nss[2]), Field: fields.OneTermNotEqualSelector("metadata.name", "cm-03")},
			Range:  livequery.Range{Limit: 3}},
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range queries {
			if !yield(k) {
				return
			}
		}
	})
	consumers := map[string]*consumer{}
	for _, name := range names {
		consumers[name] = open(t, ts, r, queries[name])
	}

	seed := *workloadSeed
	t.Logf("workload seed %d (-feed.seed)", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	type key struct{ ns, name string }
	live := map[key]*corev1.ConfigMap{}
	liveKeys := func() []key {
		ks := make([]key, 0, len(live))
		for k := range live {
			ks = append(ks, k)
		}
		slices.SortFunc(ks, func(a, b key) int { return cmp.Or(cmp.Compare(a.ns, b.ns), cmp.Compare(a.name, b.name)) })
		return ks
	}
	randomLabels := func() map[string]string {
		l := map[string]string{}
		if rng.IntN(3) > 0 {
			l["team"] = []string{"a", "b"}[rng.IntN(2)]
		}
		if rng.IntN(3) > 0 {
			l["tier"] = []string{"x", "y", "z"}[rng.IntN(3)]
		}
		return l
	}
	ctx := context.Background()
	cms := env.Client.CoreV1()
	// The deletion's resourceVersion is in the DELETED event, not in
	// the answer to the DELETE: the test watches for it.
	start, err := cms.ConfigMaps("").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	watch, err := cms.ConfigMaps("").Watch(ctx, metav1.ListOptions{ResourceVersion: start.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Stop()
	deletedAt := func(ns, name string) string {
		t.Helper()
		deadline := time.NewTimer(30 * time.Second)
		defer deadline.Stop()
		for {
			select {
			case ev, ok := <-watch.ResultChan():
				if !ok {
					t.Fatal("the test's watch closed")
				}
				if cm, isCM := ev.Object.(*corev1.ConfigMap); isCM && ev.Type == "DELETED" && cm.Namespace == ns && cm.Name == name {
					return cm.ResourceVersion
				}
			case <-deadline.C:
				t.Fatalf("no DELETED event for %s/%s", ns, name)
			}
		}
	}
	resets := 0
	check := func(step int, what string, rv string) {
		t.Helper()
		target, err := strconv.ParseUint(rv, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			caught := true
			for _, name := range names {
				c := consumers[name]
				c.pop(t)
				caught = caught && c.rv >= target
			}
			return caught, nil
		}); err != nil {
			t.Fatalf("step %d (%s): the windows never reached resourceVersion %d", step, what, target)
		}
		list, err := cms.ConfigMaps("").List(ctx, metav1.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			c := consumers[name]
			want, count, offset := expectedWindow(list.Items, queries[name])
			if got := versioned(c.rows); !slices.Equal(got, want) || c.count != count || c.offset != offset {
				t.Fatalf("step %d (%s) at %s: window %q holds %v, count %d, offset %d;\nthe apiserver's list gives %v, count %d, offset %d",
					step, what, rv, name, got, c.count, c.offset, want, count, offset)
			}
		}
	}

	next := 0
	for step := 0; step < *workloadSteps; step++ {
		if rng.IntN(12) == 0 {
			resetNext.Store(true)
			resets++
		}
		switch p := rng.Float64(); {
		case len(live) < 6 || p < 0.35:
			// A burst of creations: their timestamps mostly share a
			// second, so the namespace/name tiebreak decides.
			for range 1 + rng.IntN(3) {
				k := key{nss[rng.IntN(len(nss))], fmt.Sprintf("cm-%02d", next%40)}
				next++
				if live[k] != nil {
					continue
				}
				cm, err := cms.ConfigMaps(k.ns).Create(ctx, &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: k.name, Labels: randomLabels()},
					Data:       map[string]string{"v": "0"}}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				live[k] = cm
				check(step, "create "+k.ns+"/"+k.name, cm.ResourceVersion)
			}
		case p < 0.75:
			ks := liveKeys()
			k := ks[rng.IntN(len(ks))]
			cm := live[k].DeepCopy()
			if rng.IntN(2) == 0 {
				cm.Labels = randomLabels()
			}
			cm.Data = map[string]string{"v": strconv.Itoa(rng.IntN(1000))}
			cm, err := cms.ConfigMaps(k.ns).Update(ctx, cm, metav1.UpdateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			live[k] = cm
			check(step, "update "+k.ns+"/"+k.name, cm.ResourceVersion)
		default:
			ks := liveKeys()
			k := ks[rng.IntN(len(ks))]
			if err := cms.ConfigMaps(k.ns).Delete(ctx, k.name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			delete(live, k)
			check(step, "delete "+k.ns+"/"+k.name, deletedAt(k.ns, k.name))
		}
	}

	// The workload exercised what it is meant to.
	ties := 0
	seen := map[int64]bool{}
	for _, cm := range live {
		s := cm.CreationTimestamp.Unix()
		if seen[s] {
			ties++
		}
		seen[s] = true
	}
	t.Logf("%d steps, %d objects left, %d creation-time ties among them, %d listener resets asked", *workloadSteps, len(live), ties, resets)
	if ties == 0 || resets == 0 {
		t.Fatalf("the workload made %d creation-time ties and %d resets; it needs both", ties, resets)
	}
}

func mustSelector(t *testing.T, s string) labels.Selector {
	t.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

// expectedWindow is "filter, sort, slice" on the apiserver's list,
// written without the engine: the window's rows as "namespace/name@rv",
// the count of matching objects and the window's offset among them.
func expectedWindow(items []corev1.ConfigMap, q livequery.Query) (rows []string, count, offset int) {
	var match []*corev1.ConfigMap
	for i := range items {
		cm := &items[i]
		f := q.Filter
		if f.Namespaces != nil && !f.Namespaces.Has(cm.Namespace) ||
			f.Label != nil && !f.Label.Matches(labels.Set(cm.Labels)) ||
			f.Field != nil && !f.Field.Matches(fields.Set{"metadata.name": cm.Name, "metadata.namespace": cm.Namespace}) {
			continue
		}
		match = append(match, cm)
	}
	compare := func(aNS, aName string, aTime time.Time, b *corev1.ConfigMap) int {
		var c int
		switch q.Sort.Key {
		case "metadata.name":
			c = cmp.Compare(aName, b.Name)
		case "metadata.creationTimestamp":
			c = aTime.Compare(b.CreationTimestamp.Time)
		default:
			panic("no model for sort key " + q.Sort.Key)
		}
		if q.Sort.Desc {
			c = -c
		}
		return cmp.Or(c, cmp.Compare(aNS, b.Namespace), cmp.Compare(aName, b.Name))
	}
	slices.SortFunc(match, func(a, b *corev1.ConfigMap) int {
		return compare(a.Namespace, a.Name, a.CreationTimestamp.Time, b)
	})
	offset = q.Range.Offset
	if cur := q.Range.Cursor; cur != nil {
		// The cursors here are on names: the first object at or after it.
		offset = 0
		for _, cm := range match {
			if compare(cur.Namespace, cur.Value.String(), time.Time{}, cm) > 0 {
				offset++
			}
		}
	}
	for _, cm := range match[min(offset, len(match)):min(offset+q.Range.Limit, len(match))] {
		rows = append(rows, cm.Namespace+"/"+cm.Name+"@"+cm.ResourceVersion)
	}
	return rows, len(match), offset
}
