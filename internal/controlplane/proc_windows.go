package controlplane

import (
	"os"
	"syscall"
)

// ChildProcAttr gives a child process its own process group, so a console's Ctrl-C reaches only the caller. Windows
// has no parent-death signal: children may outlive a caller that is killed.
func ChildProcAttr(bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP}
}

// processAlive reports whether pid exists; it cannot check the path.
func processAlive(pid int, _ string) bool {
	if pid <= 0 {
		return false
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	p.Release()
	return true
}
