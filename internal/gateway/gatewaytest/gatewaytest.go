// Package gatewaytest runs the gateway in a test, as cmd/gateway runs
// it: built by gateway.New from a config.Config, against the package's
// test apiserver (internal/testenv).
package gatewaytest

import (
	"context"
	"net"
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"kubegate/internal/config"
	"kubegate/internal/gateway"
	"kubegate/internal/testenv"
)

// Config is the configuration tests start from: config.Default(), the
// configuration of a gateway started with no flags, listening on a free
// loopback port.
func Config() config.Config {
	c := config.Default()
	c.Listen = "127.0.0.1:0"
	return c
}

// Start builds the gateway cfg describes with gateway.New and runs it
// until the test ends; its goroutines have exited, and Start's error has
// been checked, when the test's cleanups have run. Options left out
// default to the test apiserver's admin client (testenv.Get), a listener
// on a free loopback port and a test logger at info level.
func Start(t testing.TB, cfg config.Config, opts gateway.Options) *gateway.Gateway {
	t.Helper()
	g, _ := StartStoppable(t, cfg, opts)
	return g
}

// StartStoppable is Start that also returns a function that stops the
// gateway and waits for it (idempotent; the test's cleanup calls it too).
func StartStoppable(t testing.TB, cfg config.Config, opts gateway.Options) (*gateway.Gateway, func()) {
	t.Helper()
	if opts.RESTConfig == nil {
		opts.RESTConfig = testenv.Get(t).Config
	}
	if opts.Logger == nil {
		opts.Logger = zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))
	}
	if opts.Listener == nil {
		ln, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			t.Fatal(err)
		}
		opts.Listener = ln
	}
	g, err := gateway.New(cfg, opts)
	if err != nil {
		_ = opts.Listener.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Start(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("gateway: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return g, stop
}
