package auth

import (
	"fmt"
	"testing"
	"time"
)

func TestExpiringCacheBound(t *testing.T) {
	c := newExpiringCache[int](fakeClock(), 100)
	for i := range 1000 {
		c.set(fmt.Sprint(i), i, time.Minute)
		if i == 500 {
			// Read the oldest entry still held: it becomes the most
			// recently used and outlives the next 99 inserts.
			if _, ok := c.get("401"); !ok {
				t.Fatal("entry 401 evicted among the 100 newest")
			}
		}
		if n := len(c.lru.Keys()); n > 100 {
			t.Fatalf("%d entries after %d inserts, bound 100", n, i+1)
		}
	}
	if v, ok := c.get("999"); !ok || v != 999 {
		t.Fatal("the newest entry was evicted")
	}
	if _, ok := c.get("899"); ok {
		t.Fatal("entry 899 kept: the least recently used is not the one dropped")
	}
}

func TestExpiringCacheTTL(t *testing.T) {
	clk := fakeClock()
	c := newExpiringCache[*User](clk, 10)
	c.set("user", &User{Name: "alice"}, time.Minute)
	c.set("rejected", nil, 2*time.Minute) // a nil value is a cached answer
	if u, ok := c.get("user"); !ok || u.Name != "alice" {
		t.Fatalf("get(user) = %v, %v", u, ok)
	}
	clk.Step(time.Minute - time.Nanosecond)
	if _, ok := c.get("user"); !ok {
		t.Fatal("entry expired before its TTL")
	}
	clk.Step(time.Nanosecond)
	if _, ok := c.get("user"); ok {
		t.Fatal("entry returned once its TTL has passed")
	}
	if u, ok := c.get("rejected"); !ok || u != nil {
		t.Fatalf("get(rejected) = %v, %v; want a cached nil", u, ok)
	}
	c.delete("rejected")
	if _, ok := c.get("rejected"); ok {
		t.Fatal("deleted entry returned")
	}
	c.set("x", &User{}, 0)
	if _, ok := c.get("x"); ok {
		t.Fatal("zero TTL cached")
	}
}
