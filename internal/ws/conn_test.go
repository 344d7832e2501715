package ws

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestMessageTakesOneWriteSyscall writes data messages of several sizes
// the way the writer does (netConn.writeMessage) and counts the write
// syscalls the writing thread made, as the kernel counts them
// (/proc/thread-self/io, which counts write and writev alike). Each
// message must cost one, whether it fits in the connection's 1 KiB write
// buffer or not, and arrive intact.
func TestMessageTakesOneWriteSyscall(t *testing.T) {
	if _, err := writeSyscalls(); err != nil {
		t.Skipf("per-thread I/O accounting unavailable: %v", err)
	}
	type accepted struct {
		c  *websocket.Conn
		nc *netConn
	}
	conns := make(chan accepted, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hj := &hijacker{ResponseWriter: w}
		c, err := websocket.Accept(hj, r, &websocket.AcceptOptions{Subprotocols: []string{Subprotocol}})
		if err != nil {
			t.Errorf("accept: %v", err)
			return
		}
		conns <- accepted{c, hj.conn}
	}))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), &websocket.DialOptions{Subprotocols: []string{Subprotocol}})
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseNow()
	client.SetReadLimit(-1)
	a := <-conns
	defer a.c.CloseNow()
	// A send buffer that takes the largest message whole: otherwise the
	// kernel may take part of it, and the rest costs more syscalls
	// whatever the framing.
	if err := a.nc.Conn.(*net.TCPConn).SetWriteBuffer(4 << 20); err != nil {
		t.Fatal(err)
	}

	for _, size := range []int{100, 1000, 1020, 1021, 1500, 7 << 10, 64<<10 - 1, 64 << 10, 300 << 10} {
		t.Run("bytes="+strconv.Itoa(size), func(t *testing.T) {
			msg := bytes.Repeat([]byte(strconv.Itoa(size%10)), size)
			read := make(chan []byte, 1)
			go func() {
				_, data, err := client.Read(ctx)
				if err != nil {
					t.Errorf("client read: %v", err)
				}
				read <- data
			}()

			n, err := writeSyscallsOf(func() error { return a.nc.writeMessage(a.c, msg) })
			if err != nil {
				t.Fatal(err)
			}
			if got := <-read; !bytes.Equal(got, msg) {
				t.Fatalf("client read %d bytes, not the %d written", len(got), len(msg))
			}
			if n != 1 {
				t.Errorf("a message of %d bytes took %d write syscalls, want 1", size, n)
			}
		})
	}
}

// writeSyscallsOf runs f on a thread of its own and returns how many
// write syscalls (write, writev, …) that thread made meanwhile.
func writeSyscallsOf(f func() error) (int, error) {
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		before, err := writeSyscalls()
		if err != nil {
			done <- result{err: err}
			return
		}
		if err := f(); err != nil {
			done <- result{err: err}
			return
		}
		after, err := writeSyscalls()
		done <- result{after - before, err}
	}()
	r := <-done
	return r.n, r.err
}

// writeSyscalls returns the calling thread's count of write syscalls.
func writeSyscalls() (int, error) {
	b, err := os.ReadFile("/proc/thread-self/io")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "syscw:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, os.ErrNotExist
}

// TestNetConnHoldsAMessageUntilItsEnd: during a message, Write holds
// what it is given until the message's last byte, then sends it all in
// the order given, control frames written meanwhile included; endMessage
// sends whatever a cut-short message left.
func TestNetConnHoldsAMessageUntilItsEnd(t *testing.T) {
	rec := &recordingConn{}
	c := &netConn{Conn: rec}
	write := func(s string) {
		t.Helper()
		if n, err := c.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	sent := func() string {
		t.Helper()
		s := rec.buf.String()
		rec.buf.Reset()
		return s
	}

	c.beginMessage(10)
	write("pong|") // a control frame written before the message
	write("head")
	if s := sent(); s != "" {
		t.Fatalf("sent %q before the message's end", s)
	}
	write("tail..") // the message's end, and more
	if s := sent(); s != "pong|headtail.." {
		t.Fatalf("sent %q", s)
	}
	write("ping|") // after the message: at once
	if s := sent(); s != "ping|" {
		t.Fatalf("sent %q after the message", s)
	}
	if err := c.endMessage(); err != nil || sent() != "" {
		t.Fatalf("endMessage after a complete message: %v", err)
	}

	c.beginMessage(10)
	write("cut")
	if s := sent(); s != "" {
		t.Fatalf("sent %q before the message's end", s)
	}
	if err := c.endMessage(); err != nil {
		t.Fatal(err)
	}
	if s := sent(); s != "cut" {
		t.Fatalf("endMessage sent %q, want what was held", s)
	}
	write("next")
	if s := sent(); s != "next" {
		t.Fatalf("sent %q after endMessage", s)
	}
}

// recordingConn is a net.Conn that keeps what is written to it.
type recordingConn struct {
	net.Conn
	buf bytes.Buffer
}

func (c *recordingConn) Write(p []byte) (int, error) { return c.buf.Write(p) }
