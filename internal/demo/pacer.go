package demo

import (
	"context"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
)

// pacer spaces calls to wait evenly at a rate per second, with a burst of
// one. Unlike rate.Limiter.Wait it takes time from an injected clock.
type pacer struct {
	lim *rate.Limiter
	clk clock.Clock
}

func newPacer(perSecond float64, clk clock.Clock) *pacer {
	return &pacer{lim: rate.NewLimiter(rate.Limit(perSecond), 1), clk: clk}
}

// wait blocks until the next call is due or ctx ends.
func (p *pacer) wait(ctx context.Context) error {
	now := p.clk.Now()
	r := p.lim.ReserveN(now, 1)
	d := r.DelayFrom(now)
	if d <= 0 {
		return ctx.Err()
	}
	t := p.clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		r.CancelAt(p.clk.Now())
		return ctx.Err()
	}
}
