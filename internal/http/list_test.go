package httpapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kubegate/internal/informer"
)

// TestWriteListMatchesAppendList: the streamed answer is byte for byte the
// buffered one, with a Content-Length that matches what is sent, and a
// HEAD request gets the headers without a body.
func TestWriteListMatchesAppendList(t *testing.T) {
	obj := func(ns, name, raw string) *informer.Object {
		o := &informer.Object{Raw: []byte(raw)}
		o.Namespace, o.Name = ns, name
		return o
	}
	big := bytes.Repeat([]byte("x"), 3*listWriteBuffer)
	cases := map[string]struct {
		page      []*informer.Object
		next      string
		remaining int
		shard     string
	}{
		"empty": {},
		"one":   {page: []*informer.Object{obj("a", "p1", `{"kind":"Pod"}`+"\n")}},
		"several, one larger than the write buffer": {page: []*informer.Object{
			obj("a", "p1", `{"kind":"Pod","n":1}`+"\n"),
			obj("a", "p2", `{"kind":"Pod","big":"`+string(big)+`"}`+"\n"),
			obj("b", "p3", `{"kind":"Pod","n":3}`),
		}},
		"a page with a continue token": {page: []*informer.Object{obj("a", "p1", `{}`+"\n")}, next: "tok", remaining: 7},
		"a page of a shard": {page: []*informer.Object{obj("a", "p1", `{}`+"\n")}, next: "tok", remaining: 7,
			shard: "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var want bytes.Buffer
			appendList(&want, "PodList", "v1", 42, tc.next, tc.remaining, tc.shard, tc.page)

			rec := httptest.NewRecorder()
			writeList(rec, httptest.NewRequest(http.MethodGet, "/api/v1/pods", nil), "PodList", "v1", 42, tc.next, tc.remaining, tc.shard, tc.page)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d", rec.Code)
			}
			if tc.shard != "" && !bytes.Contains(rec.Body.Bytes(), []byte(`"remainingItemCount":7,"shardInfo":{"selector":"`+tc.shard+`"}},"items":[`)) {
				t.Errorf("no shardInfo where ListMeta has it: %s", rec.Body.String())
			}
			if diff := cmp.Diff(want.String(), rec.Body.String()); diff != "" {
				t.Errorf("streamed answer (-appendList +writeList):\n%s", diff)
			}
			if got := rec.Header().Get("Content-Length"); got != strconv.Itoa(rec.Body.Len()) {
				t.Errorf("Content-Length %s, body %d bytes", got, rec.Body.Len())
			}

			head := httptest.NewRecorder()
			writeList(head, httptest.NewRequest(http.MethodHead, "/api/v1/pods", nil), "PodList", "v1", 42, tc.next, tc.remaining, tc.shard, tc.page)
			if head.Body.Len() != 0 || head.Header().Get("Content-Length") != strconv.Itoa(want.Len()) {
				t.Errorf("HEAD: body %d bytes, Content-Length %q; want none and %d", head.Body.Len(), head.Header().Get("Content-Length"), want.Len())
			}
		})
	}
}
