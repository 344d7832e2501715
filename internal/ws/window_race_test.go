package ws

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	clocktesting "k8s.io/utils/clock/testing"

	"kubegate/internal/testenv"
)

// TestWindowMovesDuringReauthorizations streams window moves while
// re-authorization reopens the window again and again (under -race, the
// subscription's copy and the moves touch the same fields), then checks
// that the window still answers a move where it was asked to go.
func TestWindowMovesDuringReauthorizations(t *testing.T) {
	env := testenv.Get(t)
	ns1, ns2 := env.Namespace(t), env.Namespace(t)
	lbl := map[string]string{"moves": ns1}
	createCM(t, ns1, "a", lbl)
	createCM(t, ns1, "b", lbl)
	createCM(t, ns2, "c", lbl)
	authz := &fakeAuthorizer{decide: onlyNamespaces(ns1)}
	clk := &fakeClock{FakeClock: clocktesting.NewFakeClock(time.Now()), realDelays: true}
	ts := startServer(t, startManager(t, env.Config, nil), func(o *Options) {
		o.Authorizer = authz
		o.clock = clk
		o.PingInterval = 1000 * time.Hour
	})
	c := dialAs(t, ts, "alice")
	c.subscribe("w", "configmaps", "", func(m map[string]any) { m["limit"], m["labelSelector"] = 1, "moves="+ns1 })
	c.expect("ack", "w")

	// One goroutine reads every frame (unpacking batches) and hands on
	// the count ops; another sends moves until told to stop.
	counts := make(chan wireOp, 16)
	go func() {
		defer close(counts)
		for {
			f, err := c.read(time.Minute)
			if err != nil {
				return
			}
			for _, op := range f.Ops {
				if op.Op == "count" && op.Offset == 2 { // the storm's moves are to 0 and 1
					counts <- op
				}
			}
		}
	}()
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // moves, as fast as the socket takes them
		defer wg.Done()
		moves := [][]byte{[]byte(`{"type":"window","id":"w","offset":1}`), []byte(`{"type":"window","id":"w","offset":0}`)}
		for i := 0; !stop.Load(); i++ {
			if c.c.Write(context.Background(), websocket.MessageText, moves[i%2]) != nil {
				return
			}
		}
	}()
	for i := range 40 {
		if i%2 == 0 {
			authz.set(onlyNamespaces(ns1, ns2))
		} else {
			authz.set(onlyNamespaces(ns1))
		}
		clk.stepArmed(t, 2, ts.opts.RecheckInterval)
	}
	clk.waitArmed(t, 2)
	stop.Store(true)
	wg.Wait()

	// Both namespaces are readable (the last pass narrowed to ns1, so
	// widen once more); a move to the third row is answered there.
	authz.set(onlyNamespaces(ns1, ns2))
	clk.stepArmed(t, 2, ts.opts.RecheckInterval)
	c.send(map[string]any{"type": "window", "id": "w", "offset": 2})
	for op := range counts {
		if op.Offset == 2 && op.Count == 3 {
			return
		}
	}
	t.Fatal("the socket ended before the window answered the last move")
}
