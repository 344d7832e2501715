package main

import (
	"math"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"go.uber.org/zap"
)

// memoryLimitRatio is the share of the container's memory limit given to
// the Go heap limit (GOMEMLIMIT); the rest covers what it does not count
// (goroutine stacks, socket buffers, the runtime's own overhead).
const memoryLimitRatio = 0.9

// setMemoryLimit sets the Go heap limit from the container's memory limit
// (cgroup), so the garbage collector works harder as the cache grows near
// the limit instead of the process being killed for it. An explicit
// GOMEMLIMIT (or AUTOMEMLIMIT=off) wins. It returns the limit in force.
func setMemoryLimit(log *zap.Logger, provider memlimit.Provider) int64 {
	limit, err := memlimit.Set(memlimit.WithRatio(memoryLimitRatio), memlimit.WithProvider(provider))
	switch {
	case err != nil:
		log.Debug("no container memory limit found; the Go heap is not limited", zap.Error(err))
	case limit != math.MaxInt64:
		log.Info("Go heap limit set", zap.Int64("bytes", limit), zap.Float64("shareOfContainerLimit", memoryLimitRatio))
	}
	return limit
}
