//go:build !linux

package soak

import "syscall"

// slowSocket leaves the socket as it is outside Linux.
func slowSocket(_, _ string, _ syscall.RawConn) error { return nil }
