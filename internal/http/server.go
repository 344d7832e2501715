// Package httpapi is kubegate's HTTP front door: one chi router that
// serves health and metrics, authenticates callers, and mounts the
// Kubernetes-compatible REST API (read from the informer cache), the
// WebSocket endpoint and the dashboard.
package httpapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/utils/clock"

	"kubegate/internal/apistatus"
	"kubegate/internal/auth"
	"kubegate/internal/informer"
	"kubegate/internal/livequery/feed"
	"kubegate/internal/livequery/wire"
)

// Options configures New.
type Options struct {
	// Manager serves every read. Required.
	Manager *informer.Manager
	// Tables serves live windows (sorted, filtered pages): sorted lists
	// read them. Built by wire.NewTables, so that rows carry the cells of
	// the resource's Table; started by the caller (Tables.Start), which
	// stops it after Start has returned, and shared with the WebSocket
	// server. Required.
	Tables *feed.Tables
	// Logger. Default: no logging.
	Logger *zap.Logger
	// Registry receives the server's metrics and is served at /metrics.
	// Default: a new registry.
	Registry *prometheus.Registry
	// OpenMetrics serves /metrics to anyone who can connect, for scrapes
	// through a trusted path. Default false: as kube-apiserver protects
	// its own /metrics, the caller is authenticated (Authenticator) and
	// must be allowed the request's verb ("get") on the non-resource URL
	// /metrics (Authorizer, which must then implement
	// auth.NonResourceAuthorizer).
	OpenMetrics bool
	// Listen is the TCP address. Default: 127.0.0.1:8080.
	Listen string
	// Listener, when set, is used instead of listening on Listen (tests).
	Listener net.Listener
	// GetCertificate, when set, makes the server speak HTTPS with the
	// certificate it returns for each handshake (servingcert.Pair's
	// follows rotated files), as kube-apiserver serves: TLS 1.2 at least
	// with Go's default cipher suites, and HTTP/2 beside HTTP/1.1 (see
	// Start). Default: plain HTTP.
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// WebSocket is mounted at /ws behind authentication. Default: none.
	WebSocket http.Handler
	// OpenAPI serves /openapi/v2, /openapi/v3 and below (package
	// openapi), behind authentication and, as kube-apiserver authorizes
	// them, authorization of get on the path as a non-resource URL
	// (Authorizer must then implement auth.NonResourceAuthorizer).
	// Default: none (404).
	OpenAPI http.Handler
	// Web serves the dashboard at / without authentication (it holds no
	// data; the data it fetches is authenticated). Default: none.
	Web http.Handler
	// Authenticator identifies callers of /api, /apis, /version, /ws and
	// /metrics. Default: auth.Anonymous{}.
	Authenticator auth.Authenticator
	// Authorizer decides what they may read. Default: auth.AlwaysAllow{}.
	Authorizer auth.Authorizer
	// Login, when set, serves POST /login and POST /logout (the browser
	// cookie). Default: none (404).
	Login *auth.Login
	// PassThrough, when set, sends what the cache does not serve to
	// kube-apiserver with the caller's own token (see PassThrough).
	// Default: none; such requests are refused, saying PassThroughOff.
	PassThrough *PassThrough
	// PassThroughOff says why requests are not passed through, in the
	// Status that refuses them ("... and <PassThroughOff>"). Default:
	// "nothing is passed through to kube-apiserver".
	PassThroughOff string
	// RateLimiter, when set, limits authenticated requests per user (429
	// with Retry-After). Default: no limit.
	RateLimiter *auth.RateLimiter
	// Hosts, when set, refuses requests whose Host it does not allow
	// (403), on every path. Default: none, every Host is served; the
	// gateway always sets one.
	Hosts *HostPolicy
	// TrustedProxies finds each request's client address (stored with
	// auth.WithSource for the limits kept per address). Default: none
	// trusted, the client address is the connection's peer.
	TrustedProxies *auth.TrustedProxies
	// RecheckInterval is how often a live watch stream is re-authorized;
	// a revoked stream ends within it. Default: 5s.
	RecheckInterval time.Duration
	// RecheckGrace is how long a watch goes on while its
	// re-authorizations cannot be made (see auth.Recheck). Default
	// auth.DefaultRecheckGrace; negative ends it at the first failure.
	RecheckGrace time.Duration
	// ShutdownTimeout bounds the graceful shutdown. Default: 15s.
	ShutdownTimeout time.Duration
	// Version is the apiserver's version, served at /version (kubectl
	// version). Default: none (404).
	Version *version.Info
	// PageTTL is how long a list snapshot behind continue tokens is
	// kept. Default: 5m (the apiserver's default etcd compaction interval).
	PageTTL time.Duration
	// MaxPageSnapshots bounds the list snapshots kept for continue tokens;
	// the oldest is dropped first (its tokens then answer 410). Default: 1000.
	MaxPageSnapshots int
	// Clock drives page expiry and the ages in Tables. Default: the real
	// clock.
	Clock clock.Clock

	// bookmarkClock ticks REST watch bookmarks (test hook). Default: the
	// real clock.
	bookmarkClock clock.WithTicker
	// watchWriter, if set, wraps each watch's ResponseWriter (test hook).
	watchWriter func(http.ResponseWriter) http.ResponseWriter
	// wholeSortedWindow is the rows per window of a sorted list read
	// whole (test hook). Default: wire.MaxLimit.
	wholeSortedWindow int
	// wholeSortedRead, if set, is called once each window of a sorted
	// list read whole has been read, with its index (test hook).
	wholeSortedRead func(window int)
}

func (o Options) withDefaults() (Options, error) {
	if o.Manager == nil {
		return o, errors.New("httpapi: Options.Manager is required")
	}
	if o.Tables == nil {
		return o, errors.New("httpapi: Options.Tables is required")
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	if o.Listen == "" {
		o.Listen = "127.0.0.1:8080"
	}
	if o.Authenticator == nil {
		o.Authenticator = auth.Anonymous{}
	}
	if o.Authorizer == nil {
		o.Authorizer = auth.AlwaysAllow{}
	}
	if _, ok := o.Authorizer.(auth.NonResourceAuthorizer); !ok && !o.OpenMetrics {
		return o, fmt.Errorf("httpapi: Options.Authorizer (%T) cannot authorize /metrics (auth.NonResourceAuthorizer); implement it or set OpenMetrics", o.Authorizer)
	}
	if _, ok := o.Authorizer.(auth.NonResourceAuthorizer); !ok && o.OpenAPI != nil {
		return o, fmt.Errorf("httpapi: Options.Authorizer (%T) cannot authorize /openapi (auth.NonResourceAuthorizer)", o.Authorizer)
	}
	if o.RecheckInterval <= 0 {
		o.RecheckInterval = 5 * time.Second
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = 15 * time.Second
	}
	if o.PageTTL <= 0 {
		o.PageTTL = 5 * time.Minute
	}
	if o.MaxPageSnapshots <= 0 {
		o.MaxPageSnapshots = 1000
	}
	if o.bookmarkClock == nil {
		o.bookmarkClock = clock.RealClock{}
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.wholeSortedWindow <= 0 {
		o.wholeSortedWindow = wire.MaxLimit
	}
	if o.PassThroughOff == "" {
		o.PassThroughOff = "nothing is passed through to kube-apiserver"
	}
	return o, nil
}

// Server is the HTTP server. Start serves until its context ends, then
// shuts down gracefully: it stops accepting, waits up to ShutdownTimeout
// for requests to finish (long-lived streams watch the base context and
// end first), then closes what is left.
type Server struct {
	opts    Options
	log     *zap.Logger
	ln      net.Listener
	handler http.Handler
	metrics *metrics
	pager   *pager
	pass    *passThrough // nil: pass-through is off
	// discovery holds the discovery answers, rendered once per document.
	discovery discoveryCache
	// baseCtx is every request's parent; cancelled when shutdown begins
	// so streams end promptly instead of holding Shutdown up.
	baseCtx    context.Context
	cancelBase context.CancelFunc
}

// New binds the listen address (so a port in use fails here, with a clear
// message) and builds the routes.
func New(opts Options) (*Server, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, log: opts.Logger, ln: opts.Listener}
	if opts.PassThrough != nil {
		if s.pass, err = newPassThrough(*opts.PassThrough, opts.Logger.Named("passthrough")); err != nil {
			return nil, err
		}
		s.discovery.passThrough = true
	}
	s.baseCtx, s.cancelBase = context.WithCancel(context.Background())
	s.metrics = newMetrics(opts.Registry)
	s.pager = newPager(opts.PageTTL, opts.MaxPageSnapshots, opts.Clock)
	if s.ln == nil {
		s.ln, err = net.Listen("tcp", opts.Listen)
		if err != nil {
			s.cancelBase()
			return nil, fmt.Errorf("listen on %s: %w (choose another address with --listen)", opts.Listen, err)
		}
	}
	s.handler = s.routes()
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Handler is the server's routes, for tests that use httptest.
func (s *Server) Handler() http.Handler { return s.handler }

func (s *Server) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.Recoverer, s.metrics.instrument, limitURI, s.checkHost, s.clientAddress)
	r.Get("/healthz", s.healthz)
	r.Get("/livez", s.healthz)
	r.Get("/readyz", s.readyz)
	metrics := promhttp.HandlerFor(s.opts.Registry, promhttp.HandlerOpts{Registry: s.opts.Registry})
	if s.opts.OpenMetrics {
		r.Handle("/metrics", metrics)
	} else {
		r.With(s.authenticate, s.opts.RateLimiter.Middleware, s.authorizePath).Handle("/metrics", metrics)
	}

	s.mountLogin(r)
	r.Group(func(r chi.Router) {
		r.Use(s.authenticate, s.opts.RateLimiter.Middleware)
		if s.opts.WebSocket != nil {
			r.Handle("/ws", s.opts.WebSocket)
		}
		s.mountAPI(r)
		s.mountOpenAPI(r)
	})
	if s.opts.Web != nil {
		r.Handle("/*", s.opts.Web)
	}
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		apistatus.Write(w, apistatus.New(http.StatusNotFound, "NotFound", "the server could not find the requested resource"))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		apistatus.Write(w, apistatus.New(http.StatusMethodNotAllowed, "MethodNotAllowed", "kubegate is read-only: only GET is served"))
	})
	return r
}

// Bounds of a request's URI. Kubernetes names are at most 253 bytes and
// a resource path has at most seven segments; a query holds selectors,
// a filter and a continue token. Larger requests are refused before any
// other work, on every route.
const (
	maxPathLen  = 2048
	maxQueryLen = 8192
	// maxHeaderBytes bounds a request's head, its request line and URI
	// included, as kube-apiserver bounds it (1 MiB): net/http reads no
	// more, and refuses a larger head itself (431, in text), before any
	// handler could answer with a Status. Within it, limitURI answers.
	maxHeaderBytes = 1 << 20
)

// limitURI answers 414 with a Status to a request whose path or query is
// over its bound, whatever the route.
func limitURI(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var what string
		switch {
		case len(r.URL.Path) > maxPathLen:
			what = fmt.Sprintf("path longer than %d bytes", maxPathLen)
		case len(r.URL.RawQuery) > maxQueryLen:
			what = fmt.Sprintf("query longer than %d bytes", maxQueryLen)
		default:
			next.ServeHTTP(w, r)
			return
		}
		apistatus.Write(w, apistatus.New(http.StatusRequestURITooLong, metav1.StatusReasonBadRequest, "request URI too long: "+what))
	})
}

// clientAddress stores the request's client address (see
// Options.TrustedProxies) in its context.
func (s *Server) clientAddress(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(auth.WithSource(r.Context(), s.opts.TrustedProxies.ClientAddr(r))))
	})
}

// authenticate stores the caller in the request context or answers 401.
// With pass-through, it keeps the caller's token too, read before the
// authenticator removes a WebSocket subprotocol carrying it.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var cred credential
		if s.pass != nil {
			cred.token, cred.transport, _ = auth.ExtractToken(r)
		}
		u, err := s.opts.Authenticator.Authenticate(r)
		var refused *auth.RefusedError
		if errors.As(err, &refused) {
			// Refused for how the credentials were sent (token in the
			// URL, cookie from a foreign origin): 400 or 403 as is.
			apistatus.WriteError(w, refused)
			return
		}
		if err != nil {
			st := apistatus.FromError(err)
			switch st.Code {
			case http.StatusUnauthorized:
			case http.StatusTooManyRequests, http.StatusServiceUnavailable:
				// Too many failed credentials from the client's address,
				// or the review queues are full: 429 with Retry-After.
				// The token could not be checked (the apiserver could
				// not be asked): 503 with Retry-After, never let in.
				apistatus.Write(w, st)
				return
			default:
				// The credentials could not be checked (apiserver down):
				// never let the caller in. The authenticator logs why, a
				// line per interval rather than one per request.
				s.log.Debug("authentication failed", zap.Error(err), zap.String("path", r.URL.Path))
				st = apistatus.New(http.StatusUnauthorized, "Unauthorized", "Unauthorized")
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="kubegate"`)
			apistatus.Write(w, st)
			return
		}
		ctx := auth.WithUser(r.Context(), u)
		if cred.token != "" {
			ctx = withCredential(ctx, cred)
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// authorizePath answers 403 unless the authenticated caller may make the
// request on its path as a non-resource URL: the verb is the method in
// lower case, as kube-apiserver names it ("get" for GET /metrics).
func (s *Server) authorizePath(next http.Handler) http.Handler {
	az := s.opts.Authorizer.(auth.NonResourceAuthorizer) // checked by withDefaults
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := az.AuthorizeNonResource(r.Context(), auth.UserFrom(r.Context()), strings.ToLower(r.Method), r.URL.Path); err != nil {
			s.writeError(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

// readyz answers 200 once the configured informers have synced, their
// requests are not failing and their live tables are built (so that a
// first window on one only builds its own view), else 503 with a body
// naming what is not.
// ?verbose lists every resource; those started on first use are marked
// "on demand" and do not gate readiness (see informer.Options.Resources).
//
// Like kube-apiserver's, the answer names checks and their states only:
// which resources are cached and whether they are ready. Object counts
// and errors are for callers who may read /metrics (see mayReadMetrics),
// which exports them anyway; others get "reason withheld" for errors.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, verbose := r.URL.Query()["verbose"]
	ready := s.opts.Manager.Ready()
	var tables error
	if ready == nil {
		// Then the live tables of the configured resources: a first
		// window on one of them only builds its own view.
		tables = s.opts.Tables.Ready(s.opts.Manager.Configured())
	}
	detail := (verbose || ready != nil || tables != nil) && s.mayReadMetrics(r)
	// The verdict is Manager.Ready's, then the tables'; the lines only
	// explain it.
	b := informerChecks(s.opts.Manager.Status(), detail)
	switch {
	case ready != nil && detail:
		fmt.Fprintf(b, "[-]informers: %v\n", ready)
	case ready != nil:
		b.WriteString("[-]informers failed: reason withheld\n")
	case tables != nil:
		fmt.Fprintf(b, "[-]%v\n", tables) // names resources only, as the lines above do
	default:
		b.WriteString("[+]live tables ok\n")
	}
	if ready != nil || tables != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(b.String() + "readyz check failed\n"))
		return
	}
	if verbose {
		_, _ = w.Write([]byte(b.String()))
	}
	_, _ = w.Write([]byte("ok\n"))
}

// mayReadMetrics reports whether r's caller may read /metrics, as that
// route decides it: always with OpenMetrics; else the caller must be
// authenticated and allowed get on the path /metrics. A request without
// credentials is not authenticated at all (no failed-credential budget
// spent on a probe), unless every caller is anonymous.
func (s *Server) mayReadMetrics(r *http.Request) bool {
	if s.opts.OpenMetrics {
		return true
	}
	if _, anonymous := s.opts.Authenticator.(auth.Anonymous); !anonymous {
		if _, tr, _ := auth.ExtractToken(r); tr == auth.TransportNone {
			return false
		}
	}
	u, err := s.opts.Authenticator.Authenticate(r)
	if err != nil {
		return false
	}
	az := s.opts.Authorizer.(auth.NonResourceAuthorizer) // checked by withDefaults
	return az.AuthorizeNonResource(auth.WithUser(r.Context(), u), u, "get", "/metrics") == nil
}

// informerChecks renders one /readyz line per informer, marked [-] when it
// keeps the gateway unready (see informer.Manager.Ready): a resource
// started on first use does not gate readiness, so its line passes
// whatever its state, nor does a configured one the apiserver no longer
// serves. Without detail, the lines hold no object count and no error.
func informerChecks(status []informer.ResourceStatus, detail bool) *strings.Builder {
	b := &strings.Builder{}
	why := func(err string) string {
		if detail {
			return err
		}
		return "reason withheld"
	}
	for _, st := range status {
		mark, note := "[-]", ""
		if !st.Gating {
			mark, note = "[+]", " (on demand; does not gate readiness)"
		}
		switch {
		case st.Gone:
			fmt.Fprintf(b, "[+]informer %s not served by the apiserver (configured; started again once it is): %s\n", st.Resource, why(st.Error))
		case st.Synced && st.FailingError != "" && detail:
			fmt.Fprintf(b, "[+]informer %s ok (%d objects); its requests have failed for %s: %s\n",
				st.Resource, st.Objects, st.FailingFor.Truncate(time.Second), st.FailingError)
		case st.Synced && st.FailingError != "":
			fmt.Fprintf(b, "[+]informer %s ok; its requests are failing: reason withheld\n", st.Resource)
		case st.Synced && detail:
			fmt.Fprintf(b, "[+]informer %s ok (%d objects)\n", st.Resource, st.Objects)
		case st.Synced:
			fmt.Fprintf(b, "[+]informer %s ok\n", st.Resource)
		case st.Error != "":
			fmt.Fprintf(b, "%sinformer %s failed%s: %s\n", mark, st.Resource, note, why(st.Error))
		case st.FailingError != "":
			fmt.Fprintf(b, "%sinformer %s not synced%s: %s\n", mark, st.Resource, note, why(st.FailingError))
		default:
			fmt.Fprintf(b, "%sinformer %s not synced%s\n", mark, st.Resource, note)
		}
	}
	return b
}

// serverTLSConfig is kube-apiserver's secure serving configuration
// (k8s.io/apiserver's SecureServingInfo): TLS 1.2 at least, Go's default
// cipher suites and curves, and ALPN offering HTTP/2 before HTTP/1.1.
//
// WebSockets need HTTP/1.1: coder/websocket takes the connection over
// with Hijack, which HTTP/2 streams cannot offer, and net/http's HTTP/2
// server does not announce WebSockets over HTTP/2 (RFC 8441; it would
// with GODEBUG=http2xconnect=1, which the gateway must not run with,
// or browsers would send /ws over HTTP/2 where it fails). Clients
// therefore open /ws on an HTTP/1.1 connection of its own (browsers, and
// Go's http.Transport for any Upgrade request, leave h2 out of that
// handshake), while REST calls share an HTTP/2 connection.
func serverTLSConfig(get func(*tls.ClientHelloInfo) (*tls.Certificate, error)) *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"h2", "http/1.1"},
		GetCertificate: get,
	}
}

// serverLog is net/http's error log. A failed TLS handshake is logged at
// debug level only, as kube-apiserver logs it only at -v=5: TCP health
// checks and port scans cause one per connection.
type serverLog struct{ log *zap.Logger }

func (l serverLog) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	if strings.HasPrefix(msg, "http: TLS handshake error") {
		l.log.Debug(msg)
	} else {
		l.log.Info(msg)
	}
	return len(p), nil
}

// Start serves until ctx ends, then shuts down within ShutdownTimeout.
func (s *Server) Start(ctx context.Context) error {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		// No WriteTimeout: watch streams and WebSockets live for hours;
		// they set their own per-write deadlines.
		IdleTimeout:    120 * time.Second,
		MaxHeaderBytes: maxHeaderBytes,
		BaseContext:    func(net.Listener) context.Context { return s.baseCtx },
		ErrorLog:       stdlog.New(serverLog{s.log.Named("server")}, "", 0),
	}
	scheme := "http"
	if s.opts.GetCertificate != nil {
		scheme = "https"
		srv.TLSConfig = serverTLSConfig(s.opts.GetCertificate)
		// kube-apiserver's bound on the streams of one HTTP/2 connection,
		// the streams client-go opens before it dials another.
		srv.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 100}
	}
	errc := make(chan error, 1)
	go func() {
		if srv.TLSConfig != nil {
			errc <- srv.ServeTLS(s.ln, "", "")
			return
		}
		errc <- srv.Serve(s.ln)
	}()
	s.log.Info("serving", zap.String("addr", s.ln.Addr().String()), zap.String("scheme", scheme))

	select {
	case err := <-errc:
		s.cancelBase()
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	// Streams end on their own once the base context is cancelled; plain
	// requests in flight get the timeout to finish.
	s.cancelBase()
	err := srv.Shutdown(shutdownCtx)
	if err != nil {
		s.log.Warn("graceful shutdown timed out; closing connections", zap.Error(err))
		_ = srv.Close()
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	return nil
}
