package abuse

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"kubegate/internal/ws"
)

// rawConn is a WebSocket client written by hand on a net.Conn, for
// clients no library would be: one that never reads, or reads one byte
// at a time. Its receive buffer is fixed (128 KiB), because the kernel
// would otherwise grow it to megabytes and hide how little it reads. (Much
// smaller would fall below the loopback MSS of 64 KiB, and the sender
// would then only trickle data out on zero-window probes.)
type rawConn struct {
	net.Conn
}

// rawDial connects as user and completes the handshake, failing the test
// unless the gateway upgrades the connection.
func (g *gateway) rawDial(t *testing.T, user string) *rawConn {
	t.Helper()
	c, status, err := g.rawHandshake(user)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if status != http.StatusSwitchingProtocols {
		t.Fatalf("handshake answered %d", status)
	}
	return c
}

// rawHandshake connects as user and sends the handshake. It returns the
// connection and the response's status code; the response is read one
// byte at a time up to the end of its header, so that nothing after it
// is consumed.
func (g *gateway) rawHandshake(user string) (*rawConn, int, error) {
	c, err := net.Dial("tcp", g.addr)
	if err != nil {
		return nil, 0, err
	}
	rc := &rawConn{Conn: c}
	if err := c.(*net.TCPConn).SetReadBuffer(128 << 10); err != nil {
		c.Close()
		return nil, 0, err
	}
	key := make([]byte, 16)
	_, _ = rand.Read(key)
	req := "GET /ws HTTP/1.1\r\nHost: " + g.addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " + base64.StdEncoding.EncodeToString(key) + "\r\n" +
		"Sec-WebSocket-Protocol: " + ws.Subprotocol + "\r\nAuthorization: Bearer " + g.tokens[user] + "\r\n\r\n"
	// Deadlines here are failure bounds only.
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte(req)); err != nil {
		c.Close()
		return nil, 0, err
	}
	var resp []byte
	b := make([]byte, 1)
	for !bytes.HasSuffix(resp, []byte("\r\n\r\n")) {
		if _, err := c.Read(b); err != nil {
			c.Close()
			return nil, 0, fmt.Errorf("handshake: %w after %q", err, resp)
		}
		resp = append(resp, b[0])
	}
	var status int
	if _, err := fmt.Sscanf(string(resp), "HTTP/1.1 %d ", &status); err != nil {
		c.Close()
		return nil, 0, fmt.Errorf("handshake answered %q", resp)
	}
	return rc, status, nil
}

// Frame opcodes (RFC 6455).
const (
	opText   = 0x1
	opBinary = 0x2
	opPing   = 0x9
)

// writeFrame sends one final, masked frame.
func (r *rawConn) writeFrame(op byte, payload []byte) error {
	return r.writeFrames(op, payload, 1)
}

// writeFrames sends n copies of a final, masked frame in one write.
func (r *rawConn) writeFrames(op byte, payload []byte, n int) error {
	hdr := []byte{0x80 | op}
	switch n := len(payload); {
	case n < 126:
		hdr = append(hdr, 0x80|byte(n))
	case n <= 0xffff:
		hdr = append(hdr, 0x80|126)
		hdr = binary.BigEndian.AppendUint16(hdr, uint16(n))
	default:
		hdr = append(hdr, 0x80|127)
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(n))
	}
	mask := make([]byte, 4)
	_, _ = rand.Read(mask)
	hdr = append(hdr, mask...)
	masked := make([]byte, len(payload))
	for i, c := range payload {
		masked[i] = c ^ mask[i%4]
	}
	frame := append(hdr, masked...)
	_ = r.SetWriteDeadline(time.Now().Add(30 * time.Second)) // a failure bound
	if _, err := r.Write(bytes.Repeat(frame, n)); err != nil {
		return fmt.Errorf("write frame: %w", err)
	}
	return nil
}
