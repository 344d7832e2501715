package soak

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"kubegate/internal/webhook"
)

// receiver is the webhook receiver: it verifies each request's signature
// and keeps the last state per object (namespace/name → resourceVersion,
// deleted objects removed), reconciling resets as docs/webhooks.md says.
// While failing it answers 503 and records nothing, so the gateway must
// retry.
type receiver struct {
	keys     [][]byte
	counters *counters
	failing  atomic.Bool

	mu    sync.Mutex // guards state and stale
	state map[string]string
	// stale holds the objects not seen since a reset; its end removes
	// them. The webhook watches one resource, so a reset covers all.
	stale map[string]bool
}

func newReceiver(keys [][]byte, c *counters) *receiver {
	return &receiver{keys: keys, counters: c, state: map[string]string{}, stale: map[string]bool{}}
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 8<<20))
	if err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	if r.failing.Load() {
		r.counters.webhookFailed.Add(1)
		http.Error(w, "receiver is failing on purpose", http.StatusServiceUnavailable)
		return
	}
	if err := webhook.Verify(r.keys, req.Header, body, 5*time.Minute); err != nil {
		r.counters.webhookBadSig.Add(1)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var ev struct {
		Type   string `json:"type"`
		Object struct {
			Metadata struct {
				Name            string            `json:"name"`
				Namespace       string            `json:"namespace"`
				ResourceVersion string            `json:"resourceVersion"`
				Annotations     map[string]string `json:"annotations"`
			} `json:"metadata"`
		} `json:"object"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		r.counters.protocolErrors.Add(1)
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	m := ev.Object.Metadata
	r.mu.Lock()
	k := key(m.Namespace, m.Name)
	switch {
	case ev.Type == "BOOKMARK" && m.Annotations["kubegate.io/reset"] == "true":
		for k := range r.state {
			r.stale[k] = true
		}
	case ev.Type == "BOOKMARK" && m.Annotations["k8s.io/initial-events-end"] == "true":
		for k := range r.stale {
			delete(r.state, k)
		}
		clear(r.stale)
	case ev.Type == "DELETED":
		delete(r.state, k)
		delete(r.stale, k)
	default:
		r.state[k] = m.ResourceVersion
		delete(r.stale, k)
	}
	r.mu.Unlock()
	r.counters.webhookOK.Add(1)
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) view() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.state)
}
