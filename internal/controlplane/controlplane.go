package controlplane

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KubernetesVersion is the release whose kube-apiserver and kubectl
// hack/controlplane/build.sh builds; it names the default assets directory.
const KubernetesVersion = "v1.37.2"

// AdminUser is the static-token user, a member of system:masters, that
// AdminConfig authenticates as.
const AdminUser = "kubegate-admin"

// Binary names looked up in the assets directory.
const (
	EtcdBinary      = "etcd"
	APIServerBinary = "kube-apiserver"
	KubectlBinary   = "kubectl"
	// HelmBinary is built beside them for the tests of deploy/helm.
	HelmBinary = "helm"
)

// ErrMissingBinary is wrapped by the error Start returns when a binary is
// not in the assets directory.
var ErrMissingBinary = errors.New("control plane binary missing")

// User is a static-token user of kube-apiserver. What it may do is up to
// RBAC: grant it roles with the admin client.
type User struct {
	Name string `json:"name"`
	// UID defaults to Name.
	UID string `json:"uid,omitempty"`
	// Token is the bearer token. Default: random.
	Token  string   `json:"token,omitempty"`
	Groups []string `json:"groups,omitempty"`
}

// Options configures Start. The zero value is usable.
type Options struct {
	// AssetsDir holds the etcd, kube-apiserver and kubectl binaries.
	// Default: $KUBEGATE_ASSETS, then $KUBEBUILDER_ASSETS, then
	// DefaultAssetsDir().
	AssetsDir string
	// DataDir holds etcd's data, certificates, the token file, both
	// processes' logs (etcd.log, kube-apiserver.log) and state.json.
	// Default: a new temporary directory, which Stop removes. A DataDir set
	// here is never removed.
	DataDir string
	// Users are static-token users in addition to AdminUser. Their tokens
	// and UIDs are defaulted as documented on User.
	Users []User
	// Log receives both processes' output as it is written, in addition to
	// the log files. Default: none. Ignored with Detach.
	Log io.Writer
	// ExtraAPIServerFlags adds kube-apiserver flags or overrides the
	// defaults, keyed by flag name with or without leading dashes.
	ExtraAPIServerFlags map[string]string
	// Detach starts the processes in their own session and without a
	// parent-death signal, so they keep running after the caller exits;
	// Load reattaches to them. Default: processes die with the caller.
	Detach bool
	// ReadyTimeout bounds each wait for etcd to report healthy and for
	// kube-apiserver to report /readyz. Default: 90s.
	ReadyTimeout time.Duration
}

// DefaultAssetsDir is where hack/controlplane/build.sh puts the binaries
// unless KUBEGATE_ASSETS says otherwise:
// ${XDG_CACHE_HOME:-$HOME/.cache}/kubegate/k8s-<KubernetesVersion>.
func DefaultAssetsDir() string {
	base, err := os.UserCacheDir()
	if err != nil {
		base = filepath.Join(os.TempDir(), "kubegate-cache")
	}
	return filepath.Join(base, "kubegate", "k8s-"+KubernetesVersion)
}

// ResolveAssetsDir applies the AssetsDir defaults to dir.
func ResolveAssetsDir(dir string) string {
	for _, d := range []string{dir, os.Getenv("KUBEGATE_ASSETS"), os.Getenv("KUBEBUILDER_ASSETS")} {
		if d != "" {
			return d
		}
	}
	return DefaultAssetsDir()
}

type ports struct {
	EtcdClient int `json:"etcdClient"`
	EtcdPeer   int `json:"etcdPeer"`
	APIServer  int `json:"apiServer"`
}

// ControlPlane is a running etcd and kube-apiserver.
//
// Its methods may be called from several goroutines. The configuration
// (ports, users, certificates) is fixed once Start returns; mu serialises
// starting and stopping the processes. Each process started here has one
// goroutine waiting for it (see process); Stop returns after they exit.
type ControlPlane struct {
	assetsDir    string
	dataDir      string
	ownsDataDir  bool
	detach       bool
	log          io.Writer
	readyTimeout time.Duration
	extraFlags   map[string]string
	users        []User // AdminUser first
	caPEM        []byte
	ports        ports
	probe        *http.Client // health checks, without keep-alive

	// mu guards etcd and apiServer; each is nil while stopped.
	mu        sync.Mutex
	etcd      *process
	apiServer *process
}

// Start starts etcd, then kube-apiserver, and returns once kube-apiserver
// is ready. On error nothing is left running.
func Start(ctx context.Context, opts Options) (*ControlPlane, error) {
	cp, err := newControlPlane(opts)
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		cp.ports, err = freePorts()
		if err == nil {
			err = cp.startAll(ctx)
		}
		if err == nil {
			return cp, nil
		}
		cp.mu.Lock()
		stopErr := cp.stopLocked()
		cp.mu.Unlock()
		// Ports are chosen by binding :0 and closing, so another process
		// can take one before etcd or kube-apiserver binds it; try once
		// more with new ones.
		if !errors.Is(err, errPortInUse) || attempt == 2 || stopErr != nil {
			cp.cleanupFailedStart()
			return nil, errors.Join(err, stopErr)
		}
	}
}

func newControlPlane(opts Options) (*ControlPlane, error) {
	assets, err := filepath.Abs(ResolveAssetsDir(opts.AssetsDir))
	if err != nil {
		return nil, fmt.Errorf("assets dir: %w", err)
	}
	for _, bin := range []string{EtcdBinary, APIServerBinary} {
		if err := checkBinary(assets, bin); err != nil {
			return nil, err
		}
	}
	cp := &ControlPlane{
		assetsDir:    assets,
		detach:       opts.Detach,
		log:          opts.Log,
		readyTimeout: opts.ReadyTimeout,
		extraFlags:   map[string]string{},
	}
	if cp.readyTimeout <= 0 {
		cp.readyTimeout = 90 * time.Second
	}
	for k, v := range opts.ExtraAPIServerFlags {
		cp.extraFlags[strings.TrimLeft(k, "-")] = v
	}
	admin := User{Name: AdminUser, Groups: []string{"system:masters"}}
	for _, u := range append([]User{admin}, opts.Users...) {
		if u.Name == "" {
			return nil, errors.New("user without a name")
		}
		if slices.ContainsFunc(cp.users, func(o User) bool { return o.Name == u.Name }) {
			return nil, fmt.Errorf("user %q defined twice", u.Name)
		}
		if u.UID == "" {
			u.UID = u.Name
		}
		if u.Token == "" {
			u.Token = randomToken()
		}
		u.Groups = slices.Clone(u.Groups)
		cp.users = append(cp.users, u)
	}

	if opts.DataDir == "" {
		cp.dataDir, err = os.MkdirTemp("", "kubegate-controlplane-")
		cp.ownsDataDir = true
	} else {
		cp.dataDir, err = filepath.Abs(opts.DataDir)
		if err == nil {
			err = os.MkdirAll(cp.dataDir, 0o700)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if cp.caPEM, err = writePKI(cp.pkiDir()); err == nil {
		err = cp.writeTokenFile()
	}
	if err != nil {
		cp.cleanupFailedStart()
		return nil, err
	}
	if err := cp.initProbe(); err != nil {
		cp.cleanupFailedStart()
		return nil, err
	}
	return cp, nil
}

func checkBinary(dir, name string) error {
	st, err := os.Stat(filepath.Join(dir, name))
	if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("%s not found in %s: run \"make bins\" (or hack/controlplane/build.sh) to build it: %w",
			name, dir, ErrMissingBinary)
	}
	return nil
}

func (cp *ControlPlane) initProbe() error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cp.caPEM) {
		return errors.New("CA certificate: no PEM data")
	}
	cp.probe = &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
			DisableKeepAlives: true,
		},
	}
	return nil
}

func (cp *ControlPlane) startAll(ctx context.Context) error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if err := cp.startEtcdLocked(ctx); err != nil {
		return err
	}
	return cp.startAPIServerLocked(ctx)
}

// cleanupFailedStart stops whatever runs and removes a temporary data dir.
func (cp *ControlPlane) cleanupFailedStart() {
	cp.mu.Lock()
	cp.stopLocked()
	cp.mu.Unlock()
	if cp.ownsDataDir {
		os.RemoveAll(cp.dataDir)
	}
}

// Stop stops kube-apiserver, then etcd, and waits for both to exit. It
// removes the data directory if Start created it. Stop is idempotent.
func (cp *ControlPlane) Stop() error {
	cp.mu.Lock()
	err := cp.stopLocked()
	cp.mu.Unlock()
	if cp.ownsDataDir {
		if rmErr := os.RemoveAll(cp.dataDir); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("remove data dir: %w", rmErr))
		}
	}
	return err
}

// stopLocked stops both processes, kube-apiserver first. Caller must hold
// mu.
func (cp *ControlPlane) stopLocked() error {
	var errs []error
	stopped := false
	for _, p := range []**process{&cp.apiServer, &cp.etcd} {
		if *p == nil {
			continue
		}
		if err := (*p).stop(); err != nil {
			errs = append(errs, err)
			continue
		}
		*p = nil
		stopped = true
	}
	if stopped {
		if err := cp.saveStateLocked(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// StopAPIServer stops kube-apiserver and waits for it to exit; etcd and
// the data stay. It is a no-op if kube-apiserver is not running.
func (cp *ControlPlane) StopAPIServer() error {
	return cp.stopOne(&cp.apiServer)
}

// StopEtcd stops etcd and waits for it to exit; its data stay. It is a
// no-op if etcd is not running.
func (cp *ControlPlane) StopEtcd() error {
	return cp.stopOne(&cp.etcd)
}

func (cp *ControlPlane) stopOne(p **process) error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if *p == nil {
		return nil
	}
	if err := (*p).stop(); err != nil {
		return err
	}
	*p = nil
	return cp.saveStateLocked()
}

// StartAPIServer starts kube-apiserver again, on the same port and with the
// same certificates and users, and waits until it is ready. It fails if
// kube-apiserver is running.
func (cp *ControlPlane) StartAPIServer(ctx context.Context) error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.startAPIServerLocked(ctx)
}

// StartEtcd starts etcd again, on the same ports and data, and waits until
// it is healthy. It fails if etcd is running.
func (cp *ControlPlane) StartEtcd(ctx context.Context) error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.startEtcdLocked(ctx)
}

// startEtcdLocked starts etcd and waits for it. Caller must hold mu.
func (cp *ControlPlane) startEtcdLocked(ctx context.Context) error {
	if cp.etcd != nil && !cp.etcd.hasExited() {
		return errors.New("etcd is already running")
	}
	p, err := cp.start(EtcdBinary, cp.etcdArgs())
	if err != nil {
		return err
	}
	if err := cp.waitReady(ctx, p, cp.etcdHealthy); err != nil {
		p.stop()
		return err
	}
	cp.etcd = p
	return cp.saveStateLocked()
}

// startAPIServerLocked starts kube-apiserver and waits for it. Caller must
// hold mu.
func (cp *ControlPlane) startAPIServerLocked(ctx context.Context) error {
	if cp.apiServer != nil && !cp.apiServer.hasExited() {
		return errors.New("kube-apiserver is already running")
	}
	p, err := cp.start(APIServerBinary, cp.apiServerArgs())
	if err != nil {
		return err
	}
	if err := cp.waitReady(ctx, p, cp.apiServerReady); err != nil {
		p.stop()
		return err
	}
	cp.apiServer = p
	return cp.saveStateLocked()
}

func (cp *ControlPlane) start(name string, args []string) (*process, error) {
	if err := checkBinary(cp.assetsDir, name); err != nil {
		return nil, err
	}
	return startProcess(name, filepath.Join(cp.assetsDir, name), args,
		filepath.Join(cp.dataDir, name+".log"), cp.log, cp.detach)
}

// waitReady polls check until it succeeds, the process exits, ctx ends or
// the ready timeout passes.
func (cp *ControlPlane) waitReady(ctx context.Context, p *process, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, cp.readyTimeout)
	defer cancel()
	var lastErr error
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if p.hasExited() {
			return false, p.exitError()
		}
		lastErr = check(ctx)
		return lastErr == nil, nil
	})
	switch {
	case err == nil:
		return nil
	case ctx.Err() == nil:
		return err // the process exited
	case p.hasExited():
		return p.exitError()
	default:
		return fmt.Errorf("%s not ready after %v (last check: %v); last output:\n%s\n"+
			"fix: read the output above (full log: %s); on a slow machine raise Options.ReadyTimeout: %w",
			p.name, cp.readyTimeout, lastErr, indent(p.tail()), p.logPath, ctx.Err())
	}
}

// Ready checks once that etcd is healthy and kube-apiserver reports
// /readyz.
func (cp *ControlPlane) Ready(ctx context.Context) error {
	if err := cp.etcdHealthy(ctx); err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	if err := cp.apiServerReady(ctx); err != nil {
		return fmt.Errorf("kube-apiserver: %w", err)
	}
	return nil
}

func (cp *ControlPlane) etcdHealthy(ctx context.Context) error {
	body, err := cp.get(ctx, fmt.Sprintf("http://127.0.0.1:%d/health", cp.ports.EtcdClient), "")
	if err != nil {
		return err
	}
	if !strings.Contains(strings.ReplaceAll(body, " ", ""), `"health":"true"`) {
		return fmt.Errorf("unhealthy: %s", body)
	}
	return nil
}

func (cp *ControlPlane) apiServerReady(ctx context.Context) error {
	_, err := cp.get(ctx, cp.URL()+"/readyz", cp.users[0].Token)
	return err
}

// get returns the body of a 200 response.
func (cp *ControlPlane) get(ctx context.Context, url, token string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := cp.probe.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return string(body), nil
}

func (cp *ControlPlane) pkiDir() string { return filepath.Join(cp.dataDir, "pki") }

func (cp *ControlPlane) pki(name string) string { return filepath.Join(cp.pkiDir(), name) }

func (cp *ControlPlane) etcdArgs() []string {
	client := fmt.Sprintf("http://127.0.0.1:%d", cp.ports.EtcdClient)
	peer := fmt.Sprintf("http://127.0.0.1:%d", cp.ports.EtcdPeer)
	return []string{
		"--name=kubegate",
		"--data-dir=" + filepath.Join(cp.dataDir, "etcd"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=kubegate=" + peer,
		// Durability is worth nothing for a throw-away cluster; speed is.
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	}
}

func (cp *ControlPlane) apiServerArgs() []string {
	flags := map[string]string{
		"etcd-servers":                     fmt.Sprintf("http://127.0.0.1:%d", cp.ports.EtcdClient),
		"bind-address":                     "127.0.0.1",
		"advertise-address":                "127.0.0.1",
		"secure-port":                      strconv.Itoa(cp.ports.APIServer),
		"cert-dir":                         cp.pkiDir(),
		"tls-cert-file":                    cp.pki(servingCertFile),
		"tls-private-key-file":             cp.pki(servingKeyFile),
		"client-ca-file":                   cp.pki(caCertFile),
		"token-auth-file":                  cp.pki(tokenFile),
		"authorization-mode":               "RBAC",
		"service-account-issuer":           "https://kubernetes.default.svc",
		"service-account-key-file":         cp.pki(serviceAccountKey),
		"service-account-signing-key-file": cp.pki(serviceAccountKey),
		"service-cluster-ip-range":         "10.0.0.0/24",
		// No controller-manager runs: nothing would reconcile endpoints or
		// create the default service accounts pods need.
		"endpoint-reconciler-type":  "none",
		"disable-admission-plugins": "ServiceAccount",
		"allow-privileged":          "true",
	}
	for k, v := range cp.extraFlags {
		flags[k] = v
	}
	args := make([]string, 0, len(flags))
	for k, v := range flags {
		args = append(args, "--"+k+"="+v)
	}
	sort.Strings(args)
	return args
}

// writeTokenFile writes kube-apiserver's static token file:
// token,user,uid,"group1,group2".
func (cp *ControlPlane) writeTokenFile() error {
	f, err := os.OpenFile(cp.pki(tokenFile), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write token file: %w", err)
	}
	w := csv.NewWriter(f)
	for _, u := range cp.users {
		rec := []string{u.Token, u.Name, u.UID}
		if len(u.Groups) > 0 {
			rec = append(rec, strings.Join(u.Groups, ","))
		}
		w.Write(rec)
	}
	w.Flush()
	if err := errors.Join(w.Error(), f.Close()); err != nil {
		return fmt.Errorf("write token file: %w", err)
	}
	return nil
}

// URL is kube-apiserver's address, https://127.0.0.1:<port>.
func (cp *ControlPlane) URL() string {
	return fmt.Sprintf("https://127.0.0.1:%d", cp.ports.APIServer)
}

// APIServerPID is kube-apiserver's process id, or 0 while it is stopped.
// Benchmarks read its CPU time and memory from /proc/<pid>.
func (cp *ControlPlane) APIServerPID() int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.apiServer == nil {
		return 0
	}
	return cp.apiServer.pid
}

// EtcdPID is etcd's process id, or 0 while it is stopped.
func (cp *ControlPlane) EtcdPID() int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.etcd == nil {
		return 0
	}
	return cp.etcd.pid
}

// EtcdURL is etcd's client URL: plain HTTP on loopback, no authentication.
func (cp *ControlPlane) EtcdURL() string {
	return fmt.Sprintf("http://127.0.0.1:%d", cp.ports.EtcdClient)
}

// DataDir is the directory holding etcd's data, certificates and logs.
func (cp *ControlPlane) DataDir() string { return cp.dataDir }

// AssetsDir is the directory the binaries were taken from.
func (cp *ControlPlane) AssetsDir() string { return cp.assetsDir }

// Binary returns the path of a binary in AssetsDir, such as KubectlBinary
// for tests that run kubectl against the control plane. When it is not
// there, the error wraps ErrMissingBinary and says how to build it.
func (cp *ControlPlane) Binary(name string) (string, error) {
	if err := checkBinary(cp.assetsDir, name); err != nil {
		return "", err
	}
	return filepath.Join(cp.assetsDir, name), nil
}

// CAData is the PEM certificate of the CA that signed kube-apiserver's
// serving certificate.
func (cp *ControlPlane) CAData() []byte { return slices.Clone(cp.caPEM) }

// AdminConfig returns a new client config for AdminUser, a member of
// system:masters.
func (cp *ControlPlane) AdminConfig() *rest.Config {
	return cp.configFor(cp.users[0])
}

// UserConfig returns a new client config for the static user name, or nil
// if Options.Users has no such user.
func (cp *ControlPlane) UserConfig(name string) *rest.Config {
	i := slices.IndexFunc(cp.users, func(u User) bool { return u.Name == name })
	if i < 0 {
		return nil
	}
	return cp.configFor(cp.users[i])
}

// Users returns the static users, AdminUser first, with their tokens.
func (cp *ControlPlane) Users() []User {
	out := make([]User, len(cp.users))
	for i, u := range cp.users {
		u.Groups = slices.Clone(u.Groups)
		out[i] = u
	}
	return out
}

func (cp *ControlPlane) configFor(u User) *rest.Config {
	return &rest.Config{
		Host:            cp.URL(),
		BearerToken:     u.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: slices.Clone(cp.caPEM)},
		// Tests and the demo workload talk to a private apiserver; client
		// side throttling would only slow them down.
		QPS:   1000,
		Burst: 2000,
	}
}

// WriteKubeconfig writes a kubeconfig with one context per static user:
// "kubegate" for AdminUser (the current context) and "kubegate-<name>" for
// each of Options.Users.
func (cp *ControlPlane) WriteKubeconfig(path string) error {
	const cluster = "kubegate"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[cluster] = &clientcmdapi.Cluster{
		Server:                   cp.URL(),
		CertificateAuthorityData: slices.Clone(cp.caPEM),
	}
	for i, u := range cp.users {
		ctxName := cluster + "-" + u.Name
		if i == 0 {
			ctxName = cluster
			cfg.CurrentContext = ctxName
		}
		cfg.AuthInfos[u.Name] = &clientcmdapi.AuthInfo{Token: u.Token}
		cfg.Contexts[ctxName] = &clientcmdapi.Context{Cluster: cluster, AuthInfo: u.Name}
	}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// freePorts picks three distinct free loopback ports. They are free when
// chosen; see Start for the race that follows.
func freePorts() (ports, error) {
	var p [3]int
	for i := range p {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return ports{}, fmt.Errorf("pick a free port: %w", err)
		}
		// Keep the listener open until all are chosen so they differ.
		defer l.Close()
		p[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports{EtcdClient: p[0], EtcdPeer: p[1], APIServer: p[2]}, nil
}

func randomToken() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	return hex.EncodeToString(b)
}
