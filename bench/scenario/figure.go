package scenario

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"kubegate/bench/harness"
	"kubegate/bench/workload"
)

// Arms. The gateway arm is compared with every arm whose name starts with
// ArmAPIServer ("apiserver", "apiserver/json", "apiserver/proto", "apiserver
// rv=0", ...), and with ArmFloor, the least code that writes the same
// frames (floor.go). ArmBench is the load tool itself (its own CPU),
// reported so readers can judge whether the client side was the
// bottleneck.
const (
	ArmGateway   = "gateway"
	ArmAPIServer = "apiserver"
	ArmJSON      = "apiserver/json"
	ArmProto     = "apiserver/proto"
	ArmFloor     = "floor"
	ArmBench     = "bench"
)

// Figure is one measured number.
type Figure struct {
	// Scenario is the named scenario, e.g. "broad" or "rest".
	Scenario string `json:"scenario"`
	// Arm is who served it: ArmGateway, a name starting with ArmAPIServer,
	// ArmFloor, or ArmBench (the load tool).
	Arm string `json:"arm"`
	// Metric names the quantity, e.g. "latency p99" or "list all".
	Metric string `json:"metric"`
	// Unit is the unit of Value, e.g. "ms", "MiB", "1/s", "count".
	Unit  string  `json:"unit"`
	Value float64 `json:"value"`
}

// Report is what the tool writes as JSON.
type Report struct {
	// Commit is the commit of the tree the run was started from
	// (`git describe --always --dirty`), when known.
	Commit string `json:"commit,omitempty"`
	// Command is the command line that made the run.
	Command string `json:"command,omitempty"`
	// Wall is how long the run took.
	Wall     string            `json:"wall,omitempty"`
	Machine  harness.Machine   `json:"machine"`
	Workload workload.Workload `json:"workload"`
	Figures  []Figure          `json:"figures"`
}

// WriteJSON writes r to path, creating its directory.
func WriteJSON(path string, r Report) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadJSON reads a Report written by WriteJSON.
func ReadJSON(path string) (Report, error) {
	var r Report
	b, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// isAPIServer reports whether arm is one of kube-apiserver's arms.
func isAPIServer(arm string) bool { return strings.HasPrefix(arm, ArmAPIServer) }

// isReference reports whether the gateway's figures are compared with
// arm's: kube-apiserver's arms and the floor.
func isReference(arm string) bool { return isAPIServer(arm) || arm == ArmFloor }

// Table prints the figures grouped by scenario and metric: the gateway's
// value, each reference arm's value (kube-apiserver's arms, the floor) and
// the ratio gateway/reference. Figures of other arms (bench) or without a
// counterpart get their own rows.
func Table(w io.Writer, figs []Figure) { table(w, figs, false) }

func table(w io.Writer, figs []Figure, markdown bool) {
	type key struct{ scenario, metric, unit string }
	var order []key
	byKey := map[key][]Figure{}
	for _, f := range figs {
		k := key{f.Scenario, f.Metric, f.Unit}
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], f)
	}
	flags := uint(0)
	if markdown {
		flags = tabwriter.Debug
	}
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', flags)
	fmt.Fprintln(tw, "scenario\tmetric\tunit\tgateway\treference arm\treference\tratio gw/ref\t")
	for _, k := range order {
		fs := byKey[k]
		var gw *Figure
		var refs, other []Figure
		for i := range fs {
			switch {
			case fs[i].Arm == ArmGateway:
				gw = &fs[i]
			case isReference(fs[i].Arm):
				refs = append(refs, fs[i])
			default:
				other = append(other, fs[i])
			}
		}
		slices.SortStableFunc(refs, func(a, b Figure) int { return cmp.Compare(a.Arm, b.Arm) })
		gwText := "-"
		if gw != nil {
			gwText = formatValue(gw.Value)
		}
		if len(refs) == 0 && gw != nil {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t-\t-\t-\t\n", k.scenario, k.metric, k.unit, gwText)
		}
		for _, a := range refs {
			ratio := "-"
			switch {
			case gw == nil:
			case gw.Value == a.Value:
				ratio = "="
			case gw.Value > 0 && a.Value > 0:
				ratio = fmt.Sprintf("%.2f", gw.Value/a.Value)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", k.scenario, k.metric, k.unit, gwText, a.Arm, formatValue(a.Value), ratio)
		}
		for _, o := range other {
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t%s\t%s\t-\t\n", k.scenario, k.metric, k.unit, o.Arm, formatValue(o.Value))
		}
	}
	tw.Flush()
}

// Markdown prints the same table as Table in Markdown, for docs.
func Markdown(w io.Writer, figs []Figure) {
	var b strings.Builder
	table(&b, figs, true)
	for i, line := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		cells := strings.Split(strings.TrimSuffix(line, "|"), "|")
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
		if i == 0 {
			fmt.Fprintf(w, "|%s\n", strings.Repeat("---|", len(cells)))
		}
	}
}

func formatValue(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 1000 || v <= -1000:
		return fmt.Sprintf("%.0f", v)
	case v >= 100 || v <= -100:
		return fmt.Sprintf("%.1f", v)
	case v >= 1 || v <= -1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}
