package ws

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"sync"
	"syscall"

	"github.com/coder/websocket"
)

// Buffer sizes of a socket's connection. net/http hands a hijacked
// connection over with its 4 KiB reader and writer, which an idle socket
// would hold for its whole life; these are sized for what passes through
// them instead.
//
// Client messages are small requests (a subscribe frame is about 200
// bytes), and a read larger than the buffer bypasses it.
//
// coder/websocket writes a server message as its frame header into the
// write buffer, then the payload: one write call when both fit in the
// buffer, two otherwise (the full buffer, then the rest of the payload
// directly, without copying). netConn.writeMessage joins those two into
// one writev, so every data message costs one syscall on TCP whatever
// its size (more only when the kernel's send buffer cannot take it all
// at once), without a buffer any larger.
const (
	readBufferSize  = 512
	writeBufferSize = 1 << 10
)

// hijacker is the http.ResponseWriter given to websocket.Accept. Its
// Hijack hands over the connection with the socket's own small buffers
// (see readBufferSize) instead of net/http's, which are then dropped with
// the rest of the request once ServeHTTP returns.
//
// websocket.Accept answers a refused handshake (bad request, foreign
// Origin) with a plain-text body. The hijacker holds that answer back
// (refused, refusal) so that the server can send it as a Status instead,
// the one error shape clients of the gateway know.
type hijacker struct {
	http.ResponseWriter
	conn *netConn // set by Hijack

	refused int          // the status Accept refused with, 0 if none
	refusal bytes.Buffer // Accept's plain-text reason
}

// WriteHeader holds back an error status; see hijacker.
func (h *hijacker) WriteHeader(code int) {
	if code >= http.StatusBadRequest {
		h.refused = code
		return
	}
	h.ResponseWriter.WriteHeader(code)
}

// Write holds back the body of a refusal; see hijacker.
func (h *hijacker) Write(b []byte) (int, error) {
	if h.refused != 0 {
		return h.refusal.Write(b)
	}
	return h.ResponseWriter.Write(b)
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

	// wmu guards msgLeft and held. Writes come from whichever goroutine
	// holds websocket.Conn's frame lock (the writer, a ping, the reader's
	// pong); writeMessage sets msgLeft outside that lock.
	wmu sync.Mutex
	// msgLeft counts the bytes of the data message being written (its
	// frame header and payload) that Write has not been given yet; 0
	// outside writeMessage.
	msgLeft int
	// held is what Write took but has not sent yet: the start of the
	// message, to go out in one writev with its end. nil when empty; it
	// comes from heldPool so that idle sockets hold none.
	held *[]byte
}

// heldPool holds the buffers of netConn.held: the write buffer's worth
// of a message's start, and any control frame queued before it.
var heldPool = sync.Pool{New: func() any {
	b := make([]byte, 0, writeBufferSize)
	return &b
}}

// writeMessage writes msg as one text message on ws, the websocket.Conn
// over c, in one writev.
//
// coder/websocket hands a message larger than its write buffer to Write
// in two parts: the full buffer (the frame header and the payload's
// start), then the rest of the payload straight from msg. Knowing the
// frame's length, Write holds the first part back and sends it together
// with the last.
func (c *netConn) writeMessage(ws *websocket.Conn, msg []byte) error {
	c.beginMessage(frameHeaderLen(len(msg)) + len(msg))
	err := ws.Write(context.Background(), websocket.MessageText, msg)
	if eerr := c.endMessage(); err == nil {
		err = eerr
	}
	return err
}

// beginMessage tells Write that the next n bytes it is given make one
// message. Whatever Write takes until then (a control frame written
// meanwhile included) is sent in the order taken, at the latest by
// endMessage.
func (c *netConn) beginMessage(n int) {
	c.wmu.Lock()
	c.msgLeft = n
	c.wmu.Unlock()
}

// endMessage sends what Write still holds: nothing, unless the message
// was cut short (a failed write) or framed otherwise than frameHeaderLen
// expects.
func (c *netConn) endMessage() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.msgLeft = 0
	if c.held == nil {
		return nil
	}
	_, err := c.writeHeld(nil)
	return err
}

// frameHeaderLen is the length of an unmasked (server) frame header for
// a payload of n bytes (RFC 6455, section 5.2).
func frameHeaderLen(n int) int {
	switch {
	case n <= 125:
		return 2
	case n <= 1<<16-1:
		return 4
	}
	return 10
}

// Write writes p, or during writeMessage holds it back until the
// message's last bytes arrive and sends everything held with them.
func (c *netConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.msgLeft == 0 {
		return c.Conn.Write(p)
	}
	if len(p) < c.msgLeft {
		c.msgLeft -= len(p)
		if c.held == nil {
			c.held = heldPool.Get().(*[]byte)
		}
		*c.held = append(*c.held, p...)
		return len(p), nil
	}
	c.msgLeft = 0
	if c.held == nil {
		return c.Conn.Write(p) // the whole message fitted in the buffer
	}
	return c.writeHeld(p)
}

// writeHeld writes what is held, then p, in one writev where the
// connection supports it (TCP), and returns how many bytes of p were
// written. Caller must hold c.wmu.
func (c *netConn) writeHeld(p []byte) (int, error) {
	held := *c.held
	bufs := net.Buffers{held, p}
	n, err := bufs.WriteTo(c.Conn)
	*c.held = held[:0]
	if cap(held) <= 4*writeBufferSize {
		heldPool.Put(c.held)
	}
	c.held = nil
	return max(int(n)-len(held), 0), err
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
