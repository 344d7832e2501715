package informer

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apisharding "k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apiserver/pkg/sharding"
)

func mustShard(t *testing.T, expr string) *ShardSelector {
	t.Helper()
	sel, err := sharding.Parse(expr)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewShardSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestShardSelectorMatchesAsAPIMachinery: the compiled selector selects
// exactly what apimachinery's sharding.Selector (kube-apiserver's
// matcher) selects, for random UIDs and namespaces and random ranges,
// the bound 2^64 included.
func TestShardSelectorMatchesAsAPIMachinery(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	bound := func() string {
		if rng.IntN(8) == 0 {
			return "0x10000000000000000"
		}
		return fmt.Sprintf("0x%016x", rng.Uint64())
	}
	for i := range 200 {
		field := "object.metadata.uid"
		if i%2 == 1 {
			field = "object.metadata.namespace"
		}
		var expr string
		for j := range 1 + rng.IntN(3) {
			a, b := bound(), bound()
			if !apisharding.HexLess(a, b) {
				a, b = b, a
			}
			if a == b || a == "0x10000000000000000" {
				a = "0x0000000000000000"
			}
			if j > 0 {
				expr += " || "
			}
			expr += fmt.Sprintf("shardRange(%s, '%s', '%s')", field, a, b)
		}
		sel, err := sharding.Parse(expr)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		ours, err := NewShardSelector(sel)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		if ours.String() != sel.String() {
			t.Fatalf("String %q, apimachinery's %q", ours.String(), sel.String())
		}
		for range 50 {
			o := &Object{ObjectMeta: metav1.ObjectMeta{UID: uuid.NewUUID(), Namespace: fmt.Sprintf("ns-%d", rng.IntN(1000)), Name: "x"}}
			want, err := sel.Matches(o)
			if err != nil {
				t.Fatal(err)
			}
			if got := ours.Matches(o); got != want {
				t.Fatalf("%s on uid %s, namespace %s: %v, apimachinery's %v", expr, o.UID, o.Namespace, got, want)
			}
		}
	}
}

// TestShardsPartition: N shards that split the hash space put every
// object in exactly one of them, and the hash is hash/fnv's FNV-1a.
func TestShardsPartition(t *testing.T) {
	shards := []*ShardSelector{
		mustShard(t, "shardRange(object.metadata.uid, '0x0000000000000000', '0x5555555555555555')"),
		mustShard(t, "shardRange(object.metadata.uid, '0x5555555555555555', '0xaaaaaaaaaaaaaaaa')"),
		mustShard(t, "shardRange(object.metadata.uid, '0xaaaaaaaaaaaaaaaa', '0x10000000000000000')"),
	}
	counts := make([]int, len(shards))
	for range 3000 {
		uid := uuid.NewUUID()
		h := fnv.New64a()
		h.Write([]byte(uid))
		if got := fnv1a64(string(uid)); got != h.Sum64() {
			t.Fatalf("fnv1a64(%s) = %x, hash/fnv %x", uid, got, h.Sum64())
		}
		o := &Object{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}}
		n := 0
		for i, s := range shards {
			if s.Matches(o) {
				n++
				counts[i]++
			}
		}
		if n != 1 {
			t.Fatalf("uid %s is in %d shards", uid, n)
		}
	}
	for i, c := range counts {
		if c < 800 {
			t.Errorf("shard %d holds %d of 3000 objects", i, c)
		}
	}
	// Edges: start is in, end is not, 2^64 closes the space.
	if h := fnv1a64(""); h != 0xcbf29ce484222325 { // FNV-1a's offset basis
		t.Fatalf("fnv1a64(\"\") = %x", h)
	}
	if at := mustShard(t, "shardRange(object.metadata.namespace, '0xcbf29ce484222325', '0xcbf29ce484222326')"); !at.Matches(&Object{}) {
		t.Errorf("start bound excluded")
	}
	if below := mustShard(t, "shardRange(object.metadata.namespace, '0x0000000000000000', '0xcbf29ce484222325')"); below.Matches(&Object{}) {
		t.Errorf("end bound included")
	}
}

// FuzzShardSelector feeds client-supplied shard selectors to
// kube-apiserver's parser and NewShardSelector: every selector the
// parser accepts compiles, and the compiled selector matches as
// apimachinery's does.
func FuzzShardSelector(f *testing.F) {
	for _, s := range []string{
		"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
		`shardRange(object.metadata.namespace, "0x8000000000000000", '0x10000000000000000')`,
		"shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000') || (shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000'))",
		"shardRange(object.metadata.uid, '0x0', '0x1')",
		"shardRange(object.metadata.uid, r'0x0000000000000000', '\\x30x8000000000000000')",
		"bogus || ",
	} {
		f.Add(s)
	}
	objs := []*Object{{}, {ObjectMeta: metav1.ObjectMeta{UID: "0b5c6a8e-8f0e-4f6c-9b9a-1f0d3c2e4a11", Namespace: "default"}},
		{ObjectMeta: metav1.ObjectMeta{UID: "ffffffff-ffff-ffff-ffff-ffffffffffff", Namespace: "kube-system"}}}
	f.Fuzz(func(t *testing.T, expr string) {
		sel, err := sharding.Parse(expr)
		if err != nil {
			return
		}
		ours, err := NewShardSelector(sel)
		if err != nil {
			t.Fatalf("%q: parsed by kube-apiserver's parser, refused here: %v", expr, err)
		}
		for _, o := range objs {
			want, err := sel.Matches(o)
			if err != nil {
				t.Fatal(err)
			}
			if ours == nil {
				if !want {
					t.Fatalf("%q: nil selector, apimachinery's does not match %v", expr, o.ObjectMeta)
				}
				continue
			}
			if got := ours.Matches(o); got != want {
				t.Fatalf("%q on %v: %v, apimachinery's %v", expr, o.ObjectMeta, got, want)
			}
		}
	})
}
