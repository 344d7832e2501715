package auth

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// ttlCache maps keys to values that expire. It holds at most max entries:
// when full, an insert first drops expired entries and then, if still
// full, an arbitrary tenth of the rest (the cache only saves apiserver
// calls, so losing an entry costs one review, never correctness).
type ttlCache[V any] struct {
	clock clock.PassiveClock
	max   int

	// mu guards entries.
	mu      sync.Mutex
	entries map[string]ttlEntry[V]
}

type ttlEntry[V any] struct {
	value   V
	expires time.Time
}

func newTTLCache[V any](c clock.PassiveClock, max int) *ttlCache[V] {
	return &ttlCache[V]{clock: c, max: max, entries: make(map[string]ttlEntry[V])}
}

// get returns the unexpired value for key.
func (c *ttlCache[V]) get(key string) (V, bool) {
	now := c.clock.Now()
	c.mu.Lock()
	e, ok := c.entries[key]
	if ok && !now.Before(e.expires) {
		delete(c.entries, key)
		ok = false
	}
	c.mu.Unlock()
	if !ok {
		var zero V
		return zero, false
	}
	return e.value, true
}

// set stores v under key for ttl. A ttl <= 0 stores nothing.
func (c *ttlCache[V]) set(key string, v V, ttl time.Duration) {
	if ttl <= 0 {
		return
	}
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[key]; !ok && len(c.entries) >= c.max {
		c.evictLocked(now)
	}
	c.entries[key] = ttlEntry[V]{value: v, expires: now.Add(ttl)}
}

// evictLocked makes room for one entry. Caller must hold mu.
func (c *ttlCache[V]) evictLocked(now time.Time) {
	for k, e := range c.entries {
		if !now.Before(e.expires) {
			delete(c.entries, k)
		}
	}
	drop := len(c.entries) - c.max + 1
	if drop <= 0 {
		return
	}
	drop = max(drop, c.max/10)
	for k := range c.entries {
		if drop == 0 {
			break
		}
		delete(c.entries, k)
		drop--
	}
}

func (c *ttlCache[V]) delete(key string) {
	c.mu.Lock()
	delete(c.entries, key)
	c.mu.Unlock()
}

func (c *ttlCache[V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
