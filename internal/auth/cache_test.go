package auth

import (
	"fmt"
	"testing"
	"time"
)

func TestTTLCacheBound(t *testing.T) {
	clk := fakeClock()
	c := newTTLCache[int](clk, 100)
	for i := range 1000 {
		c.set(fmt.Sprint(i), i, time.Minute)
		if c.len() > 100 {
			t.Fatalf("%d entries after %d inserts, bound 100", c.len(), i+1)
		}
	}
	if v, ok := c.get("999"); !ok || v != 999 {
		t.Fatal("the newest entry was evicted")
	}
	clk.Step(time.Minute)
	if _, ok := c.get("999"); ok {
		t.Fatal("expired entry returned")
	}
	c.set("x", 1, 0)
	if _, ok := c.get("x"); ok {
		t.Fatal("zero TTL cached")
	}
}
