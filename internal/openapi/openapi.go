// Package openapi serves the apiserver's OpenAPI documents (/openapi/v2,
// /openapi/v3 and the documents of every group version below it) from a
// cache, so that kubectl explain, client-side validation and other
// clients of the schemas work against the gateway.
//
// Documents come from the apiserver, fetched with the gateway's own
// identity on the first request for them and kept, within a bound on
// their bytes, least recently used first out. A document is served from
// the cache for RefreshInterval; after that the next request asks the
// apiserver again with If-None-Match and its ETag, and the apiserver's
// 304 keeps it, so a CRD that changes the schemas shows in the next
// answers without the cost of fetching what did not change. Documents of
// /openapi/v3 asked for by hash (?hash=, the URLs the /openapi/v3 index
// lists) follow the same rule: a hash that is the current document's
// gets it, with kube-apiserver's headers for an immutable answer; any
// other hash is redirected to the current one, as kube-apiserver
// redirects it, so that a client whose index is old still reads the
// current schema.
//
// The answers are kube-apiserver's, to the header: Content-Type, ETag,
// Last-Modified, 304 to If-None-Match, 301 to the current hash for a
// stale one, Cache-Control, and 406 to an Accept header it cannot serve.
package openapi

import (
	"bytes"
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/munnerz/goautoneg"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"kubegate/internal/apistatus"
)

// Options configures New.
type Options struct {
	// Config reaches the apiserver, with the gateway's own identity.
	// Required.
	Config *rest.Config
	// MaxBytes bounds the bytes of the documents kept. A document larger
	// than the bound is served but not kept. Default 64 MiB (a cluster's
	// /openapi/v2 is a few MiB in JSON, as much again in protobuf).
	MaxBytes int64
	// RefreshInterval is how long a document is served before the
	// apiserver is asked whether it changed. Default 5s, the refresh of
	// the gateway's discovery, so that a new CRD's schema shows no later
	// than its resource does.
	RefreshInterval time.Duration
	// FetchTimeout bounds one request to the apiserver. Default 60s.
	FetchTimeout time.Duration
	// Logger. Default: no logging.
	Logger *zap.Logger
	// Registerer receives the cache's metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// Clock. Default: the real clock.
	Clock clock.PassiveClock
}

func (o Options) withDefaults() (Options, error) {
	if o.Config == nil {
		return o, errors.New("openapi: Options.Config is required")
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = 64 << 20
	}
	if o.RefreshInterval <= 0 {
		o.RefreshInterval = 5 * time.Second
	}
	if o.FetchTimeout <= 0 {
		o.FetchTimeout = 60 * time.Second
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o, nil
}

// Handler serves /openapi/v2, /openapi/v3 and /openapi/v3/{path}. It has
// no goroutine of its own: fetches run on the goroutine of a request
// that needs them, and concurrent requests for the same document wait
// for one fetch.
type Handler struct {
	opts    Options
	log     *zap.Logger
	client  *http.Client
	base    *url.URL
	metrics *metrics
	flight  singleflight.Group

	// mu guards entries, lru and bytes.
	mu      sync.Mutex
	entries map[key]*entry
	lru     *list.List // of *entry, most recently used first
	bytes   int64
}

// New builds a Handler. It makes no request until one is served.
func New(opts Options) (*Handler, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	client, err := rest.HTTPClientFor(o.Config)
	if err != nil {
		return nil, fmt.Errorf("openapi: client: %w", err)
	}
	base, _, err := rest.DefaultServerUrlFor(o.Config)
	if err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	return &Handler{opts: o, log: o.Logger, client: client, base: base, metrics: newMetrics(o.Registerer),
		entries: map[key]*entry{}, lru: list.New()}, nil
}

// A document kind, by path.
type kind int

const (
	v2      kind = iota // /openapi/v2
	v3Index             // /openapi/v3
	v3Doc               // /openapi/v3/{path}
)

// representation is one form of a document: what the gateway asks the
// apiserver for, and the Content-Type kube-apiserver answers it with.
type representation struct {
	name   string // "json", "protobuf" or "index"
	accept string
}

// offers are, per kind, the media types kube-openapi's handlers accept,
// in their order (which decides for */*), and the form each is served
// in: both protobuf names get the same bytes.
var offers = map[kind][]struct {
	mediaType string
	rep       representation
}{
	v2: {
		{"application/json", representation{"json", "application/json"}},
		{"application/com.github.proto-openapi.spec.v2@v1.0+protobuf", representation{"protobuf", "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"}},
		{"application/com.github.proto-openapi.spec.v2.v1.0+protobuf", representation{"protobuf", "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"}},
	},
	v3Doc: {
		{"application/json", representation{"json", "application/json"}},
		{"application/com.github.proto-openapi.spec.v3.v1.0+protobuf", representation{"protobuf", "application/com.github.proto-openapi.spec.v3.v1.0+protobuf"}},
		{"application/com.github.proto-openapi.spec.v3@v1.0+protobuf", representation{"protobuf", "application/com.github.proto-openapi.spec.v3.v1.0+protobuf"}},
	},
}

// negotiate picks the form the Accept header asks for, as kube-openapi
// does: the first of its offers that the best clause (by q, then
// specificity) matches. The /openapi/v3 index has one form, whatever the
// header says.
func negotiate(k kind, accept string) (representation, bool) {
	if k == v3Index {
		return representation{"index", "application/json"}, true
	}
	if accept == "" {
		accept = "*/*"
	}
	for _, c := range goautoneg.ParseAccept(accept) {
		for _, o := range offers[k] {
			t, sub, _ := strings.Cut(o.mediaType, "/")
			if (c.Type == t || c.Type == "*") && (c.SubType == sub || c.SubType == "*") {
				return o.rep, true
			}
		}
	}
	return representation{}, false
}

// key names one cached document in one form.
type key struct {
	path string
	rep  string
}

// entry is a document as the apiserver last answered it. Its fields but
// validated are immutable; validated is guarded by Handler.mu.
type entry struct {
	key          key
	body         []byte
	contentType  string
	etag         string // quoted, as the apiserver sent it; may be ""
	lastModified time.Time
	validated    time.Time
	elem         *list.Element // nil when not kept
}

// hash is the entry's ETag without its quotes: what ?hash= names.
func (e *entry) hash() string { return strings.Trim(e.etag, `"`) }

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		apistatus.Write(w, apistatus.New(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
			r.Method+" is not allowed: the OpenAPI documents are read-only"))
		return
	}
	var k kind
	switch p := r.URL.Path; {
	case p == "/openapi/v2":
		k = v2
	case p == "/openapi/v3":
		k = v3Index
	case strings.HasPrefix(p, "/openapi/v3/") && len(p) > len("/openapi/v3/"):
		k = v3Doc
	default:
		apistatus.Write(w, apistatus.New(http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource"))
		return
	}
	w.Header().Add("Vary", "Accept")
	rep, ok := negotiate(k, r.Header.Get("Accept"))
	if !ok {
		apistatus.Write(w, apistatus.New(http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable,
			"only application/json and the OpenAPI protobuf media types are served here"))
		return
	}
	hash := ""
	if k == v3Doc {
		hash = r.URL.Query().Get("hash")
	}
	e, err := h.document(r.Context(), key{r.URL.Path, rep.name}, rep)
	if err != nil {
		apistatus.WriteError(w, err)
		return
	}
	w.Header().Set("Content-Type", e.contentType)
	if e.etag != "" {
		w.Header().Set("ETag", e.etag)
	}
	if hash != "" {
		if hash != e.hash() {
			// As kube-apiserver: the current document's URL.
			http.Redirect(w, r, r.URL.Path+"?hash="+url.QueryEscape(e.hash()), http.StatusMovedPermanently)
			return
		}
		w.Header().Set("Cache-Control", "public, immutable")
		w.Header().Set("Expires", h.opts.Clock.Now().AddDate(1, 0, 0).UTC().Format(http.TimeFormat))
	} else {
		// kube-apiserver's for every answer but these.
		w.Header().Set("Cache-Control", "no-cache, private")
	}
	// Range, If-None-Match (against the ETag set above),
	// If-Modified-Since, HEAD and Content-Length, as kube-openapi's
	// handlers answer them.
	http.ServeContent(w, r, "", e.lastModified, bytes.NewReader(e.body))
}

// document returns the document k names, from the cache while it is
// fresh (validated within RefreshInterval); otherwise the apiserver is
// asked (one request for all who wait on the same document).
func (h *Handler) document(ctx context.Context, k key, rep representation) (*entry, error) {
	now := h.opts.Clock.Now()
	h.mu.Lock()
	e := h.entries[k]
	if e != nil && now.Sub(e.validated) < h.opts.RefreshInterval {
		h.lru.MoveToFront(e.elem)
		h.mu.Unlock()
		h.metrics.requests.WithLabelValues("cached").Inc()
		return e, nil
	}
	h.mu.Unlock()
	for {
		v, err, _ := h.flight.Do(k.path+"\x00"+k.rep, func() (any, error) { return h.fetch(ctx, k, rep, e) })
		if err == nil {
			return v.(*entry), nil
		}
		if ctx.Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) && !errors.Is(err, errFetchTimeout) {
			// The fetch was made for a request that has ended; this one
			// makes its own.
			continue
		}
		return nil, err
	}
}

// errFetchTimeout is the cause of a fetch that took longer than
// Options.FetchTimeout.
var errFetchTimeout = errors.New("the apiserver did not answer in time")

// fetch asks the apiserver for k, with old's ETag if there is one: 304
// keeps old; 200 replaces it. When the apiserver cannot answer, old is
// served as it is (and logged), as kube-apiserver serves its last
// document when it cannot build a new one.
//
// It runs on the goroutine of the request ctx belongs to (the first of
// those that wait for it), so it ends with that request, and with the
// server's shutdown: those that waited for it then fetch again.
func (h *Handler) fetch(ctx context.Context, k key, rep representation, old *entry) (*entry, error) {
	reqCtx := ctx
	ctx, cancel := context.WithTimeoutCause(ctx, h.opts.FetchTimeout, errFetchTimeout)
	defer cancel()
	u := *h.base
	u.Path = strings.TrimSuffix(u.Path, "/") + k.path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", rep.accept)
	if old != nil && old.etag != "" {
		req.Header.Set("If-None-Match", old.etag)
	}
	resp, err := h.client.Do(req)
	if err == nil {
		defer resp.Body.Close()
	}
	switch {
	case err == nil && resp.StatusCode == http.StatusNotModified && old != nil:
		h.mu.Lock()
		old.validated = h.opts.Clock.Now()
		h.mu.Unlock()
		h.metrics.requests.WithLabelValues("revalidated").Inc()
		return old, nil
	case err == nil && resp.StatusCode == http.StatusOK:
		body, rerr := io.ReadAll(resp.Body)
		if rerr != nil {
			err = rerr
			break
		}
		e := &entry{key: k, body: body, contentType: resp.Header.Get("Content-Type"), etag: resp.Header.Get("ETag"),
			validated: h.opts.Clock.Now()}
		if lm, perr := http.ParseTime(resp.Header.Get("Last-Modified")); perr == nil {
			e.lastModified = lm
		}
		if e.contentType == "" {
			e.contentType = rep.accept
		}
		h.keep(e)
		h.metrics.requests.WithLabelValues("fetched").Inc()
		return e, nil
	case err == nil && resp.StatusCode == http.StatusNotFound:
		// Not cached: the path may be served later (a new group).
		h.drop(k)
		h.metrics.requests.WithLabelValues("not_found").Inc()
		return nil, &apierrors.StatusError{ErrStatus: *apistatus.New(http.StatusNotFound, metav1.StatusReasonNotFound,
			"the server could not find the requested resource")}
	case err == nil:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		err = fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(b))
	}
	if reqCtx.Err() != nil {
		return nil, reqCtx.Err() // the request ended: no answer to give
	}
	if context.Cause(ctx) == errFetchTimeout {
		err = fmt.Errorf("%w: %w", errFetchTimeout, err)
	}
	if old != nil {
		h.log.Warn("the apiserver's OpenAPI document could not be read again; serving the last one", zap.String("path", k.path), zap.Error(err))
		h.metrics.requests.WithLabelValues("stale").Inc()
		return old, nil
	}
	h.metrics.requests.WithLabelValues("error").Inc()
	return nil, &fetchError{path: k.path, err: err}
}

// fetchError is the answer when the apiserver's document cannot be read
// and none is cached: 503, as kube-apiserver answers when it has none.
type fetchError struct {
	path string
	err  error
}

func (e *fetchError) Error() string {
	return fmt.Sprintf("the apiserver's OpenAPI document %s could not be read: %v", e.path, e.err)
}

func (e *fetchError) Unwrap() error { return e.err }

func (e *fetchError) Status() metav1.Status {
	return *apistatus.New(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, e.Error())
}

// keep puts e in the cache in place of the entry of its key, then drops
// the least recently used entries until the bytes are within the bound.
// An entry larger than the bound is not kept.
func (h *Handler) keep(e *entry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropLocked(e.key)
	if int64(len(e.body)) > h.opts.MaxBytes {
		return
	}
	e.elem = h.lru.PushFront(e)
	h.entries[e.key] = e
	h.bytes += int64(len(e.body))
	for h.bytes > h.opts.MaxBytes {
		h.dropLocked(h.lru.Back().Value.(*entry).key)
	}
	h.metrics.bytes.Set(float64(h.bytes))
	h.metrics.documents.Set(float64(len(h.entries)))
}

func (h *Handler) drop(k key) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropLocked(k)
	h.metrics.bytes.Set(float64(h.bytes))
	h.metrics.documents.Set(float64(len(h.entries)))
}

// dropLocked removes k's entry, if any. Caller must hold h.mu.
func (h *Handler) dropLocked(k key) {
	e := h.entries[k]
	if e == nil {
		return
	}
	h.lru.Remove(e.elem)
	delete(h.entries, k)
	h.bytes -= int64(len(e.body))
}

// Bytes returns the bytes of the documents kept.
func (h *Handler) Bytes() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bytes
}

type metrics struct {
	requests  *prometheus.CounterVec
	bytes     prometheus.Gauge
	documents prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "kubegate", Subsystem: "openapi",
			Name: "requests_total", Help: "OpenAPI document requests by how they were answered: cached, revalidated (the apiserver's 304), " +
				"fetched, stale (the apiserver could not be read; the last document served), not_found, error."}, []string{"result"}),
		bytes: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "kubegate", Subsystem: "openapi",
			Name: "cache_bytes", Help: "Bytes of the OpenAPI documents kept."}),
		documents: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "kubegate", Subsystem: "openapi",
			Name: "cache_documents", Help: "OpenAPI documents kept (one per path and form)."}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.bytes, m.documents)
	}
	return m
}
