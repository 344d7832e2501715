package controlplane

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// ChildProcAttr puts a child process in its own process group, so a
// terminal's Ctrl-C reaches only the caller, which then stops it in order. Attached
// processes are killed when the caller dies; detached ones get their own
// session and outlive it.
func ChildProcAttr(detach bool) *syscall.SysProcAttr {
	if detach {
		return &syscall.SysProcAttr{Setsid: true}
	}
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// processAlive reports whether pid is running path. Comparing the command
// line guards against the pid having been reused after a reboot. Zombies
// have an empty command line and count as gone.
func processAlive(pid int, path string) bool {
	if pid <= 0 {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	argv0, _, _ := bytes.Cut(cmdline, []byte{0})
	return string(argv0) == path
}
