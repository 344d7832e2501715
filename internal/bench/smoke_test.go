package bench

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// buildGateway builds cmd/gateway into a temporary directory.
func buildGateway(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gateway")
	out, err := exec.Command("go", "build", "-o", bin, "kubegate/cmd/gateway").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestSmoke runs every scenario at tiny sizes against a real control plane
// and gateway, so the harness cannot rot: every figure must be present and
// positive, and no subscriber may miss or see a duplicated event.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and the gateway binary")
	}
	var log strings.Builder
	r, err := Run(t.Context(), Options{GatewayBinary: buildGateway(t), Pods: 40, Namespaces: 4, Log: &log})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, log.String())
	}
	var table strings.Builder
	Table(&table, r.Figures)
	t.Logf("\n%s\n%s", log.String(), table.String())
	if r.Workload.PodJSONBytes < 5000 || r.Workload.PodJSONBytes > 10000 {
		t.Errorf("pod JSON is %.0f B, want about 7 KB", r.Workload.PodJSONBytes)
	}
	for _, f := range r.Figures {
		if !(f.Value > 0) {
			t.Errorf("%s/%s/%s = %v %s, want > 0", f.Scenario, f.Arm, f.Metric, f.Value, f.Unit)
		}
	}
}
