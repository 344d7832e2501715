package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"

	"kubegate/internal/gateway"
)

// reloadWebhooks re-reads the --config file on every SIGHUP and applies
// its webhooks section (Gateway.ReloadWebhooks) until ctx ends. An
// invalid file changes nothing and is logged.
func reloadWebhooks(ctx context.Context, g *gateway.Gateway, log *zap.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		n, err := g.ReloadWebhooks(ctx)
		if err != nil {
			log.Error("SIGHUP: webhooks not reloaded; the previous configuration stays in effect", zap.Error(err))
			continue
		}
		log.Info("SIGHUP: webhooks reloaded", zap.Int("webhooks", n))
	}
}
