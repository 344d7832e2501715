package httpapi

import (
	"net/url"

	"k8s.io/apiserver/pkg/sharding"

	"kubegate/internal/informer"
)

// maxShardSelectorLen bounds a shardSelector. A selector of 64 ranges is
// under 5 KiB; the query's own bound (8 KiB) stops anything much larger.
const maxShardSelectorLen = 4096

// parseShardSelector reads the shardSelector of a list or watch
// (KEP-5866) into f: the objects of one shard, by the 64-bit FNV-1a hash
// of their UID or namespace. It is parsed by kube-apiserver's own parser,
// so that the gateway accepts exactly the selectors kube-apiserver
// accepts (with the ShardedListAndWatch feature gate; the gateway serves
// them from its cache whatever the apiserver's gates). An empty one
// selects everything, as kube-apiserver reads it. A selector
// kube-apiserver refuses is a 400 with its message; kube-apiserver
// itself answers 500 for one (v1.37).
func parseShardSelector(q url.Values, f *informer.Filter) error {
	raw := q.Get("shardSelector")
	if raw == "" {
		return nil
	}
	if len(raw) > maxShardSelectorLen {
		return badRequestError("invalid shard selector: longer than %d bytes", maxShardSelectorLen)
	}
	sel, err := sharding.Parse(raw)
	if err != nil {
		return badRequestError("invalid shard selector: %v", err)
	}
	s, err := informer.NewShardSelector(sel)
	if err != nil {
		return badRequestError("invalid shard selector: %v", err)
	}
	f.Shard = s
	return nil
}

// shardedSortedList is the answer to a sorted list (sort, order or
// filter) with a shardSelector: the live windows that serve sorted lists
// do not shard.
func shardedSortedList() error {
	return badRequestError("shardSelector cannot be combined with sort, order or filter: list the shard without them, " +
		"or sort the whole collection")
}

// shardInfo is the metadata.shardInfo.selector a list answer echoes, as
// kube-apiserver echoes it in lists of objects (not in Tables or
// PartialObjectMetadataLists, which it builds without it): "" when the
// list is not sharded.
func shardInfo(f *informer.Filter) string {
	if f.Shard == nil {
		return ""
	}
	return f.Shard.String()
}
