// Command devcluster runs kubegate's local development cluster: a real
// etcd and kube-apiserver on loopback (the binaries hack/controlplane/build.sh
// builds), the demo workload, and the gateway. The Makefile's cluster,
// cluster-down and run targets call it.
//
//	devcluster up      start a detached control plane in .local/cluster (idempotent)
//	devcluster down    stop it and remove its data (idempotent)
//	devcluster run     control plane + demo workload + gateway until Ctrl-C
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"kubegate/internal/controlplane"
	"kubegate/internal/demo"
)

func main() {
	fs := flag.NewFlagSet("devcluster", flag.ContinueOnError)
	dir := fs.String("dir", ".local", "state `directory`: the cluster's data goes in <dir>/cluster, the kubeconfig in <dir>/kubeconfig")
	gateway := fs.String("gateway", "bin/gateway", "gateway `binary` that run starts")
	listen := fs.String("listen", "127.0.0.1:8080", "gateway listen `address` for run")
	rate := fs.Float64("demo-rate", 5, "demo workload changes per second (0 disables the demo)")
	namespaces := fs.Int("demo-namespaces", 3, "demo namespaces")
	pods := fs.Int("demo-pods", 10, "demo pods per namespace")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: devcluster [flags] up|down|run [-- gateway flags]

  up    start etcd + kube-apiserver on loopback (detached) and write <dir>/kubeconfig
  down  stop them and remove their data
  run   start the cluster (or reuse a running one), the demo workload and the
        gateway; Ctrl-C stops everything it started

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if fs.NArg() < 1 {
		fs.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d := devcluster{dir: *dir}
	var err error
	switch fs.Arg(0) {
	case "up":
		_, _, err = d.up(ctx)
	case "down":
		err = d.down()
	case "run":
		err = d.run(ctx, runOptions{
			gateway: *gateway, listen: *listen, args: fs.Args()[1:],
			demo: demo.Options{Rate: *rate, Namespaces: *namespaces, PodsPerNamespace: *pods},
		})
	default:
		err = fmt.Errorf("unknown command %q (want up, down or run)", fs.Arg(0))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "devcluster: %v\n", err)
		os.Exit(1)
	}
}

type devcluster struct{ dir string }

func (d devcluster) dataDir() string    { return filepath.Join(d.dir, "cluster") }
func (d devcluster) kubeconfig() string { return filepath.Join(d.dir, "kubeconfig") }

// viewer is a static-token user without any RBAC grant, so the auth
// features can be tried by hand; grant it roles with kubectl.
var viewer = controlplane.User{Name: "viewer", Groups: []string{"kubegate:viewers"}}

// up starts a detached control plane, or reuses the running one. started
// reports whether this call started it.
func (d devcluster) up(ctx context.Context) (cp *controlplane.ControlPlane, started bool, err error) {
	if cp, err := controlplane.Load(d.dataDir()); err == nil {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		rerr := cp.Ready(rctx)
		cancel()
		if rerr == nil {
			fmt.Fprintf(os.Stderr, "devcluster: control plane already running at %s\n", cp.URL())
			d.printUsage()
			return cp, false, nil
		}
		fmt.Fprintf(os.Stderr, "devcluster: found a stale control plane in %s (%v); replacing it\n", d.dataDir(), rerr)
		_ = cp.Stop()
		if err := os.RemoveAll(d.dataDir()); err != nil {
			return nil, false, err
		}
	} else if !errors.Is(err, controlplane.ErrNoState) {
		return nil, false, fmt.Errorf("%v; remove %s (make cluster-down) and retry", err, d.dataDir())
	}
	if err := os.MkdirAll(d.dataDir(), 0o700); err != nil {
		return nil, false, err
	}
	fmt.Fprintf(os.Stderr, "devcluster: starting etcd and kube-apiserver (logs in %s)...\n", d.dataDir())
	cp, err = controlplane.Start(ctx, controlplane.Options{
		DataDir: d.dataDir(),
		Detach:  true,
		Users:   []controlplane.User{viewer},
	})
	if err != nil {
		_ = os.RemoveAll(d.dataDir())
		return nil, false, err
	}
	if err := cp.WriteKubeconfig(d.kubeconfig()); err != nil {
		_ = cp.Stop()
		return nil, false, err
	}
	fmt.Fprintf(os.Stderr, "devcluster: control plane ready at %s\n", cp.URL())
	d.printUsage()
	return cp, true, nil
}

func (d devcluster) printUsage() {
	kc, _ := filepath.Abs(d.kubeconfig())
	assets := controlplane.ResolveAssetsDir("")
	fmt.Fprintf(os.Stderr, `
  export KUBECONFIG=%s
  %s/kubectl get namespaces
  (context "kubegate-viewer" is a user without roles, for trying authorization)

`, kc, assets)
}

func (d devcluster) down() error {
	cp, err := controlplane.Load(d.dataDir())
	switch {
	case errors.Is(err, controlplane.ErrNoState):
		if _, serr := os.Stat(d.dataDir()); serr == nil {
			break // half-written state: just remove it
		}
		fmt.Fprintln(os.Stderr, "devcluster: no control plane running")
		return nil
	case err != nil:
		fmt.Fprintf(os.Stderr, "devcluster: %v; removing the data anyway\n", err)
	default:
		if err := cp.Stop(); err != nil {
			return fmt.Errorf("stop: %w", err)
		}
	}
	if err := os.RemoveAll(d.dataDir()); err != nil {
		return err
	}
	_ = os.Remove(d.kubeconfig())
	fmt.Fprintln(os.Stderr, "devcluster: control plane stopped and its data removed")
	return nil
}

type runOptions struct {
	gateway string
	listen  string
	args    []string
	demo    demo.Options
}

// run starts (or reuses) the cluster, the demo workload and the gateway,
// and stops what it started when ctx ends or the gateway exits.
func (d devcluster) run(ctx context.Context, o runOptions) (err error) {
	if _, err := os.Stat(o.gateway); err != nil {
		return fmt.Errorf("gateway binary: %w (build it with make build)", err)
	}
	if l, err := net.Listen("tcp", o.listen); err != nil {
		return fmt.Errorf("gateway address %s is not free: %v (stop what uses it or pass LISTEN=host:port to make run)", o.listen, err)
	} else {
		l.Close()
	}
	cp, started, err := d.up(ctx)
	if err != nil {
		return err
	}
	if started {
		defer func() {
			fmt.Fprintln(os.Stderr, "devcluster: stopping the control plane")
			if derr := d.down(); err == nil {
				err = derr
			}
		}()
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	log, _ := zap.NewDevelopment(zap.IncreaseLevel(zap.InfoLevel))
	demoDone := make(chan error, 1)
	if o.demo.Rate > 0 {
		cfg := cp.AdminConfig()
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return err
		}
		o.demo.Log = log.Named("demo")
		go func() { demoDone <- demo.Run(ctx, cs, dyn, o.demo) }()
	} else {
		demoDone <- nil
	}

	kc, _ := filepath.Abs(d.kubeconfig())
	// The demo's core resources are cached from the start so /readyz means
	// "the dashboard has data"; the Widget CRD starts on first use.
	// The dashboard in a browser on this machine needs no token: the
	// gateway runs anonymous on loopback (docs/auth.md). GATEWAY_FLAGS
	// come last and override these, e.g. --authn=kubernetes --authz=rbac
	// to try authentication with the viewer's or the admin's token.
	args := append([]string{"--kubeconfig", kc, "--listen", o.listen, "--log-format", "console",
		"--resources", "namespaces,pods,deployments.apps,configmaps",
		"--authn=none", "--authz=always-allow"}, o.args...)
	gw := exec.Command(o.gateway, args...)
	gw.Stdout, gw.Stderr = os.Stdout, os.Stderr
	if err := gw.Start(); err != nil {
		cancel()
		<-demoDone
		return fmt.Errorf("start gateway: %w", err)
	}
	gwDone := make(chan error, 1)
	go func() { gwDone <- gw.Wait() }()

	base := "http://" + o.listen
	go func() {
		if waitReady(ctx, base+"/readyz") == nil {
			fmt.Fprintf(os.Stderr, `
  kubegate is ready.
    Dashboard:  %[1]s/
    REST:       curl %[1]s/api/v1/namespaces/demo-1/pods
                kubectl --server %[1]s get pods -A
    WebSocket:  ws://%[2]s/ws   (subprotocol kubegate.v1, see docs/protocol.md)
    Health:     %[1]s/readyz?verbose   Metrics: %[1]s/metrics
    Auth:       off for local use unless GATEWAY_FLAGS say otherwise (docs/auth.md)
  Press Ctrl-C to stop.

`, base, o.listen)
		}
	}()

	var gwErr error
	select {
	case gwErr = <-gwDone:
		gwErr = fmt.Errorf("gateway exited: %v", gwErr)
	case <-ctx.Done():
		fmt.Fprintln(os.Stderr, "devcluster: stopping the gateway")
		_ = gw.Process.Signal(syscall.SIGTERM)
		select {
		case <-gwDone:
		case <-time.After(30 * time.Second):
			_ = gw.Process.Kill()
			<-gwDone
		}
	}
	cancel()
	if derr := <-demoDone; derr != nil && !errors.Is(derr, context.Canceled) {
		fmt.Fprintf(os.Stderr, "devcluster: demo: %v\n", derr)
	}
	return gwErr
}

func waitReady(ctx context.Context, url string) error {
	client := &http.Client{Timeout: 2 * time.Second}
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}
