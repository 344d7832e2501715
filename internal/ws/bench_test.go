package ws

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"

	"kubegate/internal/informer"
	"kubegate/internal/testenv"
)

var idleProfile = flag.String("idleprofile", "",
	"`prefix` of heap and goroutine profiles written by BenchmarkIdleSocket while its sockets are open (.heap, .goroutines)")

// idleSockets is how many idle sockets BenchmarkIdleSocket opens per
// iteration: enough that per-socket costs dwarf the noise of a GC cycle.
const idleSockets = 1000

// BenchmarkIdleSocket reports what one idle socket costs the server: heap
// and goroutine stacks in use after a full collection (B/socket), and
// goroutines (goroutines/socket), averaged over idleSockets sockets.
//
// The clients run in a child process (this test binary, see
// runIdleClients), so nothing on the client side is counted.
//
//   - server=kubegate: the /ws server; each socket holds one subscription
//     (configmaps in an empty namespace) after its snapshot.
//   - server=bare: a coder/websocket server that only reads, in the
//     net/http handler goroutine: the floor set by the library and
//     net/http, for comparison.
//
// Run with -benchtime=1x: one iteration already measures idleSockets
// sockets. -idleprofile writes profiles of the server while they are
// open:
//
//	go test ./internal/ws -run '^$' -bench IdleSocket/server=kubegate -benchtime=1x -idleprofile=/tmp/idle
//	go tool pprof -sample_index=inuse_space -top internal/ws/ws.test /tmp/idle.heap
func BenchmarkIdleSocket(b *testing.B) {
	env := testenv.Get(b)
	ns := env.Namespace(b)
	b.Run("server=bare", func(b *testing.B) {
		var open atomic.Int64
		bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{Subprotocol}})
			if err != nil {
				return
			}
			open.Add(1)
			defer open.Add(-1)
			_, _, _ = c.Read(context.Background())
			_ = c.CloseNow()
		}))
		defer bare.Close()
		measureIdle(b, "ws"+strings.TrimPrefix(bare.URL, "http"), "", func() int { return int(open.Load()) }, nil)
	})
	m := startManager(b, env.Config, nil)
	// Keepalive is stepped by hand; the writers' coalescing delay runs in
	// real time, so that each writer exits a delay after it sent its
	// snapshot, as in a gateway, rather than waiting for the next Step.
	clk := &fakeClock{FakeClock: clocktesting.NewFakeClock(time.Now()), realDelays: true}
	for _, pinged := range []bool{false, true} {
		b.Run(fmt.Sprintf("server=kubegate/pinged=%t", pinged), func(b *testing.B) {
			benchmarkIdleKubegate(b, m, clk, ns, pinged)
		})
	}
}

// benchmarkIdleKubegate measures idle sockets on the /ws server. With
// pinged, every socket has been through a keepalive round and a
// re-authorization pass before it is measured, as in a gateway that has
// run for a while: the reader has processed a pong, which parks it deeper
// in the library than a fresh socket's.
func benchmarkIdleKubegate(b *testing.B, m *informer.Manager, clk *fakeClock, ns string, pinged bool) {
	ts := startServer(b, m, func(o *Options) {
		// A production logger (JSON at info level), so that any
		// memory it holds per socket is counted.
		o.Logger = zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zap.InfoLevel))
		o.MaxSockets, o.MaxSocketsPerClient = 1<<20, 1<<20
		o.clock = clk
	})
	warm := dial(b, ts) // starts the informer before measuring
	warm.subscribe("w", "configmaps", ns)
	warm.snapshot("w")
	warm.c.CloseRead(context.Background()) // answers pings
	settle := func() {
		// The writers that sent the snapshots exit once their coalescing
		// delay has passed with nothing more to send.
		writing := func() (n int) {
			ts.mu.Lock()
			defer ts.mu.Unlock()
			for s := range ts.sockets {
				if s.writer.Load() != writerIdle {
					n++
				}
			}
			return n
		}
		err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, time.Minute, true,
			func(context.Context) (bool, error) { return writing() == 0, nil })
		if err != nil {
			b.Fatalf("%d writers still running", writing())
		}
		if !pinged {
			return
		}
		// Each socket arms a ping and a re-authorization timer, and
		// re-arms each once its pass is done.
		// Done when they are all armed again and the workers have
		// exited.
		armed, g := clk.Waiters(), runtime.NumGoroutine()
		clk.Step(ts.opts.PingInterval)
		err = wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, time.Minute, true,
			func(context.Context) (bool, error) {
				return clk.Waiters() == armed && runtime.NumGoroutine() <= g, nil
			})
		if err != nil {
			b.Fatalf("after a keepalive round: %d of %d timers armed, %d goroutines (before: %d)",
				clk.Waiters(), armed, runtime.NumGoroutine(), g)
		}
	}
	measureIdle(b, ts.url, ns, func() int { return ts.Sockets() - 1 }, settle)
}

// measureIdle opens idleSockets idle sockets to url from a child process
// per iteration and reports what the server holds for them. open reports
// how many of them the server still has; settle, if set, runs once they
// are open, before the measurement.
func measureIdle(b *testing.B, url, namespace string, open func() int, settle func()) {
	var heap, stack, goroutines float64
	if *idleProfile != "" {
		runtime.MemProfileRate = 1 // every allocation from here on
	}
	for b.Loop() {
		h0, s0 := liveBytes()
		g0 := runtime.NumGoroutine()
		stop := startIdleClients(b, url, namespace, idleSockets)
		// A client may be ready before its handler has counted it.
		err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, time.Minute, true,
			func(context.Context) (bool, error) { return open() == idleSockets, nil })
		if err != nil {
			b.Fatalf("server holds %d sockets, want %d", open(), idleSockets)
		}
		if settle != nil {
			settle()
		}
		h1, s1 := liveBytes()
		g1 := runtime.NumGoroutine()
		if *idleProfile != "" {
			writeProfiles(b, *idleProfile)
		}
		stop()
		err = wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, time.Minute, true,
			func(context.Context) (bool, error) { return open() == 0, nil })
		if err != nil {
			b.Fatalf("server still holds %d sockets after the clients exited", open())
		}
		heap += float64(int64(h1) - int64(h0))
		stack += float64(int64(s1) - int64(s0))
		goroutines += float64(g1 - g0)
	}
	n := float64(b.N * idleSockets)
	b.ReportMetric((heap+stack)/n, "B/socket")
	b.ReportMetric(heap/n, "heap-B/socket")
	b.ReportMetric(stack/n, "stack-B/socket")
	b.ReportMetric(goroutines/n, "goroutines/socket")
}

// writeProfiles writes the heap profile (inuse_space is what the sockets
// hold) and a goroutine dump.
func writeProfiles(b *testing.B, prefix string) {
	for _, p := range []struct{ name, suffix string }{{"heap", ".heap"}, {"goroutine", ".goroutines"}} {
		f, err := os.Create(prefix + p.suffix)
		if err != nil {
			b.Fatal(err)
		}
		err = pprof.Lookup(p.name).WriteTo(f, 1)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

// liveBytes returns the heap and the goroutine stacks in use after a full
// collection that also returns free memory to the OS (which releases
// unused stack spans).
func liveBytes() (heap, stack uint64) {
	runtime.GC()
	debug.FreeOSMemory()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse, m.StackInuse
}

// The child process of BenchmarkIdleSocket is this test binary with these
// variables set; TestMain hands it to runIdleClients.
const (
	envIdleURL       = "KUBEGATE_WS_IDLE_URL"
	envIdleSockets   = "KUBEGATE_WS_IDLE_SOCKETS"
	envIdleNamespace = "KUBEGATE_WS_IDLE_NAMESPACE"
)

// startIdleClients runs the child process and returns once all its
// sockets are open (and subscribed, for a namespace). stop ends the child
// and with it every socket.
func startIdleClients(b *testing.B, url, namespace string, n int) (stop func()) {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envIdleURL+"="+url, envIdleSockets+"="+strconv.Itoa(n), envIdleNamespace+"="+namespace)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	stop = func() {
		_ = stdin.Close()
		if err := cmd.Wait(); err != nil {
			b.Errorf("idle clients: %v", err)
		}
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if line != "ready\n" {
		stop()
		b.Fatalf("idle clients did not get ready: %q %v", line, err)
	}
	return stop
}

// runIdleClients is the child process: it opens the sockets, subscribes
// each to configmaps in the namespace (if one is given) and waits for the
// end of its snapshot, prints "ready", and holds the sockets open,
// answering pings, until its stdin closes.
func runIdleClients() int {
	n, err := strconv.Atoi(os.Getenv(envIdleSockets))
	if err != nil {
		fmt.Fprintln(os.Stderr, "idle clients:", err)
		return 2
	}
	url, ns := os.Getenv(envIdleURL), os.Getenv(envIdleNamespace)
	conns := make([]*websocket.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			_ = c.CloseNow()
		}
	}()
	for i := range n {
		c, err := openIdleClient(url, ns)
		if err != nil {
			fmt.Fprintf(os.Stderr, "idle clients: socket %d: %v\n", i, err)
			return 1
		}
		conns = append(conns, c)
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

func openIdleClient(url, namespace string) (*websocket.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{Subprotocol}})
	if err != nil {
		return nil, err
	}
	if namespace != "" {
		c.SetReadLimit(-1)
		sub := fmt.Sprintf(`{"type":"subscribe","id":"s","resource":"configmaps","namespace":%q}`, namespace)
		if err := c.Write(ctx, websocket.MessageText, []byte(sub)); err != nil {
			_ = c.CloseNow()
			return nil, err
		}
		for {
			_, msg, err := c.Read(ctx)
			if err != nil {
				_ = c.CloseNow()
				return nil, err
			}
			if bytes.Contains(msg, []byte(`"type":"error"`)) {
				_ = c.CloseNow()
				return nil, errors.New(string(msg))
			}
			if bytes.Contains(msg, []byte(`"type":"END_OF_SNAPSHOT"`)) {
				break
			}
		}
	}
	c.CloseRead(context.Background()) // answers pings
	return c, nil
}
