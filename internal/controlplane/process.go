package controlplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// errPortInUse marks a start that failed because another process took one
// of the ports chosen for it between choosing and binding.
var errPortInUse = errors.New("port already in use")

// Stop bounds: SIGTERM first, SIGKILL after stopGrace, then at most
// killGrace for the kernel to reap it.
const (
	stopGrace = 10 * time.Second
	killGrace = 5 * time.Second
)

// process is one running etcd or kube-apiserver.
//
// A process started by this package (cmd != nil) has exactly one goroutine,
// which calls cmd.Wait, records the result in waitErr and closes exited.
// Output is appended to logPath; when an extra writer is set, os/exec adds
// its own copying goroutine, which also ends before cmd.Wait returns.
//
// A process reattached by Load is not a child of this process (cmd == nil,
// exited == nil): it is signalled and polled by pid only.
type process struct {
	name    string
	path    string // binary, also used to recognise the pid as ours
	pid     int
	logPath string
	// logOffset is where this run's output starts in logPath.
	logOffset int64

	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error // written before exited is closed
}

// startProcess starts path with args, appending its output to logPath and,
// when extra is non-nil, copying it to extra too. With detach the process
// gets its own session and no parent-death signal.
func startProcess(name, path string, args []string, logPath string, extra io.Writer, detach bool) (*process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", name, err)
	}
	off, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open %s log: %w", name, err)
	}
	cmd := exec.Command(path, args...)
	var out io.Writer = f
	if extra != nil && !detach {
		out = io.MultiWriter(f, extra)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = ChildProcAttr(detach)
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{
		name:      name,
		path:      path,
		pid:       cmd.Process.Pid,
		logPath:   logPath,
		logOffset: off,
		cmd:       cmd,
		exited:    make(chan struct{}),
	}
	go func() {
		p.waitErr = cmd.Wait()
		// The child holds its own copy of the file; ours is only needed by
		// the copying goroutine, which cmd.Wait has joined.
		f.Close()
		close(p.exited)
	}()
	return p, nil
}

// hasExited reports whether the process is known to have ended.
func (p *process) hasExited() bool {
	if p.cmd == nil {
		return !processAlive(p.pid, p.path)
	}
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// exitError describes a process that ended while it was expected to run,
// with the tail of its output and what to do about it. The result wraps
// errPortInUse when that was the cause.
func (p *process) exitError() error {
	status := "exited"
	if p.waitErr != nil {
		status = p.waitErr.Error()
	}
	tail := p.tail()
	if strings.Contains(tail, "address already in use") {
		return fmt.Errorf("%s stopped during startup (%s): %w; last output:\n%s", p.name, status, errPortInUse, tail)
	}
	return fmt.Errorf("%s stopped during startup (%s); last output:\n%s\n"+
		"fix: read the output above (full log: %s); if the binary itself is broken, delete it and run \"make bins\"",
		p.name, status, indent(tail), p.logPath)
}

// tail returns the last lines this run wrote to its log.
func (p *process) tail() string {
	const maxBytes, maxLines = 8 << 10, 25
	f, err := os.Open(p.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", p.logPath, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", p.logPath, err)
	}
	start := max(p.logOffset, st.Size()-maxBytes)
	buf := make([]byte, st.Size()-start)
	if _, err := f.ReadAt(buf, start); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Sprintf("(cannot read %s: %v)", p.logPath, err)
	}
	lines := bytes.Split(bytes.TrimRight(buf, "\n"), []byte("\n"))
	if start > p.logOffset && len(lines) > 1 {
		lines = lines[1:] // the first line is cut
	}
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	if len(lines) == 1 && len(lines[0]) == 0 {
		return "(no output)"
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// stop sends SIGTERM, then SIGKILL after stopGrace, and returns once the
// process is gone.
func (p *process) stop() error {
	if p.cmd != nil {
		return p.stopChild()
	}
	return p.stopByPID()
}

func (p *process) stopChild() error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop %s: %w", p.name, err)
	}
	timer := time.NewTimer(stopGrace)
	defer timer.Stop()
	select {
	case <-p.exited:
		return nil
	case <-timer.C:
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %s: %w", p.name, err)
	}
	timer.Reset(killGrace)
	select {
	case <-p.exited:
		return nil
	case <-timer.C:
		return fmt.Errorf("stop %s: pid %d still running %v after SIGKILL", p.name, p.pid, killGrace)
	}
}

func (p *process) stopByPID() error {
	if !processAlive(p.pid, p.path) {
		return nil
	}
	proc, err := os.FindProcess(p.pid)
	if err != nil {
		return fmt.Errorf("stop %s: %w", p.name, err)
	}
	gone := func(context.Context) (bool, error) { return !processAlive(p.pid, p.path), nil }
	if err := proc.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop %s: %w", p.name, err)
	}
	// Not our child, so there is nothing to wait on: poll.
	if wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, stopGrace, true, gone) == nil {
		return nil
	}
	if err := proc.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %s: %w", p.name, err)
	}
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, killGrace, true, gone); err != nil {
		return fmt.Errorf("stop %s: pid %d still running %v after SIGKILL", p.name, p.pid, killGrace)
	}
	return nil
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
