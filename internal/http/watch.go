package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/clock"

	"kubegate/internal/apistatus"
	"kubegate/internal/auth"
	"kubegate/internal/informer"
	"kubegate/internal/sink"
)

const (
	// initialEventsEndAnnotation marks the bookmark that ends the initial
	// events of a sendInitialEvents=true watch (metav1.InitialEventsAnnotationKey).
	initialEventsEndAnnotation = metav1.InitialEventsAnnotationKey
	// bookmarkInterval is how often a watch with allowWatchBookmarks gets
	// a BOOKMARK carrying its latest resourceVersion.
	bookmarkInterval = time.Minute
	// maxWatchTimeout bounds timeoutSeconds.
	maxWatchTimeout = 24 * time.Hour
	// watchWriteTimeout bounds one batch write; a client that reads
	// nothing for this long is dropped.
	watchWriteTimeout = 30 * time.Second
	// A watch takes at most sink.Chunk notifications at a time from its
	// listener and writes what it has encoded once it reaches
	// watchFlushBytes, so a snapshot of any size streams through a
	// bounded buffer instead of being encoded whole first.
	watchFlushBytes    = 64 << 10
	maxIdleWatchBuffer = 16 << 10
)

// errStreamEnded stops popping a watch's listener: the stream ends.
var errStreamEnded = errors.New("watch stream ended")

// watchParams are a watch request's query parameters.
type watchParams struct {
	rv            string
	bookmarks     bool
	initialEvents bool // snapshot first
	endBookmark   bool // initial-events-end bookmark after the snapshot
	timeout       time.Duration
	sse           bool
	table         *tableOptions
	metadata      string // meta.k8s.io version for PartialObjectMetadata events, or ""
}

func parseWatchParams(r *http.Request) (watchParams, error) {
	q := r.URL.Query()
	p := watchParams{rv: q.Get("resourceVersion"), bookmarks: isTrue(q.Get("allowWatchBookmarks"))}
	p.sse = strings.Contains(r.Header.Get("Accept"), "text/event-stream")
	if p.sse && p.rv == "" {
		p.rv = r.Header.Get("Last-Event-ID") // an EventSource reconnecting
	}
	if p.rv != "" && p.rv != "0" {
		if _, err := strconv.ParseUint(p.rv, 10, 64); err != nil {
			return p, badRequestError("invalid resourceVersion %q: want a number", p.rv)
		}
	}
	switch sie := q.Get("sendInitialEvents"); sie {
	case "true", "1":
		// The watch-list protocol: the current state as ADDED events,
		// then (with bookmarks) a BOOKMARK annotated
		// k8s.io/initial-events-end.
		p.initialEvents, p.endBookmark = true, p.bookmarks
		if m := q.Get("resourceVersionMatch"); m != string(metav1.ResourceVersionMatchNotOlderThan) {
			return p, badRequestError("sendInitialEvents=true requires resourceVersionMatch=NotOlderThan")
		}
	case "false", "0":
	case "":
		// Legacy semantics: "" and "0" start with the current state as
		// synthetic ADDED events; a version N resumes after N.
		p.initialEvents = p.rv == "" || p.rv == "0"
	}
	for _, name := range []string{"timeoutSeconds", "timeout"} {
		v := q.Get(name)
		if v == "" {
			continue
		}
		var d time.Duration
		var err error
		if name == "timeoutSeconds" {
			var n int64
			n, err = strconv.ParseInt(v, 10, 64)
			d = time.Duration(n) * time.Second
		} else {
			d, err = time.ParseDuration(v)
		}
		if err != nil || d < 0 {
			return p, badRequestError("invalid %s %q", name, v)
		}
		if d > 0 && (p.timeout == 0 || d < p.timeout) {
			p.timeout = min(d, maxWatchTimeout)
		}
	}
	rep, err := parseAccept(r, "watch")
	p.table, p.metadata = rep.table, rep.metadata
	return p, err
}

// watchStream writes watch events: newline-delimited JSON (the
// apiserver's form) or server-sent events. It is the watch's
// sink.Encoder, used from the request's goroutine only.
type watchStream struct {
	ctx   context.Context // the request's
	w     http.ResponseWriter
	rc    *http.ResponseController
	sse   bool
	buf   bytes.Buffer
	kind  string // the resource's kind and apiVersion, for bookmarks
	apiV  string
	table func(o *informer.Object) []byte // non-nil for Table watches
	// tableVersion is a Table watch's meta.k8s.io version, for its bookmarks.
	tableVersion string
	// tableStale reports an object printed with other columns than the
	// stream's (nil but for Table watches).
	tableStale func(o *informer.Object) bool
	// metadata is the meta.k8s.io version of PartialObjectMetadata
	// events, or "".
	metadata string
	// endBookmark: the snapshot ends with an initial-events-end BOOKMARK
	// rather than an SSE id mark.
	endBookmark bool
	// inSnapshot: the events being sent are the initial snapshot's.
	inSnapshot bool
	// lastRV is the resourceVersion of the last event or bookmark sent
	// (or the one the watch resumed from).
	lastRV uint64
}

// Encode appends the event for n, writing out every watchFlushBytes
// (sink.Encoder). A Reset ends the stream with ERROR 410 and errStreamEnded;
// so does a failed write. Ended (the resource is no longer served) ends
// it with no event, as kube-apiserver closes the watches of a resource
// whose storage it tears down (a deleted CRD): the client's next request
// gets 404.
func (ws *watchStream) Encode(_ *informer.Listener, n *informer.Notification) error {
	id := n.RV
	if ws.inSnapshot {
		id = 0
	}
	if n.Object != nil && ws.tableStale != nil && ws.tableStale(n.Object) {
		// The resource's columns changed (a CRD's printer columns
		// edited): rows in a new layout must not follow the old column
		// definitions. kube-apiserver closes such a watch as it tears the
		// CRD's storage down; here the client is told to list again, and
		// the next watch carries the new definitions.
		ws.status(apistatus.New(http.StatusGone, metav1.StatusReasonExpired,
			"the resource's columns changed; list again for the new ones"))
		_ = ws.flush()
		return errStreamEnded
	}
	switch n.Type {
	case informer.Added:
		ws.object("ADDED", n.Object, id)
	case informer.Modified:
		ws.object("MODIFIED", n.Object, id)
	case informer.Deleted:
		ws.object("DELETED", n.Object, id)
	case informer.EndOfSnapshot:
		ws.inSnapshot = false
		if ws.endBookmark {
			ws.bookmark(n.RV, true)
		} else {
			ws.mark(n.RV)
		}
	case informer.Reset:
		ws.status(apistatus.New(http.StatusGone, metav1.StatusReasonExpired,
			"the watch fell too far behind and its events were dropped; list again and watch from the list's resourceVersion"))
		_ = ws.flush()
		return errStreamEnded
	case informer.Ended:
		_ = ws.flush()
		return errStreamEnded
	}
	ws.lastRV = max(ws.lastRV, n.RV)
	if ws.buf.Len() >= watchFlushBytes && ws.flush() != nil {
		return errStreamEnded
	}
	return nil
}

// Full stops popping once the client has gone (sink.Encoder).
func (ws *watchStream) Full() bool { return ws.ctx.Err() != nil }

// event appends one event whose object is raw JSON.
func (ws *watchStream) event(typ string, obj []byte, rv uint64) {
	if ws.sse {
		ws.buf.WriteString("event: ")
		ws.buf.WriteString(typ)
		if rv > 0 {
			ws.buf.WriteString("\nid: ")
			ws.buf.WriteString(strconv.FormatUint(rv, 10))
		}
		ws.buf.WriteString("\ndata: ")
	}
	ws.buf.WriteString(`{"type":"`)
	ws.buf.WriteString(typ)
	ws.buf.WriteString(`","object":`)
	ws.buf.Write(bytes.TrimRight(obj, "\n")) // one event per line, whatever obj ends with
	ws.buf.WriteString("}\n")
	if ws.sse {
		ws.buf.WriteByte('\n')
	}
}

// object appends an event for o. id is the SSE event id (0 for none):
// snapshot objects have none, since resuming from one of their versions
// would skip the rest of the snapshot.
func (ws *watchStream) object(typ string, o *informer.Object, id uint64) {
	switch {
	case ws.table != nil:
		ws.event(typ, ws.table(o), id)
	case ws.metadata != "":
		var b bytes.Buffer
		if err := appendPartialMetadata(&b, ws.metadata, o); err != nil {
			// The informer stores only objects with metadata; should one
			// lack it, the client learns of it instead of missing it.
			ws.status(apistatus.New(http.StatusInternalServerError, metav1.StatusReasonInternalError,
				"cannot read the metadata of "+o.Namespace+"/"+o.Name))
			return
		}
		ws.event(typ, b.Bytes(), id)
	default:
		ws.event(typ, o.Raw, id)
	}
}

// mark sets an SSE client's last event id without an event, so an
// EventSource that reconnects after a snapshot resumes after it.
func (ws *watchStream) mark(rv uint64) {
	if ws.sse && rv > 0 {
		ws.buf.WriteString("id: ")
		ws.buf.WriteString(strconv.FormatUint(rv, 10))
		ws.buf.WriteString("\n\n")
	}
}

func (ws *watchStream) bookmark(rv uint64, initialEnd bool) {
	b, _ := json.Marshal(map[string]any{"kind": ws.kind, "apiVersion": ws.apiV, "metadata": bookmarkMeta(rv, initialEnd)})
	if ws.table != nil {
		// A Table, as kube-apiserver sends a bookmark in Table form: one
		// row holding the bookmark's object. Its cells are empty: kube-
		// apiserver prints an empty object, which no client reads.
		t := append([]byte(`{"kind":"Table","apiVersion":"meta.k8s.io/`), ws.tableVersion...)
		t = append(t, `","metadata":{"resourceVersion":`...)
		t = appendString(t, strconv.FormatUint(rv, 10))
		t = append(t, `},"columnDefinitions":null,"rows":[{"cells":[],"object":`...)
		t = append(t, b...)
		b = append(t, "}]}"...)
	}
	ws.event("BOOKMARK", b, rv)
}

func bookmarkMeta(rv uint64, initialEnd bool) map[string]any {
	m := map[string]any{"resourceVersion": strconv.FormatUint(rv, 10)}
	if initialEnd {
		m["annotations"] = map[string]string{initialEventsEndAnnotation: "true"}
	}
	return m
}

func (ws *watchStream) status(st *metav1.Status) {
	b, _ := json.Marshal(st)
	ws.event("ERROR", b, 0)
}

// idle drops a buffer a snapshot or burst grew, once it has been written:
// an idle watch keeps no large buffer. It is kept while the backlog is
// being written, so each chunk reuses it.
func (ws *watchStream) idle() {
	if ws.buf.Len() == 0 && ws.buf.Cap() > maxIdleWatchBuffer {
		ws.buf = bytes.Buffer{}
	}
}

// flush writes the buffered batch.
func (ws *watchStream) flush() error {
	if ws.buf.Len() == 0 {
		return nil
	}
	_ = ws.rc.SetWriteDeadline(time.Now().Add(watchWriteTimeout))
	_, err := ws.w.Write(ws.buf.Bytes())
	ws.buf.Reset()
	if err == nil {
		err = ws.rc.Flush()
	}
	return err
}

// serveWatch streams changes from one listener until the client leaves,
// timeoutSeconds passes, the server shuts down, the listener overflows
// (ERROR 410: the client must list again), the resource is no longer
// served (no event, as from kube-apiserver), or a periodic
// re-authorization fails (ERROR 403) or changes the visible namespaces
// (ERROR 410).
//
// It runs on the request's goroutine; the listener has no goroutine and
// signals wake (capacity 1, owned by this function).
func (s *Server) serveWatch(w http.ResponseWriter, r *http.Request, rq apiRequest, res *informer.Resource, areq auth.Request, dec auth.Decision) {
	p, err := parseWatchParams(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	info := res.Info
	f, err := informer.ParseFilter(info, rq.namespace, r.URL.Query().Get("labelSelector"), r.URL.Query().Get("fieldSelector"))
	if err == nil {
		err = parseShardSelector(r.URL.Query(), &f)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if rq.name != "" {
		// A watch on an object path watches that one object.
		f.Field = nameSelector(rq.name, f)
	}
	if info.Namespaced && rq.namespace == "" {
		f.Namespaces = dec.Namespaces
	}
	wake := make(chan struct{}, 1)
	lopts := informer.ListenerOptions{Filter: f, Wake: wake, Overflow: informer.OverflowReset, SendInitialEvents: p.initialEvents}
	if !p.initialEvents && p.rv != "0" {
		lopts.ResourceVersion = p.rv
	}
	l, lerr := res.AddListener(lopts)
	if lerr != nil && !errors.Is(lerr, informer.ErrExpired) {
		s.writeError(w, r, lerr)
		return
	}

	if s.opts.watchWriter != nil {
		w = s.opts.watchWriter(w)
	}
	ctx := r.Context()
	ws := &watchStream{ctx: ctx, w: w, rc: http.NewResponseController(w), sse: p.sse,
		kind: info.GVK.Kind, apiV: info.GVR.GroupVersion().String(), metadata: p.metadata,
		endBookmark: p.endBookmark, inSnapshot: p.initialEvents}
	if p.metadata != "" {
		// Bookmarks too are PartialObjectMetadata: a metadata client
		// decodes nothing else.
		ws.kind, ws.apiV = "PartialObjectMetadata", "meta.k8s.io/"+p.metadata
	}
	// flush sets write deadlines; clear them so a later request on the
	// same keep-alive connection does not inherit one.
	defer func() { _ = ws.rc.SetWriteDeadline(time.Time{}) }()
	if p.table != nil {
		first := true
		printer := s.printer(r.Context(), res) // once per stream
		opts := p.table
		ws.table = func(o *informer.Object) []byte {
			// Column definitions on the first event only, as
			// kube-apiserver sends them.
			b := appendTable(nil, printer, []*informer.Object{o}, opts, first, s.opts.Clock.Now(), func(b []byte) []byte {
				b = append(b, `{"resourceVersion":`...)
				b = appendString(b, o.ResourceVersion)
				return append(b, '}')
			})
			first = false
			return b
		}
		ws.tableVersion = opts.version
		ws.tableStale = func(o *informer.Object) bool { return o.Columns != nil && !printer.Follows(o.Columns) }
	}
	if p.sse {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if lerr != nil {
		// As the apiserver does for a too old resourceVersion: 200, then
		// one ERROR event with the 410 status.
		ws.status(apistatus.New(http.StatusGone, metav1.StatusReasonExpired,
			"too old resource version: "+p.rv+" ("+lerr.Error()+"); list again and watch from the list's resourceVersion"))
		_ = ws.flush()
		return
	}
	defer l.Stop()
	gauge := s.metrics.watches.WithLabelValues(info.GVR.GroupResource().String())
	gauge.Inc()
	defer gauge.Dec()
	var bookmarks <-chan time.Time
	if p.bookmarks {
		t := s.opts.bookmarkClock.NewTicker(bookmarkInterval)
		defer t.Stop()
		bookmarks = t.C()
	}
	_ = ws.rc.Flush() // send headers now: clients wait for them

	var timeout <-chan time.Time
	if p.timeout > 0 {
		t := time.NewTimer(p.timeout)
		defer t.Stop()
		timeout = t.C
	}
	recheck := time.NewTicker(s.opts.RecheckInterval)
	defer recheck.Stop()
	rc := auth.NewRecheck(s.opts.RecheckGrace, clock.RealClock{})
	if rv, err := strconv.ParseUint(p.rv, 10, 64); err == nil {
		ws.lastRV = rv
	}
	// The listener is popped until it is empty, a chunk at a time.
	pop := sink.Popper[*informer.Listener]{Chunk: sink.Chunk}
	ls := []*informer.Listener{l}
	// deliver writes what the listener has pending; false when the
	// stream must end (the listener was reset, or the client is gone).
	deliver := func() bool {
		if ctx.Err() != nil {
			return false
		}
		_, err := pop.Pop(ls, ws)
		return err == nil && ctx.Err() == nil
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-timeout:
			return
		case <-bookmarks:
			// The resource's progress, not the last event sent: a quiet
			// filtered watch would otherwise keep an old version and
			// resume into a 410. Pop first, so the bookmark follows every
			// change up to it.
			if !deliver() {
				return
			}
			if rv := max(ws.lastRV, l.Progress()); rv > 0 && !ws.inSnapshot {
				ws.lastRV = rv
				ws.bookmark(rv, false)
			}
		case <-recheck.C:
			_, verdict, err := rc.Reauthorize(ctx, s.opts.Authorizer, auth.UserFrom(ctx), areq, dec)
			if ctx.Err() != nil {
				return
			}
			switch verdict {
			case auth.Ended:
				ws.status(apistatus.FromError(err))
				_ = ws.flush()
				return
			case auth.Deferred:
				if rc.FirstDeferred() {
					s.log.Warn("re-authorization could not be made; the watch goes on for the grace",
						zap.String("user", auth.UserFrom(ctx).Name), zap.Duration("grace", rc.Grace()), zap.Error(err))
				}
				continue
			case auth.Changed:
				if info.Namespaced && rq.namespace == "" {
					ws.status(apistatus.New(http.StatusGone, metav1.StatusReasonExpired,
						"the namespaces you may read changed; list again and watch from the list's resourceVersion"))
					_ = ws.flush()
					return
				}
			}
		case <-wake:
			if !deliver() {
				return
			}
		}
		if err := ws.flush(); err != nil {
			return // the client is gone or stopped reading
		}
		ws.idle()
	}
}

// nameSelector adds metadata.name=name to f's field selector.
func nameSelector(name string, f informer.Filter) fields.Selector {
	sel := fields.OneTermEqualSelector("metadata.name", name)
	if f.Field != nil {
		sel = fields.AndSelectors(f.Field, sel)
	}
	return sel
}
