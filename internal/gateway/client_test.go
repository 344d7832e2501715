package gateway

import (
	"flag"
	"kubegate/internal/config"
	"kubegate/internal/testenv"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// The gateway's client must not inherit client-go's 5 QPS default, which
// would queue the reviews made for many users behind each other.
func TestClientConfigLimits(t *testing.T) {
	env := testenv.Get(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.CP.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args      []string
		qps       float32
		burst     int
		throttled bool
		gzip      bool
	}{
		{nil, 50, 100, true, false},
		{[]string{"--kube-api-qps", "200", "--kube-api-burst", "400"}, 200, 400, true, false},
		{[]string{"--kube-api-qps", "-1"}, -1, 100, false, false},
		{[]string{"--kube-api-compression"}, 50, 100, true, true},
	} {
		fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
		cfg, err := config.Parse(fs, append([]string{"--kubeconfig", kubeconfig}, tc.args...))
		if err != nil {
			t.Fatal(err)
		}
		kc, _, err := clientConfig(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if kc.QPS != tc.qps || kc.Burst != tc.burst || kc.UserAgent != "kubegate" {
			t.Errorf("%v: QPS %v, Burst %d, UserAgent %q; want %v, %d, kubegate", tc.args, kc.QPS, kc.Burst, kc.UserAgent, tc.qps, tc.burst)
		}
		if kc.DisableCompression == tc.gzip {
			t.Errorf("%v: DisableCompression %v, want %v", tc.args, kc.DisableCompression, !tc.gzip)
		}
		// The limits reach the clients built from it.
		rc, err := rest.RESTClientFor(withCodec(kc))
		if err != nil {
			t.Fatal(err)
		}
		if got := rc.GetRateLimiter() != nil; got != tc.throttled {
			t.Errorf("%v: client rate limited = %v, want %v", tc.args, got, tc.throttled)
		}
		if tc.throttled && rc.GetRateLimiter().QPS() != tc.qps {
			t.Errorf("%v: client limiter QPS %v, want %v", tc.args, rc.GetRateLimiter().QPS(), tc.qps)
		}
	}
}

func withCodec(kc *rest.Config) *rest.Config {
	c := rest.CopyConfig(kc)
	c.GroupVersion = &schema.GroupVersion{Version: "v1"}
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return c
}
