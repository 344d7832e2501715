package soak

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"kubegate/internal/webhook"
)

// The receiver reconciles a reset as docs/webhooks.md says: what the
// snapshot between the reset and its end leaves out is gone.
func TestReceiverReconcilesAReset(t *testing.T) {
	keys := [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
	r := newReceiver(keys, &counters{})
	for i, body := range []string{
		`{"type":"ADDED","object":{"metadata":{"namespace":"a","name":"kept","resourceVersion":"1"}}}`,
		`{"type":"ADDED","object":{"metadata":{"namespace":"a","name":"gone","resourceVersion":"2"}}}`,
		`{"type":"BOOKMARK","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"annotations":{"kubegate.io/reset":"true"}}}}`,
		`{"type":"ADDED","object":{"metadata":{"namespace":"a","name":"kept","resourceVersion":"5"}}}`,
		`{"type":"ADDED","object":{"metadata":{"namespace":"a","name":"new","resourceVersion":"6"}}}`,
		`{"type":"BOOKMARK","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"resourceVersion":"7","annotations":{"k8s.io/initial-events-end":"true"}}}}`,
	} {
		id, ts := "msg_"+strconv.Itoa(i), time.Now().Unix()
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		req.Header.Set(webhook.HeaderID, id)
		req.Header.Set(webhook.HeaderTimestamp, strconv.FormatInt(ts, 10))
		req.Header.Set(webhook.HeaderSignature, webhook.Sign(keys, id, ts, []byte(body)))
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		if w.Code != http.StatusNoContent {
			t.Fatalf("%s: status %d", body, w.Code)
		}
	}
	if want := map[string]string{"a/kept": "5", "a/new": "6"}; !maps.Equal(r.view(), want) {
		t.Fatalf("receiver holds %v, want %v", r.view(), want)
	}
}
