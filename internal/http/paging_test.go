package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

	"kubegate/internal/apistatus"
	"kubegate/internal/auth"
	"kubegate/internal/informer"
)

func objs(names ...string) []*informer.Object {
	var out []*informer.Object
	for _, n := range names {
		out = append(out, &informer.Object{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	return out
}

func TestPagerTokens(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	p := newPager(time.Minute, 2, clk)
	tok := p.store("scope-a", objs("a", "b", "c"), 7, 2)

	snap, id, off, st := p.next(tok, "scope-a")
	if st != nil || off != 2 || snap.rv != 7 || len(snap.objs) != 3 {
		t.Fatalf("next: off=%d st=%v", off, st)
	}
	if got := p.token(id, 3); got == tok {
		t.Fatal("tokens for different offsets are equal")
	}

	raw, _ := base64.RawURLEncoding.DecodeString(tok)
	alter := func(i int) string {
		b := append([]byte(nil), raw...)
		b[i]++
		return base64.RawURLEncoding.EncodeToString(b)
	}
	// Not a token, or one of ours altered: 400.
	for name, c := range map[string]string{
		"forged offset": alter(tokenOffsetOff + 7),
		"forged id":     alter(tokenIDOff),
		"forged MAC":    alter(tokenMACOff),
		"bad version":   alter(0),
		"garbage":       "not-a-token",
		"empty-ish":     "AA",
		"truncated":     tok[:len(tok)-2],
		"padded":        tok + "==",
	} {
		if _, _, _, st := p.next(c, "scope-a"); st == nil || st.Code != http.StatusBadRequest || st.Reason != metav1.StatusReasonBadRequest {
			t.Errorf("%s: got %v, want 400", name, st)
		}
	}
	if _, _, _, st := p.next(tok, "scope-b"); st == nil || st.Code != http.StatusBadRequest {
		t.Errorf("other scope: got %v, want 400", st)
	}
	// Well-formed but not ours (another replica, an earlier run, an
	// earlier token format): 410, which client-go's pager answers with a
	// full list.
	other := newPager(time.Minute, 2, clk)
	for name, c := range map[string]string{
		"another gateway": tok,
		"another issuer":  alter(1),
		"legacy format":   base64.RawURLEncoding.EncodeToString(raw[tokenIDOff:]),
	} {
		_, _, _, st := other.next(c, "scope-a")
		if st == nil || st.Code != http.StatusGone || st.Reason != metav1.StatusReasonExpired ||
			!strings.Contains(st.Message, "another gateway replica") || !strings.Contains(st.Message, "without continue") {
			t.Errorf("%s: got %v, want 410 Expired naming replicas", name, st)
		}
	}
	if _, _, _, st := p.next(tok, "scope-a"); st != nil {
		t.Errorf("the issuer still accepts its token: %v", st)
	}

	clk.Step(time.Minute)
	_, _, _, st = p.next(tok, "scope-a")
	if st == nil || st.Code != http.StatusGone || st.Reason != metav1.StatusReasonExpired {
		t.Fatalf("expired: got %v, want 410 Expired", st)
	}
}

func TestPagerEvictsOldest(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	p := newPager(time.Hour, 2, clk)
	t1 := p.store("s", objs("a", "b"), 1, 1)
	t2 := p.store("s", objs("a", "b"), 2, 1)
	t3 := p.store("s", objs("a", "b"), 3, 1)
	if _, _, _, st := p.next(t1, "s"); st == nil || st.Code != http.StatusGone {
		t.Errorf("evicted token: got %v, want 410", st)
	}
	for _, tok := range []string{t2, t3} {
		if _, _, _, st := p.next(tok, "s"); st != nil {
			t.Errorf("kept token: %v", st)
		}
	}
	if len(p.snaps) != 2 || len(p.order) != 2 {
		t.Errorf("kept %d snapshots (%d ordered), want 2", len(p.snaps), len(p.order))
	}
}

func TestParseAPIPath(t *testing.T) {
	for _, c := range []struct {
		path, kind string
		want       apiRequest
	}{
		{"/api", "versions", apiRequest{}},
		{"/apis", "groups", apiRequest{}},
		{"/apis/apps", "group", apiRequest{gv: gv("apps", "")}},
		{"/api/v1", "resources", apiRequest{gv: gv("", "v1")}},
		{"/apis/apps/v1", "resources", apiRequest{gv: gv("apps", "v1")}},
		{"/api/v1/pods", "list", apiRequest{gv: gv("", "v1"), resource: "pods"}},
		{"/api/v1/namespaces/x/pods", "list", apiRequest{gv: gv("", "v1"), resource: "pods", namespace: "x"}},
		{"/api/v1/namespaces/x/pods/p", "get", apiRequest{gv: gv("", "v1"), resource: "pods", namespace: "x", name: "p"}},
		{"/api/v1/namespaces/x", "get", apiRequest{gv: gv("", "v1"), resource: "namespaces", name: "x"}},
		{"/apis/apps/v1/namespaces/x/deployments/d", "get", apiRequest{gv: gv("apps", "v1"), resource: "deployments", namespace: "x", name: "d"}},
		{"/api/v1/namespaces/x/pods/p/log", "", apiRequest{}},
		{"/api/v1/pods/a/b", "", apiRequest{}},
		{"/api//pods", "", apiRequest{}},
		{"/other", "", apiRequest{}},
	} {
		got, kind := parseAPIPath(c.path)
		if kind != c.kind || (kind != "" && got != c.want) {
			t.Errorf("%s: got %+v %q, want %+v %q", c.path, got, kind, c.want, c.kind)
		}
	}
}

func TestParseAccept(t *testing.T) {
	const (
		table   = "application/json;as=Table;v=v1;g=meta.k8s.io"
		metaL   = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
		metaO   = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
		pbMetaL = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
	)
	tableV1 := representation{table: &tableOptions{version: "v1", includeObject: metav1.IncludeMetadata}}
	for _, c := range []struct {
		verb, accept, query string
		want                representation
		code                int // of the error, 0 for none
	}{
		{"list", "application/json", "", representation{}, 0},
		{"list", "", "", representation{}, 0},
		{"list", "application/vnd.kubernetes.protobuf", "", representation{}, 0},
		{"list", table + ",application/json", "", tableV1, 0},
		{"watch", table, "", tableV1, 0},
		{"list", "application/json;as=Table;v=v1beta1;g=meta.k8s.io", "includeObject=Object",
			representation{table: &tableOptions{version: "v1beta1", includeObject: metav1.IncludeObject}}, 0},
		{"list", "application/json, " + table, "", representation{}, 0},
		{"list", table, "includeObject=All", representation{}, http.StatusBadRequest},
		// What client-go's metadata client sends.
		{"list", pbMetaL + "," + metaL + ",application/json", "", representation{metadata: "v1"}, 0},
		{"get", strings.ReplaceAll(pbMetaL+","+metaL, "List", "") + ",application/json", "", representation{metadata: "v1"}, 0},
		{"watch", metaO, "", representation{metadata: "v1"}, 0},
		{"get", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1", "", representation{metadata: "v1beta1"}, 0},
		// A form that does not fit the verb is skipped; when nothing
		// else is acceptable, 406 as from the apiserver.
		{"list", metaO + ",application/json", "", representation{}, 0},
		{"list", metaO, "", representation{}, http.StatusNotAcceptable},
		{"get", metaL, "", representation{}, http.StatusNotAcceptable},
		{"watch", metaL, "", representation{}, http.StatusNotAcceptable},
		{"list", "application/json;as=Table;v=v9;g=meta.k8s.io", "", representation{}, http.StatusNotAcceptable},
		{"list", "application/json;as=Thing;v=v1;g=meta.k8s.io, " + metaL, "", representation{metadata: "v1"}, 0},
		{"list", "text/html;as=Table", "", representation{}, 0},
		{"list", table + ";", "", tableV1, 0},
		// An entry asking for a form that cannot be parsed is not served
		// as something else: 406, unless another entry is served.
		{"list", table + ";;", "", representation{}, http.StatusNotAcceptable},
		{"list", table + ";v=v2", "", representation{}, http.StatusNotAcceptable},
		{"list", "as=Table;g=meta.k8s.io;v=v1", "", representation{}, http.StatusNotAcceptable},
		{"get", metaO + ";x", "", representation{}, http.StatusNotAcceptable},
		{"list", table + ";;," + table, "", tableV1, 0},
		{"list", table + ";;,application/json", "", representation{}, 0},
		{"list", "text/html;as=Table;;", "", representation{}, 0},
		{"list", "application/json;x=\"unterminated, " + table, "", tableV1, 0},
	} {
		r := httptest.NewRequest("GET", "/api/v1/pods?"+c.query, nil)
		r.Header.Set("Accept", c.accept)
		got, err := parseAccept(r, c.verb)
		code := 0
		if err != nil {
			code = int(apistatus.FromError(err).Code)
		}
		if code != c.code {
			t.Errorf("%s %q %q: error %v, want code %d", c.verb, c.accept, c.query, err, c.code)
			continue
		}
		if diff := cmp.Diff(c.want, got, cmp.AllowUnexported(representation{}, tableOptions{})); err == nil && diff != "" {
			t.Errorf("%s %q %q (-want +got):\n%s", c.verb, c.accept, c.query, diff)
		}
	}
}

// TestParseAcceptMalformed checks what a client asking for a form in a
// malformed Accept header reads: a complete 406 Status naming the entry
// and what is wrong with it.
func TestParseAcceptMalformed(t *testing.T) {
	r := httptest.NewRequest("GET", "/api/v1/pods", nil)
	r.Header.Set("Accept", "application/json;as=Table;g=meta.k8s.io;v=v1;v=v1beta1")
	_, err := parseAccept(r, "list")
	st := apistatus.FromError(err)
	if st == nil || st.Kind != "Status" || st.APIVersion != "v1" || st.Status != metav1.StatusFailure ||
		st.Code != http.StatusNotAcceptable || st.Reason != metav1.StatusReasonNotAcceptable {
		t.Fatalf("status %+v, want a complete 406 NotAcceptable", st)
	}
	const want = "(application/json;as=Table;g=meta.k8s.io;v=v1;v=v1beta1 (malformed: mime: duplicate parameter name))"
	if !strings.Contains(st.Message, want) {
		t.Fatalf("message %q does not contain %q", st.Message, want)
	}
}

func TestRawMetadata(t *testing.T) {
	for _, tc := range []struct {
		raw, want string
		err       error
	}{
		{raw: `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","labels":{"x":"y"}},"spec":{"x":[1,2]}}`, want: `{"name":"a","labels":{"x":"y"}}`},
		{raw: `{"spec":{"metadata":{"name":"inner"}},"metadata":{"name":"outer"}}`, want: `{"name":"outer"}`},
		{raw: ` { "metadata" : {"name":"b"} }`, want: `{"name":"b"}`},
		{raw: `{"a":"}\"{","b":[{"c":1},true,null,-1.5e3],"metadata":{"s":"\\"}}`, want: `{"s":"\\"}`},
		{raw: `{"kind":"Pod"}`, err: errNoMetadata},
		{raw: `{"metadata":"x"}`, err: errNoMetadata},
		{raw: `{}`, err: errNoMetadata},
		{raw: `[]`, err: errMalformed},
		{raw: `{"metadata":`, err: errMalformed},
		{raw: `{"a":1 "metadata":{}}`, err: errMalformed},
		{raw: `{"a":`, err: errMalformed},
		{raw: `{"a":[}`, err: errMalformed},
		{raw: `{"a":[1},"metadata":{}}`, err: errMalformed},
		{raw: `{"metadata":{"a":]}}`, err: errMalformed},
		{raw: ``, err: errMalformed},
	} {
		got, err := rawMetadata([]byte(tc.raw))
		if string(got) != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("%s: got %s, %v; want %s, %v", tc.raw, got, err, tc.want, tc.err)
		}
	}
}

// An object version's metadata is found once and kept with it: a second
// answer slices the same bytes of Raw, an error is kept too, and another
// version finds its own.
func TestMetadataOfOnce(t *testing.T) {
	o := &informer.Object{Raw: []byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a"},"spec":{}}`)}
	m1, err := metadataOf(o)
	if err != nil || string(m1) != `{"name":"a"}` {
		t.Fatalf("metadataOf: %s, %v", m1, err)
	}
	// Rename the member: read again, the object would have no metadata.
	o.Raw[len(`{"kind":"Pod","apiVersion":"v1","metadat`)] = 'X'
	m2, err := metadataOf(o)
	if err != nil || &m2[0] != &m1[0] {
		t.Errorf("second metadataOf: %s, %v; want the first's bytes, kept", m2, err)
	}
	other := o.DeepCopyObject().(*informer.Object)
	other.Raw = []byte(`{"metadata":{"name":"c"}}`)
	if m, err := metadataOf(other); err != nil || string(m) != `{"name":"c"}` {
		t.Errorf("another version: %s, %v", m, err)
	}
	bad := &informer.Object{Raw: []byte(`{"kind":"Pod"}`)}
	for range 2 {
		if _, err := metadataOf(bad); !errors.Is(err, errNoMetadata) {
			t.Errorf("no metadata: %v, want %v", err, errNoMetadata)
		}
	}
}

func TestValidateQuery(t *testing.T) {
	for q, bad := range map[string]bool{
		"watch=true":                false,
		"watch=1&pretty=false":      false,
		"watch=yes":                 true,
		"limit=1&limit=2":           true,
		"unknown=1&unknown=2":       false,
		"allowWatchBookmarks=maybe": true,
	} {
		r := httptest.NewRequest("GET", "/api/v1/pods?"+q, nil)
		if st := validateQuery(r.URL.Query()); (st != nil) != bad {
			t.Errorf("%s: got %v, want bad=%v", q, st, bad)
		}
	}
}

// FuzzContinueToken checks that no token crashes the pager or passes
// without having been issued.
func FuzzContinueToken(f *testing.F) {
	p := newPager(time.Minute, 10, clocktesting.NewFakeClock(time.Unix(1e9, 0)))
	good := p.store("s", objs("a", "b"), 1, 1)
	f.Add(good)
	f.Add("")
	f.Add("AAAA")
	f.Fuzz(func(t *testing.T, tok string) {
		_, _, _, st := p.next(tok, "s")
		if st == nil && tok != good {
			t.Fatalf("token %q accepted", tok)
		}
		if st != nil && st.Code != http.StatusBadRequest && st.Code != http.StatusGone {
			t.Fatalf("token %q: code %d, want 400 or 410", tok, st.Code)
		}
	})
}

// FuzzAPIPath checks that path parsing never panics and only names
// resources with non-empty segments.
// FuzzRawMetadata checks that the metadata walk never panics and returns
// a JSON object taken from its input.
func FuzzRawMetadata(f *testing.F) {
	f.Add(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a"},"spec":{}}`)
	f.Add(`{"a":"}\"{","metadata":{"s":"\\"}}`)
	f.Add(`{"a":[1,{"b":"]"}],"metadata":{}}`)
	f.Fuzz(func(t *testing.T, in string) {
		m, err := rawMetadata([]byte(in))
		if err != nil {
			return
		}
		if !strings.Contains(in, string(m)) || m[0] != '{' || m[len(m)-1] != '}' {
			t.Fatalf("%q: metadata %q", in, m)
		}
		if json.Valid([]byte(in)) && !json.Valid(m) {
			t.Fatalf("%q: invalid metadata %q from valid input", in, m)
		}
	})
}

func FuzzAPIPath(f *testing.F) {
	for _, s := range []string{"/api/v1/pods", "/apis/a/b/namespaces/c/d/e", "//", "/api/v1/namespaces//pods"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		rq, kind := parseAPIPath(path)
		if (kind == "list" || kind == "get") && (rq.resource == "" || rq.gv.Version == "") {
			t.Fatalf("%q: %q with empty resource or version: %+v", path, kind, rq)
		}
	})
}

func gv(g, v string) schema.GroupVersion { return schema.GroupVersion{Group: g, Version: v} }

// FuzzQueryParams feeds arbitrary query strings and Accept headers to the
// parameter parsers: they must answer an error or a value, never panic.
func FuzzQueryParams(f *testing.F) {
	f.Add("labelSelector=app%3Dx&limit=10&continue=abc", "application/json")
	f.Add("watch=1&resourceVersion=5&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=9", "text/event-stream")
	f.Add("fieldSelector=metadata.name%3D%3D&includeObject=Object", "application/json;as=Table;v=v1;g=meta.k8s.io")
	f.Add("timeout=1h&timeoutSeconds=-1&limit=1e9", "application/json;as=Table;v=v1;g=meta.k8s.io;x=\"")
	info := &informer.ResourceInfo{Namespaced: true}
	f.Fuzz(func(t *testing.T, rawQuery, accept string) {
		r := &http.Request{Method: "GET", URL: &url.URL{Path: "/api/v1/pods", RawQuery: rawQuery}, Header: http.Header{}}
		r.Header.Set("Accept", accept)
		_ = validateQuery(r.URL.Query())
		_, _ = parseAccept(r, "list")
		if p, err := parseWatchParams(r); err == nil && p.timeout > maxWatchTimeout {
			t.Fatalf("timeout %v above the bound", p.timeout)
		}
		if p, err := parseListParams(r, apiRequest{resource: "pods"}, info, auth.Decision{}); err == nil && (p.limit < 0 || p.limit > maxLimit) {
			t.Fatalf("limit %d out of range", p.limit)
		}
	})
}
