package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is USER_HZ, the unit of utime and stime in /proc/<pid>/stat. It
// is 100 on every Linux architecture Go supports.
const clockTick = 100

// selfPID is this process, whose CPU use is reported so readers can judge
// whether the client side was the bottleneck.
var selfPID = os.Getpid()

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

// ReadProc reads pid's CPU time and memory from /proc.
func ReadProc(pid int) (ProcStats, error) {
	var st ProcStats
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return st, err
	}
	// The command name (field 2) may contain spaces; fields after it are
	// plain numbers. utime and stime are fields 14 and 15.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return st, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 13 {
		return st, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return st, fmt.Errorf("/proc/%d/stat: bad utime/stime %q %q", pid, fields[11], fields[12])
	}
	st.CPU = time.Duration(utime+stime) * time.Second / clockTick

	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		var dst *int64
		switch {
		case strings.HasPrefix(line, "VmRSS:"):
			dst = &st.RSS
		case strings.HasPrefix(line, "VmHWM:"):
			dst = &st.HWM
		default:
			continue
		}
		// "VmRSS:	  123456 kB"
		f := strings.Fields(line)
		if len(f) >= 2 {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err == nil {
				*dst = kb << 10
			}
		}
	}
	return st, sc.Err()
}

// ResetPeak resets pid's VmHWM to its current RSS (clear_refs "5"), so the
// next ReadProc reports the peak since now. The process must belong to the
// caller's user.
func ResetPeak(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// Sub is the CPU used between two readings.
func (s ProcStats) Sub(before ProcStats) time.Duration { return s.CPU - before.CPU }
