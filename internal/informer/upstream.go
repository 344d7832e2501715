package informer

import (
	"context"
	"errors"
	"net/http"
	"sync"

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
//	kube-apiserver ─JSON LIST/WATCH─▶ listWatch (bytes decoded straight into *Object)
//	    └─ cache.Reflector (ListAndWatch, watch-list, relist on 410, backoff)
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

// listWatch lists and watches one resource in all namespaces, decoding
// the JSON bodies as they stream in: a list is never held whole as bytes,
// and no object passes through map[string]any.
type listWatch struct {
	client rest.Interface
	path   string // collection path, e.g. /apis/apps/v1/deployments
	dec    *objectDecoder
}

var _ cache.ListerWatcherWithContext = (*listWatch)(nil)

func newListWatch(client rest.Interface, gvr schema.GroupVersionResource, dec *objectDecoder) *listWatch {
	return &listWatch{client: client, path: resourcePath(gvr), dec: dec}
}

func (lw *listWatch) request(opts *metav1.ListOptions) *rest.Request {
	return lw.client.Get().AbsPath(lw.path).
		SpecificallyVersionedParams(opts, metav1.ParameterCodec, metav1.Unversioned)
}

// ListWithContext implements cache.ListerWithContext.
func (lw *listWatch) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	body, err := lw.request(&opts).Stream(ctx)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	return lw.dec.decodeList(body)
}

// WatchWithContext implements cache.WatcherWithContext.
func (lw *listWatch) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	body, err := lw.request(&opts).Stream(ctx)
	if err != nil {
		return nil, err
	}
	// As rest.Request.Watch reports a body it cannot decode.
	return watch.NewStreamWatcher(newWatchDecoder(body, lw.dec),
		apierrors.NewClientErrorReporter(http.StatusInternalServerError, "GET", "ClientWatchDecoding")), nil
}

// IsWatchListSemanticsUnSupported makes client-go's reflector sync with a
// LIST, then WATCH from the list's resourceVersion, instead of a
// watch-list (a WATCH with sendInitialEvents, client-go's default since
// v0.35). A watch-list makes kube-apiserver encode and send every object
// as a watch event: measured on 10,000 Pods it spent 4.2 s of CPU on the
// gateway's start against 1.2 s for one LIST of the same Pods
// (docs/benchmarks-history.md). The LIST is paged by the reflector and decoded as
// it streams, so neither side holds it whole. A watch that kube-apiserver
// ends cleanly (its timeout) is then resumed with a WATCH from the last
// resourceVersion, where a watch-list client would stream every object
// again; a watch that fails is followed by a LIST from that version.
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

func (f *boundedFIFO) Replace(list []any, rv string) error {
	return f.enqueue(func() error { return f.fifo.Replace(list, rv) })
}

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
