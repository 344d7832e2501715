package gateway_test

import (
	"context"
	"os/signal"
	"syscall"

	"kubegate/internal/config"
	"kubegate/internal/gateway"
)

// A gateway is built from its configuration, as cmd/gateway builds it,
// and runs until its context ends.
func ExampleNew() {
	run := func() error {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		cfg := config.Default()
		cfg.Cache.Resources = []string{"pods", "deployments.apps"}
		g, err := gateway.New(cfg, gateway.Options{})
		if err != nil {
			return err
		}
		return g.Start(ctx)
	}
	_ = run
}
