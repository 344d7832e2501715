package ws

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"go.uber.org/zap"

	"kubegate/internal/testenv"
)

// liveBytes is the heap and stack in use after a full collection.
func liveBytes() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

// BenchmarkIdleSocket reports the memory an idle socket costs, client and
// server together (both run in this process): server=kubegate with one
// subscription after its snapshot, server=bare a coder/websocket server
// that only reads, as the floor set by the library and net/http. The
// difference is what the gateway adds per idle socket.
func BenchmarkIdleSocket(b *testing.B) {
	env := testenv.Get(b)
	ns := env.Namespace(b)
	b.Run("server=bare", func(b *testing.B) {
		bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{Subprotocol}})
			if err == nil {
				_, _, _ = c.Read(context.Background())
			}
		}))
		defer bare.Close()
		url := "ws" + strings.TrimPrefix(bare.URL, "http")
		var conns []*websocket.Conn
		defer func() {
			for _, c := range conns {
				_ = c.CloseNow()
			}
		}()
		before := liveBytes()
		for b.Loop() {
			c, _, err := websocket.Dial(context.Background(), url, &websocket.DialOptions{Subprotocols: []string{Subprotocol}})
			if err != nil {
				b.Fatal(err)
			}
			conns = append(conns, c)
		}
		b.ReportMetric(float64(liveBytes()-before)/float64(len(conns)), "B/socket-pair")
	})
	b.Run("server=kubegate", func(b *testing.B) {
		m := startManager(b, env.Config, nil)
		ts := startServer(b, m, func(o *Options) {
			o.Logger = zap.NewNop()
			o.MaxSockets, o.MaxSocketsPerClient = 1<<20, 1<<20
		})
		warm := dial(b, ts) // starts the informer before measuring
		warm.subscribe("w", "configmaps", ns)
		warm.snapshot("w")
		n := 0
		before := liveBytes()
		for b.Loop() {
			c := dial(b, ts)
			c.subscribe("s", "configmaps", ns)
			c.snapshot("s")
			n++
		}
		b.ReportMetric(float64(liveBytes()-before)/float64(n), "B/socket-pair")
	})
}
