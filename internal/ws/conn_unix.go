//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package ws

import (
	"net"
	"syscall"
)

// rawConn returns the raw connection under a TCP or Unix connection, and
// nil for others (a TLS connection buffers decrypted bytes of its own).
func rawConn(nc net.Conn) syscall.RawConn {
	switch nc.(type) {
	case *net.TCPConn, *net.UnixConn:
		raw, err := nc.(syscall.Conn).SyscallConn()
		if err != nil {
			return nil
		}
		return raw
	}
	return nil
}

// readable reports whether the socket fd has something to read: data,
// EOF or an error. It peeks, so nothing is consumed.
func readable(fd uintptr) bool {
	var b [1]byte
	_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK)
	return err != syscall.EAGAIN
}
