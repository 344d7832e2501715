// Command gateway runs kubegate: it caches the resources clients ask for
// with one LIST+WATCH each and serves them over Kubernetes-compatible REST,
// WebSocket subscriptions and webhooks.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"k8s.io/klog/v2"

	"kubegate/internal/config"
	"kubegate/internal/gateway"
)

func main() {
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `kubegate gateway: serves Kubernetes objects from one shared cache over
REST (kubectl/client-go compatible), WebSocket (/ws) and webhooks.

Usage: gateway [flags]

Flags:
`)
		fs.PrintDefaults()
	}
	cfg, err := config.Parse(fs, os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "gateway: %v (see gateway --help)\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "gateway: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config.Config) error {
	log, err := gateway.NewLogger(cfg.Log)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	klog.SetLogger(zapr.NewLogger(log.Named("client-go")))
	setMemoryLimit(log, memlimit.FromCgroup)

	g, err := gateway.New(cfg, gateway.Options{Logger: log})
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- g.Start(runCtx) }()
	go reloadWebhooks(runCtx, g, log.Named("webhook"))
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		log.Info("shutting down", zap.Duration("timeout", time.Duration(cfg.ShutdownTimeout)))
	}
	select {
	case err := <-done:
		log.Info("stopped")
		return err
	case <-time.After(time.Duration(cfg.ShutdownTimeout) + 5*time.Second):
		return errors.New("shutdown did not finish in time; exiting anyway")
	}
}
