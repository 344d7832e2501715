package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics is one scrape of a server's /metrics, by metric family.
type Metrics map[string]*dto.MetricFamily

// ParseMetrics reads the Prometheus text format.
func ParseMetrics(r io.Reader) (Metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	m, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return m, nil
}

// ScrapeMetrics GETs url (a /metrics endpoint) with c and parses it.
func ScrapeMetrics(ctx context.Context, c *http.Client, url string) (Metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return ParseMetrics(resp.Body)
}

// Get sums the samples of the metric name whose labels include every
// pair of labels (name, value, name, value, ...). name is a counter, a
// gauge or an untyped metric, or the _count or _sum of a summary or
// histogram. found is false when no sample matches.
func (m Metrics) Get(name string, labels ...string) (v float64, found bool) {
	value := func(s *dto.Metric) float64 {
		switch {
		case s.Counter != nil:
			return s.Counter.GetValue()
		case s.Gauge != nil:
			return s.Gauge.GetValue()
		default:
			return s.Untyped.GetValue()
		}
	}
	f := m[name]
	if f == nil {
		for _, sfx := range []string{"_count", "_sum"} {
			base, ok := strings.CutSuffix(name, sfx)
			if g := m[base]; ok && g != nil && (g.GetType() == dto.MetricType_SUMMARY || g.GetType() == dto.MetricType_HISTOGRAM) {
				f = g
				value = func(s *dto.Metric) float64 {
					switch {
					case sfx == "_count" && s.Summary != nil:
						return float64(s.Summary.GetSampleCount())
					case sfx == "_count":
						return float64(s.Histogram.GetSampleCount())
					case s.Summary != nil:
						return s.Summary.GetSampleSum()
					default:
						return s.Histogram.GetSampleSum()
					}
				}
			}
		}
	}
	if f == nil {
		return 0, false
	}
	for _, s := range f.Metric {
		if hasLabels(s, labels) {
			v += value(s)
			found = true
		}
	}
	return v, found
}

// Value is Get for a metric that must be there.
func (m Metrics) Value(name string, labels ...string) (float64, error) {
	v, ok := m.Get(name, labels...)
	if !ok {
		return 0, fmt.Errorf("metric %s%v not found", name, labels)
	}
	return v, nil
}

func hasLabels(s *dto.Metric, pairs []string) bool {
	for i := 0; i+1 < len(pairs); i += 2 {
		ok := false
		for _, l := range s.Label {
			if l.GetName() == pairs[i] && l.GetValue() == pairs[i+1] {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}
