package informer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// The upstream path of one resource, all on client-go's machinery:
//
//	kube-apiserver ─Table LIST/WATCH─▶ listWatch (bytes decoded straight into *Object)
//	    └─ cache.Reflector (ListAndWatch, relist on 410, backoff)
//	        └─ boundedFIFO: client-go's RealFIFO with atomic events, at most N deltas
//	            └─ cache.New controller's process loop ─▶ processor.process
//
// The reflector and the process loop are client-go's own goroutines, run
// by Controller.RunWithContext and joined by the Manager.

// newRESTClient builds the client the upstream lists and watches with. It
// asks for JSON: the decoder reads the apiserver's JSON bytes directly.
// Its serializer only decodes error bodies (metav1.Status).
func newRESTClient(cfg *rest.Config) (*rest.RESTClient, error) {
	c := rest.CopyConfig(cfg)
	c.APIPath = ""
	c.GroupVersion = nil
	c.AcceptContentTypes = "application/json"
	c.ContentType = "application/json"
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return rest.UnversionedRESTClientFor(c)
}

const (
	// tableAccept asks for kube-apiserver's Table, as kubectl does, and
	// for the objects as they are from a server that has no Tables.
	tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
	// tablePageSize is the limit of each page of a Table list (as
	// client-go's pager's).
	tablePageSize = 500
	// tableListRestarts bounds how often one Table list starts over
	// within a call (a continue token that expired, columns that changed
	// from one page to the next) before it fails and the reflector's
	// own retries take over.
	tableListRestarts = 2
)

// listWatch lists and watches one resource in all namespaces, decoding
// the JSON bodies as they stream in: a list is never held whole as bytes,
// and no object passes through map[string]any.
//
// It asks for the resource as kube-apiserver's Table, with every row's
// object embedded (includeObject=Object): each object arrives with its
// row, the columns kubectl prints, exactly as kube-apiserver prints them
// for built-in types and custom resources alike, computed once per object
// version (Object.Cells, Object.Columns). Table lists are consistent and
// paged (resourceVersion "", limit 500), whatever the reflector asks: a
// list at resourceVersion 0 is answered from kube-apiserver's watch
// cache, which ignores the limit and, for a Table, builds the whole Table
// in memory before sending a byte (32 MB at 10,000 Pods).
//
// An upstream that does not answer a Table with the objects (an
// aggregated API server without Tables, a server that ignores
// includeObject, a 406) is read as plain JSON from then on, as the
// reflector asks, with no cells; this is logged once.
type listWatch struct {
	client rest.Interface
	gvr    schema.GroupVersionResource
	path   string // collection path, e.g. /apis/apps/v1/deployments
	log    *zap.Logger
	// dec decodes the objects, with the resource's selectable fields.
	// Only the reflector's list and watch calls, which never overlap,
	// use it and the fields below.
	dec *objectDecoder
	// pageSize is the limit of each page of a Table list.
	pageSize int

	// plain is set once the resource is read as plain JSON.
	plain atomic.Bool
	// columns are those of the last list (nil for a plain one): the
	// watch that follows the list gives them to its objects, and lists
	// again when its Table has others; the queue hands them to the
	// processor with the list (see boundedFIFO.Replace).
	columns atomic.Pointer[Columns]
	// warnings are the Warning headers' texts kube-apiserver sent with
	// the last list (a deprecated API's, for example); listWarned
	// collects them while a list runs.
	warnings   atomic.Pointer[[]string]
	listWarned warningTexts

	// For a custom resource, readCRD reads CRDs: the resource's
	// selectableFields are read again from its CRD before each list and
	// at each watch's start but the first after a list (kube-apiserver
	// rebuilds a CRD's storage when its spec changes, which ends the
	// watches). fields is the resource's field set, which a change
	// updates once a list has decoded the objects with it.
	readCRD           func(ctx context.Context, name string) ([]byte, error)
	fields            *sharedFields
	namespaced        bool
	keepManagedFields bool
	// pending is a field set a watch's start found, for the next list;
	// watched says a watch has started since the last list.
	pending *fieldSet
	watched bool
}

var _ cache.ListerWatcherWithContext = (*listWatch)(nil)

func newListWatch(client rest.Interface, gvr schema.GroupVersionResource, dec *objectDecoder, log *zap.Logger) *listWatch {
	return &listWatch{client: client, gvr: gvr, path: resourcePath(gvr), dec: dec, log: log, pageSize: tablePageSize}
}

func (lw *listWatch) request(opts *metav1.ListOptions) *rest.Request {
	return lw.client.Get().AbsPath(lw.path).
		SpecificallyVersionedParams(opts, metav1.ParameterCodec, metav1.Unversioned)
}

// listedColumns returns the columns of the last list.
func (lw *listWatch) listedColumns() *Columns { return lw.columns.Load() }

// usePlain reads the resource as plain JSON from now on.
func (lw *listWatch) usePlain(reason string) {
	if lw.plain.CompareAndSwap(false, true) {
		lw.log.Info("the upstream does not serve this resource as a Table with its objects; reading it as plain JSON, without kube-apiserver's columns",
			zap.String("reason", reason))
	}
}

// ListWithContext implements cache.ListerWithContext.
func (lw *listWatch) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	var fields *fieldSet
	if opts.Continue == "" { // not a plain list's next page
		fields = lw.refreshFields(ctx)
	}
	lw.listWarned = nil
	l, err := lw.list(ctx, opts)
	if err == nil {
		texts := []string(slices.Clone(lw.listWarned))
		lw.warnings.Store(&texts)
	}
	if err == nil && fields != nil {
		lw.fields.p.Store(fields)
		lw.log.Info("the CustomResourceDefinition's selectableFields changed; the objects were listed again with them",
			zap.Strings("fields", fields.names))
	}
	return l, err
}

func (lw *listWatch) list(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	if !lw.plain.Load() {
		l, err := lw.listTable(ctx)
		if !errors.Is(err, errNoTable) {
			return l, err
		}
	}
	lw.columns.Store(nil)
	body, err := lw.request(&opts).WarningHandler(&lw.listWarned).Stream(ctx)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	return lw.dec.decodeList(body)
}

// listedWarnings returns the Warning headers' texts of the last list.
func (lw *listWatch) listedWarnings() []string {
	if p := lw.warnings.Load(); p != nil {
		return *p
	}
	return nil
}

// warningTexts collects the texts of the Warning headers of one list's
// requests, each once (every page of a deprecated API carries the same).
type warningTexts []string

func (w *warningTexts) HandleWarningHeader(code int, _ string, text string) {
	if code == 299 && text != "" && !slices.Contains(*w, text) {
		*w = append(*w, text)
	}
}

// refreshFields, before a list of a custom resource, reads its CRD's
// selectableFields (unless a watch's start just did) and, when they
// changed, gives lw a decoder that extracts them; it returns the new
// field set, to be published once the list has succeeded. A CRD that
// cannot be read leaves the fields as they are.
func (lw *listWatch) refreshFields(ctx context.Context) *fieldSet {
	lw.watched = false
	if lw.readCRD == nil {
		return nil
	}
	set := lw.pending
	lw.pending = nil
	if set == nil {
		s, crd, err := readCRDFields(ctx, lw.readCRD, lw.gvr, lw.namespaced)
		if err != nil || !crd {
			return nil
		}
		set = s
	}
	if set.equal(lw.fields.load()) {
		return nil
	}
	lw.dec = newFieldDecoder(lw.dec.gvk, lw.keepManagedFields, set.fields)
	return set
}

// fieldsChanged, at a watch's start (but the first after a list), reads
// the custom resource's CRD and reports whether its selectableFields
// changed; the next list then extracts them.
func (lw *listWatch) fieldsChanged(ctx context.Context) bool {
	if lw.readCRD == nil {
		return false
	}
	first := !lw.watched
	lw.watched = true
	if first {
		return false
	}
	set, crd, err := readCRDFields(ctx, lw.readCRD, lw.gvr, lw.namespaced)
	if err != nil || !crd || set.equal(lw.fields.load()) {
		return false
	}
	lw.pending = set
	return true
}

// errNoTable says the upstream answered a Table request with something
// else; usePlain has been called.
var errNoTable = errors.New("no Table with objects")

// errRestart is a reason for a Table list to start over from its first
// page.
type errRestart struct{ err error }

func (e *errRestart) Error() string { return e.err.Error() }
func (e *errRestart) Unwrap() error { return e.err }

// listTable lists the resource as a Table, page by page, starting over
// (up to tableListRestarts times) when a page's continue token has
// expired or the columns changed between pages. On success the list's
// columns become lw's.
func (lw *listWatch) listTable(ctx context.Context) (*objectList, error) {
	for restarts := 0; ; restarts++ {
		l, cols, err := lw.listTablePages(ctx)
		if r := (*errRestart)(nil); errors.As(err, &r) {
			if restarts < tableListRestarts {
				lw.log.Info("listing again from the first page", zap.Error(r.err))
				continue
			}
			err = r.err
		}
		if err != nil {
			return nil, err
		}
		lw.columns.Store(cols)
		return l, nil
	}
}

func (lw *listWatch) listTablePages(ctx context.Context) (*objectList, *Columns, error) {
	out := &objectList{Items: []*Object{}}
	cols := lw.columns.Load() // equal columns keep their pointer
	cont := ""
	for page := 0; ; page++ {
		req := lw.client.Get().AbsPath(lw.path).SetHeader("Accept", tableAccept).
			Param("includeObject", string(metav1.IncludeObject)).
			Param("limit", strconv.Itoa(lw.pageSize)).WarningHandler(&lw.listWarned)
		if cont != "" {
			req.Param("continue", cont)
		}
		body, err := req.Stream(ctx)
		switch {
		case err == nil:
		case apierrors.IsNotAcceptable(err):
			lw.usePlain(err.Error())
			return nil, nil, errNoTable
		case cont != "" && (apierrors.IsResourceExpired(err) || apierrors.IsGone(err)):
			// The continue token's version was compacted: a new
			// consistent list starts from the first page.
			return nil, nil, &errRestart{fmt.Errorf("page %d: %w", page+1, err)}
		default:
			return nil, nil, err
		}
		l, err := lw.dec.decodeList(body)
		body.Close()
		switch {
		case err != nil:
			return nil, nil, err
		case l.table == nil:
			lw.usePlain("a Table list was answered with a plain list")
			return nil, nil, errNoTable
		case l.table.partial:
			lw.usePlain("a Table list's rows lack their objects (includeObject=Object was not honoured)")
			return nil, nil, errNoTable
		}
		c, err := columnsOf(cols, l.table.columns)
		switch {
		case err != nil:
			return nil, nil, fmt.Errorf("decode %s list: %w", lw.dec.gvk.Kind, err)
		case page > 0 && c != cols:
			return nil, nil, &errRestart{fmt.Errorf("the Table's columns changed at page %d", page+1)}
		}
		cols = c
		for _, o := range l.Items {
			o.Columns = cols
		}
		if page == 0 {
			out.ResourceVersion = l.ResourceVersion
		}
		out.Items = append(out.Items, l.Items...)
		if cont = l.Continue; cont == "" {
			return out, cols, nil
		}
	}
}

// WatchWithContext implements cache.WatcherWithContext.
func (lw *listWatch) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	if lw.fieldsChanged(ctx) {
		// The reflector lists again (after its backoff), with the new
		// fields, as after any watch it cannot start.
		return nil, apierrors.NewResourceExpired("the CustomResourceDefinition's selectableFields changed; listing again")
	}
	opts.Watch = true
	req := lw.request(&opts)
	table := !lw.plain.Load()
	if table {
		req.SetHeader("Accept", tableAccept).Param("includeObject", string(metav1.IncludeObject))
	}
	body, err := req.Stream(ctx)
	if err != nil {
		return nil, err
	}
	dec := newWatchDecoder(body, lw.dec)
	if table {
		dec = newTableWatchDecoder(body, lw.dec, lw.columns.Load(), lw.usePlain)
	}
	// As rest.Request.Watch reports a body it cannot decode.
	return watch.NewStreamWatcher(dec,
		apierrors.NewClientErrorReporter(http.StatusInternalServerError, "GET", "ClientWatchDecoding")), nil
}

// IsWatchListSemanticsUnSupported makes client-go's reflector sync with a
// LIST, then WATCH from the list's resourceVersion, instead of a
// watch-list (a WATCH with sendInitialEvents, client-go's default since
// v0.35). A watch-list makes kube-apiserver encode and send every object
// as a watch event: measured on 10,000 Pods it spent 4.2 s of CPU on the
// gateway's start against 1.2 s for one LIST of the same Pods
// (docs/benchmarks-history.md). The LIST is paged and decoded as
// it streams, so neither side holds it whole. A watch that kube-apiserver
// ends cleanly (its timeout) is then resumed with a WATCH from the last
// resourceVersion, where a watch-list client would stream every object
// again; a watch that fails is followed by a LIST.
func (lw *listWatch) IsWatchListSemanticsUnSupported() bool { return true }

// List implements cache.Lister (the reflector uses the context variants).
func (lw *listWatch) List(opts metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(context.Background(), opts)
}

// Watch implements cache.Watcher.
func (lw *listWatch) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), opts)
}

// boundedFIFO is client-go's RealFIFO, emitting atomic ReplacedAll and
// Bookmark deltas, holding at most max deltas at once.
//
// At the bound the reflector waits in Add (or Update, Delete, Bookmark,
// Replace) until the process loop pops a delta: it stops reading the watch
// stream, so TCP flow control pushes back to kube-apiserver, which ends a
// watcher that stays blocked. The reflector then re-watches from the last
// resourceVersion it queued, or relists if that is compacted. Nothing is
// lost or reordered; the cost is a re-watch or a relist.
//
// A ReplacedAll counts as one delta, though it holds a whole list: the
// list is bounded by the resource's size, not by the queue.
type boundedFIFO struct {
	fifo *cache.RealFIFO
	// slots holds one token per queued delta; its capacity is the bound.
	slots chan struct{}
	// closed is closed by Close, so a producer waiting for a slot gives
	// up when the controller stops.
	closed    chan struct{}
	closeOnce sync.Once
	// listColumns, when set, returns the columns of the list being
	// queued by Replace (listWatch.listedColumns).
	listColumns func() *Columns
}

var _ cache.Queue = (*boundedFIFO)(nil)

func newBoundedFIFO(max int) *boundedFIFO {
	return &boundedFIFO{
		fifo: cache.NewRealFIFOWithOptions(cache.RealFIFOOptions{
			KeyFunction:           cache.MetaNamespaceKeyFunc,
			AtomicEvents:          true,
			EmitDeltaTypeBookmark: true,
			// The producer is not held up while a delta is processed;
			// the bound above is what stops it.
			UnlockWhileProcessing: true,
		}),
		slots:  make(chan struct{}, max),
		closed: make(chan struct{}),
	}
}

// enqueue takes a slot, waiting while the queue is full, and runs add.
func (f *boundedFIFO) enqueue(add func() error) error {
	select {
	case f.slots <- struct{}{}:
	case <-f.closed:
		return cache.ErrFIFOClosed
	}
	if err := add(); err != nil {
		<-f.slots
		return err
	}
	return nil
}

func (f *boundedFIFO) Add(obj any) error { return f.enqueue(func() error { return f.fifo.Add(obj) }) }
func (f *boundedFIFO) Update(obj any) error {
	return f.enqueue(func() error { return f.fifo.Update(obj) })
}
func (f *boundedFIFO) Delete(obj any) error {
	return f.enqueue(func() error { return f.fifo.Delete(obj) })
}
func (f *boundedFIFO) Resync() error { return f.enqueue(f.fifo.Resync) }

// Replace queues a (re)list. The reflector calls it right after the list,
// so the list's columns go with it, in order with the other deltas: as
// the last of the objects, a listedColumns, which processor.replaceLocked
// takes out. (A ReplacedAll delta carries only objects and a
// resourceVersion; the columns of an empty list must reach the processor
// too.)
func (f *boundedFIFO) Replace(list []any, rv string) error {
	if f.listColumns != nil {
		list = append(list[:len(list):len(list)], listedColumns{f.listColumns()})
	}
	return f.enqueue(func() error { return f.fifo.Replace(list, rv) })
}

// listedColumns ends the objects of a ReplacedAll delta: the list's
// columns (see boundedFIFO.Replace).
type listedColumns struct{ columns *Columns }

// Bookmark implements cache.ReflectorBookmarkStore, so the processor sees
// the watch's progress as a delta in order with the events.
func (f *boundedFIFO) Bookmark(rv string) error {
	return f.enqueue(func() error { return f.fifo.Bookmark(rv) })
}

// Pop frees the popped delta's slot before processing it, so the reflector
// can queue the next one meanwhile.
func (f *boundedFIFO) Pop(process cache.PopProcessFunc) (any, error) {
	return f.fifo.Pop(func(obj any, isInInitialList bool) error {
		<-f.slots
		return process(obj, isInInitialList)
	})
}

func (f *boundedFIFO) HasSynced() bool                     { return f.fifo.HasSynced() }
func (f *boundedFIFO) HasSyncedChecker() cache.DoneChecker { return f.fifo.HasSyncedChecker() }

func (f *boundedFIFO) Close() {
	f.closeOnce.Do(func() { close(f.closed) })
	f.fifo.Close()
}

// drain closes the queue and hands what it still holds to process, in
// order. The controller's process loop stops at once when its context
// ends; drain lets a resource that is gone deliver the changes its
// reflector had queued (the deletions that precede the end) before its
// listeners are ended. Call it only once the controller has stopped.
func (f *boundedFIFO) drain(process cache.PopProcessFunc) {
	f.Close()
	for {
		// A closed RealFIFO still pops what it holds, then reports
		// ErrFIFOClosed; process errors are logged by process.
		if _, err := f.Pop(process); errors.Is(err, cache.ErrFIFOClosed) {
			return
		}
	}
}

// newController wires one resource's reflector, queue and processor with
// client-go's low-level controller. Run it with RunWithContext.
func newController(lw cache.ListerWatcher, q cache.Queue, p *processor, onWatchError cache.WatchErrorHandlerWithContext) cache.Controller {
	return cache.New(&cache.Config{
		Queue:                        q,
		ListerWatcher:                lw,
		Process:                      p.process,
		ObjectType:                   &Object{},
		ObjectDescription:            p.gvr.String(),
		WatchErrorHandlerWithContext: onWatchError,
	})
}
