package scenario

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// Markers around the part of docs/benchmarks.md that WriteDoc generates.
const (
	DocBegin = "<!-- BEGIN kubegate-bench -report: generated from one run's JSON; do not edit by hand, run `make bench-report` -->"
	DocEnd   = "<!-- END kubegate-bench -report -->"
)

// Stamp is one line saying where r's figures come from: commit, command,
// machine and its load when the run started.
func (r Report) Stamp() string {
	m := r.Machine
	var b strings.Builder
	fmt.Fprintf(&b, "commit `%s`, `%s`", cmp.Or(r.Commit, "unknown"), cmp.Or(r.Command, "kubegate-bench"))
	fmt.Fprintf(&b, "; %d CPUs", m.CPUs)
	if m.CPUModel != "" {
		fmt.Fprintf(&b, " (%s)", m.CPUModel)
	}
	if m.MemTotal != "" {
		fmt.Fprintf(&b, ", %s RAM", m.MemTotal)
	}
	fmt.Fprintf(&b, ", %s", m.GoVersion)
	if m.LoadAvg != "" {
		fmt.Fprintf(&b, ", load average %s at start", m.LoadAvg)
	}
	fmt.Fprintf(&b, "; started %s", m.Started)
	if r.Wall != "" {
		fmt.Fprintf(&b, ", took %s", r.Wall)
	}
	return b.String()
}

// ShortStamp is Stamp in brief, for each table's heading: commit,
// machine and its load at the start, command.
func (r Report) ShortStamp() string {
	m := r.Machine
	host := fmt.Sprintf("%d CPUs", m.CPUs)
	if m.LoadAvg != "" {
		host += ", load " + strings.Fields(m.LoadAvg)[0]
	}
	return fmt.Sprintf("`%s`, %s, `%s`", cmp.Or(r.Commit, "unknown"), host, cmp.Or(r.Command, "kubegate-bench"))
}

// Markdown renders r whole: GoalsMarkdown, then FiguresMarkdown's
// tables.
func (r Report) Markdown(w io.Writer) {
	r.GoalsMarkdown(w)
	r.scenarioTables(w)
}

// GoalsMarkdown renders r as docs/benchmarks.md shows it: where it comes
// from and the goals table (goal, figure, verdict) with the run's notes.
func (r Report) GoalsMarkdown(w io.Writer) {
	stamp := r.Stamp()
	fmt.Fprintf(w, "All figures below: %s.\n\n", stamp)
	wl := r.Workload
	fmt.Fprintf(w, "Workload: %d Pods (%.0f B of JSON as the gateway caches one, %.0f B as kube-apiserver serves it) in %d namespaces, %d ConfigMaps.\n\n",
		wl.Pods, wl.PodJSONBytes, wl.PodJSONBytesServed, len(wl.Namespaces), wl.ConfigMaps)

	short := r.ShortStamp()
	fmt.Fprintf(w, "### Goals · %s\n\n", short)
	var notes []string
	fmt.Fprintln(w, "| goal | figure | verdict |")
	fmt.Fprintln(w, "|---|---|---|")
	for _, g := range Goals(r.Figures) {
		if g.Note {
			notes = append(notes, g.Goal)
			continue
		}
		fig := g.Figure
		if after := strings.TrimLeft(g.After, "; "); after != "" {
			fig = strings.TrimSpace(fig + " " + after)
		}
		verdict := g.Verdict
		switch {
		case g.Met():
			verdict = "met"
		case strings.HasPrefix(verdict, "MISSED"):
			verdict = "**missed**" + strings.TrimPrefix(verdict, "MISSED")
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", cell(g.Goal), cell(fig), cell(verdict))
	}
	fmt.Fprintln(w)
	for _, n := range notes {
		fmt.Fprintf(w, "Note: %s.\n\n", n)
	}
}

// FiguresMarkdown renders every figure of r as
// docs/benchmarks-figures.md shows them: where they come from, then one
// table per scenario with a row per metric and a column per arm.
func (r Report) FiguresMarkdown(w io.Writer) {
	fmt.Fprintf(w, "All figures below: %s.\n\n", r.Stamp())
	r.scenarioTables(w)
}

// scenarioTables renders a table per scenario of r.
func (r Report) scenarioTables(w io.Writer) {
	short := r.ShortStamp()
	var order []string
	byScenario := map[string][]Figure{}
	for _, f := range r.Figures {
		if _, ok := byScenario[f.Scenario]; !ok {
			order = append(order, f.Scenario)
		}
		byScenario[f.Scenario] = append(byScenario[f.Scenario], f)
	}
	for _, s := range order {
		fmt.Fprintf(w, "### %s · %s\n\n", s, short)
		scenarioTable(w, byScenario[s])
		fmt.Fprintln(w)
	}
}

// scenarioTable prints one scenario's figures with a row per metric and
// a column per arm: the gateway, then the references (kube-apiserver's
// arms, the floor) with the ratio gateway / reference in brackets, then
// others. A figure of the load tool's own cost for an arm ("bench
// (<arm>)") goes in that arm's column.
func scenarioTable(w io.Writer, figs []Figure) {
	type key struct{ metric, unit string }
	var rows []key
	cells := map[key]map[string]float64{}
	ownCost := map[key]bool{}
	var arms []string
	for _, f := range figs {
		k := key{f.Metric, f.Unit}
		if cells[k] == nil {
			rows = append(rows, k)
			cells[k] = map[string]float64{}
		}
		arm := f.Arm
		if inner, ok := strings.CutPrefix(arm, ArmBench+" ("); ok {
			arm, ownCost[k] = strings.TrimSuffix(inner, ")"), true
		}
		cells[k][arm] = f.Value
		if !slices.Contains(arms, arm) {
			arms = append(arms, arm)
		}
	}
	rank := func(a string) int {
		switch {
		case a == ArmGateway:
			return 0
		case isAPIServer(a):
			return 1
		case a == ArmFloor:
			return 2
		default:
			return 3
		}
	}
	slices.SortStableFunc(arms, func(a, b string) int { return cmp.Compare(rank(a), rank(b)) })
	fmt.Fprintf(w, "| metric | unit | %s |\n|---|---|%s\n", strings.Join(arms, " | "), strings.Repeat("---|", len(arms)))
	for _, k := range rows {
		c := cells[k]
		gw, hasGW := c[ArmGateway]
		var out []string
		for _, a := range arms {
			v, ok := c[a]
			switch {
			case !ok:
				out = append(out, "")
			case a != ArmGateway && isReference(a) && hasGW && !ownCost[k] && gw > 0 && v > 0:
				out = append(out, fmt.Sprintf("%s (%.2f)", formatValue(v), gw/v))
			default:
				out = append(out, formatValue(v))
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", cell(k.metric), k.unit, strings.Join(out, " | "))
	}
}

// cell escapes what would break a Markdown table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// DocMarkers are the markers around the part of docs/benchmarks.md that
// r renders into: DocBegin and DocEnd for a run of the default
// scenarios; for a run of opt-in scenarios only (OptInScenarios), markers
// of their own that name them, so that their figures stand beside the
// default run's instead of replacing them.
func DocMarkers(r Report) (begin, end string) {
	var names []string
	for _, f := range r.Figures {
		if !slices.Contains(names, f.Scenario) {
			names = append(names, f.Scenario)
		}
	}
	if len(names) == 0 {
		return DocBegin, DocEnd
	}
	for _, n := range names {
		if !slices.Contains(OptInScenarios, n) {
			return DocBegin, DocEnd
		}
	}
	key := "-scenarios=" + strings.Join(names, ",")
	return "<!-- BEGIN kubegate-bench -report " + key + ": generated from one run's JSON; do not edit by hand -->",
		"<!-- END kubegate-bench -report " + key + " -->"
}

// WriteDoc replaces the part of the Markdown file at path between r's
// markers (DocMarkers) with r's goals (GoalsMarkdown), and the part of
// the one at figures between the same markers with its figures
// (FiguresMarkdown); with figures "", path gets both (Markdown).
func WriteDoc(path, figures string, r Report) error {
	if figures == "" {
		return writeSection(path, r, r.Markdown)
	}
	if err := writeSection(figures, r, r.FiguresMarkdown); err != nil {
		return err
	}
	return writeSection(path, r, r.GoalsMarkdown)
}

// writeSection replaces the part of the Markdown file at path between
// r's markers with what render writes.
func writeSection(path string, r Report, render func(io.Writer)) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	begin, end := DocMarkers(r)
	i := bytes.Index(b, []byte(begin))
	j := bytes.Index(b, []byte(end))
	if i < 0 || j < i {
		return fmt.Errorf("%s: no %q ... %q section to generate", path, begin, end)
	}
	var out bytes.Buffer
	out.Write(b[:i+len(begin)])
	out.WriteString("\n\n")
	render(&out)
	out.Write(b[j:])
	return os.WriteFile(path, out.Bytes(), 0o644)
}
