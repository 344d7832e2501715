package informer

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/sharding"
)

// ShardSelector selects the objects of one shard of a sharded list or
// watch (KEP-5866, ListOptions.ShardSelector): those whose field (the
// UID or the namespace), hashed with 64-bit FNV-1a, falls in one of its
// ranges [start, end). Every object has one UID and one namespace for
// its whole life, so an object never moves from one shard to another.
//
// It matches as apimachinery's sharding.Selector does, without
// formatting each hash as a string: it is checked once per object per
// change for every sharded listener.
type ShardSelector struct {
	// text is the selector in the canonical form kube-apiserver echoes in
	// a list's metadata.shardInfo.selector.
	text string
	// namespace: the field is the namespace; else the UID.
	namespace bool
	ranges    []hashRange
}

// hashRange is [start, end) over the 64-bit hash space, end being 2^64
// when all is set.
type hashRange struct {
	start, end uint64
	all        bool // end is 2^64
}

// NewShardSelector compiles a selector parsed by kube-apiserver's parser
// (k8s.io/apiserver/pkg/sharding.Parse), which checks its syntax and
// bounds; nil for one that selects everything.
func NewShardSelector(sel sharding.Selector) (*ShardSelector, error) {
	if sel == nil || sel.Empty() {
		return nil, nil
	}
	reqs := sel.Requirements()
	s := &ShardSelector{text: sel.String()}
	for i, r := range reqs {
		switch r.Key {
		case "object.metadata.uid":
		case "object.metadata.namespace":
			s.namespace = true
		default:
			return nil, fmt.Errorf("unsupported field path %q; supported: object.metadata.uid, object.metadata.namespace", r.Key)
		}
		if i > 0 && r.Key != reqs[0].Key {
			return nil, fmt.Errorf("all shard ranges must use the same field, got %q and %q", reqs[0].Key, r.Key)
		}
		start, startAll, err := parseBound(r.Start)
		if err != nil || startAll {
			return nil, fmt.Errorf("shard range start %q: not a 64-bit hash", r.Start)
		}
		end, endAll, err := parseBound(r.End)
		if err != nil {
			return nil, fmt.Errorf("shard range end %q: not a hash bound", r.End)
		}
		s.ranges = append(s.ranges, hashRange{start: start, end: end, all: endAll})
	}
	return s, nil
}

// parseBound reads a 0x-prefixed hex bound: a 64-bit value, or 2^64
// (all).
func parseBound(s string) (v uint64, all bool, err error) {
	hex, ok := strings.CutPrefix(s, "0x")
	if !ok {
		return 0, false, fmt.Errorf("no 0x prefix")
	}
	if v, err := strconv.ParseUint(hex, 16, 64); err == nil {
		return v, false, nil
	}
	n, ok := new(big.Int).SetString(hex, 16)
	if !ok || n.Cmp(new(big.Int).Lsh(big.NewInt(1), 64)) != 0 {
		return 0, false, fmt.Errorf("out of range")
	}
	return 0, true, nil
}

// String is the selector as kube-apiserver echoes it in
// metadata.shardInfo.selector.
func (s *ShardSelector) String() string { return s.text }

// Matches reports whether o is in the shard.
func (s *ShardSelector) Matches(o *Object) bool {
	field := string(o.UID)
	if s.namespace {
		field = o.Namespace
	}
	h := fnv1a64(field)
	for _, r := range s.ranges {
		if h >= r.start && (r.all || h < r.end) {
			return true
		}
	}
	return false
}

// fnv1a64 is hash/fnv's New64a over s, without an allocation.
func fnv1a64(s string) uint64 {
	const (
		offset64 = 14695981039346656037
		prime64  = 1099511628211
	)
	h := uint64(offset64)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= prime64
	}
	return h
}
