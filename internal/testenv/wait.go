package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/util/wait"
)

// WaitLimit is how long Eventually waits. It bounds a wait on a loaded
// machine (2 cores, the race detector, other packages' control planes);
// it is not a period any test relies on.
const WaitLimit = time.Minute

// Eventually waits until cond holds, checking it every 10ms, and fails
// the test naming what it waited for if it does not within WaitLimit.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	EventuallyWithin(t, WaitLimit, what, cond)
}

// EventuallyWithin is Eventually with another bound.
func EventuallyWithin(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, limit, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("%s: not within %s", what, limit)
	}
}

// EventuallyShowing is Eventually that says, when it fails, what last
// returns: what the test saw last.
func EventuallyShowing(t testing.TB, what string, cond func() bool, last func() string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, WaitLimit, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("%s: not within %s; last: %s", what, WaitLimit, last())
	}
}

// Metric sums the samples of the counters and gauges named name that g
// gathers, over those whose labels include every name=value pair of
// labels (given as name, value, name, value...).
func Metric(t testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	if len(labels)%2 != 0 {
		t.Fatalf("Metric %s: labels %q are not name, value pairs", name, labels)
	}
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if hasLabels(m, labels) {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
			}
		}
	}
	return sum
}

func hasLabels(m *dto.Metric, labels []string) bool {
	for i := 0; i < len(labels); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
