package httpapi

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubegate/internal/testenv"
)

// writeSizes records the size of every Write on a watch's response.
type writeSizes struct {
	http.ResponseWriter
	mu    *sync.Mutex
	sizes *[]int
}

func (w writeSizes) Write(p []byte) (int, error) {
	w.mu.Lock()
	*w.sizes = append(*w.sizes, len(p))
	w.mu.Unlock()
	return w.ResponseWriter.Write(p)
}

func (w writeSizes) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestWatchListStreamsInChunks: a watch-list's initial events are written
// as they are encoded, in bounded chunks, rather than encoded whole into
// one buffer per client first.
func TestWatchListStreamsInChunks(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	value := strings.Repeat("x", 4<<10)
	const n = 100
	for i := range n {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "big-"}, Data: map[string]string{"v": value}}
		if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("configmap %d: %v", i, err)
		}
	}
	var mu sync.Mutex
	var sizes []int
	gw := startGateway(t, func(o *Options) {
		o.watchWriter = func(w http.ResponseWriter) http.ResponseWriter { return writeSizes{w, &mu, &sizes} }
	})
	w, _ := startWatch(t, gw+"/api/v1/namespaces/"+ns+"/configmaps?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan")
	added := 0
	w.until("the initial-events-end bookmark", func(e watchEvent) bool {
		if e.Type == "ADDED" {
			added++
		}
		return e.Type == "BOOKMARK"
	})
	if added != n {
		t.Fatalf("%d initial events, want %d", added, n)
	}
	mu.Lock()
	defer mu.Unlock()
	largest, total := 0, 0
	for _, s := range sizes {
		largest = max(largest, s)
		total += s
	}
	if total < n*len(value) {
		t.Fatalf("%d bytes written for %d objects of %d bytes", total, n, len(value))
	}
	if limit := watchFlushBytes + 8<<10; largest > limit {
		t.Fatalf("a write of %d bytes (of %d in %d writes); want each at most %d", largest, total, len(sizes), limit)
	}
}
