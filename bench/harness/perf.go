package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Profiler records a CPU profile of a running process with Linux perf
// (perf record -g), for finding what limits the serving processes without
// building profiling endpoints into them. Go binaries keep frame pointers,
// so perf's call graphs are complete. Read a profile with
//
//	perf report -i <file> --no-children --stdio | head -60
type Profiler struct {
	cmd  *exec.Cmd
	done chan error
}

// StartPerf starts perf record on pid writing to dir/name.perf.data. It
// returns nil (and says why on log) when perf is not available.
func StartPerf(dir, name string, pid int, log func(string, ...any)) *Profiler {
	if dir == "" {
		return nil
	}
	path, err := exec.LookPath("perf")
	if err != nil {
		log("  no perf (%v): no profile for %s", err, name)
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log("  profile dir: %v", err)
		return nil
	}
	out := filepath.Join(dir, name+".perf.data")
	cmd := exec.Command(path, "record", "-F", "499", "-g", "-p", fmt.Sprint(pid), "-o", out, "--quiet")
	if err := cmd.Start(); err != nil {
		log("  perf: %v", err)
		return nil
	}
	p := &Profiler{cmd: cmd, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	log("  profiling pid %d into %s", pid, out)
	return p
}

// Stop ends the recording (SIGINT makes perf write its file) and waits.
func (p *Profiler) Stop() {
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
