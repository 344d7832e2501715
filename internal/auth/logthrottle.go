package auth

import (
	"sync"
	"time"

	"go.uber.org/zap"
	"k8s.io/utils/clock"
)

// logEvery is how often a throttled message is logged at most.
const logEvery = 10 * time.Second

// logThrottle logs a message that may recur for every request (a review
// that failed, while the apiserver is down or a flood is on) at most once
// per logEvery: the first occurrence at once, the next ones counted and
// reported in the next line written ("suppressed": how many were left
// out since the last line), and in kubegate_auth_log_suppressed_total. A
// flood then costs a few lines a minute instead of one per request.
type logThrottle struct {
	log     *zap.Logger
	msg     string
	clock   clock.PassiveClock
	metrics *Metrics

	// mu guards last and suppressed.
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func newLogThrottle(log *zap.Logger, msg string, c clock.PassiveClock, m *Metrics) *logThrottle {
	return &logThrottle{log: log, msg: msg, clock: c, metrics: m}
}

// Warn logs the message with fields at warn level, or counts it.
func (t *logThrottle) Warn(fields ...zap.Field) {
	now := t.clock.Now()
	t.mu.Lock()
	if !t.last.IsZero() && now.Sub(t.last) < logEvery {
		t.suppressed++
		t.mu.Unlock()
		t.metrics.logSuppressed(t.msg)
		return
	}
	n, prev := t.suppressed, t.last
	t.last, t.suppressed = now, 0
	t.mu.Unlock()
	if n > 0 {
		fields = append(fields, zap.Int("suppressed", n), zap.Duration("suppressedOver", now.Sub(prev)))
	}
	t.log.Warn(t.msg, fields...)
}
