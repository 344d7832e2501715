package main

import (
	"math"
	"os"
	"runtime/debug"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"go.uber.org/zap/zaptest"
)

func TestSetMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	log := zaptest.NewLogger(t)
	// t.Setenv restores the variables afterwards; unset them for the
	// container-limit cases.
	t.Setenv("GOMEMLIMIT", "")
	t.Setenv("AUTOMEMLIMIT", "")
	os.Unsetenv("GOMEMLIMIT")
	os.Unsetenv("AUTOMEMLIMIT")

	const gib = 1 << 30
	ratio := memoryLimitRatio // a variable: the product is not an integer constant
	if got, want := setMemoryLimit(log, memlimit.Limit(gib)), int64(float64(gib)*ratio); got != want || debug.SetMemoryLimit(-1) != want {
		t.Fatalf("limit = %d (runtime %d), want %d", got, debug.SetMemoryLimit(-1), want)
	}
	noLimit := func() (uint64, error) { return 0, memlimit.ErrNoLimit }
	if got := setMemoryLimit(log, noLimit); got != math.MaxInt64 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Fatalf("without a container limit: %d, want none", got)
	}
	// An explicit GOMEMLIMIT wins over the container's limit.
	debug.SetMemoryLimit(123 << 20)
	t.Setenv("GOMEMLIMIT", "123MiB")
	if got := setMemoryLimit(log, memlimit.Limit(gib)); got != 123<<20 || debug.SetMemoryLimit(-1) != 123<<20 {
		t.Fatalf("with GOMEMLIMIT: %d, want %d", got, 123<<20)
	}
}
