package harness

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// clockTick is USER_HZ, the unit of utime and stime in /proc/<pid>/stat. It
// is 100 on every Linux architecture Go supports.
const clockTick = 100

// proc is the /proc file system, opened once.
var proc = sync.OnceValues(procfs.NewDefaultFS)

// ProcStats is a process's resource use as /proc reports it.
type ProcStats struct {
	// CPU is user plus system time since the process started.
	CPU time.Duration
	// RSS is the resident set size now (VmRSS).
	RSS int64
	// HWM is the peak resident set size (VmHWM) since the process started
	// or since ResetPeak.
	HWM int64
}

// ReadProc reads pid's CPU time (/proc/<pid>/stat) and memory
// (/proc/<pid>/status).
func ReadProc(pid int) (ProcStats, error) {
	var st ProcStats
	fs, err := proc()
	if err != nil {
		return st, err
	}
	p, err := fs.Proc(pid)
	if err != nil {
		return st, err
	}
	stat, err := p.Stat()
	if err != nil {
		return st, err
	}
	st.CPU = time.Duration(stat.UTime+stat.STime) * time.Second / clockTick
	status, err := p.NewStatus()
	if err != nil {
		return st, err
	}
	st.RSS, st.HWM = int64(status.VmRSS), int64(status.VmHWM)
	return st, nil
}

// ResetPeak resets pid's VmHWM to its current RSS (clear_refs "5"), so the
// next ReadProc reports the peak since now. The process must belong to the
// caller's user.
func ResetPeak(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// Sub is the CPU used between two readings.
func (s ProcStats) Sub(before ProcStats) time.Duration { return s.CPU - before.CPU }

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
	threads, err := threadsRunTime(pid)
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

// threadsRunTime sums the time on the CPU of every thread of pid
// (/proc/<pid>/task/*/schedstat). A thread that exits while the tasks
// are read is skipped.
func threadsRunTime(pid int) (time.Duration, error) {
	fs, err := proc()
	if err != nil {
		return 0, err
	}
	threads, err := fs.AllThreads(pid)
	if err != nil {
		return 0, err
	}
	var sum time.Duration
	for _, t := range threads {
		s, err := t.Schedstat()
		if errors.Is(err, iofs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			continue // the thread exited
		}
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/task/%d/schedstat: %w", pid, t.PID, err)
		}
		sum += time.Duration(s.RunningNanoseconds)
	}
	return sum, nil
}

// TCPMemory is the memory of every TCP socket's buffers in this network
// namespace (the "mem" pages of /proc/net/sockstat), in bytes: on
// loopback, both ends of every connection, whoever holds them.
func TCPMemory() (int64, error) {
	fs, err := proc()
	if err != nil {
		return 0, err
	}
	st, err := fs.NetSockstat()
	if err != nil {
		return 0, err
	}
	for _, p := range st.Protocols {
		if p.Protocol == "TCP" && p.Mem != nil {
			return int64(*p.Mem) * int64(os.Getpagesize()), nil
		}
	}
	return 0, errors.New("/proc/net/sockstat: no TCP mem")
}
