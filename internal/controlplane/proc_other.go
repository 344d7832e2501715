//go:build unix && !linux

package controlplane

import (
	"errors"
	"os"
	"syscall"
)

// ChildProcAttr puts a child process in its own process group, or its own session
// when detached. Without Pdeathsig outside Linux, attached processes may
// outlive a caller that is killed.
func ChildProcAttr(detach bool) *syscall.SysProcAttr {
	if detach {
		return &syscall.SysProcAttr{Setsid: true}
	}
	return &syscall.SysProcAttr{Setpgid: true}
}

// processAlive reports whether pid exists. Without /proc it cannot check
// that the pid still runs path.
func processAlive(pid int, _ string) bool {
	if pid <= 0 {
		return false
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return err == nil || errors.Is(err, syscall.EPERM)
}
