package ws

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"
)

// TestPingTimeoutDropsDeadPeer: a peer whose pongs do not come back is
// dropped PongTimeout after the ping; one that answers stays until
// shutdown closes it with 1001.
func TestPingTimeoutDropsDeadPeer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ps := startPipeServer(t, nil) // pings every 30s, pongs due within 15s
		dead, _ := ps.dialPong(t, false)
		alive, _ := ps.dial(t)
		pongTimeouts := func() float64 { return counterValue(ps.metrics.closes.WithLabelValues(closePongTimeout)) }

		time.Sleep(ps.opts.PingInterval)
		synctest.Wait()
		if d, a := dead.pings.Load(), alive.pings.Load(); d != 1 || a != 1 {
			t.Fatalf("pings after PingInterval: dead peer %d, alive peer %d; want 1 each", d, a)
		}
		time.Sleep(ps.opts.PongTimeout - time.Nanosecond)
		synctest.Wait()
		if n := ps.Sockets(); n != 2 {
			t.Fatalf("%d sockets before the pong is due, want 2", n)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if n, dropped := ps.Sockets(), pongTimeouts(); n != 1 || dropped != 1 {
			t.Fatalf("when the pong is due: %d sockets, %v dropped for no pong; want 1 and 1", n, dropped)
		}
		select {
		case <-dead.done:
		default:
			t.Fatal("the dead peer's connection is still open")
		}

		ps.stop()
		if code := alive.closeStatus(); code != websocket.StatusGoingAway {
			t.Fatalf("alive peer: close %d at shutdown, want 1001", code)
		}
		if n := pongTimeouts(); n != 1 {
			t.Fatalf("%v sockets dropped for no pong, want only the dead peer's", n)
		}
	})
}
