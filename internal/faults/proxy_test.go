package faults

import (
	"net"
	"sync"
	"testing"
)

// tcpProxy forwards TCP connections to target until freeze is called.
// From then on it black-holes them: existing connections stay open but
// every byte is dropped in both directions (a half-open network path), and
// new connections are accepted but never forwarded. After thaw, new
// connections forward again; the black-holed ones never recover, as after a
// real network cut.
//
// The accept goroutine and two copy goroutines per connection run until
// close, which waits for them.
type tcpProxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	// mu guards frozen, conns and closed.
	mu     sync.Mutex
	frozen bool
	conns  []*proxyConn
	closed bool
}

type proxyConn struct {
	client, server net.Conn
	// dead is set (under tcpProxy.mu) when the connection is black-holed.
	dead bool
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

func (p *tcpProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		pc := &proxyConn{client: c, server: s}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		pc.dead = p.frozen
		p.conns = append(p.conns, pc)
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(pc, s, c)
		go p.pipe(pc, c, s)
	}
}

// pipe copies from src to dst until either fails, dropping what it reads
// while the connection is black-holed.
func (p *tcpProxy) pipe(pc *proxyConn, dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			dead := pc.dead
			p.mu.Unlock()
			if !dead {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
		}
		if err != nil {
			break
		}
	}
	p.mu.Lock()
	dead := pc.dead
	p.mu.Unlock()
	if !dead { // a black-holed peer never learns the other side closed
		pc.client.Close()
		pc.server.Close()
	}
}

// freeze black-holes every open connection and those accepted until thaw.
func (p *tcpProxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen = true
	for _, c := range p.conns {
		c.dead = true
	}
}

func (p *tcpProxy) thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen = false
}

func (p *tcpProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for _, c := range p.conns {
		c.client.Close()
		c.server.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
