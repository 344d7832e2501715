package soak

import "syscall"

// smallReceiveBuffer shrinks a slow subscriber's socket receive buffer, so
// that the gateway's writes block after kilobytes rather than the megabytes
// loopback TCP would otherwise buffer.
func smallReceiveBuffer(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
	})
	if err != nil {
		return err
	}
	return serr
}
