package informer

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"kubegate/internal/testenv"
)

// TestStaleSecondsTwoVersions: two versions of one resource, cached side
// by side because clients asked for both, export one
// kubegate_cache_stale_seconds series, like the other per-resource
// metrics, instead of two with the same labels, which fail every scrape.
func TestStaleSecondsTwoVersions(t *testing.T) {
	env := testenv.Get(t)
	reg := prometheus.NewRegistry()
	m := startManager(t, env.Config, func(o *Options) { o.Registerer = reg })
	syncedResource(t, m, "horizontalpodautoscalers.v1.autoscaling")
	syncedResource(t, m, "horizontalpodautoscalers.v2.autoscaling")
	if _, err := reg.Gather(); err != nil {
		t.Fatalf("gather: %v", err)
	}
	n, err := testutil.GatherAndCount(reg, "kubegate_cache_stale_seconds")
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d kubegate_cache_stale_seconds series for one resource in two versions, want 1", n)
	}
}
