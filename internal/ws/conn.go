package ws

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
	"syscall"
)

// Buffer sizes of a socket's connection. net/http hands a hijacked
// connection over with its 4 KiB reader and writer, which an idle socket
// would hold for its whole life; these are sized for what passes through
// them instead.
//
// Client messages are small requests (a subscribe frame is about 200
// bytes), and a read larger than the buffer bypasses it.
//
// A server message is written as its frame header followed by the payload:
// one write syscall when both fit in the buffer, two otherwise (the
// buffered part, then the rest of the payload directly, without copying).
// With 4 KiB most single-object events of ConfigMap-sized objects take one
// syscall; with 1 KiB those between 1 and 4 KiB take two. Pods (about 7 KB)
// and batches take two either way.
const (
	readBufferSize  = 512
	writeBufferSize = 1 << 10
)

// hijacker is the http.ResponseWriter given to websocket.Accept. Its
// Hijack hands over the connection with the socket's own small buffers
// (see readBufferSize) instead of net/http's, which are then dropped with
// the rest of the request once ServeHTTP returns.
type hijacker struct {
	http.ResponseWriter
	conn *netConn // set by Hijack
}

// Unwrap lets http.ResponseController reach the wrapped writer.
func (h *hijacker) Unwrap() http.ResponseWriter { return h.ResponseWriter }

func (h *hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	c := &netConn{Conn: nc}
	if n := brw.Reader.Buffered(); n > 0 {
		// The client sent frames right behind its handshake.
		b, _ := brw.Reader.Peek(n)
		c.early = bytes.Clone(b)
	}
	// The 101 response has been flushed by now, so brw.Writer holds
	// nothing.
	c.br = bufio.NewReaderSize(c, readBufferSize)
	c.raw = rawConn(nc)
	h.conn = c
	return c, bufio.NewReadWriter(c.br, bufio.NewWriterSize(c, writeBufferSize)), nil
}

// netConn is a socket's connection as websocket.Conn uses it.
type netConn struct {
	net.Conn
	// early holds bytes net/http had read beyond the handshake; reads
	// return them first. Guarded by websocket.Conn's read lock, like br.
	early []byte
	br    *bufio.Reader   // the buffered reader over this connection
	raw   syscall.RawConn // nil where waitReadable cannot wait
}

// buffered reports whether reads would return bytes already received.
// The caller must exclude other readers (see socket.closeMu).
func (c *netConn) buffered() bool {
	return len(c.early) > 0 || c.br.Buffered() > 0
}

// waitReadable blocks until the connection has data, EOF or an error to
// read, without reading anything, so that an idle socket's reader waits
// here with a short stack rather than deep inside websocket.Conn.Read
// (see "Cost of an idle socket" in docs/protocol.md). Data already in br
// is not seen: the caller checks buffered first. Where the connection
// offers no raw access (TLS, other platforms) it returns at once and the
// read that follows waits instead.
func (c *netConn) waitReadable() {
	if c.raw == nil {
		return
	}
	// The callback runs first at once, then each time the poller reports
	// the socket readable, until it returns true.
	_ = c.raw.Read(readable)
}

func (c *netConn) Read(p []byte) (int, error) {
	if len(c.early) > 0 {
		n := copy(p, c.early)
		if c.early = c.early[n:]; len(c.early) == 0 {
			c.early = nil
		}
		return n, nil
	}
	return c.Conn.Read(p)
}
