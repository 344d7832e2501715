//go:build !linux

package soak

import "syscall"

// smallReceiveBuffer leaves the socket as it is outside Linux.
func smallReceiveBuffer(_, _ string, _ syscall.RawConn) error { return nil }
