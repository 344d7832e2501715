package auth

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestLogThrottle: a recurring message is logged once per interval, the
// next line counting those left out.
func TestLogThrottle(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	clk := fakeClock()
	l := newLogThrottle(zap.New(core), "review failed", clk, nil)
	for range 1000 {
		l.Warn(zap.String("k", "v"))
	}
	clk.Step(logEvery)
	l.Warn()
	got := logs.All()
	if len(got) != 2 {
		t.Fatalf("%d lines for 1001 failures over %v, want 2", len(got), logEvery)
	}
	if f := got[1].ContextMap(); f["suppressed"] != int64(999) {
		t.Fatalf("second line: %v, want suppressed 999", f)
	}
}
