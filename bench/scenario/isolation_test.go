package scenario

import (
	"net/url"
	"strings"
	"testing"

	"kubegate/bench/workload"

	"k8s.io/apimachinery/pkg/labels"
)

func TestScanTableWatchEvent(t *testing.T) {
	const cols = `"columnDefinitions":[{"name":"Name","type":"string","format":"name","description":"x","priority":0}]`
	row := func(rv string) string {
		return `{"cells":["web-1","0/3","Pending",{"a":"}"},"5m"],"object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"web-1","ownerReferences":[{"resourceVersion":"9"}],"resourceVersion":"` + rv + `"}}}`
	}
	for _, tc := range []struct {
		name, line string
		typ        string
		rv         uint64
		ok         bool
	}{
		// The gateway's Table carries no resourceVersion of its own.
		{name: "gateway", line: `{"type":"MODIFIED","object":{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{},` + cols + `,"rows":[` + row("1234") + `]}}`,
			typ: "MODIFIED", rv: 1234, ok: true},
		// kube-apiserver's does, and it is the object's.
		{name: "apiserver", line: `{"type":"ADDED","object":{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"77"},"rows":[` + row("77") + `]}}`,
			typ: "ADDED", rv: 77, ok: true},
		{name: "type last", line: `{"object":{"kind":"Table","rows":[` + row("5") + `,` + row("6") + `]},"type":"DELETED"}`, typ: "DELETED", rv: 5, ok: true},
		{name: "error", line: `{"type":"ERROR","object":{"kind":"Status","code":410}}`, typ: "ERROR", ok: true},
		{name: "no rows", line: `{"type":"BOOKMARK","object":{"kind":"Table","rows":[]}}`, typ: "BOOKMARK", ok: true},
		{name: "truncated", line: `{"type":"MODIFIED","object":{"kind":"Table","rows":[` + row("1")[:40]},
		{name: "bad version", line: `{"type":"MODIFIED","object":{"rows":[` + row("x1") + `]}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			typ, rv, ok := scanTableWatchEvent([]byte(tc.line))
			if ok != tc.ok || (ok && (string(typ) != tc.typ || rv != tc.rv)) {
				t.Errorf("got %q %d %t, want %q %d %t", typ, rv, ok, tc.typ, tc.rv, tc.ok)
			}
		})
	}
}

// TestLongSelector: issue 30's 4 KiB selectors are fresh, within the
// gateway's 4096 bytes and its 8192-byte query, and every Pod matches
// them, so that each builds a view over every row.
func TestLongSelector(t *testing.T) {
	pod := labels.Set(workload.NewPod(workload.PodAt(7, 3), 7).Labels)
	seen := map[string]bool{}
	for _, seq := range []int{0, 1, 99999} {
		s := longSelector(seq)
		if len(s) > 4096 || len(s) < 4000 {
			t.Errorf("selector %d is %d bytes, want 4000 to 4096", seq, len(s))
		}
		if q := sortQuery(seq, "labelSelector="+url.QueryEscape(s)); len(q) > 8192 {
			t.Errorf("query %d is %d bytes, over 8192", seq, len(q))
		}
		sel, err := labels.Parse(s)
		if err != nil {
			t.Fatalf("selector %d: %v", seq, err)
		}
		if !sel.Matches(pod) {
			t.Errorf("selector %d does not match a benchmark Pod", seq)
		}
		if seen[s] {
			t.Errorf("selector %d repeats an earlier one", seq)
		}
		seen[s] = true
	}
}

func TestCompleteStatus(t *testing.T) {
	full := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"slow down","reason":"TooManyRequests","code":429}`
	for _, tc := range []struct {
		body string
		code int
		want bool
	}{
		{full, 429, true},
		{full, 403, false},
		{strings.Replace(full, `"kind":"Status",`, "", 1), 429, false},
		{strings.Replace(full, `"message":"slow down",`, "", 1), 429, false},
		{strings.Replace(full, `"reason":"TooManyRequests",`, "", 1), 429, false},
		{"Too Many Requests", 429, false},
	} {
		if got := completeStatus([]byte(tc.body), tc.code); got != tc.want {
			t.Errorf("completeStatus(%s, %d) = %t, want %t", tc.body, tc.code, got, tc.want)
		}
	}
	r := newRefusals()
	r.add(429, []byte(full), true, true)
	r.add(429, []byte(full), true, false) // no Retry-After
	r.add(429, []byte(full), false, false)
	r.add(429, []byte(`{}`), false, false)
	r.add(401, nil, true, false)
	if n := r.bad429.Load(); n != 2 {
		t.Errorf("%d incomplete 429s counted, want 2", n)
	}
	if r.count(429) != 4 || r.total() != 5 {
		t.Errorf("counted %d 429s of %d answers, want 4 of 5", r.count(429), r.total())
	}
}

// goalsOf returns the goals whose text starts with prefix.
func goalsOf(gs []Goal, prefix string) []Goal {
	var out []Goal
	for _, g := range gs {
		if strings.HasPrefix(g.Goal, prefix) {
			out = append(out, g)
		}
	}
	return out
}

func TestViewChurnGoals(t *testing.T) {
	gw := func(metric string, v float64) Figure { return Figure{ScenarioViewChurn, ArmGateway, metric, "ms", v} }
	figs := []Figure{
		{ScenarioViewChurn, ArmBench, "pods", "count", 20000},
		gw("victims' window update latency p99"+churnBaseline, 70),
		gw("victims' window update latency p99"+churnUnder, 21000),
		gw(victimNewView+" p50"+churnUnder, 30),
		gw(victimNewView+" p99"+churnUnder, 90),
		gw(victimNewViews+churnUnder, 40),
		gw("attacker: new view over REST, time to first rows p50", 3000),
		gw("attacker: new view over REST, time to first rows p99", 9000),
		gw("attacker: new views over REST served/s", 12),
		gw("attacker: new views over REST refused (429)", 0),
		// Every WebSocket view refused: none served, no note.
		gw("attacker: new views over WebSocket refused (429)", 40),
		gw("first window, new table (20000 pods)", 3000),
		gw("list all CPU/list", 10),
		gw("list all as Table CPU/list", 15),
		gw("list all as Table items", 10000),
		gw("list all as Table p50", 100),
		{ScenarioViewChurn, ArmAPIServerRV0, "list all as Table p50", "ms", 3000},
		{ScenarioViewChurn, ArmAPIServerRVUnset, "list all as Table p50", "ms", 500},
		gw("CPU per 1000 deliveries (REST watch, JSON)", 0.02),
		gw("CPU per 1000 deliveries (REST watch, Table)", 0.1),
	}
	gs := viewChurnGoals(figs)
	for _, c := range []struct {
		prefix string
		met    bool
	}{
		{"victims' window update p99", false},
		{"a user's new sort or filter over WebSocket while another user churns views", true},
		{"first window on a resource never opened before", false},
		{"REST Table list of 10000 pods: gateway CPU", true},
		{"REST Table list of 10000 pods >= 10x faster than " + ArmAPIServerRV0, true},
		{"REST Table list of 10000 pods >= 10x faster than " + ArmAPIServerRVUnset, false},
		{"Table watch", false},
	} {
		g := goalsOf(gs, c.prefix)
		if len(g) != 1 {
			t.Errorf("%d goals %q, want 1 (all: %q)", len(g), c.prefix, goalLines(gs))
			continue
		}
		if g[0].Met() != c.met {
			t.Errorf("%s: met %t, want %t", g[0], g[0].Met(), c.met)
		}
	}
	if g := goalsOf(gs, "a user's new sort or filter"); len(g) == 1 && !strings.Contains(g[0].After, "the goal is set at 100000") {
		t.Errorf("%s: no note that it was measured below the goal's size", g[0])
	}
	// The churner's own views are a note, not a goal; with none served,
	// not even that.
	notes := goalsOf(gs, "the churner's own new views over ")
	if len(notes) != 1 || !notes[0].Note || notes[0].Goal != "the churner's own new views over REST (12.0 served a second, its builds held to its share): first rows median 3000.0 ms, p99 9000.0 ms" {
		t.Errorf("the churner's notes: %q, want one for REST", goalLines(notes))
	}
	// A probe that got no view served misses.
	none := viewChurnGoals([]Figure{gw(victimNewViews+churnUnder, 0)})
	if g := goalsOf(none, "a user's new sort or filter"); len(g) != 1 || !strings.Contains(g[0].Verdict, "no new view was served") {
		t.Errorf("%q: want it missed for serving none", goalLines(g))
	}
}

func TestTenantsGoals(t *testing.T) {
	a := AttackTokenFlood
	sfx, bsfx := attackSuffix(a), baselineSuffix(a)
	gw := func(metric string, v float64) Figure { return Figure{ScenarioTenants, ArmGateway, metric, "ms", v} }
	figs := []Figure{
		gw("victim window update latency p99"+bsfx, 10), gw("victim window update latency p99"+sfx, 15),
		gw("victim object event latency p99"+bsfx, 10), gw("victim object event latency p99"+sfx, 30),
		gw("victim REST list latency p99"+bsfx, 5), gw("victim REST list latency p99"+sfx, 9),
		gw("victim REST lists failed"+sfx, 2), gw("victim socket failures"+sfx, 0),
		gw("missed window updates"+sfx, 0), gw("missed object events"+sfx, 1),
		gw("flooder: answered 429"+sfx, 10), gw("flooder: 429s without Retry-After or a complete Status"+sfx, 0),
		gw("live heap+stacks before"+sfx, 100), gw("live heap+stacks after"+sfx, 104),
		gw("never-seen valid token accepted: tried"+sfx, 3), gw("never-seen valid token accepted: not served"+sfx, 1),
		gw("never-seen valid token accepted: time max"+sfx, 400),
		// Another attack that ran, without its baseline's REST lists.
		gw("victim socket failures"+attackSuffix(AttackSocketFill), 0),
		gw("victim REST list latency p99"+attackSuffix(AttackSocketFill), 9),
		gw("victim new socket to its first window: tried"+attackSuffix(AttackSocketFill), 6),
		gw("victim new socket to its first window: not served"+attackSuffix(AttackSocketFill), 0),
	}
	gs := tenantsGoals(figs)
	for _, c := range []struct {
		prefix, verdict string
	}{
		{a + ": the victim's p99", "MISSED by object events 3.0x"},
		{a + ": no victim request fails", "MISSED by 3 failures"},
		{a + ": the attacker's refusals", "met"},
		{a + ": what the attack grows comes back", "met"},
		{a + ": a never-seen valid token", "MISSED by 1 never accepted"},
		{AttackSocketFill + ": the victim's p99", "MISSED by window updates (none arrived), object events (none arrived), REST lists (no baseline)"},
		{AttackSocketFill + ": the victim still connects", "met"},
		{AttackSocketFill + ": what the attack grows", "not judged"},
	} {
		g := goalsOf(gs, c.prefix)
		if len(g) != 1 {
			t.Errorf("%d goals %q, want 1 (all: %q)", len(g), c.prefix, goalLines(gs))
			continue
		}
		if !strings.HasPrefix(g[0].Verdict, c.verdict) {
			t.Errorf("%s: verdict %q, want %q", g[0].Goal, g[0].Verdict, c.verdict)
		}
	}
	if n := len(goalsOf(gs, AttackViewHoard)); n != 0 {
		t.Errorf("%d goals for an attack that did not run", n)
	}
	// Memory past the slack is missed (the later figure wins).
	figs = append(figs, gw("live heap+stacks after"+sfx, 110))
	if g := goalsOf(tenantsGoals(figs), a+": what the attack grows"); len(g) != 1 || g[0].Verdict != "MISSED by 5 MiB" {
		t.Errorf("memory 100 -> 110 MiB: %q, want missed by 5 MiB", goalLines(g))
	}
	// Nothing is judged without the victim's figures.
	if gs := tenantsGoals(figs[len(figs)-1:]); len(gs) != 0 {
		t.Errorf("goals from a run without the victim's figures: %q", goalLines(gs))
	}
}
