package scenario

import (
	"math"
	"os"
	"slices"
	"time"
)

// Percentile returns the q-quantile (0 < q <= 1) of samples by the
// nearest-rank method: the smallest sample that at least q of the samples
// do not exceed. It sorts samples in place. With fewer than 1/(1-q)
// samples the top quantiles are the maximum (p99 of 20 samples is the
// slowest one), which is what a reader of a small run should see. It
// returns 0 for no samples.
func Percentile(samples []time.Duration, q float64) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	slices.Sort(samples)
	// The epsilon keeps 0.99*100 at rank 99 despite rounding.
	rank := int(math.Ceil(q*float64(len(samples)) - 1e-9))
	rank = min(max(rank, 1), len(samples))
	return samples[rank-1]
}

// Milliseconds is d in (fractional) milliseconds, the unit of the latency
// figures.
func Milliseconds(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// selfPID is this process, whose CPU use is reported so readers can judge
// whether the client side was the bottleneck.
var selfPID = os.Getpid()
