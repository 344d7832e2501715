// Package web is the browser dashboard: static HTML, CSS and ES modules
// embedded in the binary and served at /. The page holds no data of its
// own; it reads discovery and objects from the REST API, live changes from
// one WebSocket (/ws, protocol kubegate.v1, through the JavaScript client
// of package jsclient, served at /kubegate.js) and the gateway's state
// from /readyz and /metrics, all with the caller's credentials.
package web

import (
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"io/fs"
	"net/http"
	"path"
	"strings"

	jsclient "kubegate/clients/js"
)

//go:embed static
var static embed.FS

// file is one embedded asset, read once at start.
type file struct {
	body        []byte
	contentType string
	etag        string
}

var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
	".ico":  "image/x-icon",
}

// Handler serves the dashboard. / is index.html; other paths are the
// embedded files by name, and /kubegate.js the protocol client (the one
// copy in clients/js); anything else is 404. Every answer carries
// security headers and a Content-Security-Policy that allows scripts,
// styles and connections (including WebSocket) to this origin only.
// Responses are revalidated on every load (Cache-Control: no-cache) with a
// content ETag, so an upgraded gateway never serves a stale mix of files.
func Handler() http.Handler {
	files := map[string]*file{}
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embed directive guarantees the directory
	}
	err = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		files["/"+p] = newFile(p, b)
		return nil
	})
	if err != nil {
		panic(err)
	}
	if files[clientPath] != nil {
		panic("web: static/" + clientPath[1:] + " would hide the protocol client from clients/js")
	}
	files[clientPath] = newFile(clientPath, jsclient.Module)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setSecurityHeaders(w, r)
		p := r.URL.Path
		if p == "/" {
			p = "/index.html"
		}
		f, ok := files[p]
		if !ok {
			http.Error(w, "404 page not found", http.StatusNotFound)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "405 method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Content-Type", f.contentType)
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", f.etag)
		if match := r.Header.Get("If-None-Match"); match != "" && strings.Contains(match, f.etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(f.body)
	})
}

// clientPath is where the page imports the protocol client from.
const clientPath = "/kubegate.js"

func newFile(name string, b []byte) *file {
	ct, ok := contentTypes[path.Ext(name)]
	if !ok {
		ct = "application/octet-stream"
	}
	sum := sha256.Sum256(b)
	return &file{body: b, contentType: ct, etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`}
}

// setSecurityHeaders forbids framing, sniffing, inline script and
// connections to other origins. 'self' in connect-src covers ws:/wss: to
// the same host in current browsers; the explicit ws(s)://host entries
// cover older ones.
func setSecurityHeaders(w http.ResponseWriter, r *http.Request) {
	connect := "'self'"
	if validHost(r.Host) {
		connect += " ws://" + r.Host + " wss://" + r.Host
	}
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src "+connect+"; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
}

// validHost accepts host[:port] made of the characters a DNS name, an IPv4
// or a bracketed IPv6 address can hold, so a forged Host header cannot
// inject CSP directives.
func validHost(h string) bool {
	if h == "" || len(h) > 255 {
		return false
	}
	for _, c := range h {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '-', c == ':', c == '[', c == ']':
		default:
			return false
		}
	}
	return true
}
