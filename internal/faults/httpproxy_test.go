package faults

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
)

// Kinds of GET request for a collection, as a reflector sends them.
const (
	kindList      = "list"      // a plain LIST
	kindWatchList = "watchlist" // a WATCH with sendInitialEvents=true (client-go's streaming list)
	kindWatch     = "watch"     // a WATCH resuming from a resourceVersion
)

// httpFault is what the proxy answers instead of forwarding.
type httpFault struct {
	code       int    // 404, 429 or 5xx
	retryAfter string // Retry-After header; empty for none
}

// hit is one request for the proxy's collection.
type hit struct {
	at      time.Time
	kind    string
	rv      string // the resourceVersion asked for
	faulted bool   // answered with the fault instead of forwarded
}

// faultProxy is an HTTPS reverse proxy to the control plane's apiserver.
// It terminates TLS with its own certificate and forwards with the admin
// credentials. GET requests for one collection path (for example
// /api/v1/configmaps, what a cluster-wide informer lists and watches) are
// recorded, and answered with a fault while one is set; setting a fault
// also cuts the watch streams it is forwarding for that path, so the
// informer has to come back through the fault.
//
// Handlers run on the httptest server's goroutines; close (a test
// cleanup) waits for them.
type faultProxy struct {
	srv  *httptest.Server
	path string

	// mu guards fault, expire, hits and streams.
	mu    sync.Mutex
	fault *httpFault
	// expire is how many more watch resumes to answer with 410 Expired;
	// a list clears it.
	expire  int
	hits    []hit
	streams map[*http.Request]context.CancelFunc
}

func newFaultProxy(t *testing.T, path string) *faultProxy {
	t.Helper()
	admin := controlPlane(t).AdminConfig()
	upstream, err := url.Parse(admin.Host)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(admin)
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{path: path, streams: map[*http.Request]context.CancelFunc{}}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(upstream) },
		Transport:     transport,
		FlushInterval: -1,                         // watch events go out as they come
		ErrorLog:      log.New(io.Discard, "", 0), // cut streams are expected
	}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != p.path {
			rp.ServeHTTP(w, r)
			return
		}
		kind := requestKind(r)
		p.mu.Lock()
		f := p.fault
		expire := kind == kindWatch && f == nil && p.expire > 0
		if expire {
			p.expire--
		} else if kind != kindWatch {
			p.expire = 0 // the reflector relists anyway
		}
		p.hits = append(p.hits, hit{at: time.Now(), kind: kind, rv: r.URL.Query().Get("resourceVersion"), faulted: f != nil || expire})
		if expire {
			p.mu.Unlock()
			writeExpired(w, r.URL.Query().Get("resourceVersion"))
			return
		}
		var cancel context.CancelFunc
		if f == nil && kind != kindList {
			var ctx context.Context
			ctx, cancel = context.WithCancel(r.Context())
			p.streams[r] = cancel
			r = r.WithContext(ctx)
		}
		p.mu.Unlock()
		if f != nil {
			writeFault(w, *f, r.URL.Path)
			return
		}
		if cancel != nil {
			defer func() {
				p.mu.Lock()
				delete(p.streams, r)
				p.mu.Unlock()
				cancel()
			}()
		}
		rp.ServeHTTP(w, r)
	}))
	p.srv.EnableHTTP2 = true
	p.srv.StartTLS()
	t.Cleanup(func() {
		p.srv.CloseClientConnections()
		p.srv.Close()
	})
	return p
}

func requestKind(r *http.Request) string {
	q := r.URL.Query()
	switch {
	case q.Get("watch") != "true" && q.Get("watch") != "1":
		return kindList
	case q.Get("sendInitialEvents") == "true":
		return kindWatchList
	default:
		return kindWatch
	}
}

// writeFault answers as an apiserver would, with a metav1.Status; a 404
// as a proxy that does not know the path would, in plain text.
func writeFault(w http.ResponseWriter, f httpFault, path string) {
	if f.code == http.StatusNotFound {
		http.Error(w, "404 page not found", http.StatusNotFound)
		return
	}
	var err *apierrors.StatusError
	switch f.code {
	case http.StatusTooManyRequests:
		secs, _ := strconv.Atoi(f.retryAfter)
		err = apierrors.NewTooManyRequests("injected: too many requests", secs)
	default:
		err = apierrors.NewInternalError(&injectedError{path})
		err.ErrStatus.Code = int32(f.code)
	}
	st := err.ErrStatus
	st.Kind, st.APIVersion = "Status", "v1"
	body, _ := json.Marshal(st)
	w.Header().Set("Content-Type", "application/json")
	if f.retryAfter != "" {
		w.Header().Set("Retry-After", f.retryAfter)
	}
	w.WriteHeader(f.code)
	_, _ = w.Write(body)
}

// writeExpired answers a watch as kube-apiserver does when its
// resourceVersion has been compacted away: 200, then one ERROR event.
func writeExpired(w http.ResponseWriter, rv string) {
	st := apierrors.NewResourceExpired("too old resource version: " + rv + " (injected)").ErrStatus
	st.Kind, st.APIVersion = "Status", "v1"
	ev, _ := json.Marshal(map[string]any{"type": "ERROR", "object": st})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(ev, '\n'))
}

type injectedError struct{ path string }

func (e *injectedError) Error() string { return "injected fault for " + e.path }

// config returns a client config for the gateway that reaches the
// apiserver through the proxy: the proxy's CA, no credentials of its own.
func (p *faultProxy) config() *rest.Config {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.srv.Certificate().Raw})
	return &rest.Config{Host: p.srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
}

// setFault makes the proxy answer the collection with f (nil: forward
// again). Setting a fault cuts the watch streams being forwarded.
func (p *faultProxy) setFault(f *httpFault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault = f
	if f != nil {
		for _, cancel := range p.streams {
			cancel()
		}
	}
}

// expireWatch cuts the watch streams being forwarded and, unless the
// reflector lists next anyway (it does after a watch that ended with an
// error), answers its watch resume with 410 Expired: either way it
// relists exactly once.
func (p *faultProxy) expireWatch() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expire++
	for _, cancel := range p.streams {
		cancel()
	}
}

// requests returns the requests for the collection so far.
func (p *faultProxy) requests() []hit {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]hit(nil), p.hits...)
}
