// recheck.go holds the periodic re-authorization of a socket's
// subscriptions.

package ws

import (
	"slices"
	"strconv"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubegate/internal/apistatus"
	"kubegate/internal/auth"
)

// recheckPass is the re-authorization worker: one pass, then it arms
// the next.
func (s *socket) recheckPass() {
	s.recheck()
	if s.ctx.Err() == nil {
		s.recheckTimer.Reset(s.opts.RecheckInterval)
	}
}

// recheck asks the Authorizer again for every active subscription. A
// denied subscription ends with a 403 error frame; one whose namespace set
// changed restarts under the new set behind a RESET. One whose re-check
// could not be made (the apiserver is unreachable) goes on for
// RecheckGrace since it was last authorized, then ends with 503.
func (s *socket) recheck() {
	s.mu.Lock()
	subs := make([]*subscription, 0, len(s.subs))
	for _, sub := range s.subs {
		if sub.l != nil || sub.win != nil {
			subs = append(subs, sub)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(subs, func(a, b *subscription) int { return cmpString(a.id, b.id) })

	for _, sub := range subs {
		if s.ctx.Err() != nil {
			return
		}
		// A slow answer delays the next pass (one runs at a time).
		dec, verdict, err := sub.recheck.Reauthorize(s.ctx, s.opts.Authorizer, s.user, sub.authz, sub.decision)
		if s.ctx.Err() != nil {
			return
		}
		switch verdict {
		case auth.Deferred:
			if sub.recheck.FirstDeferred() {
				s.log(zapcore.WarnLevel, "re-authorization could not be made; the subscription goes on for the grace",
					zap.String("id", sub.id), zap.Duration("grace", sub.recheck.Grace()), zap.Error(err))
			}
		case auth.Ended:
			st := apistatus.FromError(err)
			if apistatus.Internal(st) {
				s.log(zapcore.WarnLevel, "re-authorization failed; ending subscription", zap.String("id", sub.id), zap.Error(err))
			}
			s.end(sub, st)
		case auth.Changed:
			s.restart(sub, dec)
		}
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// end removes an active subscription with an error frame marked ended.
func (s *socket) end(sub *subscription, st *metav1.Status) {
	s.mu.Lock()
	if s.subs[sub.id] != sub {
		s.mu.Unlock()
		return
	}
	delete(s.subs, sub.id)
	s.enqueueLocked(encodeError(sub.id, "", true, st))
	s.mu.Unlock()
	s.countEnded(sub, st)
	s.signal()
}

// countEnded stops the listener or window of sub, just removed from
// s.subs with st, and counts its end.
func (s *socket) countEnded(sub *subscription, st *metav1.Status) {
	sub.stop()
	s.srv.metrics.subscriptions.Dec()
	s.srv.metrics.clientErrors.WithLabelValues(strconv.Itoa(int(st.Code))).Inc()
}

// restart replaces sub by a subscription under a new decision: RESET, then
// a fresh snapshot.
func (s *socket) restart(sub *subscription, dec auth.Decision) {
	if sub.win != nil {
		s.restartWindow(sub, dec)
		return
	}
	next := *sub
	next.decision = dec
	l, err := s.listen(sub.res, sub.filter, dec, sub.req, "", true)
	if err != nil {
		s.end(sub, apistatus.FromError(err))
		return
	}
	next.l = l
	s.mu.Lock()
	if s.subs[sub.id] != sub {
		s.mu.Unlock()
		l.Stop()
		return
	}
	s.subs[sub.id] = &next
	s.enqueueLocked(encodeReset(sub.id, resetReauthorized))
	s.mu.Unlock()
	sub.l.Stop()
	s.srv.metrics.resets.WithLabelValues(resetReauthorized).Inc()
	s.log(zapcore.InfoLevel, "authorization changed; restarting subscription", zap.String("id", sub.id))
	s.signal()
}

// restartWindow replaces a window subscription by one under a new
// decision, at the same range: its first frame starts with a reset
// (Reauthorized) and holds the window whole.
func (s *socket) restartWindow(sub *subscription, dec auth.Decision) {
	s.mu.Lock()
	rng := sub.win.rng
	s.mu.Unlock()
	win, err := s.openWindow(s.ctx, sub.res, sub.filter, dec, sub.req, &rng)
	if err != nil {
		s.end(sub, apistatus.FromError(err))
		return
	}
	win.first = resetReauthorized
	s.mu.Lock()
	if s.subs[sub.id] != sub {
		s.mu.Unlock()
		win.w.Close()
		return
	}
	// Copied under mu, which guards move: a move not yet applied goes to
	// the new window, and one the writer took meanwhile is handed over
	// by the writer (flushWindow).
	next := *sub
	next.decision, next.win = dec, win
	sub.move = nil
	s.subs[sub.id] = &next
	s.mu.Unlock()
	sub.win.w.Close()
	s.log(zapcore.InfoLevel, "authorization changed; reopening window", zap.String("id", sub.id))
	s.signal()
}
