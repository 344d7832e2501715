package auth

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// CookieName is the cookie /login sets. It holds the bearer token
	// itself, HttpOnly so scripts cannot read it.
	CookieName = "kubegate_token"
	// BearerProtocolPrefix introduces a bearer token in
	// Sec-WebSocket-Protocol, as kube-apiserver accepts it:
	// base64url.bearer.authorization.k8s.io.<base64url(token), unpadded>.
	BearerProtocolPrefix = "base64url.bearer.authorization.k8s.io."

	protocolHeader = "Sec-WebSocket-Protocol"
	// maxTokenLen bounds tokens from clients; service-account JWTs are
	// around 1 KiB.
	maxTokenLen = 16 << 10
)

// Transport names where a request's token came from.
type Transport string

const (
	TransportNone     Transport = "none"
	TransportHeader   Transport = "header"   // Authorization: Bearer
	TransportProtocol Transport = "protocol" // Sec-WebSocket-Protocol
	TransportCookie   Transport = "cookie"   // CookieName, set by /login
)

// queryTokenParams are URL parameters that would carry a token. URLs end
// up in access logs, proxies and browser history, so they are refused
// rather than ignored: the client learns at once what to do instead.
var queryTokenParams = []string{"token", "access_token"}

// ExtractToken finds the bearer token of r. Transports are tried in
// order: the Authorization header, the WebSocket subprotocol, the cookie;
// the first present is used, and a malformed one is an error rather than
// a reason to try the next. It returns TransportNone and no error when r
// carries no credentials. Errors are a *RefusedError (400, token in the
// URL) or a 401 *apierrors.StatusError (malformed credentials).
func ExtractToken(r *http.Request) (string, Transport, error) {
	q := r.URL.Query()
	for _, p := range queryTokenParams {
		if q.Has(p) {
			return "", TransportNone, refused(http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf(
				"tokens in the URL (?%s=) are not accepted: send the header Authorization: Bearer <token>, or from a browser use the WebSocket subprotocol %s<base64url token> or POST /login", p, BearerProtocolPrefix))
		}
	}
	if vals := r.Header.Values("Authorization"); len(vals) > 0 {
		tok, err := parseAuthorization(vals)
		return tok, TransportHeader, err
	}
	if tok, ok, err := parseBearerProtocol(r.Header.Values(protocolHeader)); ok || err != nil {
		return tok, TransportProtocol, err
	}
	if c, err := r.Cookie(CookieName); err == nil {
		if err := checkToken(c.Value); err != nil {
			return "", TransportCookie, unauthorized(fmt.Sprintf("invalid %s cookie: %v; log in again", CookieName, err))
		}
		return c.Value, TransportCookie, nil
	}
	return "", TransportNone, nil
}

func parseAuthorization(vals []string) (string, error) {
	if len(vals) > 1 {
		return "", unauthorized("more than one Authorization header")
	}
	scheme, tok, ok := strings.Cut(strings.TrimSpace(vals[0]), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", unauthorized(`malformed Authorization header: want "Bearer <token>"`)
	}
	tok = strings.TrimSpace(tok)
	if err := checkToken(tok); err != nil {
		return "", unauthorized("malformed Authorization header: " + err.Error())
	}
	return tok, nil
}

// parseBearerProtocol finds the one bearer-token subprotocol among the
// comma-separated values of Sec-WebSocket-Protocol. ok reports whether
// there was one.
func parseBearerProtocol(vals []string) (tok string, ok bool, err error) {
	for _, v := range vals {
		for p := range strings.SplitSeq(v, ",") {
			p = strings.TrimSpace(p)
			enc, isBearer := strings.CutPrefix(p, BearerProtocolPrefix)
			if !isBearer {
				continue
			}
			if ok {
				return "", true, unauthorized("more than one bearer token subprotocol")
			}
			ok = true
			b, derr := base64.RawURLEncoding.DecodeString(enc)
			if derr != nil {
				return "", true, unauthorized("invalid bearer token subprotocol: the token must be unpadded base64url")
			}
			tok = string(b)
			if cerr := checkToken(tok); cerr != nil {
				return "", true, unauthorized("invalid bearer token subprotocol: " + cerr.Error())
			}
		}
	}
	return tok, ok, nil
}

// checkToken rejects tokens that cannot be valid, before anything is sent
// to the apiserver.
func checkToken(tok string) error {
	switch {
	case tok == "":
		return errors.New("empty token")
	case len(tok) > maxTokenLen:
		return fmt.Errorf("token longer than %d bytes", maxTokenLen)
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c <= ' ' || c >= 0x7f {
			return errors.New("token has whitespace, control or non-ASCII characters")
		}
	}
	return nil
}

// stripBearerProtocol removes bearer-token subprotocols from r so that no
// handler can echo the token back in its handshake response.
func stripBearerProtocol(r *http.Request) {
	vals := r.Header.Values(protocolHeader)
	if len(vals) == 0 {
		return
	}
	var keep []string
	for _, v := range vals {
		for p := range strings.SplitSeq(v, ",") {
			if p = strings.TrimSpace(p); p != "" && !strings.HasPrefix(p, BearerProtocolPrefix) {
				keep = append(keep, p)
			}
		}
	}
	if len(keep) == 0 {
		r.Header.Del(protocolHeader)
		return
	}
	r.Header.Set(protocolHeader, strings.Join(keep, ", "))
}

// TokenAuthenticator validates a bearer token.
type TokenAuthenticator interface {
	// AuthenticateToken returns the token's user, a 401
	// *apierrors.StatusError when the token is not valid, or another
	// error (wrapping ErrReviewFailed) when it could not be checked.
	// The returned User is shared and must not be modified.
	AuthenticateToken(ctx context.Context, token string) (*User, error)
}

// CachedTokens is implemented by TokenAuthenticators that can tell, at
// no cost, that a token is valid (TokenReview's cache of valid tokens, a
// token file). Such tokens are never refused for their client address's
// failures (see FailureBudget).
type CachedTokens interface {
	// CachedToken returns token's user if it is known to be valid now.
	CachedToken(token string) (*User, bool)
}

// BearerOptions configures NewBearer.
type BearerOptions struct {
	// Tokens validates the tokens found. Required.
	Tokens TokenAuthenticator
	// Failures, when set, limits the requests with failing credentials
	// per client address (see FailureBudget); requests whose token
	// Tokens knows to be valid (CachedTokens) are never refused by it.
	// Default: no limit.
	Failures *FailureBudget
	// AllowedOrigins are origins whose cookie-authenticated requests are
	// accepted besides the gateway's own (same host as the request):
	// host patterns such as "dash.example.com" or "*.example.com", or
	// full origins with a scheme ("https://dash.example.com"), matched
	// with path.Match. Default none.
	AllowedOrigins []string
	// Metrics, when set, counts results by transport.
	Metrics *Metrics
	// Logger. Default: no logging.
	Logger *zap.Logger
}

// Bearer authenticates requests by bearer token, found by ExtractToken.
// It refuses cookie-authenticated requests from foreign origins (cross-site
// request forgery and WebSocket hijacking) before any handler runs, and
// removes bearer-token subprotocols from the request it lets through.
type Bearer struct {
	opts BearerOptions
	log  *zap.Logger
}

// NewBearer checks opts and returns a Bearer.
func NewBearer(opts BearerOptions) (*Bearer, error) {
	if opts.Tokens == nil {
		return nil, errors.New("auth: BearerOptions.Tokens is required")
	}
	for _, p := range opts.AllowedOrigins {
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("auth: allowed origin pattern %q: %w", p, err)
		}
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	return &Bearer{opts: opts, log: opts.Logger}, nil
}

// Authenticate implements Authenticator. A request whose token is known
// to be valid (CachedTokens) passes at once. Any other request takes a
// unit of its client address's failure budget before its credentials are
// checked, and gets it back if they are valid; with the budget spent it
// is refused with 429 before anything is checked.
func (b *Bearer) Authenticate(r *http.Request) (*User, error) {
	tok, transport, err := ExtractToken(r)
	if err == nil && transport == TransportNone {
		err = unauthorized("no credentials: send the header Authorization: Bearer <token> (see docs/auth.md)")
	}
	if err == nil && transport == TransportCookie {
		err = CheckOrigin(r, b.opts.AllowedOrigins)
	}
	if err == nil {
		if c, ok := b.opts.Tokens.(CachedTokens); ok {
			if u, ok := c.CachedToken(tok); ok {
				if transport == TransportProtocol {
					stripBearerProtocol(r)
				}
				b.opts.Metrics.authnResult(string(transport), "success")
				return u, nil
			}
		}
	}
	refund, st := b.opts.Failures.Take(SourceKey(requestSource(r)))
	if st != nil {
		b.opts.Metrics.authnResult(string(transport), "limited")
		return nil, &apierrors.StatusError{ErrStatus: *st}
	}
	if err != nil {
		b.opts.Metrics.authnResult(string(transport), resultFor(err))
		return nil, err
	}
	if transport == TransportProtocol {
		stripBearerProtocol(r)
	}
	u, err := b.opts.Tokens.AuthenticateToken(r.Context(), tok)
	b.opts.Metrics.authnResult(string(transport), resultFor(err))
	if err == nil || !isCode(err, http.StatusUnauthorized) {
		// Valid, or not checked for reasons of the gateway's own
		// (apiserver down, review queues full): not the caller's failure.
		refund()
	}
	if errors.Is(err, ErrReviewFailed) {
		// The token could not be checked, which says nothing about the
		// token: 503 with Retry-After, as for a SubjectAccessReview that
		// could not be made, so that clients try again instead of
		// asking their user for another token.
		return nil, unavailable("authentication")
	}
	if err != nil {
		return nil, err
	}
	return u, nil
}

// isCode reports whether err carries a Status with code.
func isCode(err error, code int32) bool {
	var se apierrors.APIStatus
	return errors.As(err, &se) && se.Status().Code == code
}

func resultFor(err error) string {
	var re *RefusedError
	switch {
	case err == nil:
		return "success"
	case errors.As(err, &re):
		return "refused"
	case errors.Is(err, ErrReviewFailed):
		return "error"
	case errors.Is(err, ErrReviewQueueFull):
		return "limited"
	}
	return "failure"
}

// CheckOrigin refuses (403) a browser request whose Origin is neither the
// request's own host nor one of allowed (see BearerOptions.AllowedOrigins),
// and one that the browser marks as cross-site (Sec-Fetch-Site). Requests
// without Origin (curl, same-origin GETs) pass: without an Origin there
// is no browser cross-site context to defend against, and the cookie's
// SameSite=Strict keeps it off cross-site requests in the first place.
func CheckOrigin(r *http.Request, allowed []string) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
			return refused(http.StatusForbidden, metav1.StatusReasonForbidden, "cross-site request with the login cookie refused")
		}
		return nil
	}
	if originAllowed(origin, r.Host, allowed) {
		return nil
	}
	return refused(http.StatusForbidden, metav1.StatusReasonForbidden, fmt.Sprintf(
		"origin %q may not use the login cookie: add it to websocket.allowedOrigins, or send the token with Authorization: Bearer or the bearer subprotocol", origin))
}

func originAllowed(origin, host string, allowed []string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false // includes the opaque "null" origin
	}
	if strings.EqualFold(u.Host, host) {
		return true
	}
	h := strings.ToLower(u.Host)
	full := strings.ToLower(u.Scheme + "://" + u.Host)
	for _, p := range allowed {
		p = strings.ToLower(p)
		target := h
		if strings.Contains(p, "://") {
			target = full
		}
		if ok, _ := path.Match(p, target); ok {
			return true
		}
	}
	return false
}
