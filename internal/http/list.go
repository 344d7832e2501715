package httpapi

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubegate/internal/apistatus"
	"kubegate/internal/auth"
	"kubegate/internal/informer"
	"kubegate/internal/rows"
)

// maxLimit bounds limit; larger values are rejected so a client learns the
// bound instead of receiving fewer items than it asked for.
const maxLimit = 100000

// listParams are a list request's query parameters.
type listParams struct {
	filter   informer.Filter
	limit    int
	cont     string
	rv       string
	rvMatch  string
	pretty   bool
	table    *tableOptions
	metadata string // meta.k8s.io version of a PartialObjectMetadataList answer, or ""
	scopeKey string
}

func parseListParams(r *http.Request, rq apiRequest, info *informer.ResourceInfo, dec auth.Decision) (listParams, error) {
	q := r.URL.Query()
	var p listParams
	f, err := informer.ParseFilter(info, rq.namespace, q.Get("labelSelector"), q.Get("fieldSelector"))
	if err != nil {
		return p, err
	}
	if err := parseShardSelector(q, &f); err != nil {
		return p, err
	}
	if info.Namespaced && rq.namespace == "" {
		f.Namespaces = dec.Namespaces
	}
	p.filter = f
	if v := q.Get("limit"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > maxLimit {
			return p, badRequestError("invalid limit %q: want an integer from 0 to %d (0 means no limit)", v, maxLimit)
		}
		p.limit = int(n)
	}
	p.cont = q.Get("continue")
	p.rv = q.Get("resourceVersion")
	p.rvMatch = q.Get("resourceVersionMatch")
	if p.rv != "" && p.rv != "0" {
		if _, err := strconv.ParseUint(p.rv, 10, 64); err != nil {
			return p, badRequestError("invalid resourceVersion %q: want a number", p.rv)
		}
	}
	switch p.rvMatch {
	case "", string(metav1.ResourceVersionMatchNotOlderThan), string(metav1.ResourceVersionMatchExact):
	default:
		return p, badRequestError("invalid resourceVersionMatch %q: want NotOlderThan or Exact", p.rvMatch)
	}
	if p.rvMatch != "" && p.rv == "" {
		return p, badRequestError("resourceVersionMatch is forbidden unless resourceVersion is provided")
	}
	if p.cont != "" && p.rv != "" && p.rv != "0" {
		return p, badRequestError("specifying resourceVersion is not allowed when using continue")
	}
	p.pretty = isTrue(q.Get("pretty"))
	rep, err := parseAccept(r, "list")
	if err != nil {
		return p, err
	}
	p.table, p.metadata = rep.table, rep.metadata
	// The scope binds continue tokens to the request that created them.
	u := auth.UserFrom(r.Context())
	p.scopeKey = strings.Join([]string{info.GVR.String(), rq.namespace, q.Get("labelSelector"),
		q.Get("fieldSelector"), q.Get("shardSelector"), u.String(), nsKey(dec)}, "\x00")
	return p, nil
}

func nsKey(d auth.Decision) string {
	if d.Namespaces == nil {
		return "*"
	}
	ns := d.Namespaces.UnsortedList()
	slices.Sort(ns)
	return strings.Join(ns, ",")
}

// serveList answers a list from the cache, or from a stored snapshot when
// continuing. Objects are sorted by namespace and name (the apiserver's
// etcd key order), so pages are stable.
func (s *Server) serveList(w http.ResponseWriter, r *http.Request, rq apiRequest, res *informer.Resource, dec auth.Decision) {
	p, err := parseListParams(r, rq, res.Info, dec)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if isSortedList(r.URL.Query()) {
		if p.filter.Shard != nil {
			s.writeError(w, r, shardedSortedList())
			return
		}
		s.serveSortedList(w, r, rq, res, p)
		return
	}
	var (
		objs   []*informer.Object
		rv     uint64
		offset int
	)
	if p.cont != "" {
		snap, _, off, st := s.pager.next(p.cont, p.scopeKey)
		if st != nil {
			if err := sortedContinueError(p.cont, s.printer(r.Context(), res).Columns()); err != nil {
				s.writeError(w, r, err)
				return
			}
			apistatus.Write(w, st)
			return
		}
		objs, rv, offset = snap.objs, snap.rv, off
	} else {
		objs, rv = res.List(&p.filter)
		if st := checkListRV(p, rv); st != nil {
			apistatus.Write(w, st)
			return
		}
		slices.SortFunc(objs, compareObjects)
	}
	page := objs[offset:]
	var next string
	remaining := 0
	if p.limit > 0 && len(page) > p.limit {
		page = page[:p.limit]
		remaining = len(objs) - offset - p.limit
		if p.cont == "" {
			next = s.pager.store(p.scopeKey, objs, rv, offset+p.limit)
		} else {
			snapID := s.pager.mustID(p.cont)
			next = s.pager.token(snapID, offset+p.limit)
		}
	}
	if p.table != nil {
		page = printerOrder(res, page)
	}
	s.writeListAnswer(w, r, res, p, nil, page, rv, next, remaining)
}

// printerOrder puts a Table page's rows in the order kube-apiserver's
// printer gives them. Its FlowSchema list printer sorts a list (one page)
// by matching precedence, then name (apihelpers.FlowSchemaSequence), so
// that `kubectl get flowschemas` shows them in the order they match;
// every other printer keeps the list's order. It sorts a copy: page is
// the cache's.
func printerOrder(res *informer.Resource, page []*informer.Object) []*informer.Object {
	if gvr := res.Info.GVR; gvr.Group != "flowcontrol.apiserver.k8s.io" || gvr.Resource != "flowschemas" || len(page) < 2 {
		return page
	}
	type ranked struct {
		o          *informer.Object
		precedence int64
	}
	rs := make([]ranked, len(page))
	for i, o := range page {
		var fs struct {
			Spec struct {
				MatchingPrecedence int64 `json:"matchingPrecedence"`
			} `json:"spec"`
		}
		_ = json.Unmarshal(o.Raw, &fs) // the apiserver's own JSON; a field missing sorts first, as a zero would there
		rs[i] = ranked{o, fs.Spec.MatchingPrecedence}
	}
	slices.SortFunc(rs, func(a, b ranked) int {
		if a.precedence != b.precedence {
			return cmp.Compare(a.precedence, b.precedence)
		}
		return strings.Compare(a.o.Name, b.o.Name)
	})
	out := make([]*informer.Object, len(rs))
	for i, r := range rs {
		out[i] = r.o
	}
	return out
}

// writeListAnswer writes a list page in the form p asks for: the
// objects' stored JSON, their metadata only, or a Table of the rows
// printer computes (nil: the resource's printer now).
func (s *Server) writeListAnswer(w http.ResponseWriter, r *http.Request, res *informer.Resource, p listParams,
	printer *rows.Printer, page []*informer.Object, rv uint64, next string, remaining int) {
	info := res.Info
	if p.table != nil {
		if printer == nil {
			printer = s.printer(r.Context(), res)
		}
		s.writeTable(w, r, printer, page, rv, next, remaining, p.table, p.pretty)
		return
	}
	kind, apiVersion := info.GVK.Kind+"List", info.GVR.GroupVersion().String()
	if p.metadata == "" && !p.pretty {
		writeList(w, r, kind, apiVersion, rv, next, remaining, shardInfo(&p.filter), page)
		return
	}
	var b bytes.Buffer
	if p.metadata != "" {
		if err := appendMetadataList(&b, p.metadata, rv, next, remaining, page); err != nil {
			s.writeError(w, r, err)
			return
		}
	} else {
		appendList(&b, kind, apiVersion, rv, next, remaining, shardInfo(&p.filter), page)
	}
	writeJSON(w, r, http.StatusOK, b.Bytes(), p.pretty)
}

// listWriteBuffer is the buffer writeList copies stored objects through:
// large enough that a write to the connection carries many objects.
const listWriteBuffer = 64 << 10

// writeList streams a list answer (the same bytes appendList builds)
// straight from the objects' stored JSON to the client. The answer is
// never assembled in memory: a list of all 10,000 Pods would otherwise
// cost a second copy of their JSON per request, and copying it twice
// (into the buffer, then to the connection) was half the CPU of a list.
// Content-Length is computed first, so clients still see the size.
func writeList(w http.ResponseWriter, r *http.Request, kind, apiVersion string, rv uint64, next string, remaining int, shard string, page []*informer.Object) {
	var head bytes.Buffer
	appendListHead(&head, kind, apiVersion, rv, next, remaining, shard)
	const tail = "]}\n"
	n := head.Len() + len(tail)
	for i, o := range page {
		if i > 0 {
			n++
		}
		n += len(bytes.TrimRight(o.Raw, "\n"))
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(n))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	bw := bufio.NewWriterSize(w, listWriteBuffer)
	_, _ = bw.Write(head.Bytes())
	for i, o := range page {
		if i > 0 {
			_ = bw.WriteByte(',')
		}
		if _, err := bw.Write(bytes.TrimRight(o.Raw, "\n")); err != nil {
			return // the client went away; the status line is already sent
		}
	}
	_, _ = bw.WriteString(tail)
	_ = bw.Flush()
}

// appendList writes a list envelope around the objects' stored JSON.
func appendList(b *bytes.Buffer, kind, apiVersion string, rv uint64, next string, remaining int, shard string, page []*informer.Object) {
	b.Grow(256 + sizeOf(page))
	appendListHead(b, kind, apiVersion, rv, next, remaining, shard)
	for i, o := range page {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(bytes.TrimRight(o.Raw, "\n"))
	}
	b.WriteString("]}\n")
}

// appendMetadataList writes a meta.k8s.io PartialObjectMetadataList of
// the objects: each item's metadata is copied from its stored JSON.
func appendMetadataList(b *bytes.Buffer, version string, rv uint64, next string, remaining int, page []*informer.Object) error {
	b.Grow(256 + 512*len(page))
	appendListHead(b, "PartialObjectMetadataList", "meta.k8s.io/"+version, rv, next, remaining, "")
	for i, o := range page {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := appendPartialMetadata(b, version, o); err != nil {
			return fmt.Errorf("%s/%s: %w", o.Namespace, o.Name, err)
		}
	}
	b.WriteString("]}\n")
	return nil
}

// appendListHead writes a list's kind, apiVersion, metadata and the
// opening of its items; shard, when set, is the shard selector echoed in
// metadata.shardInfo.
func appendListHead(b *bytes.Buffer, kind, apiVersion string, rv uint64, next string, remaining int, shard string) {
	b.WriteString(`{"kind":`)
	writeJSONString(b, kind)
	b.WriteString(`,"apiVersion":`)
	writeJSONString(b, apiVersion)
	b.WriteString(`,"metadata":{"resourceVersion":"`)
	b.WriteString(strconv.FormatUint(rv, 10))
	b.WriteByte('"')
	if next != "" {
		b.WriteString(`,"continue":"`)
		b.WriteString(next) // base64url: nothing to escape
		b.WriteString(`","remainingItemCount":`)
		b.WriteString(strconv.Itoa(remaining))
	}
	if shard != "" {
		b.WriteString(`,"shardInfo":{"selector":`)
		writeJSONString(b, shard)
		b.WriteByte('}')
	}
	b.WriteString(`},"items":[`)
}

// checkListRV applies resourceVersion and resourceVersionMatch to a list
// served at the cache's version rv. The cache only ever holds its latest
// state, so: "" and "0" are served as is; N with NotOlderThan (or no
// match) is served when the cache has reached N, else 504 like the
// apiserver's "Too large resource version"; Exact is served only when N is
// the cache's version, else 410.
func checkListRV(p listParams, rv uint64) *metav1.Status {
	if p.rv == "" || p.rv == "0" {
		return nil
	}
	want, _ := strconv.ParseUint(p.rv, 10, 64)
	switch {
	case p.rvMatch == string(metav1.ResourceVersionMatchExact) && want != rv:
		return apistatus.New(http.StatusGone, metav1.StatusReasonExpired,
			"resourceVersionMatch=Exact: the gateway serves only its latest version ("+strconv.FormatUint(rv, 10)+"), not "+p.rv)
	case want > rv:
		st := apistatus.New(http.StatusGatewayTimeout, metav1.StatusReasonTimeout,
			"Too large resource version: "+p.rv+", current: "+strconv.FormatUint(rv, 10))
		st.Details = &metav1.StatusDetails{RetryAfterSeconds: 1,
			Causes: []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}}
		return st
	}
	return nil
}

func compareObjects(a, b *informer.Object) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

func sizeOf(objs []*informer.Object) int {
	n := 0
	for _, o := range objs {
		n += len(o.Raw) + 1
	}
	return n
}

func writeJSONString(b *bytes.Buffer, s string) {
	enc, _ := json.Marshal(s)
	b.Write(enc)
}

// writeJSON sends a JSON body, indented when pretty is set.
func writeJSON(w http.ResponseWriter, r *http.Request, code int, body []byte, pretty bool) {
	if pretty {
		var ind bytes.Buffer
		if err := json.Indent(&ind, body, "", "  "); err == nil {
			body = ind.Bytes()
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// serveGet answers one object from the cache.
func (s *Server) serveGet(w http.ResponseWriter, r *http.Request, rq apiRequest, res *informer.Resource) {
	rep, err := parseAccept(r, "get")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	table := rep.table
	o, ok := res.Get(rq.namespace, rq.name)
	if !ok {
		st := notFound("%s %q not found", res.Info.GVR.GroupResource(), rq.name)
		st.Details = &metav1.StatusDetails{Name: rq.name, Group: res.Info.GVR.Group, Kind: res.Info.GVR.Resource}
		apistatus.Write(w, st)
		return
	}
	pretty := isTrue(r.URL.Query().Get("pretty"))
	if table != nil {
		s.writeTable(w, r, s.printer(r.Context(), res), []*informer.Object{o}, o.RV, "", 0, table, pretty)
		return
	}
	if rep.metadata != "" {
		var b bytes.Buffer
		if err := appendPartialMetadata(&b, rep.metadata, o); err != nil {
			s.writeError(w, r, err)
			return
		}
		b.WriteByte('\n')
		writeJSON(w, r, http.StatusOK, b.Bytes(), pretty)
		return
	}
	body := o.Raw
	if !bytes.HasSuffix(body, []byte("\n")) {
		body = append(append(make([]byte, 0, len(body)+1), body...), '\n')
	}
	writeJSON(w, r, http.StatusOK, body, pretty)
}
