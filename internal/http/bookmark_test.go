package httpapi

import (
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"kubegate/internal/testenv"
)

// TestWatchBookmarkCarriesProgress: a filtered watch that matches nothing
// still gets bookmarks at the resource's progress, not at the version it
// started from, so it can resume after changes it was never sent.
func TestWatchBookmarkCarriesProgress(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	createConfigMaps(t, env.Client, ns, nil, "quiet")
	fc := clocktesting.NewFakeClock(time.Now())
	gw := startGateway(t, func(o *Options) { o.bookmarkClock = fc })
	base := gw + "/api/v1/namespaces/" + ns + "/configmaps"
	l := getList(t, base)
	listRV, _ := strconv.ParseUint(l.Metadata.ResourceVersion, 10, 64)

	quiet, _ := startWatch(t, base+"?watch=1&allowWatchBookmarks=true&fieldSelector=metadata.name%3Dquiet&resourceVersion="+l.Metadata.ResourceVersion)
	all, _ := startWatch(t, base+"?watch=1&resourceVersion="+l.Metadata.ResourceVersion)
	createConfigMaps(t, env.Client, ns, nil, "other1", "other2")
	// Once the unfiltered watch has the last change, so has the cache.
	last := all.until("ADDED other2", named("ADDED", "other2"))
	lastRV, _ := strconv.ParseUint(last.meta().ResourceVersion, 10, 64)

	fc.Step(bookmarkInterval)
	e := quiet.until("a bookmark", func(e watchEvent) bool { return e.Type == "BOOKMARK" })
	rv, _ := strconv.ParseUint(e.meta().ResourceVersion, 10, 64)
	if rv < lastRV {
		t.Fatalf("bookmark at %d; the resource had reached %d (the watch started at %d)", rv, lastRV, listRV)
	}
	// Resuming from the bookmark misses nothing after it.
	resumed, _ := startWatch(t, base+"?watch=1&fieldSelector=metadata.name%3Dquiet&resourceVersion="+e.meta().ResourceVersion)
	if err := env.Client.CoreV1().ConfigMaps(ns).Delete(t.Context(), "quiet", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	resumed.until("DELETED quiet", named("DELETED", "quiet"))
}
