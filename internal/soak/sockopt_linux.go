package soak

import "syscall"

// slowSocket shrinks a slow subscriber's socket before it connects: a 4 KiB
// receive buffer, and a 536-byte maximum segment so that the gateway's
// send buffer, which Linux sizes by segments, stays small too. Without
// this, loopback TCP (64 KiB segments) buffers a megabyte or more and a
// slow reader takes minutes to push back on the gateway.
func slowSocket(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		if serr == nil {
			serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG, 536)
		}
	})
	if err != nil {
		return err
	}
	return serr
}
