// Command kubegate-bench measures kubegate against kube-apiserver on the
// same workload in one run (package internal/bench does the work). It
// starts its own etcd + kube-apiserver, runs the gateway binary as a
// subprocess, prints a table with gateway/apiserver ratios and writes JSON.
//
// Usage:
//
//	make build
//	go run ./cmd/kubegate-bench -gateway bin/gateway -json .local/bench/load.json
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"kubegate/internal/bench"
)

func main() {
	var (
		o       bench.Options
		scen    string
		jsonOut string
		md      bool
	)
	flag.StringVar(&o.GatewayBinary, "gateway", "bin/gateway", "gateway `binary` (make build)")
	flag.StringVar(&scen, "scenarios", strings.Join(bench.DefaultScenarios, ","), "comma-separated `scenarios` to run")
	flag.IntVar(&o.Pods, "pods", 1000, "Pods to create (~7 KB JSON each)")
	flag.IntVar(&o.Namespaces, "namespaces", 10, "namespaces to spread the Pods over")
	flag.StringVar(&jsonOut, "json", "", "also write the results as JSON to this `file`")
	flag.BoolVar(&md, "markdown", false, "print the table as Markdown")
	flag.Parse()
	for _, s := range strings.Split(scen, ",") {
		if s = strings.TrimSpace(s); s != "" {
			o.Scenarios = append(o.Scenarios, s)
		}
	}
	o.Log = os.Stderr

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r, err := bench.Run(ctx, o)
	if md {
		bench.Markdown(os.Stdout, r.Figures)
	} else {
		bench.Table(os.Stdout, r.Figures)
	}
	if jsonOut != "" {
		if werr := bench.WriteJSON(jsonOut, r); werr != nil {
			fmt.Fprintln(os.Stderr, "kubegate-bench:", werr)
			os.Exit(1)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubegate-bench:", err)
		os.Exit(1)
	}
}
