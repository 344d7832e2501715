package auth

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubegate/internal/apistatus"
)

// LoginOptions configures NewLogin.
type LoginOptions struct {
	// Tokens validates the token before the cookie is set. Required.
	Tokens TokenAuthenticator
	// AllowedOrigins, as BearerOptions.AllowedOrigins: a login or logout
	// from any other origin is refused (login CSRF).
	AllowedOrigins []string
	// Failures, when set, limits failed logins per client address (see
	// FailureBudget, which the API's requests share: a bogus token costs
	// the same wherever it is sent). Logins with a valid token take
	// nothing from it, so bogus logins from one address do not refuse
	// the valid ones of another, nor, once it is spent, a token the
	// gateway knows to be valid. Default: no limit.
	Failures *FailureBudget
	// Users, when set, limits successful logins per user name, whatever
	// the address they come from (keyed "login:" and the name). Default:
	// no limit.
	Users *RateLimiter
	// Metrics, when set, counts login results (transport "login").
	Metrics *Metrics
	// Logger. Default: no logging. Tokens are never logged.
	Logger *zap.Logger
}

// Login serves POST /login, which checks a token and stores it in an
// HttpOnly, SameSite=Strict cookie (Secure when the request came over
// TLS), and POST /logout, which clears it. It lets a browser dashboard
// authenticate plain fetches and WebSockets without keeping the token
// where scripts can read it.
type Login struct {
	opts LoginOptions
	log  *zap.Logger
}

// NewLogin returns the login handlers.
func NewLogin(opts LoginOptions) (*Login, error) {
	if opts.Tokens == nil {
		return nil, errors.New("auth: LoginOptions.Tokens is required")
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	return &Login{opts: opts, log: opts.Logger}, nil
}

// maxLoginBody bounds a login request body.
const maxLoginBody = 64 << 10

// LoginResponse is the body of a successful login.
type LoginResponse struct {
	Username string   `json:"username"`
	UID      string   `json:"uid,omitempty"`
	Groups   []string `json:"groups,omitempty"`
}

// ServeLogin handles POST /login. The token comes as a form field
// (token=...), a JSON body ({"token": "..."}) or an Authorization: Bearer
// header.
func (l *Login) ServeLogin(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		apistatus.Write(w, apistatus.New(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, "POST the token to /login (form field token, or JSON {\"token\": ...})"))
		return
	}
	if err := CheckOrigin(r, l.opts.AllowedOrigins); err != nil {
		apistatus.WriteError(w, err)
		return
	}
	tok, err := loginToken(r)
	var u *User
	if err == nil {
		if c, ok := l.opts.Tokens.(CachedTokens); ok {
			u, _ = c.CachedToken(tok)
		}
	}
	if u == nil {
		refund, st := l.opts.Failures.Take(SourceKey(requestSource(r)))
		if st != nil {
			l.opts.Metrics.authnResult("login", "limited")
			apistatus.Write(w, st)
			return
		}
		if err != nil {
			l.opts.Metrics.authnResult("login", resultFor(err))
			apistatus.WriteError(w, err)
			return
		}
		u, err = l.opts.Tokens.AuthenticateToken(r.Context(), tok)
		l.opts.Metrics.authnResult("login", resultFor(err))
		if err == nil || !isCode(err, http.StatusUnauthorized) {
			refund()
		}
		if err != nil {
			st := apistatus.FromError(err)
			switch st.Code {
			case http.StatusUnauthorized, http.StatusTooManyRequests:
			default:
				// Not the token's fault (the apiserver could not be
				// asked): 503 with Retry-After, never a login.
				l.log.Warn("login: token could not be checked", zap.Error(err))
				st = apistatus.FromError(unavailable("authentication"))
			}
			if st.Code == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="kubegate"`)
			}
			apistatus.Write(w, st)
			return
		}
	} else {
		l.opts.Metrics.authnResult("login", "success")
	}
	release, st := l.opts.Users.Acquire("login:" + u.Name)
	if st != nil {
		l.opts.Metrics.limitedLogin()
		apistatus.Write(w, st)
		return
	}
	release()
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: tok, Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secureRequest(r),
	})
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(LoginResponse{Username: u.Name, UID: u.UID, Groups: u.Groups})
}

// ServeLogout handles POST /logout: it clears the cookie.
func (l *Login) ServeLogout(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		apistatus.Write(w, apistatus.New(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, "POST to /logout"))
		return
	}
	if err := CheckOrigin(r, l.opts.AllowedOrigins); err != nil {
		apistatus.WriteError(w, err)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secureRequest(r),
	})
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

// secureRequest reports whether the browser reached us over TLS. Trusting
// X-Forwarded-Proto here is safe: it can only add the Secure attribute,
// never remove it.
func secureRequest(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func loginToken(r *http.Request) (string, error) {
	for _, p := range queryTokenParams {
		if r.URL.Query().Has(p) {
			return "", refused(http.StatusBadRequest, metav1.StatusReasonBadRequest, "tokens in the URL are not accepted: POST the token in the body")
		}
	}
	if vals := r.Header.Values("Authorization"); len(vals) > 0 {
		return parseAuthorization(vals)
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxLoginBody))
	if err != nil {
		return "", refused(http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge, "login body too large")
	}
	var tok string
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch mt {
	case "application/json":
		var req struct {
			Token string `json:"token"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			return "", refused(http.StatusBadRequest, metav1.StatusReasonBadRequest, `login body: want JSON {"token": "..."}`)
		}
		tok = req.Token
	case "application/x-www-form-urlencoded":
		vals, err := parseForm(body)
		if err != nil {
			return "", refused(http.StatusBadRequest, metav1.StatusReasonBadRequest, "login body: malformed form")
		}
		tok = vals
	default:
		return "", refused(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
			"login body: want Content-Type application/x-www-form-urlencoded (token=...) or application/json")
	}
	tok = strings.TrimSpace(tok)
	if err := checkToken(tok); err != nil {
		return "", unauthorized("login: " + err.Error())
	}
	return tok, nil
}

func parseForm(body []byte) (string, error) {
	v, err := url.ParseQuery(string(body))
	if err != nil {
		return "", err
	}
	return v.Get("token"), nil
}
