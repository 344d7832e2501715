package scenario

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestFloor runs the floor in-process: subscribers get one MODIFIED frame
// per published resourceVersion, through the gateway arm's receivers, and
// a subscription with another id is refused.
func TestFloor(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- serveFloor(inR, outW) }()
	url, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	url = strings.TrimSpace(url)
	if _, err := io.WriteString(inW, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-00000"}}`+"\n"); err != nil {
		t.Fatal(err)
	}

	ctx := t.Context()
	subs := []*subscriber{{}, {}, {}}
	arm := &wsArm{url: url}
	if err := arm.Open(ctx, subs, 0); err != nil {
		t.Fatal(err)
	}
	for _, rv := range []string{"101", "102", "103"} {
		if _, err := io.WriteString(inW, rv+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	if !waitFor(ctx, 10*time.Second, func() bool {
		for _, s := range subs {
			if s.count.Load() < 3 {
				return false
			}
		}
		return true
	}) {
		t.Fatal("not every frame arrived")
	}
	arm.Close()
	for i, s := range subs {
		if s.err != nil || len(s.events) != 3 || s.events[0].rv != 101 || s.events[2].rv != 103 {
			t.Errorf("subscriber %d: err %v, events %v", i, s.err, s.events)
		}
	}

	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{"kubegate.v1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribe","id":"other","resource":"pods"}`)); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, _, err := c.Read(rctx); websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Errorf("subscription with another id: %v, want close %v", err, websocket.StatusPolicyViolation)
	}

	inW.Close()
	if err := <-served; err != nil {
		t.Errorf("serveFloor: %v", err)
	}
	outR.Close()
}
