package scenario

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"kubegate/bench/harness"
)

// The watchlist scenario: what concurrent watch-list clients cost a
// server in memory. A watch-list is client-go's streaming list
// (watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&
// allowWatchBookmarks=true): every object as an ADDED event, then a
// bookmark annotated k8s.io/initial-events-end. Both servers are asked the
// same over HTTP/1.1 in JSON: the gateway's REST watch, and kube-apiserver
// (with TLS). Two phases per server:
//
//   - stalled: WatchList clients connect and read nothing after the
//     response headers, so each server holds, for every client, whatever
//     it has not been able to write of a snapshot: the worst case for
//     memory, and the one a slow or hostile client can impose. The
//     growth of the server's Go heap+stacks in use (its /metrics) and of
//     its RSS, a settle time after the last client connected, is divided
//     by the clients. The gateway drops a client that has not read for
//     30s (its watch write timeout), so the reading is taken well before,
//     and the gateway's count of open watches is read with it. One stream
//     is then read to its end, to check that it was a complete watch-list.
//   - full speed: WatchListReaders clients start at once and read their
//     snapshots as fast as this process can; the figures are the peaks
//     over the phase (RSS from VmHWM after a reset; Go heap+stacks from
//     /metrics sampled every watchListSample, which can miss a short
//     spike), less the values before, per client, with the time until
//     every snapshot was in and the server's CPU per snapshot.
//
// Heap in use is read without a collection (neither server can be made to
// run one from outside), so it counts the garbage the clients caused as
// well as what they hold: an upper bound on the latter, and a figure that
// a collection during the phase can lower. The log says how many
// collections ran. The bytes each client made the server allocate
// (go_memstats_alloc_bytes_total) do not depend on when collections run,
// and are reported beside them. What a stalled client has not read sits
// partly in the kernel's socket buffers, which no process's RSS counts;
// their growth over the stalled phase (/proc/net/sockstat, both ends of
// every loopback connection, and anything else on the machine using TCP
// meanwhile) is reported too, as a share of the snapshot that is in
// flight but not the server's.
//
// Each of the gateway's phases runs on a fresh gateway process caching
// the Pods, as the idle scenario does: the main gateway's heap holds the
// garbage and free pages of the earlier scenarios, which would inflate
// heap in use or absorb RSS growth. kube-apiserver cannot be restarted as
// cheaply: its figures carry that noise and are there for scale.

// watchListSample is how often the full-speed phase reads the servers'
// Go memory; each read costs kube-apiserver a /metrics answer.
const watchListSample = 250 * time.Millisecond

// watchListQuery is client-go's watch-list request.
const watchListQuery = "/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"

// watchListTarget is a server watch-lists are asked of.
type watchListTarget struct {
	arm    string
	url    string // base URL, no trailing slash
	token  string // bearer token; "" for none
	client *http.Client
	pid    int
}

func gatewayWatchListTarget(env *Env) watchListTarget {
	return watchListTarget{arm: ArmGateway, url: env.GatewayURL, pid: env.GatewayPID, client: &http.Client{Transport: &http.Transport{
		MaxIdleConnsPerHost: 1000,
		DisableCompression:  true,
	}}}
}

func apiserverWatchListTarget(env *Env, client *http.Client) watchListTarget {
	return watchListTarget{arm: ArmJSON, url: env.APIServer.Host, token: env.APIServer.BearerToken, pid: env.APIServerPID, client: client}
}

// open starts one watch-list and returns its response once the headers
// are in.
func (t watchListTarget) open(ctx context.Context) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.url+watchListQuery, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if t.token != "" {
		req.Header.Set("Authorization", "Bearer "+t.token)
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return nil, fmt.Errorf("%s: %s", resp.Status, b)
	}
	return resp, nil
}

// readWatchList counts the ADDED events of a watch-list up to the bookmark
// that ends its initial events.
func readWatchList(body io.Reader) (int, error) {
	br := bufio.NewReaderSize(body, 64<<10)
	n := 0
	for {
		line, err := readLine(br)
		if err != nil {
			return n, err
		}
		typ, _, ok := scanWatchEvent(line)
		if !ok {
			return n, fmt.Errorf("bad event %.200s", line)
		}
		switch string(typ) {
		case "ADDED":
			n++
		case "BOOKMARK":
			if bytes.Contains(line, []byte(`"k8s.io/initial-events-end":"true"`)) {
				return n, nil
			}
		case "ERROR":
			return n, fmt.Errorf("watch error: %.300s", line)
		}
	}
}

// watchListSnapshot is one watch-list read to the end of its initial
// events; it returns how many objects it had.
func watchListSnapshot(ctx context.Context, t watchListTarget) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resp, err := t.open(ctx)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return readWatchList(resp.Body)
}

// serverMemory is a server's memory at one time.
type serverMemory struct {
	rss int64
	// inuse is Go heap+stacks in use; alloc all bytes allocated so far;
	// gcs the collections so far.
	inuse, alloc, gcs float64
}

func readServerMemory(ctx context.Context, env *Env, t watchListTarget) (serverMemory, error) {
	var m serverMemory
	st, err := harness.ReadProc(t.pid)
	if err != nil {
		return m, err
	}
	m.rss = st.RSS
	met, err := metricsOf(ctx, env, t.arm)
	if err != nil {
		return m, err
	}
	heap, err1 := met.Value("go_memstats_heap_inuse_bytes")
	stack, err2 := met.Value("go_memstats_stack_inuse_bytes")
	alloc, err3 := met.Value("go_memstats_alloc_bytes_total")
	gcs, err4 := met.Value("go_gc_duration_seconds_count")
	m.inuse, m.alloc, m.gcs = heap+stack, alloc, gcs
	return m, errors.Join(err1, err2, err3, err4)
}

func scenarioWatchList(ctx context.Context, env *Env, z Sizes, log io.Writer) ([]Figure, error) {
	jc, err := http1Client(env.APIServer)
	if err != nil {
		return nil, err
	}
	defer jc.CloseIdleConnections()
	pods, err := podCount(ctx, env)
	if err != nil {
		return nil, err
	}
	var figs []Figure
	for _, phase := range []struct {
		name string
		run  func(context.Context, *Env, watchListTarget, Sizes, int, io.Writer) ([]Figure, error)
	}{
		{"stalled", watchListStalled},
		{"full speed", watchListFullSpeed},
	} {
		fresh, err := env.startGateway(ctx, GatewayConfig(env.Kubeconfig, "pods"), false)
		if err != nil {
			return figs, err
		}
		freshEnv := *env
		freshEnv.GatewayURL, freshEnv.GatewayPID = fresh.URL, fresh.PID
		gw := gatewayWatchListTarget(&freshEnv)
		f, err := phase.run(ctx, &freshEnv, gw, z, pods, log)
		gw.client.CloseIdleConnections()
		fresh.Stop()
		figs = append(figs, f...)
		if err != nil {
			return figs, fmt.Errorf("%s, %s: %w", ArmGateway, phase.name, err)
		}
		f, err = phase.run(ctx, env, apiserverWatchListTarget(env, jc), z, pods, log)
		figs = append(figs, f...)
		if err != nil {
			return figs, fmt.Errorf("%s, %s: %w", ArmJSON, phase.name, err)
		}
	}
	return figs, nil
}

// perClient is (after - before) / n in KiB.
func perClient(after, before float64, n int) float64 { return (after - before) / float64(n) / 1024 }

// watchListStalled connects z.WatchList clients that read nothing and
// measures the server's growth.
func watchListStalled(ctx context.Context, env *Env, t watchListTarget, z Sizes, pods int, log io.Writer) ([]Figure, error) {
	n := z.WatchList
	time.Sleep(z.Settle)
	m0, err := readServerMemory(ctx, env, t)
	if err != nil {
		return nil, err
	}
	tcp0, err := harness.TCPMemory()
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	var (
		mu     sync.Mutex // guards bodies
		bodies []io.ReadCloser
	)
	defer func() {
		cancel()
		for _, b := range bodies {
			b.Close()
		}
	}()
	t0 := time.Now()
	slots := make([]*subscriber, n) // openParallel's unit of work, unused
	err = openParallel(ctx, slots, func(context.Context, int, *subscriber) error {
		// The streams outlive openParallel's context: sctx.
		resp, err := t.open(sctx)
		if err != nil {
			return err
		}
		mu.Lock()
		bodies = append(bodies, resp.Body)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("open %d watch-lists: %w", n, err)
	}
	opened := time.Since(t0)
	time.Sleep(z.Settle)
	m1, err := readServerMemory(ctx, env, t)
	if err != nil {
		return nil, err
	}
	tcp1, err := harness.TCPMemory()
	if err != nil {
		return nil, err
	}
	held := time.Since(t0)
	what := fmt.Sprintf("(N=%d stalled)", n)
	figs := []Figure{
		{"watchlist", t.arm, "Go heap+stacks per client " + what, "KiB", perClient(m1.inuse, m0.inuse, n)},
		{"watchlist", t.arm, "RSS per client " + what, "KiB", perClient(float64(m1.rss), float64(m0.rss), n)},
		{"watchlist", t.arm, "allocated per client " + what, "KiB", perClient(m1.alloc, m0.alloc, n)},
		{"watchlist", t.arm, "kernel socket buffers per client " + what, "KiB", perClient(float64(tcp1), float64(tcp0), n)},
	}
	watches := ""
	if t.arm == ArmGateway {
		// Every stream must still be open when memory is read: the gateway
		// drops a watch that has not been read for 30s.
		w, ok, err := gatewayPodsMetric(ctx, env, "kubegate_rest_watches")
		if err != nil {
			return figs, err
		}
		if ok {
			watches = fmt.Sprintf("; %.0f watches open", w)
			figs = append(figs, Figure{"watchlist", t.arm, "watches open " + what, "count", w})
		}
	}
	fmt.Fprintf(log, "  %s: %d stalled watch-lists opened in %v, memory read %v after the first: RSS %.1f -> %.1f MiB, Go heap+stacks %.1f -> %.1f MiB, %.1f MiB allocated, %.0f collections; TCP buffers %.1f -> %.1f MiB%s\n",
		t.arm, n, opened.Round(time.Millisecond), held.Round(time.Millisecond), mib(m0.rss), mib(m1.rss),
		m0.inuse/(1<<20), m1.inuse/(1<<20), (m1.alloc-m0.alloc)/(1<<20), m1.gcs-m0.gcs, mib(tcp0), mib(tcp1), watches)
	// One stream read to its end: a complete watch-list, held back only
	// by its reader.
	got, err := readWatchList(bodies[0])
	if err != nil {
		return figs, fmt.Errorf("read a stalled watch-list: %w", err)
	}
	if got != pods {
		return figs, fmt.Errorf("a stalled watch-list had %d pods, want %d", got, pods)
	}
	return figs, nil
}

// watchListFullSpeed starts z.WatchListReaders clients at once and reads
// every snapshot as fast as it can, sampling the server's memory.
func watchListFullSpeed(ctx context.Context, env *Env, t watchListTarget, z Sizes, pods int, log io.Writer) ([]Figure, error) {
	n := z.WatchListReaders
	time.Sleep(z.Settle)
	m0, err := readServerMemory(ctx, env, t)
	if err != nil {
		return nil, err
	}
	_ = harness.ResetPeak(t.pid)
	cpu0, err := harness.ReadCPU(t.pid)
	if err != nil {
		return nil, err
	}
	self0, err := harness.ReadCPU(selfPID)
	if err != nil {
		return nil, err
	}

	sampled := make(chan float64, 1)
	sctx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	go func() {
		peak := m0.inuse
		tick := time.NewTicker(watchListSample)
		defer tick.Stop()
		for {
			select {
			case <-sctx.Done():
				sampled <- peak
				return
			case <-tick.C:
				if v, err := goInuse(sctx, env, t.arm); err == nil {
					peak = max(peak, v)
				}
			}
		}
	}()

	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex // guards the three below
		bodies  []io.ReadCloser
		slowest time.Duration
		errs    []error
	)
	t0 := time.Now()
	for range n {
		wg.Go(func() {
			resp, err := t.open(rctx)
			if err == nil {
				mu.Lock()
				bodies = append(bodies, resp.Body)
				mu.Unlock()
				var got int
				got, err = readWatchList(resp.Body)
				if err == nil && got != pods {
					err = fmt.Errorf("a watch-list had %d pods, want %d", got, pods)
				}
			}
			mu.Lock()
			slowest = max(slowest, time.Since(t0))
			if err != nil {
				errs = append(errs, err)
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	// Every client has its snapshot and is still connected.
	stopSampling()
	peakInuse := <-sampled
	st, perr := harness.ReadProc(t.pid)
	cpu1, cerr := harness.ReadCPU(t.pid)
	m1, merr := readServerMemory(ctx, env, t)
	self1, serr := harness.ReadCPU(selfPID)
	cancel()
	for _, b := range bodies {
		b.Close()
	}
	if err := errors.Join(errors.Join(errs...), perr, cerr, merr, serr); err != nil {
		return nil, err
	}
	peakInuse = max(peakInuse, m1.inuse)
	peakRSS := max(st.HWM, st.RSS)
	cpu := cpu1.Since(cpu0) / time.Duration(n)
	fmt.Fprintf(log, "  %s: %d watch-lists at full speed, all in after %v: peak RSS %.1f -> %.1f MiB, peak Go heap+stacks (sampled) %.1f -> %.1f MiB, %.1f MiB allocated, %.0f collections; server CPU %v per watch-list\n",
		t.arm, n, slowest.Round(time.Millisecond), mib(m0.rss), mib(peakRSS), m0.inuse/(1<<20), peakInuse/(1<<20),
		(m1.alloc-m0.alloc)/(1<<20), m1.gcs-m0.gcs, cpu.Round(time.Millisecond))
	what := fmt.Sprintf("(N=%d at full speed)", n)
	return []Figure{
		{"watchlist", t.arm, "Go heap+stacks peak per client " + what, "KiB", perClient(peakInuse, m0.inuse, n)},
		{"watchlist", t.arm, "RSS peak per client " + what, "KiB", perClient(float64(peakRSS), float64(m0.rss), n)},
		{"watchlist", t.arm, "allocated per client " + what, "KiB", perClient(m1.alloc, m0.alloc, n)},
		{"watchlist", t.arm, "time until every snapshot is in " + what, "ms", Milliseconds(slowest)},
		{"watchlist", t.arm, "server CPU per watch-list " + what, "ms", Milliseconds(cpu)},
		{"watchlist", ArmBench + " (" + t.arm + ")", "client CPU per watch-list " + what, "ms", Milliseconds(self1.Since(self0) / time.Duration(n))},
	}, nil
}
