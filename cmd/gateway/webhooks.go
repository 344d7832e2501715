package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"

	"kubegate/internal/config"
	"kubegate/internal/webhook"
)

// reloadWebhooks re-reads the --config file on every SIGHUP and applies
// its webhooks section. Webhooks whose configuration did not change keep
// their queues; an invalid file changes nothing and is logged. Other
// settings need a restart.
func reloadWebhooks(ctx context.Context, path string, hooks *webhook.Manager, log *zap.Logger) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hup:
		}
		if path == "" {
			log.Warn("SIGHUP: no --config file to re-read")
			continue
		}
		c, err := config.Load(path, config.Default())
		if err == nil {
			err = hooks.Apply(ctx, c.Webhooks)
		}
		if err != nil {
			log.Error("SIGHUP: webhooks not reloaded; the previous configuration stays in effect", zap.Error(err))
			continue
		}
		log.Info("SIGHUP: webhooks reloaded", zap.Int("webhooks", len(c.Webhooks)))
	}
}
