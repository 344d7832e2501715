package scenario

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubegate/bench/harness"
	"kubegate/bench/workload"
	"kubegate/internal/config"
	"kubegate/internal/controlplane"
)

// Env is what every scenario and arm runs against: one kube-apiserver and
// one gateway in front of it, with the workload created. Its fields do not
// change once StartEnv returns, except APIServerPID.
type Env struct {
	// GatewayURL is the gateway's base URL, http://127.0.0.1:<port>.
	GatewayURL string
	// GatewayToken is the bearer token for the gateway; "" because the
	// benchmark gateway runs with auth.authn none (see GatewayConfig).
	GatewayToken string
	// APIServer is an admin (system:masters) client config for
	// kube-apiserver, without client-side rate limits.
	APIServer *rest.Config
	// Namespaces hold the workload, workload.NamespaceName(0..k-1).
	Namespaces []string
	// Labels are on every benchmark Pod and ConfigMap (workload.PartOfLabel); the
	// Pods also carry workload.ShardLabel=shard-0..shard-9. Selector selects shard-0.
	Labels   map[string]string
	Selector string
	// Workload is what workload.CreateWorkload made.
	Workload workload.Workload
	// GatewayPID and APIServerPID are the serving processes, for harness.ReadProc.
	// APIServerPID changes when the relist scenario restarts kube-apiserver
	// (scenarios run one at a time).
	GatewayPID   int
	APIServerPID int

	// Kubeconfig is a kubeconfig file for the admin user (for extra gateway
	// processes, e.g. cold start).
	Kubeconfig string
	// Dir holds the gateway's config and logs for this run.
	Dir string
	// GatewayBinary is the binary the gateway runs from.
	GatewayBinary string

	cp      *controlplane.ControlPlane
	gateway *harness.Gateway
	client  kubernetes.Interface
}

// EnvOptions configures StartEnv.
type EnvOptions struct {
	// GatewayBinary is the gateway executable (make build: bin/gateway).
	// Required.
	GatewayBinary string
	// Namespaces is how many namespaces the Pods are spread over. Default 10.
	Namespaces int
	// Pods to create. Default 1000. ConfigMaps: one per 10 Pods.
	Pods int
	// Workers are concurrent create requests. Default 16.
	Workers int
	// MinResync, when set, is the gateway's cache.minResync (its default
	// is 5s).
	MinResync time.Duration
	// APIServerFlags add kube-apiserver flags or override the Env's,
	// keyed by name without dashes. Default none.
	APIServerFlags map[string]string
	// Log receives progress lines. Default none.
	Log io.Writer
}

// StartEnv starts etcd and kube-apiserver, creates the workload, then starts
// the gateway with Pods and ConfigMaps cached. Close stops everything.
func StartEnv(ctx context.Context, o EnvOptions) (*Env, error) {
	if o.Namespaces <= 0 {
		o.Namespaces = 10
	}
	if o.Pods < 0 {
		return nil, errors.New("negative pod count")
	}
	if o.Pods == 0 {
		o.Pods = 1000
	}
	if o.Workers <= 0 {
		o.Workers = 16
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	dir, err := os.MkdirTemp("", "kubegate-bench-")
	if err != nil {
		return nil, err
	}
	e := &Env{Dir: dir, GatewayBinary: o.GatewayBinary}
	ok := false
	defer func() {
		if !ok {
			e.Close()
		}
	}()
	t0 := time.Now()
	// The default (400 + 200 in flight) is sized for a real cluster;
	// thousands of watches and a creating storm need more room, and the
	// gateway side has no such limit either.
	flags := map[string]string{"max-requests-inflight": "4000", "max-mutating-requests-inflight": "2000"}
	maps.Copy(flags, o.APIServerFlags)
	e.cp, err = controlplane.Start(ctx, controlplane.Options{ExtraAPIServerFlags: flags})
	if err != nil {
		return nil, fmt.Errorf("control plane: %w", err)
	}
	e.APIServer = e.cp.AdminConfig()
	e.APIServer.WarningHandler = rest.NoWarnings{}
	e.APIServerPID = e.cp.APIServerPID()
	e.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := e.cp.WriteKubeconfig(e.Kubeconfig); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Log, "control plane ready in %v (kube-apiserver pid %d)\n", time.Since(t0).Round(time.Millisecond), e.APIServerPID)

	e.client, err = kubernetes.NewForConfig(e.APIServer)
	if err != nil {
		return nil, err
	}
	t0 = time.Now()
	e.Workload, err = workload.CreateWorkload(ctx, e.client, o.Namespaces, o.Pods, o.Workers)
	if err != nil {
		return nil, err
	}
	e.Namespaces = e.Workload.Namespaces
	e.Labels = map[string]string{workload.PartOfLabel: workload.PartOfValue}
	e.Selector = e.Workload.Selector
	fmt.Fprintf(o.Log, "created %d pods and %d configmaps over %d namespaces in %v; pod JSON %.0f B (as served, with managedFields: %.0f B)\n",
		e.Workload.Pods, e.Workload.ConfigMaps, len(e.Namespaces), time.Since(t0).Round(time.Millisecond),
		e.Workload.PodJSONBytes, e.Workload.PodJSONBytesServed)

	cfg := GatewayConfig(e.Kubeconfig, "pods", "configmaps")
	if o.MinResync > 0 {
		cfg.Cache.MinResync = config.Duration(o.MinResync)
	}
	e.gateway, err = e.startGateway(ctx, cfg, false)
	if err != nil {
		return nil, err
	}
	e.GatewayURL = e.gateway.URL
	e.GatewayPID = e.gateway.PID
	fmt.Fprintf(o.Log, "gateway ready in %v (pid %d, %s)\n", e.gateway.Ready.Sub(e.gateway.Started).Round(time.Millisecond), e.GatewayPID, e.GatewayURL)
	ok = true
	return e, nil
}

// GatewayConfig is the configuration of every gateway the benchmark
// starts: config.Default() reading kubeconfig and caching resources at
// start, with its per-client limits lifted. The benchmark opens
// thousands of sockets from one address as one anonymous user, which the
// defaults (100 sockets per client, 50 requests/s per user) would refuse.
// Authentication is off (loopback only) and authorization always allows;
// kube-apiserver's arm uses a system:masters token, which its RBAC also
// allows without a review, so neither side pays for authorization.
func GatewayConfig(kubeconfig string, resources ...string) config.Config {
	c := config.Default()
	c.Kubeconfig = kubeconfig
	c.Listen = "" // a free loopback port, chosen by harness.StartGateway
	c.Log = config.Log{Level: "warn", Format: "json"}
	c.Cache.Resources = resources
	ws := &c.WebSocket
	ws.MaxSockets, ws.MaxSocketsPerClient, ws.MaxSubscriptionsPerSocket = 1_000_000, 1_000_000, 10_000
	ws.SubscribeRate, ws.SubscribeBurst = 1_000_000, 1_000_000
	c.Auth.Authn, c.Auth.Authz = "none", "always-allow"
	// No per-user limit: the benchmark's clients are one user.
	c.Auth.UserQPS, c.Auth.UserMaxInflight = 0, 0
	return c
}

// startGateway starts another gateway process against the Env's
// kube-apiserver, its files in Dir.
func (e *Env) startGateway(ctx context.Context, cfg config.Config, gcTrace bool) (*harness.Gateway, error) {
	return harness.StartGateway(ctx, harness.GatewayOptions{Binary: e.GatewayBinary, Config: cfg, Dir: e.Dir, GCTrace: gcTrace})
}

// Client is an admin clientset for kube-apiserver.
func (e *Env) Client() kubernetes.Interface { return e.client }

// ControlPlane is the control plane the Env started.
func (e *Env) ControlPlane() *controlplane.ControlPlane { return e.cp }

// Close stops the gateway and the control plane and removes Dir.
func (e *Env) Close() error {
	var errs []error
	if e.gateway != nil {
		errs = append(errs, e.gateway.Stop())
	}
	if e.cp != nil {
		errs = append(errs, e.cp.Stop())
	}
	errs = append(errs, os.RemoveAll(e.Dir))
	return errors.Join(errs...)
}
