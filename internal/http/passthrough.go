package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kubegate/internal/apistatus"
	"kubegate/internal/auth"
)

// PassThrough sends to kube-apiserver, with the caller's own token, the
// requests below /api and /apis that the cache does not serve: writes,
// subresources and reads of resources that cannot be listed and watched
// (see passes). kube-apiserver then authenticates, authorizes, admits
// and audits the caller, not the gateway. docs/auth.md ("Pass-through")
// gives the reasoning behind each rule.
type PassThrough struct {
	// Upstream is kube-apiserver's base URL: scheme, host and any path
	// prefix. Required.
	Upstream *url.URL
	// Transport carries requests to Upstream. It must add no credential
	// of its own (no Authorization header, no client certificate): the
	// caller's token, which the server sets, must be the only one a
	// request carries. Required.
	Transport http.RoundTripper
	// UpgradeTransport carries protocol upgrades (exec, attach and
	// portforward over WebSocket or SPDY), which need HTTP/1.1: HTTP/2
	// has no Upgrade. The same rule on credentials holds. Required.
	UpgradeTransport http.RoundTripper
	// AllowedOrigins are the origins, besides the gateway's own, whose
	// requests may use the login cookie (auth.BearerOptions'): a request
	// that changes something (not GET or HEAD, or an upgrade) and is
	// authenticated by the cookie must name one of them, or the
	// gateway's own host, in Origin.
	AllowedOrigins []string
	// MaxBodyBytes bounds a request body: a larger one is answered 413.
	// Default 3 MiB, kube-apiserver's own bound.
	MaxBodyBytes int64
	// Timeout bounds a request that is not a stream, from its sending to
	// the end of its answer: 504 beyond it. Streams (see longRunning) are
	// bounded by the caller's in-flight limit instead. Default 70s.
	Timeout time.Duration
}

// passThrough is the server's pass-through: its options and the proxy
// built from them once.
type passThrough struct {
	opts  PassThrough
	proxy *httputil.ReverseProxy
}

func newPassThrough(o PassThrough, log *zap.Logger) (*passThrough, error) {
	if o.Upstream == nil || o.Transport == nil || o.UpgradeTransport == nil {
		return nil, errors.New("httpapi: PassThrough needs Upstream, Transport and UpgradeTransport")
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 3 << 20
	}
	if o.Timeout <= 0 {
		o.Timeout = 70 * time.Second
	}
	p := &passThrough{opts: o}
	upstream := *o.Upstream
	debug := log.Core().Enabled(zap.DebugLevel)
	p.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// Forwarded and X-Forwarded-* from the client are already
			// gone (Rewrite's contract): only what the gateway knows is
			// sent.
			pr.SetURL(&upstream)
			h := pr.Out.Header
			// The caller's token, however it came (header, WebSocket
			// subprotocol, login cookie), as a header: the only
			// credential the request carries.
			c := credentialFrom(pr.In.Context())
			h.Set("Authorization", "Bearer "+c.token)
			h.Del("Cookie")
			// kube-apiserver honours these only from its front proxy's
			// client certificate, which the gateway never presents;
			// dropped all the same, so that no future transport change
			// could make them count.
			for k := range h {
				if strings.HasPrefix(k, "X-Remote-") {
					h.Del(k)
				}
			}
			// The client address the gateway determined (its peer, or
			// what trusted proxies forwarded), for kube-apiserver's
			// audit log, which lists it first in sourceIPs.
			if a, ok := auth.SourceFrom(pr.In.Context()); ok && a.IsValid() {
				h.Set("X-Forwarded-For", a.String())
			}
		},
		Transport: upgradeAware{normal: o.Transport, upgrade: o.UpgradeTransport},
		ModifyResponse: func(resp *http.Response) error {
			// kube-apiserver sets no cookie; an upstream that did would
			// set it on the gateway's origin, beside the login cookie.
			resp.Header.Del("Set-Cookie")
			if resp.Header.Get("X-Content-Type-Options") == "" {
				resp.Header.Set("X-Content-Type-Options", "nosniff")
			}
			if debug {
				r := resp.Request
				log.Debug("passed through", zap.Stringer("user", auth.UserFrom(r.Context())),
					zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Int("code", resp.StatusCode))
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			p.writeError(w, r, err, log)
		},
		ErrorLog:   zap.NewStdLog(log),
		BufferPool: copyBuffers{},
	}
	return p, nil
}

// copyBuffers lends the proxy its 32 KiB copy buffers, which it would
// otherwise allocate for every answer: most of what a small write
// through the gateway allocated.
type copyBuffers struct{}

var copyBufferPool = sync.Pool{New: func() any { return new([32 << 10]byte) }}

func (copyBuffers) Get() []byte  { return copyBufferPool.Get().(*[32 << 10]byte)[:] }
func (copyBuffers) Put(b []byte) { copyBufferPool.Put((*[32 << 10]byte)(b)) }

// writeError answers a request that got no answer from kube-apiserver.
// The internal error is logged, never sent.
func (p *passThrough) writeError(w http.ResponseWriter, r *http.Request, err error, log *zap.Logger) {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		apistatus.Write(w, bodyTooLarge(p.opts.MaxBodyBytes))
	case r.Context().Err() != nil && errors.Is(context.Cause(r.Context()), errPassTimeout):
		apistatus.Write(w, apistatus.New(http.StatusGatewayTimeout, metav1.StatusReasonTimeout, fmt.Sprintf(
			"kube-apiserver did not answer within %s (passThrough.timeout)", p.opts.Timeout)))
	case r.Context().Err() != nil:
		// The client went away (or the gateway is shutting down).
	default:
		log.Warn("pass-through to kube-apiserver failed", zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err))
		apistatus.Write(w, apistatus.New(http.StatusBadGateway, metav1.StatusReasonServiceUnavailable,
			"kube-apiserver could not be reached to pass the request on; see the gateway's log"))
	}
}

var errPassTimeout = errors.New("pass-through timeout")

func bodyTooLarge(max int64) *metav1.Status {
	return apistatus.New(http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge, fmt.Sprintf(
		"request entity too large: the body of a request passed through to kube-apiserver is limited to %d bytes (passThrough.maxBodyBytes)", max))
}

// upgradeAware sends protocol upgrades on the HTTP/1.1 transport.
type upgradeAware struct{ normal, upgrade http.RoundTripper }

func (t upgradeAware) RoundTrip(r *http.Request) (*http.Response, error) {
	if isUpgrade(r) {
		return t.upgrade.RoundTrip(r)
	}
	return t.normal.RoundTrip(r)
}

// isUpgrade reports whether r asks for a protocol upgrade: Connection
// names the token "upgrade" and Upgrade is set.
func isUpgrade(r *http.Request) bool {
	if r.Header.Get("Upgrade") == "" {
		return false
	}
	for _, v := range r.Header.Values("Connection") {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				return true
			}
		}
	}
	return false
}

// credential is the token a request was authenticated with, and how it
// came, kept for pass-through (the WebSocket subprotocol that carried it
// is removed from the request once it is authenticated).
type credential struct {
	token     string
	transport auth.Transport
}

type credentialKey struct{}

func withCredential(ctx context.Context, c credential) context.Context {
	return context.WithValue(ctx, credentialKey{}, c)
}

func credentialFrom(ctx context.Context) credential {
	c, _ := ctx.Value(credentialKey{}).(credential)
	return c
}

// resourcePath is a path below /api or /apis read as kube-apiserver's
// RequestInfoFactory reads it: /api/{v} or /apis/{g}/{v}, then
// [namespaces/{ns}/]{resource}[/{name}[/{subresource}[/...]]], where
// namespaces/{ns}/status and namespaces/{ns}/finalize are subresources of
// the namespace {ns}.
type resourcePath struct {
	gv          schema.GroupVersion
	namespace   string
	resource    string
	name        string
	subresource string
	// more is set when segments follow the subresource (proxy paths).
	more bool
}

// parseResourcePath reads path; ok is false when it names no resource
// (discovery paths, empty segments, other prefixes).
func parseResourcePath(path string) (p resourcePath, ok bool) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for _, s := range segs {
		if s == "" {
			return p, false
		}
	}
	switch {
	case segs[0] == "api" && len(segs) >= 3:
		p.gv = schema.GroupVersion{Version: segs[1]}
		segs = segs[2:]
	case segs[0] == "apis" && len(segs) >= 4:
		p.gv = schema.GroupVersion{Group: segs[1], Version: segs[2]}
		segs = segs[3:]
	default:
		return p, false
	}
	if segs[0] == "namespaces" && len(segs) > 1 {
		p.namespace = segs[1]
		if len(segs) > 2 && segs[2] != "status" && segs[2] != "finalize" {
			segs = segs[2:]
		}
	}
	p.resource = segs[0]
	if len(segs) > 1 {
		p.name = segs[1]
	}
	if len(segs) > 2 {
		p.subresource = segs[2]
	}
	p.more = len(segs) > 3
	return p, true
}

// route is p's metrics route: the template of its path, never a name
// from it.
func (p resourcePath) route() string {
	t := "/api/{version}"
	if p.gv.Group != "" {
		t = "/apis/{group}/{version}"
	}
	if p.namespace != "" && !(p.resource == "namespaces" && p.name == p.namespace) {
		t += "/namespaces/{namespace}"
	}
	t += "/{resource}"
	if p.name != "" {
		t += "/{name}"
	}
	if p.subresource != "" {
		t += "/{subresource}"
	}
	return t + " pass-through"
}

// passes decides whether r goes to kube-apiserver: a write (POST, PUT,
// PATCH, DELETE) to any resource path, or a read (GET, HEAD) of a
// subresource. Reads of resources come from the cache (those it cannot
// hold, which have no list and watch, pass through from serveAPI).
// Other methods, and paths that name no resource (discovery), do not.
func passes(r *http.Request) (resourcePath, bool) {
	p, ok := parseResourcePath(r.URL.Path)
	if !ok {
		return p, false
	}
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return p, true
	case http.MethodGet, http.MethodHead:
		return p, p.subresource != ""
	}
	return p, false
}

// longRunning reports whether r is a stream, as kube-apiserver's
// long-running check counts them: a watch, or the subresources attach,
// exec, log and portforward (and any protocol upgrade).
func longRunning(p resourcePath, r *http.Request) bool {
	switch p.subresource {
	case "attach", "exec", "log", "portforward":
		return true
	}
	return isTrue(r.URL.Query().Get("watch")) || isUpgrade(r)
}

// unsafeRequest reports whether r changes something: any method but GET
// and HEAD, and upgrades (exec, attach, portforward run commands and
// open ports).
func unsafeRequest(r *http.Request) bool {
	return (r.Method != http.MethodGet && r.Method != http.MethodHead) || isUpgrade(r)
}

// servePassThrough answers a request passes chose: refused when
// pass-through is off or for what is never passed (proxy subresources),
// else sent to kube-apiserver.
func (s *Server) servePassThrough(w http.ResponseWriter, r *http.Request, p resourcePath) {
	setAPIRoute(r, p.route())
	if p.subresource == "proxy" || p.resource == "proxy" {
		apistatus.Write(w, apistatus.New(http.StatusForbidden, metav1.StatusReasonForbidden,
			"kubegate does not pass proxy subresources through: their answers are a Pod's, Service's or node's own content, which browsers holding the gateway's login cookie would run as the gateway's; use kubectl port-forward, or kube-apiserver directly"))
		return
	}
	if s.pass == nil {
		s.refusePassThrough(w, r, p)
		return
	}
	s.pass.serve(w, r, p)
}

// refusePassThrough answers, with pass-through off, as the gateway always
// has (405 for a write, 404 for a subresource), saying why.
func (s *Server) refusePassThrough(w http.ResponseWriter, r *http.Request, p resourcePath) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		apistatus.Write(w, apistatus.New(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
			fmt.Sprintf("%s is not allowed: kubegate serves a read-only cache (get, list, watch), and %s", r.Method, s.opts.PassThroughOff)))
		return
	}
	apistatus.Write(w, notFound("the server could not find the requested resource: the subresource %q is served by kube-apiserver only, and %s",
		p.subresource, s.opts.PassThroughOff))
}

// serveRead passes through a read the cache cannot serve (a resource
// without list and watch), when pass-through is on; it reports whether
// it answered.
func (s *Server) serveRead(w http.ResponseWriter, r *http.Request) bool {
	if s.pass == nil {
		return false
	}
	p, ok := parseResourcePath(r.URL.Path)
	if !ok {
		return false
	}
	setAPIRoute(r, p.route())
	s.pass.serve(w, r, p)
	return true
}

// serve sends r to kube-apiserver with the caller's token, within the
// body and time bounds, and copies the answer back as it comes (streams
// flush as they are written; upgrades become a two-way copy).
func (p *passThrough) serve(w http.ResponseWriter, r *http.Request, rp resourcePath) {
	c := credentialFrom(r.Context())
	if c.token == "" {
		// Only authn kubernetes enables pass-through, and it lets no
		// request without a token through.
		w.Header().Set("WWW-Authenticate", `Bearer realm="kubegate"`)
		apistatus.Write(w, apistatus.New(http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "no token to pass on to kube-apiserver"))
		return
	}
	if c.transport == auth.TransportCookie && unsafeRequest(r) {
		if err := checkCookieOrigin(r, p.opts.AllowedOrigins); err != nil {
			apistatus.WriteError(w, err)
			return
		}
	}
	if r.ContentLength > p.opts.MaxBodyBytes {
		apistatus.Write(w, bodyTooLarge(p.opts.MaxBodyBytes))
		return
	}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = http.MaxBytesReader(w, r.Body, p.opts.MaxBodyBytes)
	}
	if !longRunning(rp, r) {
		ctx, cancel := context.WithTimeoutCause(r.Context(), p.opts.Timeout, errPassTimeout)
		defer cancel()
		r = r.WithContext(ctx)
	}
	p.proxy.ServeHTTP(w, r)
}

// checkCookieOrigin refuses a request that changes something, is
// authenticated by the login cookie and does not show that it comes from
// an allowed page: it must name the gateway's own origin or an allowed
// one in Origin (browsers send it with every such request), or be marked
// same-origin by the browser. auth.CheckOrigin, which every cookie
// request passes, lets requests without Origin through (curl, same-origin
// GETs); here a request without it is refused, as the cookie is a
// browser's credential and scripts send the token in a header.
func checkCookieOrigin(r *http.Request, allowed []string) error {
	if err := auth.CheckOrigin(r, allowed); err != nil {
		return err
	}
	if r.Header.Get("Origin") != "" || r.Header.Get("Sec-Fetch-Site") == "same-origin" {
		return nil
	}
	return statusErr(apistatus.New(http.StatusForbidden, metav1.StatusReasonForbidden,
		"a request that changes something, authenticated by the login cookie, must carry the Origin header browsers send; other clients send the token in Authorization: Bearer"))
}
