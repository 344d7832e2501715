package soak

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Sample is one row of the report. Gateway figures come from its process
// (/proc) and /metrics; client figures are the soak's own counters.
// Counters are totals since the start.
type Sample struct {
	Elapsed time.Duration `json:"elapsed"`
	// Gateway process.
	RSS        int64 `json:"rssBytes"`
	HeapAlloc  int64 `json:"heapAllocBytes"`
	HeapGoal   int64 `json:"heapGoalBytes"` // go_memstats_next_gc_bytes: about 2x the heap live after the last GC
	Goroutines int64 `json:"goroutines"`
	Sockets    int64 `json:"sockets"`
	Subs       int64 `json:"subscriptions"`
	Frames     int64 `json:"framesSent"`        // WebSocket frames sent, inside batches counted
	Overflows  int64 `json:"listenerOverflows"` // listener backlogs that reached their bound
	WSResets   int64 `json:"wsResets"`          // RESET frames sent, all reasons
	WSErrors   int64 `json:"wsErrorFrames"`
	HookOK     int64 `json:"webhookDelivered"`
	HookRetry  int64 `json:"webhookFailedAttempts"` // attempts that will be retried (5xx, errors)
	HookQueue  int64 `json:"webhookQueue"`
	Ready      bool  `json:"ready"`
	// Clients.
	Ops        int64 `json:"workloadOps"`
	OpErrors   int64 `json:"workloadErrors"`
	Events     int64 `json:"clientEvents"` // ADDED/MODIFIED/DELETED received by all subscribers
	Joins      int64 `json:"clientJoins"`
	Leaves     int64 `json:"clientLeaves"`
	Resets     int64 `json:"clientResets"`
	Ended      int64 `json:"clientEnded"` // subscriptions ended by the gateway (403, 503, ...)
	Closes     int64 `json:"serverCloses"`
	DialErrors int64 `json:"dialErrors"`
	Restarts   int64 `json:"apiserverRestarts"`
	RBACFlips  int64 `json:"rbacFlips"`
}

// Report is the outcome of a run.
type Report struct {
	Start    time.Time     `json:"start"`
	Duration time.Duration `json:"duration"`
	// Idle is the gateway's goroutine count before the load, Final after
	// every client left.
	IdleGoroutines  int64         `json:"idleGoroutines"`
	FinalGoroutines int64         `json:"finalGoroutines"`
	ConvergedAfter  time.Duration `json:"convergedAfter"`
	Samples         []Sample      `json:"samples"`
	Totals          Totals        `json:"totals"`
	// GatewayWarnings are the gateway's log lines at warn level or above
	// (the first 1,000; WarningsDropped counts the rest).
	GatewayWarnings []string `json:"gatewayWarnings,omitempty"`
	WarningsDropped int      `json:"warningsDropped,omitempty"`
	Problems        []string `json:"problems"`
}

// Totals are the client counters at the end, by detail.
type Totals struct {
	ResetOverflow, ResetExpired, ResetReauthorized int64
	Ended401, Ended403, Ended503, EndedOther       int64
	EndedOtherCodes                                map[int]int64 `json:",omitempty"`
	Refused                                        int64
	SlowConsumerCloses                             int64
	WebhookDelivered, WebhookFailed, WebhookBadSig int64
	ProtocolErrors                                 int64
}

func mib(b int64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }

const tableHeader = "elapsed  rssMiB heapMiB goalMiB gorout sockets subs   frames  ovfl resets errFr  hookOK hookRetry queue ready   ops opErr  events joins ended closes restarts rbac"

func (s Sample) row() string {
	return fmt.Sprintf("%7s %7s %7s %7s %6d %7d %4d %8d %5d %6d %5d %7d %9d %5d %5v %5d %5d %7d %5d %5d %6d %8d %4d",
		s.Elapsed.Truncate(time.Second), mib(s.RSS), mib(s.HeapAlloc), mib(s.HeapGoal), s.Goroutines, s.Sockets, s.Subs,
		s.Frames, s.Overflows, s.WSResets, s.WSErrors, s.HookOK, s.HookRetry, s.HookQueue, s.Ready,
		s.Ops, s.OpErrors, s.Events, s.Joins, s.Ended, s.Closes, s.Restarts, s.RBACFlips)
}

// WriteTable prints the samples as a table.
func (r *Report) WriteTable(w io.Writer) {
	fmt.Fprintln(w, tableHeader)
	for _, s := range r.Samples {
		fmt.Fprintln(w, s.row())
	}
}

// WriteFiles writes soak-<time>.csv and soak-<time>.json into dir and
// returns their paths.
func (r *Report) WriteFiles(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	base := filepath.Join(dir, "soak-"+r.Start.UTC().Format("20060102T150405Z"))
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(base+".json", j, 0o644); err != nil {
		return nil, err
	}
	f, err := os.Create(base + ".csv")
	if err != nil {
		return nil, err
	}
	cw := csv.NewWriter(f)
	_ = cw.Write([]string{"elapsed_s", "rss_bytes", "heap_alloc_bytes", "heap_goal_bytes", "goroutines", "sockets", "subscriptions",
		"frames_sent", "listener_overflows", "ws_resets", "ws_error_frames", "webhook_delivered", "webhook_failed_attempts",
		"webhook_queue", "ready", "workload_ops", "workload_errors", "client_events", "client_joins", "client_leaves",
		"client_resets", "client_ended", "server_closes", "dial_errors", "apiserver_restarts", "rbac_flips"})
	for _, s := range r.Samples {
		i := func(v int64) string { return strconv.FormatInt(v, 10) }
		_ = cw.Write([]string{strconv.FormatFloat(s.Elapsed.Seconds(), 'f', 1, 64), i(s.RSS), i(s.HeapAlloc), i(s.HeapGoal),
			i(s.Goroutines), i(s.Sockets), i(s.Subs), i(s.Frames), i(s.Overflows), i(s.WSResets), i(s.WSErrors), i(s.HookOK),
			i(s.HookRetry), i(s.HookQueue), strconv.FormatBool(s.Ready), i(s.Ops), i(s.OpErrors), i(s.Events), i(s.Joins),
			i(s.Leaves), i(s.Resets), i(s.Ended), i(s.Closes), i(s.DialErrors), i(s.Restarts), i(s.RBACFlips)})
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	return []string{base + ".csv", base + ".json"}, nil
}

// Flatness bounds: the largest value of the last third of the load
// samples may exceed the largest of the first third by at most Factor
// (relative) plus Slack (absolute). See docs/reliability.md for why.
type Bound struct {
	Factor float64
	Slack  float64
}

// Default flatness bounds.
var (
	GoroutineBound = Bound{Factor: 1.2, Slack: 20}
	RSSBound       = Bound{Factor: 1.2, Slack: 16 << 20}
	HeapGoalBound  = Bound{Factor: 1.2, Slack: 8 << 20}
)

// checkFlat applies b to values (in sample order) and returns a problem
// or "". With fewer than 3 values nothing can be said.
func checkFlat(what string, values []float64, b Bound) (first, last float64, problem string) {
	n := len(values) / 3
	if n == 0 {
		return 0, 0, ""
	}
	first, last = maxOf(values[:n]), maxOf(values[len(values)-n:])
	if limit := first*b.Factor + b.Slack; last > limit {
		problem = fmt.Sprintf("%s grew: max of the last third %.0f > max of the first third %.0f x %.2f + %.0f = %.0f",
			what, last, first, b.Factor, b.Slack, limit)
	}
	return first, last, problem
}

func maxOf(v []float64) float64 {
	m := v[0]
	for _, x := range v[1:] {
		m = max(m, x)
	}
	return m
}
