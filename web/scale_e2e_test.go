package web_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/heapprofiler"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubegate/internal/config"
	"kubegate/internal/testenv"
)

// The dashboard's goals at 100,000 objects, with the headroom each bound
// leaves on a shared 2-core machine (docs/benchmarks-history.md,
// "Dashboard at 100,000 objects", has the figures):
const (
	// firstRowsBudget bounds the median time, over three page loads,
	// from navigation start to the first rows painted, with the
	// gateway's live table of the resource in place (a dashboard opened
	// on a gateway that serves others). The goal is 1s: on the idle
	// development machine it takes 0.35s, but with other tests running
	// (load average 8 on its 2 cores) 1.0s, so the bound is 2.5s.
	firstRowsBudget = 2500 * time.Millisecond
	// firstRowsRaceBudget replaces it under the race detector, which
	// slows the in-process gateway's opening of the window (a scan and
	// sort of the 100,000 rows, see docs/benchmarks-history.md) about 3×: 1.2s
	// on the idle development machine.
	firstRowsRaceBudget = 6 * time.Second
	// heapBudget bounds the page's JavaScript heap after scrolling from
	// the first row to the last and a full collection: the goal.
	heapBudget = 100 << 20
	// changeBudget bounds the time from the apiserver's answer to an
	// update to its new cell on screen: the goal.
	changeBudget = time.Second
)

// TestDashboard100k opens the dashboard on 100,000 ConfigMaps, created in
// the package's real kube-apiserver (in parallel; the time it takes is
// printed) so that they reach the gateway's cache as in production: its
// informer lists and watches them, and its live table sorts them. The
// page holds only its window of rows. The test prints one line of
// figures, "dashboard-100k: key=value …": time to first rows (the
// first page on the resource, when the gateway builds its live table,
// and then three reloads), the JavaScript heap after scrolling end to
// end and a forced collection, and the latency of changes to visible
// rows. It asserts the bounds above, and that every scroll position
// showed the right rows.
//
// The ConfigMaps stay in the apiserver (it runs no namespace
// controller), so this test is the package's last: every gateway started
// afterwards would list them.
func TestDashboard100k(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 100,000 objects")
	}
	const (
		n    = 100_000
		live = 500 // created while the page is open
	)
	env := testenv.Get(t)
	ns := env.Namespace(t)
	// The admin client's rate limit (1,000/s) would make the creates
	// take longer than the apiserver does.
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cms := client.CoreV1().ConfigMaps(ns)
	name := func(i int) string { return fmt.Sprintf("cm-%06d", i) }
	create := func(from, to int) error {
		g, ctx := errgroup.WithContext(t.Context())
		g.SetLimit(64)
		for i := from; i < to; i++ {
			g.Go(func() error {
				_, err := cms.Create(ctx, configMap(name(i), nil), metav1.CreateOptions{})
				return err
			})
		}
		return g.Wait()
	}
	start := time.Now()
	if err := create(0, n-live); err != nil {
		t.Fatal(err)
	}
	createTime := time.Since(start)
	t.Logf("created %d ConfigMaps in %v (%.0f/s)", n-live, createTime.Round(time.Millisecond), float64(n-live)/createTime.Seconds())

	// The gateway starts the ConfigMaps' informer at once and is ready
	// once it holds them all.
	start = time.Now()
	base := startGateway(t, gatewayOptions{config: func(c *config.Config) { c.Cache.Resources = []string{"configmaps"} }})
	err = wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		res, err := http.Get(base + "/readyz")
		if err != nil {
			return false, nil
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("gateway not ready: %v", err)
	}
	syncTime := time.Since(start)

	ctx := newBrowser(t)
	url := base + "/#resource=configmaps&namespace=" + ns
	// firstRows loads the page and returns the time from navigation
	// start to the first rows painted (the page's performance mark),
	// waiting at most limit for them.
	firstRows := func(load chromedp.Action[chromedp.Void], limit time.Duration) time.Duration {
		t.Helper()
		if err := chromedp.Do(ctx, load); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, limit, "first rows", `performance.getEntriesByName("kubegate:first-rows").length > 0 && `+row(ns, name(0))+` !== null`)
		ms, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`performance.getEntriesByName("kubegate:first-rows")[0].startTime`))
		if err != nil {
			t.Fatal(err)
		}
		return time.Duration(ms * float64(time.Millisecond))
	}
	// The first page builds the gateway's live table of the 100,000
	// ConfigMaps: 24-31 s under the race detector at load average 15,
	// over a minute at 20 (a figure, not a bound: the goal is for a
	// table in place, below).
	cold := firstRows(chromedp.Navigate(url), 5*time.Minute)
	var warm []time.Duration
	for range 3 {
		warm = append(warm, firstRows(chromedp.Reload(), time.Minute))
	}

	// Live creates while the page shows the first rows: the count follows,
	// and no task of the page runs long.
	if err := create(n-live, n); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, time.Minute, "count after the live creates", fmt.Sprintf(`document.getElementById("count").dataset.count === "%d"`, n))
	type sizes struct {
		Elements int `json:"elements"`
		Rows     int `json:"rows"`
		Limit    int `json:"limit"`
	}
	sz, err := chromedp.Run(ctx, chromedp.Evaluate[sizes](`({elements: document.querySelectorAll("#rows .row").length,
		rows: kubegate.window.rows.length, limit: kubegate.window.limit})`))
	if err != nil {
		t.Fatal(err)
	}
	if sz.Elements == 0 || sz.Elements > 100 || sz.Rows > sz.Limit || sz.Limit > 200 {
		t.Errorf("%d row elements, a window of %d rows (limit %d) for %d objects; want a few screens' worth", sz.Elements, sz.Rows, sz.Limit, n)
	}

	// Scroll from the first row to the last: 400 jumps across the list
	// (dragging the scroll bar), then 200 steps of 5 rows (a wheel). At
	// each position the page must show the rows of that position, which
	// it asks the gateway for. The run is driven inside the page, which
	// records how long each position took to fill.
	if err := chromedp.Do(ctx, evalVoid(`(window.scrollRun = { done: false, error: "", fills: [] }, (async () => {
		const run = window.scrollRun;
		const vp = document.getElementById("viewport");
		const h = 26;
		const name = (i) => "cm-" + String(i).padStart(6, "0");
		const frame = () => new Promise((r) => requestAnimationFrame(r));
		const visit = async (top) => {
			vp.scrollTop = top;
			const t0 = performance.now();
			const want = name(Math.floor(vp.scrollTop / h));
			for (;;) {
				await frame();
				const rows = document.querySelectorAll("#rows .row");
				if (rows.length > 0 && !document.querySelector("#rows .placeholder") && rows[0].dataset.key.endsWith("/" + want)) break;
				if (performance.now() - t0 > 20000) throw new Error("at " + top + "px: want " + want + " first, have " +
					(rows[0] ? rows[0].dataset.key || "a placeholder" : "no row"));
			}
			run.fills.push(performance.now() - t0);
		};
		try {
			const max = vp.scrollHeight - vp.clientHeight;
			for (let i = 1; i <= 400; i++) await visit(Math.round(max * i / 400));
			const mid = Math.round(max / 2);
			for (let i = 0; i < 200; i++) await visit(mid + i * 5 * h);
			// The end as it is now: the page's layout may have moved
			// since max was read (the viewport's height with it).
			await visit(vp.scrollHeight - vp.clientHeight);
			run.last = document.querySelector("#rows .row:last-child").dataset.key;
		} catch (e) {
			run.error = String(e.message || e);
		}
		run.done = true;
	})())`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 3*time.Minute, "scrolled end to end", `window.scrollRun.done`)
	type scrollRun struct {
		Error string    `json:"error"`
		Fills []float64 `json:"fills"`
		Last  string    `json:"last"`
	}
	sr, err := chromedp.Run(ctx, chromedp.Evaluate[scrollRun](`window.scrollRun`))
	if err != nil {
		t.Fatal(err)
	}
	if sr.Error != "" {
		t.Fatalf("scrolling: %s", sr.Error)
	}
	if sr.Last != ns+"/"+name(n-1) {
		t.Errorf("last row at the end of the list = %q, want %s", sr.Last, name(n-1))
	}
	slices.Sort(sr.Fills)
	fillMedian, fillMax := sr.Fills[len(sr.Fills)/2], sr.Fills[len(sr.Fills)-1]
	screenshot(t, ctx, "dashboard-100k.png")

	// The heap after a full collection.
	heap, err := chromedp.Run(ctx, func(ctx context.Context, tg *chromedp.Target) (float64, error) {
		if _, err := cdp.Call(ctx, tg, heapprofiler.CollectGarbage, cdp.Empty{}); err != nil {
			return 0, err
		}
		u, err := cdp.Call(ctx, tg, runtime.GetHeapUsage, cdp.Empty{})
		return u.UsedSize, err
	})
	if err != nil {
		t.Fatal(err)
	}

	// Changes to visible rows (near the end, where the scroll left the
	// view): from the apiserver's answer to the new cell on screen. The
	// page records when it first draws the cell, in Unix milliseconds.
	var changes []time.Duration
	for i := range 5 {
		target := name(n - 10 + i)
		if err := chromedp.Do(ctx, evalVoid(fmt.Sprintf(`(() => {
			const check = () => {
				if (%s === "2") window.changeSeen = performance.timeOrigin + performance.now();
				else requestAnimationFrame(check);
			};
			window.changeSeen = 0;
			requestAnimationFrame(check);
		})()`, cell(ns, target, "Data")))); err != nil {
			t.Fatal(err)
		}
		cm := configMap(target, nil)
		cm.Data["k2"] = "v2"
		if _, err := cms.Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		answered := time.Now()
		waitFor(t, ctx, 30*time.Second, "changed cell "+target, `window.changeSeen > 0`)
		seen, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`window.changeSeen`))
		if err != nil {
			t.Fatal(err)
		}
		changes = append(changes, time.UnixMicro(int64(seen*1000)).Sub(answered))
	}
	slices.Sort(changes)

	type page struct {
		Moves        int     `json:"moves"`
		Frames       int     `json:"frames"`
		Message      float64 `json:"message"`
		Draw         float64 `json:"draw"`
		Messages     int     `json:"messages"`
		Draws        int     `json:"draws"`
		SlowMessages int     `json:"slowMessages"`
		SlowDraws    int     `json:"slowDraws"`
	}
	pg, err := chromedp.Run(ctx, chromedp.Evaluate[page](`({moves: kubegate.stats.moves, frames: kubegate.stats.frames,
		message: kubegate.stats.maxMessageMs, draw: kubegate.stats.maxDrawMs, messages: kubegate.stats.messages,
		draws: kubegate.stats.draws, slowMessages: kubegate.stats.slowMessages, slowDraws: kubegate.stats.slowDraws})`))
	if err != nil {
		t.Fatal(err)
	}
	ms := func(d time.Duration) string {
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 0, 64)
	}
	warmSorted := slices.Clone(warm)
	slices.Sort(warmSorted)
	t.Logf("dashboard-100k: objects=%d create_s=%.1f gateway_sync_s=%.1f first_rows_cold_ms=%s first_rows_ms=%s,%s,%s "+
		"heap_mb=%.1f scroll_positions=%d fill_median_ms=%.0f fill_max_ms=%.0f moves=%d frames=%d change_median_ms=%s change_max_ms=%s "+
		"max_message_ms=%.0f max_draw_ms=%.0f slow_messages=%d/%d slow_draws=%d/%d row_elements=%d window_rows=%d race=%v",
		n, createTime.Seconds(), syncTime.Seconds(), ms(cold), ms(warm[0]), ms(warm[1]), ms(warm[2]),
		heap/(1<<20), len(sr.Fills), fillMedian, fillMax, pg.Moves, pg.Frames, ms(changes[len(changes)/2]), ms(changes[len(changes)-1]),
		pg.Message, pg.Draw, pg.SlowMessages, pg.Messages, pg.SlowDraws, pg.Draws, sz.Elements, sz.Rows, raceDetector)

	budget := firstRowsBudget
	if raceDetector {
		budget = firstRowsRaceBudget
	}
	if median := warmSorted[1]; median > budget {
		t.Errorf("first rows after %v (median of %v), want at most %v (race detector: %v)", median, warm, budget, raceDetector)
	}
	if heap > heapBudget {
		t.Errorf("JavaScript heap %.1f MB after scrolling end to end, want at most %d MB", heap/(1<<20), heapBudget>>20)
	}
	if worst := changes[len(changes)-1]; worst > changeBudget {
		t.Errorf("a change took %v to show (all: %v), want at most %v", worst, changes, changeBudget)
	}
	// The page's tasks (a message handled, a draw) each stay under
	// 500 ms: a page that does work in proportion to the objects takes
	// longer on most of them. On a machine loaded past its cores, the
	// browser is sometimes not scheduled for that long in the middle of
	// one (a draw of 21 rows took 980 ms at load average 15), so one
	// task in a hundred may.
	if pg.Messages == 0 || pg.Draws == 0 || pg.SlowMessages*100 > pg.Messages || pg.SlowDraws*100 > pg.Draws {
		t.Errorf("%d of %d messages and %d of %d draws took over 500 ms (longest %.0f ms and %.0f ms); want at most 1 in 100 of each",
			pg.SlowMessages, pg.Messages, pg.SlowDraws, pg.Draws, pg.Message, pg.Draw)
	}
}
