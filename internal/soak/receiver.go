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
// deleted objects removed). While failing it answers 503 and records
// nothing, so the gateway must retry.
type receiver struct {
	keys     [][]byte
	counters *counters
	failing  atomic.Bool

	mu    sync.Mutex // guards state
	state map[string]string
}

func newReceiver(keys [][]byte, c *counters) *receiver {
	return &receiver{keys: keys, counters: c, state: map[string]string{}}
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
				Name            string `json:"name"`
				Namespace       string `json:"namespace"`
				ResourceVersion string `json:"resourceVersion"`
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
	switch ev.Type {
	case "DELETED":
		delete(r.state, key(m.Namespace, m.Name))
	default:
		r.state[key(m.Namespace, m.Name)] = m.ResourceVersion
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
