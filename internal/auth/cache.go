package auth

import (
	"time"

	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/utils/clock"
)

// expiringCache is a typed view of apimachinery's LRUExpireCache, the
// cache kube-apiserver's own token and webhook authorizer caches use:
// entries expire after their TTL, and when the cache is full an insert
// drops the least recently used entry (the cache only saves apiserver
// calls, so losing an entry costs one review, never correctness). It is
// safe for concurrent use.
type expiringCache[V any] struct {
	lru *cache.LRUExpireCache
}

func newExpiringCache[V any](c clock.PassiveClock, max int) *expiringCache[V] {
	return &expiringCache[V]{lru: cache.NewLRUExpireCacheWithClock(max, c)}
}

// get returns the unexpired value for key.
func (c *expiringCache[V]) get(key string) (V, bool) {
	v, ok := c.lru.Get(key)
	if !ok {
		var zero V
		return zero, false
	}
	return v.(V), true
}

// set stores v under key for ttl: get finds it until ttl has passed, and
// not at that instant, so that "revoked access shows within AllowTTL"
// holds exactly (on a fake clock too, where a re-check lands right on the
// TTL). LRUExpireCache keeps an entry through its expiry instant, hence
// the nanosecond less. A ttl <= 0 stores nothing.
func (c *expiringCache[V]) set(key string, v V, ttl time.Duration) {
	if ttl > 0 {
		c.lru.Add(key, v, ttl-time.Nanosecond)
	}
}

func (c *expiringCache[V]) delete(key string) { c.lru.Remove(key) }
