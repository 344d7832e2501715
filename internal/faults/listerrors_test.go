package faults

import (
	"context"
	"kubegate/internal/testenv"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	"k8s.io/apimachinery/pkg/util/wait"

	"kubegate/internal/informer"
)

// client-go's reflector backs off between failed list-and-watch cycles
// with 800ms doubling per failure up to 30s, each delay jittered up to
// twice its base (k8s.io/client-go/tools/cache/reflector.go:
// defaultBackoffInit, defaultBackoffMax, defaultBackoffFactor,
// defaultBackoffJitter). A cycle is at most two requests: client-go's
// streaming list (a watch with sendInitialEvents) and, when that fails, a
// plain LIST.
const reflectorMinBackoff = 800 * time.Millisecond

// burstGap separates bursts of requests: requests of one cycle follow
// each other at once, cycles are reflectorMinBackoff or more apart.
const burstGap = 300 * time.Millisecond

// unreadyWith waits until Ready fails with a message containing every
// part, and returns the message.
func unreadyWith(t *testing.T, m *informer.Manager, limit time.Duration, parts ...string) string {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, limit, true,
		func(context.Context) (bool, error) {
			last = m.Ready()
			if last == nil {
				return false, nil
			}
			for _, p := range parts {
				if !strings.Contains(last.Error(), p) {
					return false, nil
				}
			}
			return true, nil
		})
	if err != nil {
		t.Fatalf("Ready() never failed naming %q within %s; last: %v", parts, limit, last)
	}
	return last.Error()
}

func faulted(hits []hit, since time.Time) []hit {
	var out []hit
	for _, h := range hits {
		if h.faulted && !h.at.Before(since) {
			out = append(out, h)
		}
	}
	return out
}

func countKind(hits []hit, kind string) int {
	n := 0
	for _, h := range hits {
		if h.kind == kind {
			n++
		}
	}
	return n
}

// bursts groups requests into the cycles that sent them and returns the
// start of each.
func bursts(hits []hit) []time.Time {
	var starts []time.Time
	for i, h := range hits {
		if i == 0 || h.at.Sub(hits[i-1].at) > burstGap {
			starts = append(starts, h.at)
		}
	}
	return starts
}

func gaps(ts []time.Time) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(ts); i++ {
		out = append(out, ts[i].Sub(ts[i-1]))
	}
	return out
}

func roundAll(ds []time.Duration) string {
	var s []string
	for _, d := range ds {
		s = append(s, d.Round(10*time.Millisecond).String())
	}
	return "[" + strings.Join(s, " ") + "]"
}

// TestListServerErrorsBackOff: once synced, the apiserver answers every
// list and watch of config maps with 500 (no Retry-After), and the
// current watch is cut. The informer retries in cycles whose spacing at
// least doubles each time from 800ms (the reflector's backoff), sending at
// most two requests per cycle; Ready names the failure after StaleAfter;
// changes made meanwhile, deletes included, reach the subscriber once the
// errors stop. The metrics count the 500s and show the cache stale until
// then.
func TestListServerErrorsBackOff(t *testing.T) {
	cs := client(t)
	ns := namespace(t, cs)
	create(t, cs, ns, "keep", "change", "drop")
	p := newFaultProxy(t, "/api/v1/configmaps")
	reg := prometheus.NewPedanticRegistry()
	m := startManagerWith(t, informer.Options{Config: p.config(), Logger: zaptest.NewLogger(t),
		Resources: []string{"configmaps"}, Registerer: reg})
	r := configMaps(t, m)
	sub := subscribe(t, r, ns)
	sub.converge(t, truth(t, cs, ns))
	if v, ok := sample(t, reg, "kubegate_cache_stale_seconds", "resource", "configmaps"); !ok || v != 0 {
		t.Fatalf("kubegate_cache_stale_seconds{resource=configmaps} = %v (present %v) while synced, want 0", v, ok)
	}

	start := time.Now()
	p.setFault(&httpFault{code: http.StatusInternalServerError})
	remove(t, cs, ns, "drop")
	update(t, cs, ns, "change", "1")
	create(t, cs, ns, "new")
	msg := unreadyWith(t, m, 30*time.Second, "stale", "HTTP 500")
	t.Logf("unready after %s: %s", time.Since(start).Round(10*time.Millisecond), msg)
	if v, _ := sample(t, reg, "kubegate_cache_stale_seconds", "resource", "configmaps"); v < staleAfter.Seconds() {
		t.Errorf("kubegate_cache_stale_seconds{resource=configmaps} = %v once unready, want at least %v", v, staleAfter.Seconds())
	}
	if v, _ := sample(t, reg, "kubegate_upstream_errors_total", "code", "500"); v < 1 {
		t.Errorf("kubegate_upstream_errors_total{code=500} = %v once unready, want at least 1", v)
	}
	// Let the informer fail two list cycles: the delays before them and
	// before the cycle that recovers are three back-off steps.
	testenv.EventuallyWithin(t, 60*time.Second, "two failed list cycles", func() bool {
		return countKind(faulted(p.requests(), start), kindList) >= 2
	})
	end := time.Now()
	p.setFault(nil)
	pollReady(t, m, true, 60*time.Second)
	recovered := time.Since(end)
	sub.converge(t, truth(t, cs, ns))
	noExtraModified(t, []*subscriber{sub}, map[string]int{"change": 1})
	if v, _ := sample(t, reg, "kubegate_cache_stale_seconds", "resource", "configmaps"); v != 0 {
		t.Errorf("kubegate_cache_stale_seconds{resource=configmaps} = %v after recovery, want 0", v)
	}

	var after []hit
	for _, h := range p.requests() {
		if !h.at.Before(start) {
			after = append(after, h)
		}
	}
	failed := faulted(after, start)
	// The first delay runs from the cut. The reflector answers a broken
	// watch by ending its cycle (no request of its own) or, when the
	// stream ended cleanly, by watching again at once; either way the
	// backoff starts there.
	b := bursts(after)
	if len(after) > 0 && after[0].kind == kindWatch {
		b[0] = after[0].at
	} else {
		b = append([]time.Time{start}, b...)
	}
	g := gaps(b)
	t.Logf("500 for %s: %d requests (%d list, %d watch-list, %d watch) in %d cycles; gaps between cycles %s; ready %s after the errors stopped",
		end.Sub(start).Round(10*time.Millisecond), len(failed), countKind(failed, kindList), countKind(failed, kindWatchList),
		countKind(failed, kindWatch), len(b)-1, roundAll(g), recovered.Round(10*time.Millisecond))
	// Each failed cycle is at most a streaming list and a list; the cut
	// watch may add one watch request before the first delay.
	if max := 2*countKind(failed, kindList) + 1; len(failed) > max {
		t.Errorf("%d requests for %d failed list cycles, want at most %d", len(failed), countKind(failed, kindList), max)
	}
	// Cycles are spaced by the reflector's backoff: at least 800ms, and
	// each delay at least the one before (its base doubles, its jitter is
	// below the base). 50ms slack for request latency.
	if len(g) < 3 {
		t.Fatalf("only %d cycles after the fault: %s", len(b)-1, roundAll(g))
	}
	for i, d := range g {
		if d < reflectorMinBackoff-50*time.Millisecond {
			t.Errorf("cycle %d followed %s after the one before, want at least %s", i+1, d, reflectorMinBackoff)
		}
		if i > 0 && d < g[i-1]-50*time.Millisecond {
			t.Errorf("back-off shrank: gaps %s", roundAll(g))
		}
	}
	if last, first := g[len(g)-1], g[0]; last < 2*first-100*time.Millisecond {
		t.Errorf("back-off did not grow: gaps %s", roundAll(g))
	}
}

// TestListTooManyRequestsHonoursRetryAfter: once synced, the apiserver
// answers every list and watch of config maps with 429 and Retry-After: 1,
// and the current watch is cut. client-go's REST client retries such
// answers itself (up to 10 times, waiting Retry-After each time) before
// the reflector sees an error, so requests arrive about once a second;
// Ready names the failure; the next retry after the 429s stop succeeds.
func TestListTooManyRequestsHonoursRetryAfter(t *testing.T) {
	cs := client(t)
	ns := namespace(t, cs)
	create(t, cs, ns, "keep", "change", "drop")
	p := newFaultProxy(t, "/api/v1/configmaps")
	m := startManager(t, p.config(), "configmaps")
	r := configMaps(t, m)
	sub := subscribe(t, r, ns)
	sub.converge(t, truth(t, cs, ns))

	start := time.Now()
	p.setFault(&httpFault{code: http.StatusTooManyRequests, retryAfter: "1"})
	remove(t, cs, ns, "drop")
	update(t, cs, ns, "change", "1")
	msg := unreadyWith(t, m, 30*time.Second, "stale", "HTTP 429")
	t.Logf("unready after %s: %s", time.Since(start).Round(10*time.Millisecond), msg)
	testenv.EventuallyWithin(t, 30*time.Second, "five answered 429s", func() bool { return len(faulted(p.requests(), start)) >= 5 })
	end := time.Now()
	p.setFault(nil)
	pollReady(t, m, true, 30*time.Second)
	recovered := time.Since(end)
	sub.converge(t, truth(t, cs, ns))

	failed := faulted(p.requests(), start)
	var at []time.Time
	for _, h := range failed {
		at = append(at, h.at)
	}
	g := gaps(at)
	window := end.Sub(start)
	t.Logf("429 for %s: %d requests (%d list, %d watch-list, %d watch); gaps %s; ready %s after the 429s stopped",
		window.Round(10*time.Millisecond), len(failed), countKind(failed, kindList), countKind(failed, kindWatchList),
		countKind(failed, kindWatch), roundAll(g), recovered.Round(10*time.Millisecond))
	// Every retry waits for Retry-After (1s) or the reflector's backoff
	// (800ms or more), so no two requests are closer than 800ms.
	for _, d := range g {
		if d < reflectorMinBackoff-50*time.Millisecond {
			t.Errorf("requests %s apart, want at least %s: gaps %s", d, reflectorMinBackoff, roundAll(g))
		}
	}
	if max := 1 + int(window/reflectorMinBackoff); len(failed) > max {
		t.Errorf("%d requests in %s, want at most %d", len(failed), window, max)
	}
	// The REST client's own retry (waiting 1s) picks the request up.
	if recovered > 3*time.Second {
		t.Errorf("ready %s after the 429s stopped, want within about Retry-After (1s)", recovered)
	}
}

// TestOnDemandFailuresDoNotGateReadiness: a resource started on first use
// whose requests keep failing (an aggregated API that is down, a CRD whose
// conversion webhook fails) is reported, but the gateway stays ready, so
// one client's request cannot take it out of service. The same failures
// of a configured resource make it unready (the tests above).
func TestOnDemandFailuresDoNotGateReadiness(t *testing.T) {
	for _, tc := range []struct {
		name   string
		synced bool // the failures start after the first list
	}{{"before-sync", false}, {"after-sync", true}} {
		t.Run(tc.name, func(t *testing.T) {
			cs := client(t)
			ns := namespace(t, cs)
			create(t, cs, ns, "a")
			p := newFaultProxy(t, "/api/v1/configmaps")
			m := startManager(t, p.config(), "namespaces")
			testenv.EventuallyWithin(t, 30*time.Second, "namespaces synced", func() bool { return m.Ready() == nil })
			if !tc.synced {
				p.setFault(&httpFault{code: http.StatusServiceUnavailable})
			}
			if !tc.synced {
				if _, err := m.Resource(context.Background(), "configmaps"); err != nil {
					t.Fatal(err)
				}
			} else {
				sub := subscribe(t, configMaps(t, m), ns)
				sub.converge(t, truth(t, cs, ns))
				p.setFault(&httpFault{code: http.StatusServiceUnavailable})
			}
			var st informer.ResourceStatus
			testenv.EventuallyWithin(t, 60*time.Second, "config maps failing for longer than StaleAfter", func() bool {
				for _, s := range m.Status() {
					if s.Resource == "configmaps" {
						st = s
					}
				}
				return st.FailingFor > staleAfter
			})
			if err := m.Ready(); err != nil {
				t.Fatalf("Ready() = %v, want ready: configmaps was started on demand", err)
			}
			if st.Gating || st.Synced != tc.synced || !strings.Contains(st.FailingError, "HTTP 503") {
				t.Fatalf("configmaps status = %+v, want on demand, synced=%v, failing with HTTP 503", st, tc.synced)
			}
			t.Logf("ready while configmaps fails: %+v", st)
		})
	}
}

// TestInitialListErrors: the apiserver fails the informer's first lists
// (500, then 429 with Retry-After). Ready names the resource and the
// error meanwhile; once the errors stop the cache syncs and a subscriber
// gets the apiserver's state.
func TestInitialListErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault httpFault
		want  []string
	}{
		{"500", httpFault{code: http.StatusInternalServerError}, []string{"not synced", "configmaps", "injected fault"}},
		// client-go retries these itself; until it gives up, the failing
		// requests are the only explanation.
		{"429", httpFault{code: http.StatusTooManyRequests, retryAfter: "1"}, []string{"not synced: [configmaps (", "HTTP 429"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := client(t)
			ns := namespace(t, cs)
			create(t, cs, ns, "a", "b")
			p := newFaultProxy(t, "/api/v1/configmaps")
			p.setFault(&tc.fault)
			start := time.Now()
			m := startManager(t, p.config(), "configmaps")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			r, err := m.Resource(ctx, "configmaps")
			if err != nil {
				t.Fatal(err)
			}
			msg := unreadyWith(t, m, 30*time.Second, tc.want...)
			t.Logf("while failing: %s", msg)
			testenv.EventuallyWithin(t, 30*time.Second, "three failed requests", func() bool { return len(faulted(p.requests(), start)) >= 3 })
			p.setFault(nil)
			end := time.Now()
			if err := r.WaitForSync(ctx); err != nil {
				t.Fatal(err)
			}
			failed := faulted(p.requests(), start)
			t.Logf("%d requests failed in %s; synced %s after the errors stopped",
				len(failed), end.Sub(start).Round(10*time.Millisecond), time.Since(end).Round(10*time.Millisecond))
			sub := subscribe(t, r, ns)
			sub.converge(t, truth(t, cs, ns))
			if err := m.Ready(); err != nil {
				t.Errorf("not ready after sync: %v", err)
			}
		})
	}
}

// TestNotFoundFromProxyDoesNotEndResource: a proxy in front of the
// apiserver answers the config maps collection with 404 for a while. A
// 404 alone does not end a resource: discovery, fetched again after it,
// still lists config maps, so the informer keeps retrying, its
// subscriber is not ended, and changes made meanwhile reach it once the
// proxy forwards again.
func TestNotFoundFromProxyDoesNotEndResource(t *testing.T) {
	cs := client(t)
	ns := namespace(t, cs)
	create(t, cs, ns, "keep", "drop")
	p := newFaultProxy(t, "/api/v1/configmaps")
	m := startManager(t, p.config(), "configmaps")
	r := configMaps(t, m)
	sub := subscribe(t, r, ns)
	sub.converge(t, truth(t, cs, ns))

	start := time.Now()
	p.setFault(&httpFault{code: http.StatusNotFound})
	remove(t, cs, ns, "drop")
	create(t, cs, ns, "new")
	// Each failed list is followed by a look at discovery.
	testenv.EventuallyWithin(t, 30*time.Second, "two lists answered 404", func() bool {
		return countKind(faulted(p.requests(), start), kindList) >= 2
	})
	p.setFault(nil)
	sub.converge(t, truth(t, cs, ns))
	if err := sub.l.Err(); err != nil {
		t.Fatalf("the subscriber was ended by a 404 from a proxy: %v", err)
	}
	for _, s := range m.Status() {
		if s.Gone {
			t.Fatalf("status reports %s gone after a 404 from a proxy", s.Resource)
		}
	}
	pollReady(t, m, true, 30*time.Second)
	if _, err := m.Resolve(context.Background(), "configmaps"); err != nil {
		t.Fatalf("Resolve(configmaps) after a 404 from a proxy: %v", err)
	}
}

// sample returns the value of the series of metric name whose label has
// value, and whether there is one.
func sample(t *testing.T, g prometheus.Gatherer, name, label, value string) (float64, bool) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					switch {
					case m.Gauge != nil:
						return m.GetGauge().GetValue(), true
					case m.Counter != nil:
						return m.GetCounter().GetValue(), true
					}
				}
			}
		}
	}
	return 0, false
}
