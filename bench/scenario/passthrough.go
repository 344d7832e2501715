package scenario

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubegate/bench/harness"
)

// ScenarioPassThrough is the opt-in scenario that measures what passing
// a write through the gateway adds to it.
const ScenarioPassThrough = "passthrough"

// passThroughWarmup writes are made on each arm before the timed ones:
// they open the connections and put the token in the gateway's cache.
const passThroughWarmup = 20

// scenarioPassThrough measures the latency pass-through adds to a write.
// A gateway of its own, with authn kubernetes (pass-through needs the
// caller's token to be a cluster credential) and caching only
// namespaces, so that its CPU is the pass-through's, passes writes on to
// kube-apiserver. The same small merge patch of a ConfigMap (one per arm)
// is sent z.PassThroughWrites times on each arm, one at a time and
// alternating the arms (which goes first alternates too), so that both
// see the same machine: straight to kube-apiserver over HTTPS and
// HTTP/2, as kubectl sends it, and through the gateway over plain
// HTTP/1.1 on loopback (the harness serves it so), which sends it on over
// HTTPS and HTTP/2 with the same admin token. A latency is from sending
// the request to reading the whole answer, each arm on a connection kept
// open. The gateway's CPU over the timed writes, divided by them, is its
// cost per passed write.
func scenarioPassThrough(ctx context.Context, env *Env, z Sizes, log io.Writer) ([]Figure, error) {
	cfg := GatewayConfig(env.Kubeconfig, "namespaces")
	cfg.Auth.Authn = "kubernetes"
	gw, err := env.startGateway(ctx, cfg, false)
	if err != nil {
		return nil, err
	}
	defer gw.Stop()

	ns := env.Namespaces[0]
	cms := env.Client().CoreV1().ConfigMaps(ns)
	arms := []struct {
		name, base string
		client     *http.Client
	}{
		{ArmGateway, gw.URL, &http.Client{Transport: &http.Transport{}}},
		{ArmAPIServer, env.APIServer.Host, nil},
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(env.APIServer.CAData) {
		return nil, errors.New("no CA in the apiserver's client configuration")
	}
	arms[1].client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	for _, a := range arms {
		defer a.client.CloseIdleConnections()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "passthrough-" + a.name}, Data: map[string]string{"n": "0"}}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("create %s: %w", cm.Name, err)
		}
		defer cms.Delete(context.WithoutCancel(ctx), cm.Name, metav1.DeleteOptions{}) //nolint:errcheck // best effort
	}
	write := func(i, arm int) (time.Duration, error) {
		a := arms[arm]
		body := fmt.Appendf(nil, `{"data":{"n":"%d"}}`, i)
		req, err := http.NewRequestWithContext(ctx, http.MethodPatch, a.base+"/api/v1/namespaces/"+ns+"/configmaps/passthrough-"+a.name, bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer "+env.APIServer.BearerToken)
		req.Header.Set("Content-Type", "application/merge-patch+json")
		req.Header.Set("Accept", "application/json")
		t0 := time.Now()
		resp, err := a.client.Do(req)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", a.name, err)
		}
		b, err := io.ReadAll(resp.Body)
		d := time.Since(t0)
		resp.Body.Close()
		if err != nil {
			return 0, fmt.Errorf("%s: %w", a.name, err)
		}
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("%s: %s: %.300s", a.name, resp.Status, b)
		}
		return d, nil
	}
	for i := range passThroughWarmup {
		for arm := range arms {
			if _, err := write(i, arm); err != nil {
				return nil, fmt.Errorf("warm-up: %w", err)
			}
		}
	}
	cpu0, err := harness.ReadCPU(gw.PID)
	if err != nil {
		return nil, err
	}
	lat := make([][]time.Duration, len(arms))
	for i := range z.PassThroughWrites {
		for k := range arms {
			arm := (i + k) % len(arms) // each arm goes first every other round
			d, err := write(passThroughWarmup+i, arm)
			if err != nil {
				return nil, err
			}
			lat[arm] = append(lat[arm], d)
		}
	}
	cpu1, err := harness.ReadCPU(gw.PID)
	if err != nil {
		return nil, err
	}
	n := float64(z.PassThroughWrites)
	figs := []Figure{{ScenarioPassThrough, ArmBench, "writes per arm", "count", n}}
	for arm, a := range arms {
		ds := lat[arm]
		slices.Sort(ds)
		p50, p99 := ds[len(ds)/2], ds[min(len(ds)-1, len(ds)*99/100)]
		fmt.Fprintf(log, "  %s: %d writes, p50 %v, p99 %v\n", a.name, len(ds), p50.Round(time.Microsecond), p99.Round(time.Microsecond))
		figs = append(figs,
			Figure{ScenarioPassThrough, a.name, "write p50", "ms", Milliseconds(p50)},
			Figure{ScenarioPassThrough, a.name, "write p99", "ms", Milliseconds(p99)})
	}
	perWrite := cpu1.Since(cpu0) / time.Duration(z.PassThroughWrites)
	fmt.Fprintf(log, "  gateway CPU per passed write: %v\n", perWrite.Round(time.Microsecond))
	return append(figs, Figure{ScenarioPassThrough, ArmGateway, "CPU per write", "ms", Milliseconds(perWrite)}), nil
}
