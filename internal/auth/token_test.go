package auth

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func TestExtractToken(t *testing.T) {
	for _, tc := range []struct {
		name      string
		target    string
		header    http.Header
		cookie    string
		want      string
		transport Transport
		code      int32 // 0: no error
	}{
		{name: "none", transport: TransportNone},
		{name: "bearer header", header: http.Header{"Authorization": {"Bearer abc"}}, want: "abc", transport: TransportHeader},
		{name: "bearer scheme is case-insensitive", header: http.Header{"Authorization": {"bearer abc"}}, want: "abc", transport: TransportHeader},
		{name: "basic auth", header: http.Header{"Authorization": {"Basic YTpi"}}, transport: TransportHeader, code: 401},
		{name: "empty bearer", header: http.Header{"Authorization": {"Bearer "}}, transport: TransportHeader, code: 401},
		{name: "token with space", header: http.Header{"Authorization": {"Bearer a b"}}, transport: TransportHeader, code: 401},
		{name: "two headers", header: http.Header{"Authorization": {"Bearer a", "Bearer b"}}, transport: TransportHeader, code: 401},
		{name: "subprotocol", header: http.Header{"Sec-Websocket-Protocol": {"kubegate.v1, " + BearerProtocolPrefix + b64("tok")}}, want: "tok", transport: TransportProtocol},
		{name: "subprotocol in second header", header: http.Header{"Sec-Websocket-Protocol": {"kubegate.v1", BearerProtocolPrefix + b64("tok")}}, want: "tok", transport: TransportProtocol},
		{name: "duplicate subprotocol", header: http.Header{"Sec-Websocket-Protocol": {BearerProtocolPrefix + b64("a") + "," + BearerProtocolPrefix + b64("b")}}, transport: TransportProtocol, code: 401},
		{name: "padded subprotocol", header: http.Header{"Sec-Websocket-Protocol": {BearerProtocolPrefix + "dG9rZW4="}}, transport: TransportProtocol, code: 401},
		{name: "std base64 subprotocol", header: http.Header{"Sec-Websocket-Protocol": {BearerProtocolPrefix + "a+/b"}}, transport: TransportProtocol, code: 401},
		{name: "empty subprotocol token", header: http.Header{"Sec-Websocket-Protocol": {BearerProtocolPrefix}}, transport: TransportProtocol, code: 401},
		{name: "only other protocols", header: http.Header{"Sec-Websocket-Protocol": {"kubegate.v1"}}, transport: TransportNone},
		{name: "header wins over subprotocol", header: http.Header{"Authorization": {"Bearer h"}, "Sec-Websocket-Protocol": {BearerProtocolPrefix + b64("p")}}, want: "h", transport: TransportHeader},
		{name: "cookie", cookie: "c", want: "c", transport: TransportCookie},
		{name: "empty cookie", cookie: "", transport: TransportCookie, code: 401},
		{name: "token in query", target: "/api/v1/pods?token=abc", code: 400},
		{name: "access_token in query", target: "/ws?access_token=abc", header: http.Header{"Authorization": {"Bearer abc"}}, code: 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := tc.target
			if target == "" {
				target = "/api/v1/pods"
			}
			r := httptest.NewRequest(http.MethodGet, target, nil)
			for k, v := range tc.header {
				r.Header[k] = v
			}
			if tc.cookie != "" || tc.name == "empty cookie" {
				r.Header.Add("Cookie", CookieName+"="+tc.cookie)
			}
			tok, transport, err := ExtractToken(r)
			if tc.code != 0 {
				if !isCode(err, tc.code) {
					t.Fatalf("err = %v, want code %d", err, tc.code)
				}
				return
			}
			if err != nil || tok != tc.want || transport != tc.transport {
				t.Fatalf("got %q, %s, %v; want %q, %s", tok, transport, err, tc.want, tc.transport)
			}
		})
	}
}

func TestQueryTokenErrorSaysWhatToDo(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/api/v1/pods?token=abc", nil)
	_, _, err := ExtractToken(r)
	var re *RefusedError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "Authorization: Bearer") || strings.Contains(err.Error(), "abc") {
		t.Fatalf("err = %v", err)
	}
}

// userTokens is a TokenAuthenticator for tests.
type userTokens map[string]*User

func (m userTokens) AuthenticateToken(_ context.Context, tok string) (*User, error) {
	if u, ok := m[tok]; ok {
		return u, nil
	}
	return nil, unauthorized("invalid bearer token")
}

func TestBearer(t *testing.T) {
	b := must[*Bearer](t)(NewBearer(BearerOptions{
		Tokens:         userTokens{"good": alice},
		AllowedOrigins: []string{"dash.example.com", "https://*.corp.example"},
	}))
	for _, tc := range []struct {
		name   string
		header http.Header
		code   int32
	}{
		{"header", http.Header{"Authorization": {"Bearer good"}}, 0},
		{"bad header token", http.Header{"Authorization": {"Bearer bad"}}, 401},
		{"no credentials", nil, 401},
		{"cookie without origin", http.Header{"Cookie": {CookieName + "=good"}}, 0},
		{"cookie same origin", http.Header{"Cookie": {CookieName + "=good"}, "Origin": {"http://gw.local:8080"}}, 0},
		{"cookie allowed origin", http.Header{"Cookie": {CookieName + "=good"}, "Origin": {"https://dash.example.com"}}, 0},
		{"cookie allowed full origin", http.Header{"Cookie": {CookieName + "=good"}, "Origin": {"https://a.corp.example"}}, 0},
		{"cookie allowed full origin wrong scheme", http.Header{"Cookie": {CookieName + "=good"}, "Origin": {"http://a.corp.example"}}, 403},
		{"cookie foreign origin", http.Header{"Cookie": {CookieName + "=good"}, "Origin": {"https://evil.example"}}, 403},
		{"cookie null origin", http.Header{"Cookie": {CookieName + "=good"}, "Origin": {"null"}}, 403},
		{"cookie cross-site fetch", http.Header{"Cookie": {CookieName + "=good"}, "Sec-Fetch-Site": {"cross-site"}}, 403},
		{"bad cookie foreign origin", http.Header{"Cookie": {CookieName + "=bad"}, "Origin": {"https://evil.example"}}, 403},
		{"header from foreign origin", http.Header{"Authorization": {"Bearer good"}, "Origin": {"https://evil.example"}}, 0},
		{"subprotocol from foreign origin", http.Header{"Sec-Websocket-Protocol": {BearerProtocolPrefix + b64("good")}, "Origin": {"https://evil.example"}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "http://gw.local:8080/ws", nil)
			for k, v := range tc.header {
				r.Header[k] = v
			}
			u, err := b.Authenticate(r)
			if tc.code != 0 {
				if !isCode(err, tc.code) {
					t.Fatalf("err = %v, want %d", err, tc.code)
				}
				if tc.code == 403 {
					var re *RefusedError
					if !errors.As(err, &re) {
						t.Fatalf("403 is not a RefusedError: %T", err)
					}
				}
				return
			}
			if err != nil || u != alice {
				t.Fatalf("got %v, %v; want alice", u, err)
			}
		})
	}
}

func TestBearerStripsTheTokenProtocol(t *testing.T) {
	b := must[*Bearer](t)(NewBearer(BearerOptions{Tokens: userTokens{"good": alice}}))
	r := httptest.NewRequest(http.MethodGet, "/ws", nil)
	r.Header.Set("Sec-WebSocket-Protocol", "kubegate.v1, "+BearerProtocolPrefix+b64("good"))
	if _, err := b.Authenticate(r); err != nil {
		t.Fatal(err)
	}
	if got := r.Header.Values("Sec-WebSocket-Protocol"); len(got) != 1 || got[0] != "kubegate.v1" {
		t.Fatalf("protocols left for the handler: %q", got)
	}
	r = httptest.NewRequest(http.MethodGet, "/ws", nil)
	r.Header.Set("Sec-WebSocket-Protocol", BearerProtocolPrefix+b64("good"))
	if _, err := b.Authenticate(r); err != nil {
		t.Fatal(err)
	}
	if got := r.Header.Values("Sec-WebSocket-Protocol"); len(got) != 0 {
		t.Fatalf("protocols left for the handler: %q", got)
	}
}

func TestNewBearerRejectsBadPatterns(t *testing.T) {
	if _, err := NewBearer(BearerOptions{Tokens: userTokens{}, AllowedOrigins: []string{"[a"}}); err == nil {
		t.Fatal("bad pattern accepted")
	}
	if _, err := NewBearer(BearerOptions{}); err == nil {
		t.Fatal("missing Tokens accepted")
	}
}

// FuzzExtractToken feeds arbitrary credentials to the parser: it must
// never panic, and whatever it accepts must be a plausible token that
// round-trips.
func FuzzExtractToken(f *testing.F) {
	f.Add("Bearer abc", "kubegate.v1, "+BearerProtocolPrefix+b64("tok"), "c", "token=x")
	f.Add("", BearerProtocolPrefix+"!!", "", "")
	f.Add("Bearer", BearerProtocolPrefix+b64("a")+","+BearerProtocolPrefix+b64("b"), "", "access_token")
	f.Fuzz(func(t *testing.T, authz, protocol, cookie, query string) {
		r := httptest.NewRequest(http.MethodGet, "/ws", nil)
		r.URL.RawQuery = query
		if authz != "" {
			r.Header.Set("Authorization", authz)
		}
		if protocol != "" {
			r.Header.Set("Sec-WebSocket-Protocol", protocol)
		}
		if cookie != "" {
			r.AddCookie(&http.Cookie{Name: CookieName, Value: cookie, Quoted: false})
		}
		tok, transport, err := ExtractToken(r)
		if err != nil {
			var re *RefusedError
			if !errors.As(err, &re) && !isCode(err, 401) {
				t.Fatalf("error of unexpected kind: %T %v", err, err)
			}
			return
		}
		if transport == TransportNone {
			if tok != "" {
				t.Fatalf("token %q without a transport", tok)
			}
			return
		}
		if cerr := checkToken(tok); cerr != nil {
			t.Fatalf("accepted token %q: %v", tok, cerr)
		}
		// No subprotocol that would be read as a token survives: an
		// element that only contains the prefix elsewhere (say
		// "0base64url.bearer...") is not one, and stays.
		stripBearerProtocol(r)
		for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
			for p := range strings.SplitSeq(v, ",") {
				if strings.HasPrefix(strings.TrimSpace(p), BearerProtocolPrefix) {
					t.Fatalf("token protocol survived stripping: %q", v)
				}
			}
		}
	})
}
