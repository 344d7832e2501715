//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package ws

import (
	"net"
	"syscall"
)

// rawConn returns nil: waitReadable does not wait on this platform.
func rawConn(net.Conn) syscall.RawConn { return nil }

func readable(uintptr) bool { return true }
