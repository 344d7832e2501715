// subscribe.go holds the subscribe protocol: subscribe, unsubscribe and
// the error frames that answer requests.

package ws

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"kubegate/internal/apistatus"
	"kubegate/internal/auth"
	"kubegate/internal/informer"
	"kubegate/internal/rows"
)

// subscription is one subscribe request. Fields are set before it is
// visible to the writer and never change after (but cancel); a
// re-authorization that changes the namespace set replaces the
// subscription with a new value.
type subscription struct {
	id       string
	qid      []byte // id as a JSON string
	req      *clientFrame
	info     *informer.ResourceInfo
	res      *informer.Resource
	filter   informer.Filter // as requested, before authorization narrows it
	authz    auth.Request    // what it is authorized as, at subscribe and each re-check
	decision auth.Decision
	recheck  *auth.Recheck // set when active; used by the re-check worker only
	// rows, for a subscription with rows ("as": "Table"), computes and
	// encodes them; nil for objects.
	rows *rows.Printer
	l    listener // nil while pending, and for a window
	// win is an active window subscription's window; nil while pending
	// and for a subscription to every matching object.
	win *window
	// move is a window frame the writer has yet to apply. Guarded by
	// socket.mu.
	move *windowMove
	// cancel ends a pending subscribe; nil once active. Guarded by
	// socket.mu.
	cancel context.CancelFunc
}

// stop stops an active subscription's listener or closes its window.
func (sub *subscription) stop() {
	if sub.l != nil {
		sub.l.Stop()
	}
	if sub.win != nil {
		sub.win.w.Close()
	}
}

// listener is what a socket uses of its subscription's
// *informer.Listener: the writer pops it (and asks why it ended) and the
// socket stops it. Tests put a fake in its place to feed a socket
// without an apiserver.
type listener interface {
	PopAtMost(buf []informer.Notification, limit int) []informer.Notification
	Err() error
	Stop()
}

// PopAtMost pops the subscription's listener, so that the writer pops
// subscriptions (sink.Source) and encodes each event with its id.
func (sub *subscription) PopAtMost(buf []informer.Notification, limit int) []informer.Notification {
	return sub.l.PopAtMost(buf, limit)
}

func (s *socket) sendError(e *requestError) {
	s.srv.metrics.clientErrors.WithLabelValues(strconv.Itoa(int(e.Status.Code))).Inc()
	s.enqueue(encodeError(e.ID, e.Request, false, e.Status))
}

func (s *socket) refuse(f *clientFrame, code int, reason metav1.StatusReason, msg string) {
	s.sendError(&requestError{ID: f.ID, Request: f.Type, Status: apistatus.New(code, reason, msg)})
}

// subscribe admits a subscribe request and hands it to a worker.
func (s *socket) subscribe(f *clientFrame) {
	s.mu.Lock()
	switch {
	case s.subs[f.ID] != nil:
		s.mu.Unlock()
		s.refuse(f, http.StatusConflict, metav1.StatusReasonAlreadyExists,
			fmt.Sprintf("subscription %q already exists on this socket; unsubscribe it first or choose another id", f.ID))
		return
	case len(s.subs) >= s.opts.MaxSubscriptionsPerSocket:
		s.mu.Unlock()
		s.refuse(f, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests,
			fmt.Sprintf("too many subscriptions on this socket (limit %d)", s.opts.MaxSubscriptionsPerSocket))
		return
	case !s.limiter.Allow():
		s.mu.Unlock()
		s.refuse(f, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests,
			fmt.Sprintf("subscribing too fast (limit %g per second)", s.opts.SubscribeRate))
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	sub := &subscription{id: f.ID, qid: quoteID(f.ID), req: f, cancel: cancel}
	s.subs[f.ID] = sub
	s.wg.Add(1)
	s.mu.Unlock()
	s.srv.metrics.subscriptions.Inc()

	go func() {
		defer s.wg.Done()
		defer cancel()
		s.startSubscription(ctx, sub)
	}()
}

// startSubscription resolves, authorizes and starts a pending
// subscription, then activates it with its ack, or removes it with an
// error frame. Runs in a worker.
func (s *socket) startSubscription(ctx context.Context, sub *subscription) {
	p, err := s.prepare(ctx, sub.req)
	s.mu.Lock()
	if s.subs[sub.id] != sub {
		// Unsubscribed (and acknowledged) meanwhile, or the socket ended.
		s.mu.Unlock()
		if p.l != nil {
			p.l.Stop()
		}
		if p.win != nil {
			p.win.w.Close()
		}
		return
	}
	if err != nil {
		delete(s.subs, sub.id)
		s.mu.Unlock()
		s.srv.metrics.subscriptions.Dec()
		var re *requestError
		st := apistatus.FromError(err)
		if errors.As(err, &re) {
			st = re.Status
		} else if apistatus.Internal(st) && !errors.Is(err, context.Canceled) {
			// A cancelled subscribe is the client leaving mid-subscribe,
			// not a failure worth an error log.
			s.log(zapcore.ErrorLevel, "subscribe failed", zap.String("id", sub.id), zap.String("resource", sub.req.Resource), zap.Error(err))
		}
		s.sendError(&requestError{ID: sub.id, Request: typeSubscribe, Status: st})
		return
	}
	// The resource's own info rather than the one Resolve built for this
	// request, and no context any more: an idle subscription keeps only
	// what it needs.
	sub.info, sub.res, sub.filter, sub.authz, sub.decision = p.res.Info, p.res, p.filter, p.authz, p.decision
	sub.rows, sub.win = p.rows, p.win
	if p.l != nil { // a nil *Listener is not a nil listener
		sub.l = p.l
	}
	sub.recheck = auth.NewRecheck(s.opts.RecheckGrace, s.opts.clock)
	sub.cancel = nil // the worker cancels the context when it returns
	if sub.win != nil {
		s.enqueueLocked(windowAck(sub))
	} else {
		s.enqueueLocked(encodeAck(sub.id, typeSubscribe, sub.info, sortedNamespaces(sub.decision), columns(sub.rows)))
	}
	if p.expired {
		s.enqueueLocked(encodeReset(sub.id, resetExpired))
		s.srv.metrics.resets.WithLabelValues(resetExpired).Inc()
	}
	s.mu.Unlock()
	s.signal()
}

// prepared is what a subscribe resolved to.
type prepared struct {
	info     *informer.ResourceInfo
	res      *informer.Resource
	filter   informer.Filter
	authz    auth.Request
	decision auth.Decision
	l        *informer.Listener
	win      *window       // for a window subscription, instead of l
	rows     *rows.Printer // for a subscription with rows
	// expired: the resume point was older than the history, so the
	// listener starts with a snapshot behind a RESET instead.
	expired bool
}

// prepare resolves, validates and authorizes a subscribe request, waits
// for the resource's cache and adds the listener.
func (s *socket) prepare(ctx context.Context, f *clientFrame) (p prepared, err error) {
	mgr := s.opts.Manager
	if p.info, err = mgr.Resolve(ctx, f.Resource); err != nil {
		return p, err
	}
	if !p.info.Namespaced && f.Namespace != "" {
		return p, &requestError{Status: apistatus.New(http.StatusBadRequest, metav1.StatusReasonBadRequest,
			fmt.Sprintf("%s is cluster-scoped; namespace must be empty", p.info.GVR.GroupResource()))}
	}
	if p.filter, err = informer.ParseFilter(p.info, f.Namespace, f.LabelSelector, f.FieldSelector); err != nil {
		return p, err
	}
	p.authz = watchRequest(p.info, f)
	if p.decision, err = s.opts.Authorizer.Authorize(ctx, s.user, p.authz); err != nil {
		return p, err
	}
	if p.res, err = mgr.ResourceFor(ctx, p.info); err != nil {
		return p, err
	}
	syncCtx, cancel := context.WithTimeout(ctx, s.opts.SyncTimeout)
	err = p.res.WaitForSync(syncCtx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return p, ctx.Err()
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return p, &requestError{Status: apistatus.New(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable,
				fmt.Sprintf("the cache of %s did not fill within %s; try again", p.info.GVR.GroupResource(), s.opts.SyncTimeout))}
		}
		return p, err
	}
	if f.Limit != nil {
		p.win, err = s.openWindow(ctx, p.res, p.filter, p.decision, f, nil)
		return p, err
	}
	if f.As == asTable {
		// The columns of the resource as of now; the subscription keeps
		// them (a CRD's changed printer columns need a new subscription).
		p.rows = rows.ForResource(ctx, mgr, p.res)
	}
	p.l, err = s.listen(p.res, p.filter, p.decision, f, f.ResourceVersion, f.initialEvents())
	if errors.Is(err, informer.ErrExpired) {
		p.expired = true
		p.l, err = s.listen(p.res, p.filter, p.decision, f, "", true)
	}
	return p, err
}

// watchRequest is what a subscription is authorized as, at subscribe
// and at each re-check: a watch of its resource in its namespace, named
// as kube-apiserver names a watch with the same selectors (a
// metadata.name field selector), so RBAC resourceNames apply.
func watchRequest(info *informer.ResourceInfo, f *clientFrame) auth.Request {
	return auth.Request{Verb: "watch", Resource: info.GVR, Namespaced: info.Namespaced, Namespace: f.Namespace,
		Name: auth.SelectedName(url.Values{"labelSelector": {f.LabelSelector}, "fieldSelector": {f.FieldSelector}})}
}

// listen adds a listener with filter narrowed by the decision.
func (s *socket) listen(res *informer.Resource, filter informer.Filter, dec auth.Decision, f *clientFrame, rv string, initial bool) (*informer.Listener, error) {
	filter.Namespaces = dec.Namespaces
	return res.AddListener(informer.ListenerOptions{
		Filter:            filter,
		ResyncPeriod:      f.resync,
		ResyncBudget:      s.budget,
		SendInitialEvents: initial,
		ResourceVersion:   rv,
		Overflow:          informer.OverflowReset,
		MaxEvents:         s.opts.ListenerMaxEvents,
		MaxBytes:          s.opts.ListenerMaxBytes,
		OnWake:            s.signal,
	})
}

func sortedNamespaces(d auth.Decision) []string {
	if d.Namespaces == nil {
		return nil
	}
	return sets.List(d.Namespaces)
}

// unsubscribe ends a subscription (pending or active) and acknowledges it.
// Events the writer already popped may precede the ack; none follow it.
func (s *socket) unsubscribe(f *clientFrame) {
	s.mu.Lock()
	sub := s.subs[f.ID]
	if sub == nil {
		s.mu.Unlock()
		s.refuse(f, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("no subscription %q on this socket", f.ID))
		return
	}
	delete(s.subs, f.ID)
	s.enqueueLocked(encodeAck(f.ID, typeUnsubscribe, nil, nil, nil))
	cancel := sub.cancel
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	sub.stop() // a pending subscription has nothing to stop yet
	s.srv.metrics.subscriptions.Dec()
	s.signal()
}
