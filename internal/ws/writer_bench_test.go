//go:build linux

package ws

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	runtimemetrics "runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/zap"

	"kubegate/internal/informer"
	"kubegate/internal/livequery/wire"
)

// BenchmarkSocketWriter sends events of a 1 KiB object to one socket over
// loopback TCP, from a fake listener, and reports what the writer costs
// per event and what it adds to latency. Each iteration pushes one event.
//
//   - load=burst: events back to back, as fast as the producer can push.
//   - load=1/tick: one event per tick of about a millisecond (a sleep),
//     a steady trickle in which each event used to find the writer gone.
//   - load=10/tick: ten events pushed back to back per tick.
//
// Metrics: msgs/event (WebSocket messages), writes/event (write syscalls
// of the whole process, as the kernel counts them), goroutines/event
// (goroutines started in the process), CPU-µs/event (user and system CPU
// of the whole process: server, producer and the reading client),
// p50-µs and p99-µs (from the push to the client's read of the message).
//
//	go test ./internal/ws -run '^$' -bench SocketWriter -benchtime=3000x
func BenchmarkSocketWriter(b *testing.B) {
	off := time.Duration(0)
	for _, d := range []struct {
		name string
		mod  func(*Options)
	}{
		{"delay=off", func(o *Options) { o.CoalesceDelay = &off }},
		{"delay=2ms", nil}, // the default
	} {
		for _, load := range []struct {
			name       string
			perTick    int
			tick       time.Duration
			continuous bool
		}{
			{name: "load=burst", perTick: 1, continuous: true},
			{name: "load=1/tick", perTick: 1, tick: time.Millisecond},
			{name: "load=10/tick", perTick: 10, tick: time.Millisecond},
		} {
			b.Run(d.name+"/"+load.name, func(b *testing.B) {
				benchmarkSocketWriter(b, d.mod, load.perTick, load.tick)
			})
		}
	}
}

func benchmarkSocketWriter(b *testing.B, mod func(*Options), perTick int, tick time.Duration) {
	opts := Options{Manager: new(informer.Manager), Tables: wire.NewTables(new(informer.Manager), zap.NewNop(), wire.ViewLimits{}), Logger: zap.NewNop()}
	if mod != nil {
		mod(&opts)
	}
	srv, err := New(opts)
	if err != nil {
		b.Fatal(err)
	}
	served := make(chan struct{}, 1)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srv.ServeHTTP(w, r)
		served <- struct{}{}
	}))
	defer hs.Close()
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan error, 1)
	go func() { started <- srv.Start(ctx) }()
	defer func() {
		cancel()
		<-started
	}()

	c, _, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(hs.URL, "http"),
		&websocket.DialOptions{Subprotocols: []string{Subprotocol}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(-1)
	<-served
	var sock *socket
	srv.mu.Lock()
	for s := range srv.sockets {
		sock = s
	}
	srv.mu.Unlock()
	fl := sock.subscribeFake("s")

	// The client reads every message; each event's rv is its push time.
	var frames atomic.Int64
	var latencies []time.Duration // read by the benchmark after readDone
	progress := make(chan struct{}, 1)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for {
			_, data, err := c.Read(context.Background())
			if err != nil {
				return
			}
			now := time.Now().UnixNano()
			for rest := data; ; {
				i := bytes.Index(rest, []byte(`"rv":"`))
				if i < 0 {
					break
				}
				rest = rest[i+len(`"rv":"`):]
				j := bytes.IndexByte(rest, '"')
				pushed, _ := strconv.ParseInt(string(rest[:j]), 10, 64)
				latencies = append(latencies, time.Duration(now-pushed))
				frames.Add(1)
			}
			select {
			case progress <- struct{}{}:
			default:
			}
		}
	}()

	obj := &informer.Object{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n"},"data":{"x":"` +
		strings.Repeat("x", 900) + `"}}`)}
	msgs0 := counterValue(srv.metrics.frames)
	writes0 := processWriteSyscalls(b)
	goroutines0 := goroutinesCreated()
	cpu0 := processCPU()
	start := time.Now()
	next := start
	pushed := 0
	for b.Loop() {
		if tick > 0 && pushed%perTick == 0 {
			next = next.Add(tick)
			if d := time.Until(next); d > 0 {
				time.Sleep(d)
			}
		}
		fl.push(informer.Notification{Type: informer.Modified, Object: obj, RV: uint64(time.Now().UnixNano())})
		pushed++
	}
	for frames.Load() < int64(pushed) {
		select {
		case <-progress:
		case <-readDone:
			b.Fatalf("client read %d of %d events", frames.Load(), pushed)
		}
	}
	elapsed := time.Since(start)
	cpu := processCPU() - cpu0
	goroutines := goroutinesCreated() - goroutines0
	writes := processWriteSyscalls(b) - writes0
	msgs := counterValue(srv.metrics.frames) - msgs0

	_ = c.CloseNow()
	<-readDone

	n := float64(pushed)
	b.ReportMetric(n/elapsed.Seconds(), "events/s")
	b.ReportMetric(msgs/n, "msgs/event")
	b.ReportMetric(float64(writes)/n, "writes/event")
	b.ReportMetric(float64(goroutines)/n, "goroutines/event")
	b.ReportMetric(float64(cpu.Microseconds())/n, "CPU-µs/event")
	slices.Sort(latencies)
	b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds()), "p99-µs")
}

// processCPU returns the process's user and system CPU time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processWriteSyscalls returns the process's count of write syscalls.
func processWriteSyscalls(b *testing.B) int {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "syscw:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	return 0
}

func goroutinesCreated() uint64 {
	s := []runtimemetrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	runtimemetrics.Read(s)
	return s[0].Value.Uint64()
}
