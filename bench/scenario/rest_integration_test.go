package scenario

import (
	"context"
	"strings"
	"testing"
	"time"

	"kubegate/bench/workload"
)

// TestRunREST lists a small workload through the gateway binary and
// kube-apiserver: every case has every figure on every arm, the item
// counts are the workload's (RunREST itself fails when the arms' name sets
// differ), and the paging case really pages.
func TestRunREST(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and the gateway binary")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	const pods, namespaces, pageSize = 30, 3, 7
	t0 := time.Now()
	bin := buildGateway(t)
	t.Logf("gateway built in %v", time.Since(t0))
	var log strings.Builder
	env, err := StartEnv(ctx, EnvOptions{GatewayBinary: bin, Pods: pods, Namespaces: namespaces, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()

	figs, err := RunREST(ctx, env, RESTOptions{Reps: 4, PageSize: pageSize, Log: &log})
	if err != nil {
		t.Fatalf("RunREST: %v\n%s", err, log.String())
	}
	var table strings.Builder
	Table(&table, figs)
	t.Logf("\n%s\n%s", log.String(), table.String())

	got := map[string]float64{}
	for _, f := range figs {
		got[f.Arm+"|"+f.Metric] = f.Value
	}
	cases := []struct {
		name  string
		items float64
	}{
		{"list all", pods},
		{"list namespace", pods / namespaces},
		{"list selector", pods / workload.Shards},
		{"list all limit=7", pods},
	}
	for _, arm := range []string{ArmGateway, ArmAPIServerRVUnset, ArmAPIServerRV0} {
		for _, c := range cases {
			if v := got[arm+"|"+c.name+" items"]; v != c.items {
				t.Errorf("%s: %s items = %v, want %v", arm, c.name, v, c.items)
			}
			metrics := []string{"p50", "p99", "size", "CPU/list"}
			if arm != ArmGateway {
				metrics = append(metrics, "etcd CPU/list")
			}
			for _, m := range metrics {
				v, ok := got[arm+"|"+c.name+" "+m]
				// etcd may do nothing for a list served from kube-apiserver's
				// cache; everything else costs something.
				if !ok || v < 0 || (v == 0 && m != "etcd CPU/list") {
					t.Errorf("%s: %s %s = %v (present: %v), want > 0", arm, c.name, m, v, ok)
				}
			}
		}
		// Each list's bytes: the gateway leaves out managedFields, so it
		// sends less than kube-apiserver, never more.
		if gw, api := got[ArmGateway+"|list all size"], got[arm+"|list all size"]; gw > api || gw < pods*5 {
			t.Errorf("list all size: gateway %.1f KiB, %s %.1f KiB", gw, arm, api)
		}
	}
	wantPages := float64((pods + pageSize - 1) / pageSize)
	for _, arm := range []string{ArmGateway, ArmAPIServerRVUnset} {
		if v := got[arm+"|list all limit=7 pages"]; v != wantPages {
			t.Errorf("%s: %v pages of 7 for %d Pods, want %v", arm, v, pods, wantPages)
		}
	}
	if lines := goalLines(RESTGoals(figs)); len(lines) != 3 {
		t.Errorf("RESTGoals = %q, want 3 lines", lines)
	}
}
