package deploy_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"sigs.k8s.io/yaml"

	"kubegate/internal/testenv"
)

const monitoring = "monitoring/"

// ruleFile is the part of a Prometheus rule file the tests read.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// promtoolPath finds promtool ($PROMTOOL overrides). Without it the rule
// tests fail, except under -short where they are skipped, as the browser
// tests do without chromium.
func promtoolPath(t *testing.T) string {
	t.Helper()
	p := os.Getenv("PROMTOOL")
	if p == "" {
		p = "promtool"
	}
	path, err := exec.LookPath(p)
	if err != nil {
		msg := fmt.Sprintf("promtool not found (run `make promtool`, or apt-get install -y --no-install-recommends prometheus, or set $PROMTOOL): %v", err)
		if testing.Short() {
			t.Skip(msg)
		}
		t.Fatal(msg)
	}
	return path
}

// TestAlertRules: promtool accepts the rule groups and their unit tests
// pass, the PrometheusRule carries the same groups, and every alert has
// a severity, a summary, a description and a runbook section that exists.
func TestAlertRules(t *testing.T) {
	promtool := promtoolPath(t)
	for _, args := range [][]string{{"check", "rules", "rules.yaml"}, {"test", "rules", "rules_test.yaml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = monitoring
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	var plain ruleFile
	readYAML(t, monitoring+"rules.yaml", &plain)
	var cr struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   map[string]any `json:"metadata"`
		Spec       ruleFile       `json:"spec"`
	}
	readYAML(t, monitoring+"prometheusrule.yaml", &cr)
	if cr.APIVersion != "monitoring.coreos.com/v1" || cr.Kind != "PrometheusRule" {
		t.Errorf("prometheusrule.yaml is a %s %s", cr.APIVersion, cr.Kind)
	}
	if diff := cmp.Diff(plain, cr.Spec); diff != "" {
		t.Errorf("prometheusrule.yaml's spec differs from rules.yaml (-rules.yaml +spec):\n%s", diff)
	}

	runbooks, err := os.ReadFile("../docs/runbooks.md")
	if err != nil {
		t.Fatal(err)
	}
	var tested []byte
	if tested, err = os.ReadFile(monitoring + "rules_test.yaml"); err != nil {
		t.Fatal(err)
	}
	for _, g := range plain.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if s := r.Labels["severity"]; s != "warning" && s != "critical" && s != "info" {
				t.Errorf("%s: severity %q", r.Alert, s)
			}
			for _, a := range []string{"summary", "description"} {
				if r.Annotations[a] == "" {
					t.Errorf("%s: no %s", r.Alert, a)
				}
			}
			if want := "docs/runbooks.md#" + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
			}
			if !strings.Contains(string(runbooks), "\n## "+r.Alert+"\n") {
				t.Errorf("%s: no section \"## %s\" in docs/runbooks.md", r.Alert, r.Alert)
			}
			if r.For == "" {
				t.Errorf("%s: no for:, so one bad scrape fires it", r.Alert)
			}
			if n := strings.Count(string(tested), "alertname: "+r.Alert+"\n"); n < 2 {
				t.Errorf("%s: %d evaluations in rules_test.yaml, want a firing and a silent one", r.Alert, n)
			}
		}
	}
}

// promqlKeywords are identifiers in PromQL that are not metric names.
var promqlKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"bool": true, "and": true, "or": true, "unless": true, "inf": true, "nan": true,
}

var (
	promqlStrings   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	promqlMatchers  = regexp.MustCompile(`\{[^}]*\}`)
	promqlRanges    = regexp.MustCompile(`\[[^\]]*\]|\boffset\s+-?[0-9a-z]+`)
	promqlGrouping  = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlVariables = regexp.MustCompile(`\$\{?\w+\}?`)
	promqlTokens    = regexp.MustCompile(`(?i)[0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?|[a-zA-Z_:][a-zA-Z0-9_:]*\s*\(?`)
)

// metricNames returns the metric names in a PromQL expression: the
// identifiers left once strings, label matchers, ranges and offsets, grouping label
// lists and Grafana variables are gone, that are neither functions nor
// aggregations (followed by "(") nor keywords.
func metricNames(expr string) []string {
	s := promqlStrings.ReplaceAllString(expr, `""`)
	s = promqlMatchers.ReplaceAllString(s, " ")
	s = promqlRanges.ReplaceAllString(s, " ")
	s = promqlGrouping.ReplaceAllString(s, " ")
	s = promqlVariables.ReplaceAllString(s, " ")
	var names []string
	for _, tok := range promqlTokens.FindAllString(s, -1) {
		if tok[0] >= '0' && tok[0] <= '9' || tok[0] == '.' || strings.HasSuffix(tok, "(") {
			continue
		}
		if tok = strings.TrimSpace(tok); !promqlKeywords[strings.ToLower(tok)] && !slices.Contains(names, tok) {
			names = append(names, tok)
		}
	}
	return names
}

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`up`, []string{"up"}},
		{`absent(up{job="kubegate"} == 1)`, []string{"up"}},
		{`sum by (namespace, job) (rate(a_total{x=~"a|b", y!="by (c)"}[5m])) / sum(rate(b_total[5m])) by (le) > 0.05`, []string{"a_total", "b_total"}},
		{`histogram_quantile(0.99, sum by (le, route) (rate(h_seconds_bucket{namespace=~"$namespace"}[$__rate_interval])))`, []string{"h_seconds_bucket"}},
		{"(m1 - m2{a=\"}\"}) / m3 offset 5m > 1e9 and on (pod) m4 < 1.5e-3", []string{"m1", "m2", "m3", "m4"}},
		{`max by (w) (x) == bool 1 unless ignoring(a) group_left(b) y`, []string{"x", "y"}},
		{`rate(process_cpu_seconds_total[${__rate_interval}]) < Inf`, []string{"process_cpu_seconds_total"}},
	} {
		if got := metricNames(tc.expr); !cmp.Equal(got, tc.want) {
			t.Errorf("metricNames(%s) = %q, want %q", tc.expr, got, tc.want)
		}
	}
}

// recorder keeps the collectors registered through it, so that their
// descriptors name every metric family, series or not.
type recorder struct {
	prometheus.Registerer
	collectors []prometheus.Collector
}

func (r *recorder) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return r.Registerer.Register(c)
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// gatewayMetrics returns the metric families a gateway exports: those
// of a gateway running against the test control plane, with the Go and
// process collectors cmd/gateway registers, auth's and webhook's.
func gatewayMetrics(t *testing.T, env *testenv.Env) map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	rec := &recorder{Registerer: reg}
	// As gateway.New registers them with its default registry.
	rec.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	gw := startGateway(t, env.Config, gatewayOptions{Resources: []string{"configmaps"}, Registry: reg, Registerer: rec})
	// The HTTP server registers on the registry itself: a list and a
	// watch create its series.
	ns := env.Namespace(t)
	for _, q := range []string{"", "?watch=1"} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, gw.url+"/api/v1/namespaces/"+ns+"/configmaps"+q, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", req.URL, resp.Status)
		}
	}

	names := map[string]bool{}
	for _, c := range rec.collectors {
		ch := make(chan *prometheus.Desc)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := fqName.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("no fqName in %s", d)
			}
			names[m[1]] = true
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	return names
}

// TestMonitoringMetricsExist: every metric the alerts and the dashboard
// query is one a gateway exports, or up, which Prometheus adds.
func TestMonitoringMetricsExist(t *testing.T) {
	exprs := map[string][]string{} // source -> expressions
	var rules ruleFile
	readYAML(t, monitoring+"rules.yaml", &rules)
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			exprs["rules.yaml "+r.Alert] = append(exprs["rules.yaml "+r.Alert], r.Expr)
		}
	}
	b, err := os.ReadFile(monitoring + "grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		SchemaVersion int `json:"schemaVersion"`
		Templating    struct {
			List []struct {
				Name       string `json:"name"`
				Type       string `json:"type"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	if dash.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d: older than Grafana 9", dash.SchemaVersion)
	}
	vars := map[string]string{}
	for _, v := range dash.Templating.List {
		vars[v.Name] = v.Type
		if v.Definition != "" {
			q := regexp.MustCompile(`^label_values\((.*),\s*\w+\)$`).FindStringSubmatch(v.Definition)
			if q == nil {
				t.Errorf("variable %s: unexpected query %q", v.Name, v.Definition)
				continue
			}
			exprs["dashboard variable "+v.Name] = append(exprs["dashboard variable "+v.Name], q[1])
		}
	}
	if vars["datasource"] != "datasource" || vars["job"] != "query" || vars["namespace"] != "query" {
		t.Errorf("dashboard variables %v, want datasource, job and namespace", vars)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs["dashboard panel "+p.Title] = append(exprs["dashboard panel "+p.Title], tg.Expr)
		}
	}

	exported := gatewayMetrics(t, testenv.Get(t))
	exported["up"] = true
	var sources []string
	for s := range exprs {
		sources = append(sources, s)
	}
	sort.Strings(sources)
	n := 0
	for _, s := range sources {
		for _, e := range exprs[s] {
			names := metricNames(e)
			if len(names) == 0 {
				t.Errorf("%s: no metric in %q", s, e)
			}
			for _, name := range names {
				n++
				base := name
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if b, ok := strings.CutSuffix(name, suffix); ok && exported[b] {
						base = b
					}
				}
				if !exported[base] {
					t.Errorf("%s: %s is not exported by the gateway (in %q)", s, name, e)
				}
			}
		}
	}
	t.Logf("%d metric references in %d rules, variables and panels checked", n, len(sources))
}
