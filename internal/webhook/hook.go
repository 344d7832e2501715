package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"
	"k8s.io/utils/clock"

	"kubegate/internal/informer"
	"kubegate/internal/sink"
)

// source is the part of *informer.Listener a hook uses; tests replace it.
type source interface {
	PopAtMost(buf []informer.Notification, limit int) []informer.Notification
	Stats() informer.ListenerStats
	Err() error
	Reset()
	Stop()
}

// input is one watched resource of a hook: one entry of its resources.
// It is the sink.Source of its listener, so that the hook renders each
// notification with the entry it came from.
type input struct {
	entry Resource
	info  *informer.ResourceInfo
	// namespace is the entry's namespace, "" for all; collection is the
	// path listing what the entry selects from, the subject of its
	// markers. No two inputs of a hook share a collection or nest.
	namespace  string
	collection string
	src        source
	last       informer.ListenerStats // counters already reported
	// requested counts the resets the hook asked src for since last was
	// taken; they are not overflows.
	requested uint64
	// ended: src ended because the resource is no longer served;
	// reattaching: a goroutine runs reattach for it.
	ended, reattaching bool
	// reattach waits until the resource is served again and returns a
	// new listener for the entry, which starts with a reset. Set by
	// newHook; safe to call from any goroutine.
	reattach func(ctx context.Context) (*informer.ResourceInfo, source, error)
}

// setInfo sets the resolved resource and what follows from it.
func (in *input) setInfo(info *informer.ResourceInfo) {
	in.info = info
	in.namespace = ""
	if info.Namespaced {
		in.namespace = in.entry.Namespace
	}
	in.collection = collectionPath(info.GVR, info.Namespaced, in.namespace)
}

// revival is a listener a reattach goroutine got for in.
type revival struct {
	in   *input
	info *informer.ResourceInfo
	src  source
}

func (in *input) PopAtMost(buf []informer.Notification, limit int) []informer.Notification {
	return in.src.PopAtMost(buf, limit)
}

// hook delivers one webhook's events.
//
// It runs one goroutine (run), which owns every field except done. Its
// listeners buffer changes (bounded, collapsing on overflow) and signal
// wake; run pops them only when it has nothing left to send, so while a
// receiver is failing the backlog stays in the listeners, where it
// collapses to the latest state per object instead of growing. Events are
// sent one at a time in the order popped and a retried event blocks those
// behind it, so no later state of an object overtakes an earlier one.
// When an event runs out of its retry budget, the events taken are
// dropped and every listener is reset, so the receiver is sent a reset,
// the current state and snapshot.end instead; a reset is retried until
// the receiver takes it, so nothing is lost to the budget.
//
// When an input's resource is no longer served, its listener ends (the
// receiver is sent a reset and an empty snapshot) and run starts a
// goroutine, counted in reattaching, that waits until it is served again
// and hands run a new listener on revived; run swaps it in before its
// next pop. run waits for those goroutines, and closes done, when it
// returns.
type hook struct {
	cfg     Spec // with defaults
	secrets [][]byte
	source  string
	types   map[informer.NotificationType]bool
	inputs  []*input
	wake    chan struct{}
	done    chan struct{}
	cancel  context.CancelFunc
	// revived has room for one revival per input, so a reattach
	// goroutine never waits to send.
	revived     chan revival
	reattaching sync.WaitGroup

	client *http.Client
	clock  clock.Clock
	jitter func(time.Duration) time.Duration
	drain  time.Duration
	taken  int    // events popped and not yet settled, for the queue gauge
	seq    uint64 // markers rendered, to tell apart their ids
	popper sink.Popper[*input]
	render renderer
	m      *metrics
	log    *zap.Logger
}

// result is what one event's delivery came to.
type result int

const (
	resultDelivered result = iota
	resultRejected
	resultExhausted   // out of retries: the events taken are superseded
	resultRetry       // a failure worth retrying
	resultGone        // 410: disable the webhook
	resultInterrupted // ctx ended before the event was delivered
)

// maxResponseBody bounds how much of a receiver's answer is read (so the
// connection can be reused) and kept for logs.
const maxResponseBody = 64 << 10

func (h *hook) name() string { return h.cfg.Name }

// run delivers until ctx ends, then spends at most h.drain trying once
// each to deliver the events it has taken or its listeners still buffer.
func (h *hook) run(ctx context.Context) {
	defer close(h.done)
	defer h.client.CloseIdleConnections()
	defer func() {
		for _, in := range h.inputs {
			in.src.Stop()
		}
	}()
	defer h.stopReattaching()
	// When ctx ends, the attempt in flight and the drain after it share
	// h.drain: the attempt is not cut off, since the receiver may already
	// be handling it and cutting it would only make the drain send it
	// again.
	dctx, dcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer dcancel()
	stopDrainTimer := context.AfterFunc(ctx, func() { time.AfterFunc(h.drain, dcancel) })
	defer stopDrainTimer()
	var pending []event
	for ctx.Err() == nil {
		if len(pending) == 0 {
			h.install()
			pending = h.pop(pending, popChunk)
			h.startReattaching(ctx)
			h.updateQueue(len(pending))
			if len(pending) == 0 {
				select {
				case <-ctx.Done():
				case <-h.wake:
				}
				continue
			}
		}
		switch h.deliver(ctx, dctx, &pending[0]) {
		case resultGone:
			h.m.disabled.WithLabelValues(h.name()).Set(1)
			h.log.Error("receiver answered 410 Gone: webhook disabled until the configuration is reloaded",
				zap.Int("undelivered", len(pending)))
			for _, in := range h.inputs {
				in.src.Stop()
			}
			h.m.queue.WithLabelValues(h.name()).Set(0)
			<-ctx.Done()
			return
		case resultInterrupted:
			continue // ctx ended; drain below
		case resultExhausted:
			h.supersede(pending)
			pending = nil
			h.updateQueue(0)
			continue
		}
		pending = pending[1:]
		h.updateQueue(len(pending))
	}
	// What the listeners still buffer is queued too: take it, so the
	// drain tries it after the events taken earlier and counts what it
	// cannot send, instead of dropping it unreported with the listeners.
	pending = h.pop(pending, 0)
	h.drainPending(dctx, pending)
}

// startReattaching starts a reattach goroutine for each input whose
// resource ended and has none.
func (h *hook) startReattaching(ctx context.Context) {
	for _, in := range h.inputs {
		if !in.ended || in.reattaching {
			continue
		}
		in.reattaching = true
		h.reattaching.Add(1)
		go func() {
			defer h.reattaching.Done()
			for {
				info, src, err := in.reattach(ctx)
				if err == nil {
					h.revived <- revival{in: in, info: info, src: src}
					select {
					case h.wake <- struct{}{}:
					default:
					}
					return
				}
				if ctx.Err() != nil {
					return
				}
				h.log.Warn("the resource is served again but the webhook cannot listen to it; waiting to try again",
					zap.String("resource", in.entry.Resource), zap.Error(err))
			}
		}()
	}
}

// install swaps in the listeners the reattach goroutines got. Each
// starts with a reset: the receiver is sent a reset, the objects the
// entry selects now and snapshot.end.
func (h *hook) install() {
	for {
		select {
		case rv := <-h.revived:
			in := rv.in
			in.src.Stop()
			in.src = rv.src
			in.setInfo(rv.info)
			in.ended, in.reattaching = false, false
			in.last, in.requested = informer.ListenerStats{}, 1
			h.m.resets.WithLabelValues(h.name(), reasonResourceServed).Inc()
			h.log.Info("the resource is served again: sending a reset and its current objects", zap.String("collection", in.collection))
		default:
			return
		}
	}
}

// stopReattaching waits for the reattach goroutines, which end with
// run's context, and stops the listeners they got that were not
// installed.
func (h *hook) stopReattaching() {
	h.reattaching.Wait()
	for {
		select {
		case rv := <-h.revived:
			rv.src.Stop()
		default:
			return
		}
	}
}

// drainPending tries each queued event once more, in order, until dctx
// ends (h.drain after the hook was stopped).
func (h *hook) drainPending(dctx context.Context, pending []event) {
	if len(pending) == 0 {
		return
	}
	delivered := 0
	for i := range pending {
		if dctx.Err() == nil {
			if r, _ := h.attempt(dctx, &pending[i]); r == resultDelivered {
				h.m.deliveries.WithLabelValues(h.name(), outcomeDelivered).Inc()
				delivered++
				continue
			}
		}
		h.m.deliveries.WithLabelValues(h.name(), outcomeShutdown).Inc()
	}
	if delivered < len(pending) {
		h.log.Warn("events not delivered at shutdown", zap.Int("undelivered", len(pending)-delivered))
	}
}

// popChunk bounds the events a hook renders ahead of delivering them: a
// snapshot of any size waits in its listener (as object references) and
// is rendered a chunk at a time.
const popChunk = sink.Chunk

// pop takes what the listeners hold, in order per listener, and renders
// the event types the webhook wants, and every reset and snapshot.end
// marker: from each listener, chunks of at most limit notifications until
// it is empty or limit events are pending (limit 0: everything at once).
func (h *hook) pop(pending []event, limit int) []event {
	h.popper.Chunk = limit
	h.render = renderer{h: h, pending: pending, now: h.clock.Now(), limit: limit}
	_, _ = h.popper.Pop(h.inputs, &h.render) // rendering never fails
	pending, h.render.pending = h.render.pending, nil
	for _, in := range h.inputs {
		h.reportOverflows(in)
	}
	return pending
}

// renderer is a hook's sink.Encoder: it appends to pending the events
// the webhook wants for the notifications one pop takes, stamped now.
type renderer struct {
	h       *hook
	pending []event
	now     time.Time
	limit   int // Full at this many pending events; 0: never
}

// Encode renders one notification popped from in.
func (r *renderer) Encode(in *input, n *informer.Notification) error {
	h := r.h
	switch {
	case n.Type == informer.Reset:
		h.log.Warn("reset: sending the current state of the resource between reset and snapshot.end events",
			zap.String("collection", in.collection))
		h.seq++
		r.pending = append(r.pending, newMarker(in, kindReset, 0, h.cfg.Format, h.source, r.now, h.seq))
	case n.Type == informer.EndOfSnapshot:
		h.seq++
		r.pending = append(r.pending, newMarker(in, kindSnapshotEnd, n.RV, h.cfg.Format, h.source, r.now, h.seq))
	case n.Type == informer.Ended:
		// The resource is no longer served, so none of the entry's
		// objects exist: a reset and an empty snapshot say so. (A
		// reset of an ended listener hands out Ended again.)
		if !in.ended {
			in.ended = true
			h.m.resets.WithLabelValues(h.name(), reasonResourceGone).Inc()
			h.log.Warn("the resource is no longer served: sending a reset and an empty snapshot; its events resume once it is served again",
				zap.String("collection", in.collection), zap.Error(in.src.Err()))
		}
		h.seq++
		r.pending = append(r.pending, newMarker(in, kindReset, 0, h.cfg.Format, h.source, r.now, h.seq))
		h.seq++
		r.pending = append(r.pending, newMarker(in, kindSnapshotEnd, n.RV, h.cfg.Format, h.source, r.now, h.seq))
	case h.types[n.Type] && n.Object != nil:
		r.pending = append(r.pending, newEvent(in.info, *n, h.cfg.Format, h.source, r.now))
	}
	return nil
}

// Full reports whether enough events are pending: they are delivered
// first, and the rest waits in the listeners.
func (r *renderer) Full() bool { return r.limit > 0 && len(r.pending) >= r.limit }

// supersede gives up on the events taken, the first of which ran out of
// its retry budget. Rather than losing them it resets every listener: the
// receiver is sent a reset, the current state of each object (which
// carries what the events did, or leaves out objects since deleted) and
// snapshot.end, and the changes from then on. The backlog meanwhile stays
// in the listeners, within their bounds.
func (h *hook) supersede(pending []event) {
	h.m.deliveries.WithLabelValues(h.name(), outcomeSuperseded).Add(float64(len(pending)))
	h.m.resets.WithLabelValues(h.name(), reasonRetriesExhausted).Inc()
	for _, in := range h.inputs {
		in.src.Reset()
		in.requested++
	}
}

func (h *hook) reportOverflows(in *input) {
	s := in.src.Stats()
	if d := s.Collapses - in.last.Collapses; d > 0 {
		h.m.overflows.WithLabelValues(h.name(), "collapse").Add(float64(d))
		h.log.Warn("backlog reached its bound and was collapsed to the latest state per object",
			zap.String("collection", in.collection), zap.Int("maxEvents", h.cfg.MaxEvents), zap.Uint64("collapses", s.Collapses))
	}
	// Resets the hook asked for are counted where it asks; a listener
	// stopped meanwhile does not count them.
	if d := s.Resets - in.last.Resets; d > in.requested {
		d -= in.requested
		h.m.overflows.WithLabelValues(h.name(), "reset").Add(float64(d))
		h.m.resets.WithLabelValues(h.name(), reasonOverflow).Add(float64(d))
		h.log.Warn("backlog reached its bound and could not be collapsed: the receiver gets a reset and the current state",
			zap.String("collection", in.collection), zap.Int("maxEvents", h.cfg.MaxEvents), zap.Uint64("resets", s.Resets))
	}
	in.requested = 0
	in.last = s
}

func (h *hook) updateQueue(taken int) {
	h.taken = taken
	n := taken
	for _, in := range h.inputs {
		n += in.src.Stats().Buffered
	}
	h.m.queue.WithLabelValues(h.name()).Set(float64(n))
}

// deliver sends ev until it is delivered, rejected, out of retries, or ctx
// ends. A reset has no retry budget: it is retried, at most maxBackoff
// apart unless the receiver asks for longer with Retry-After, until the
// receiver takes or rejects it, since giving up on it would only queue
// another. Attempts run under actx, which outlives ctx by the drain time,
// so an attempt in flight when ctx ends can finish. Waits between
// attempts use h.clock.
func (h *hook) deliver(ctx, actx context.Context, ev *event) result {
	r := h.cfg.Retry
	first := h.clock.Now()
	for attempt := 1; ; attempt++ {
		res, retryAfter := h.attempt(actx, ev)
		switch res {
		case resultDelivered:
			h.m.deliveries.WithLabelValues(h.name(), outcomeDelivered).Inc()
			return res
		case resultRejected:
			h.m.deliveries.WithLabelValues(h.name(), outcomeRejected).Inc()
			if ev.marker {
				h.log.Error("receiver rejected a "+ev.kind+" event: it cannot tell which of its objects were deleted until the next reset",
					zap.String("id", ev.id), zap.String("collection", ev.key))
			}
			return res
		case resultGone:
			return res
		}
		if ctx.Err() != nil {
			return resultInterrupted
		}
		// The backlog keeps growing (and collapsing) while this event
		// waits; keep its metrics current.
		for _, in := range h.inputs {
			h.reportOverflows(in)
		}
		h.updateQueue(h.taken)
		wait := retryAfter
		if wait <= 0 {
			wait = h.backoff(attempt)
		}
		if ev.kind != kindReset && (attempt >= r.MaxAttempts || h.clock.Since(first)+wait > r.MaxAge.Duration) {
			h.log.Error("retries exhausted: dropping the events taken; the receiver gets a reset and the current state instead",
				zap.String("id", ev.id), zap.String("type", ev.kind), zap.String("object", ev.key),
				zap.Int("attempts", attempt), zap.Duration("age", h.clock.Since(first)), zap.Int("superseded", h.taken))
			return resultExhausted
		}
		t := h.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return resultInterrupted
		case <-t.C():
		}
	}
}

// backoff is the wait after the given failed attempt: full jitter below
// initialBackoff·2^(attempt-1), capped at maxBackoff.
func (h *hook) backoff(attempt int) time.Duration {
	ceil := h.cfg.Retry.InitialBackoff.Duration
	limit := h.cfg.Retry.MaxBackoff.Duration
	for i := 1; i < attempt && ceil < limit; i++ {
		ceil *= 2
	}
	return h.jitter(min(ceil, limit))
}

// attempt makes one POST. For a retryable failure it also returns the
// wait the receiver asked for with Retry-After (429 and 503), or 0.
func (h *hook) attempt(ctx context.Context, ev *event) (result, time.Duration) {
	actx, cancel := context.WithTimeout(ctx, h.cfg.Timeout.Duration)
	defer cancel()
	ts := h.clock.Now().Unix()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, h.cfg.URL, bytes.NewReader(ev.body))
	if err != nil {
		// The URL was validated at load; this cannot succeed on retry.
		h.log.Error("cannot build request", zap.Error(err))
		return resultRejected, 0
	}
	req.Header.Set("Content-Type", contentType(h.cfg.Format))
	req.Header.Set("User-Agent", "kubegate-webhook")
	req.Header.Set(HeaderID, ev.id)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, Sign(h.secrets, ev.id, ts, ev.body))
	start := time.Now()
	resp, err := h.client.Do(req)
	if err != nil {
		h.m.latency.WithLabelValues(h.name()).Observe(time.Since(start).Seconds())
		h.m.attempts.WithLabelValues(h.name(), "error").Inc()
		if refused := (*AddressRefusedError)(nil); errors.As(err, &refused) {
			h.log.Error("event rejected: the receiver's address is refused", zap.String("id", ev.id), zap.Error(refused))
			return resultRejected, 0
		}
		if ctx.Err() == nil {
			h.log.Warn("delivery attempt failed", zap.String("id", ev.id), zap.Error(redact(err)))
		}
		return resultRetry, 0
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
	_ = resp.Body.Close()
	h.m.latency.WithLabelValues(h.name()).Observe(time.Since(start).Seconds())
	code := resp.StatusCode
	h.m.attempts.WithLabelValues(h.name(), fmt.Sprintf("%dxx", code/100)).Inc()
	log := func(msg string) {
		h.log.Warn(msg, zap.String("id", ev.id), zap.String("type", ev.kind), zap.String("object", ev.key),
			zap.Int("status", code), zap.ByteString("body", body[:min(len(body), 512)]))
	}
	switch {
	case code >= 200 && code < 300:
		return resultDelivered, 0
	case code == http.StatusGone:
		return resultGone, 0
	case code >= 300 && code < 400:
		h.log.Error("receiver redirected; redirects are not followed, event rejected", zap.String("id", ev.id),
			zap.Int("status", code), zap.String("location", resp.Header.Get("Location")))
		return resultRejected, 0
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		log("receiver asked to slow down")
		return resultRetry, retryAfter(resp.Header.Get("Retry-After"), h.clock.Now())
	case code == http.StatusRequestTimeout:
		log("delivery attempt failed")
		return resultRetry, 0
	case code >= 400 && code < 500:
		log("receiver rejected the event; not retried")
		return resultRejected, 0
	default:
		log("delivery attempt failed")
		return resultRetry, 0
	}
}

// retryAfter parses a Retry-After value: delay seconds or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil {
		if s < 0 {
			return 0
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

// redact drops the URL from transport errors: its query may hold a
// receiver's token.
func redact(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// redactURL keeps scheme, host and path: a query may hold a token.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(invalid URL)"
	}
	u.RawQuery = ""
	return u.String()
}
