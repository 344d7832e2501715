package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// CPUReading is a process's CPU time so far, read two ways, for measuring
// short intervals: Since of two readings is the CPU used between them.
type CPUReading struct {
	// Threads is the sum of the process's live threads' run time from
	// /proc/<pid>/task/*/schedstat, in nanoseconds; it loses the time of
	// threads that exited.
	Threads time.Duration
	// Ticks is utime+stime from /proc/<pid>/stat (ReadProc): complete,
	// but counted in 10 ms ticks.
	Ticks time.Duration
}

// ReadCPU reads pid's CPU time. For pid 0 it returns the zero reading.
func ReadCPU(pid int) (CPUReading, error) {
	if pid == 0 {
		return CPUReading{}, nil
	}
	st, err := ReadProc(pid)
	if err != nil {
		return CPUReading{}, err
	}
	threads, err := threadsRunTime(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return CPUReading{}, err
	}
	return CPUReading{Threads: threads, Ticks: st.CPU}, nil
}

// Since is the CPU time used between before and r: the threads' run time,
// which is exact to the nanosecond, unless it falls short of the tick count
// by more than two ticks (threads exited in between), then the ticks.
func (r CPUReading) Since(before CPUReading) time.Duration {
	threads, ticks := r.Threads-before.Threads, r.Ticks-before.Ticks
	if ticks-threads > 2*time.Second/clockTick {
		return ticks
	}
	return max(threads, 0)
}

// threadsRunTime sums the first field (time spent on the CPU, ns) of every
// task's schedstat under dir. A thread that exits while the tasks are
// read is skipped.
func threadsRunTime(dir string) (time.Duration, error) {
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "schedstat"))
		if err != nil {
			continue // the thread exited (ENOENT or ESRCH)
		}
		ns, err := parseSchedstat(b)
		if err != nil {
			return 0, fmt.Errorf("%s/%s/schedstat: %w", dir, t.Name(), err)
		}
		sum += ns
	}
	return sum, nil
}

// parseSchedstat reads "<run ns> <wait ns> <timeslices>".
func parseSchedstat(b []byte) (time.Duration, error) {
	f := bytes.Fields(b)
	if len(f) < 1 {
		return 0, errors.New("empty")
	}
	ns, err := strconv.ParseInt(string(f[0]), 10, 64)
	if err != nil || ns < 0 {
		return 0, fmt.Errorf("bad run time %q", f[0])
	}
	return time.Duration(ns), nil
}
