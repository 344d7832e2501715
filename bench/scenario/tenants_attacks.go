package scenario

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// startAttack starts the attack name of the tenants scenario, once what it
// holds (windows, sockets) is held.
func startAttack(ctx context.Context, name string, env *Env, u tenantsUsers, v *tenantVictim, zt TenantsSizes, log io.Writer) (*attack, error) {
	sfx := attackSuffix(name)
	switch name {
	case AttackTokenFlood:
		return startTokenFlood(ctx, env, u, v, zt, log), nil
	case AttackViewChurnREST:
		ch := startChurn(ctx, u.churner, v.base, churnSpec{
			restRate: zt.ChurnRate,
			restQuery: func(seq int) string {
				return sortQuery(seq, "labelSelector="+url.QueryEscape(fmt.Sprintf("!churn-%d", seq)))
			},
			longRate:  zt.LongSelectorRate,
			longQuery: func(seq int) string { return sortQuery(seq, "labelSelector="+url.QueryEscape(longSelector(seq))) },
		})
		return &attack{stop: func() []Figure { ch.stop(); return ch.figures(ScenarioTenants, "churner", sfx, log) }}, nil
	case AttackViewChurnWS:
		ch := startChurn(ctx, u.churner, v.base, churnSpec{
			wsRate: zt.WSChurnRate, wsSockets: 4,
			wsWindow: func(seq int) windowSubscribe {
				o := newSortOrders[seq%len(newSortOrders)]
				return windowSubscribe{Sort: o.sort, Order: o.order, Filter: fmt.Sprintf("%03d", seq/len(newSortOrders)%1000),
					LabelSelector: fmt.Sprintf("!churn-ws-%d", seq)}
			},
		})
		return &attack{stop: func() []Figure { ch.stop(); return ch.figures(ScenarioTenants, "churner", sfx, log) }}, nil
	case AttackViewHoard:
		return startHoard(ctx, env, u, v, zt, log)
	case AttackReviewFlood:
		return startReviewFlood(ctx, u, v, zt, log), nil
	case AttackSocketFill:
		return startSocketFill(ctx, u, v, zt, log)
	}
	return nil, fmt.Errorf("unknown attack %q", name)
}

// longSelector is a fresh label selector of at most 4096 bytes (the
// gateway's bound), every term of which every Pod matches.
func longSelector(seq int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "!churn-long-%d", seq)
	for i := 0; ; i++ {
		term := fmt.Sprintf(",bench.kubegate.io/pad-%03d-%s!=x", i, strings.Repeat("a", 40))
		if b.Len()+len(term) > 4096 {
			return b.String()
		}
		b.WriteString(term)
	}
}

// probeTimes are the victim's probes during an attack: how long each
// took to be served, and how many were not.
type probeTimes struct {
	mu       sync.Mutex // guards the fields below
	served   []time.Duration
	tried    int
	refused  int
	examples []string
}

func (p *probeTimes) add(d time.Duration, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tried++
	if err != nil {
		p.refused++
		if len(p.examples) < 3 {
			p.examples = append(p.examples, err.Error())
		}
		return
	}
	p.served = append(p.served, d)
}

// figures are "<what> tried", "<what> not served", and the served ones'
// median and maximum time.
func (p *probeTimes) figures(what, suffix string) []Figure {
	p.mu.Lock()
	defer p.mu.Unlock()
	figs := []Figure{
		{ScenarioTenants, ArmGateway, what + " tried" + suffix, "count", float64(p.tried)},
		{ScenarioTenants, ArmGateway, what + " not served" + suffix, "count", float64(p.refused)},
	}
	if len(p.served) > 0 {
		figs = append(figs,
			Figure{ScenarioTenants, ArmGateway, what + " time p50" + suffix, "ms", Milliseconds(Percentile(p.served, 0.5))},
			Figure{ScenarioTenants, ArmGateway, what + " time max" + suffix, "ms", Milliseconds(Percentile(p.served, 1))})
	}
	return figs
}

func (p *probeTimes) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprintf("%d tried, %d not served, p50 %v, max %v %q", p.tried, p.refused,
		Percentile(p.served, 0.5).Round(time.Millisecond), Percentile(p.served, 1).Round(time.Millisecond), p.examples)
}

// every runs fn n times, spread evenly over d, until ctx ends.
func every(ctx context.Context, d time.Duration, n int, fn func(i int)) {
	step := d / time.Duration(n+1)
	for i := range n {
		select {
		case <-time.After(step):
		case <-ctx.Done():
			return
		}
		fn(i)
	}
}

// newTokenTimeout bounds the wait for a never-seen token to be accepted.
const newTokenTimeout = 10 * time.Second

// startTokenFlood floods the gateway with requests bearing fresh random
// tokens, from FloodConns connections of one address; during the phase,
// fresh valid tokens of the victim are timed to their first 200.
func startTokenFlood(ctx context.Context, env *Env, u tenantsUsers, v *tenantVictim, zt TenantsSizes, log io.Writer) *attack {
	fctx, cancel := context.WithCancel(ctx)
	flooder := identity{name: "flooder", src: loopback(11)}
	c := flooder.client(zt.FloodConns)
	ans := newRefusals()
	var sent atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	wg.Go(func() {
		paced(fctx, zt.FloodRate, zt.FloodConns, func(ctx context.Context, seq int) {
			sent.Add(1)
			id := flooder
			id.token = randomToken()
			resp, body, err := id.get(ctx, c, v.base+"/api/v1/namespaces/default/configmaps", "")
			if err != nil {
				if ctx.Err() == nil {
					ans.add(0, []byte(err.Error()), true, false)
				}
				return
			}
			ans.add(resp.StatusCode, body, true, resp.Header.Get("Retry-After") != "")
		})
	})
	probes := &probeTimes{}
	var refusedFirst atomic.Int64
	during := func(ctx context.Context) {
		every(ctx, zt.Duration, zt.NewTokens, func(int) {
			tok, err := mintToken(ctx, env, u.victimSA)
			if err != nil {
				if ctx.Err() == nil {
					probes.add(0, err)
				}
				return
			}
			id := identity{name: "victim, new token", token: tok, src: v.id.src}
			pc := id.client(1)
			defer pc.CloseIdleConnections()
			t0 := time.Now()
			for try := 0; ; try++ {
				resp, body, err := id.get(ctx, pc, v.base+v.lists[0], "")
				if ctx.Err() != nil {
					return // the phase ended: not counted
				}
				if err == nil && resp.StatusCode == http.StatusOK {
					probes.add(time.Since(t0), nil)
					return
				}
				if try == 0 {
					refusedFirst.Add(1)
				}
				if time.Since(t0) > newTokenTimeout {
					if err == nil {
						err = fmt.Errorf("%s: %.200s", resp.Status, body)
					}
					probes.add(0, fmt.Errorf("not accepted within %v: %w", newTokenTimeout, err))
					return
				}
				select {
				case <-time.After(100 * time.Millisecond):
				case <-ctx.Done():
					return
				}
			}
		})
	}
	stop := func() []Figure {
		cancel()
		wg.Wait()
		c.CloseIdleConnections()
		secs := time.Since(start).Seconds()
		sfx := attackSuffix(AttackTokenFlood)
		total := ans.total()
		fmt.Fprintf(log, "  flooder: %d requests sent, %d answered in %.1fs (%.0f/s, asked %.0f/s over %d connections); answers:%s\n",
			sent.Load(), total, secs, float64(total)/secs, zt.FloodRate, zt.FloodConns, ans)
		fmt.Fprintf(log, "  never-seen valid tokens: %s; %d refused at first\n", probes, refusedFirst.Load())
		figs := []Figure{
			{ScenarioTenants, ArmBench, "flooder: requests/s asked" + sfx, "1/s", zt.FloodRate},
			{ScenarioTenants, ArmBench, "flooder: connections" + sfx, "count", float64(zt.FloodConns)},
			{ScenarioTenants, ArmGateway, "flooder: requests/s sent" + sfx, "1/s", float64(sent.Load()) / secs},
			{ScenarioTenants, ArmGateway, "flooder: requests/s reached" + sfx, "1/s", float64(total) / secs},
			{ScenarioTenants, ArmGateway, "flooder: answered 401" + sfx, "count", float64(ans.count(401))},
			{ScenarioTenants, ArmGateway, "flooder: answered 429" + sfx, "count", float64(ans.count(429))},
			{ScenarioTenants, ArmGateway, "flooder: answered otherwise" + sfx, "count", float64(total - ans.count(401) - ans.count(429))},
			{ScenarioTenants, ArmGateway, "flooder: 429s without Retry-After or a complete Status" + sfx, "count", float64(ans.bad429.Load())},
			{ScenarioTenants, ArmGateway, "never-seen valid tokens refused at first" + sfx, "count", float64(refusedFirst.Load())},
		}
		return append(figs, probes.figures("never-seen valid token accepted:", sfx)...)
	}
	return &attack{during: during, stop: stop}
}

// startHoard has the hoarder open up to Hoard windows of distinct
// filters on its namespace's Pods, 20 per socket, and hold them; during
// the phase the victim opens windows and sorted lists of fresh filters.
func startHoard(ctx context.Context, env *Env, u tenantsUsers, v *tenantVictim, zt TenantsSizes, log io.Writer) (*attack, error) {
	const perSocket = 20 // the default subscribeBurst: no wait for the rate
	ns0 := env.Namespaces[0]
	ans := newRefusals()
	var sockets []*liveSocket
	var held atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for k := 0; k*perSocket < zt.Hoard; k++ {
		s, err := openLiveSocket(ctx, u.hoarder, v.wsURL)
		if err != nil {
			ans.add(0, []byte(err.Error()), false, false)
			continue
		}
		sockets = append(sockets, s)
		wg.Go(func() {
			for i := k * perSocket; i < min((k+1)*perSocket, zt.Hoard); i++ {
				wctx, cancel := context.WithTimeout(ctx, time.Minute)
				err := s.window(wctx, windowSubscribe{ID: fmt.Sprintf("h%d", i), Namespace: ns0, Sort: "metadata.name", Filter: fmt.Sprintf("%03d", i%1000)}, 0)
				cancel()
				var fe *frameError
				switch {
				case err == nil:
					held.Add(1)
					ans.add(200, nil, false, false)
				case errors.As(err, &fe):
					ans.add(fe.code(), fe.statusJSON(), false, false)
				default:
					ans.add(0, []byte(err.Error()), false, false)
				}
			}
		})
	}
	wg.Wait()
	fmt.Fprintf(log, "  hoarder: %d of %d windows held after %v on %d sockets; answers:%s\n", held.Load(), zt.Hoard,
		time.Since(t0).Round(time.Millisecond), len(sockets), ans)
	windows, lists := &probeTimes{}, &probeTimes{}
	during := func(ctx context.Context) {
		pc := v.id.client(1)
		defer pc.CloseIdleConnections()
		every(ctx, zt.Duration, 6, func(i int) {
			id := fmt.Sprintf("probe-%d", i)
			t := time.Now()
			err := v.sock.window(ctx, windowSubscribe{ID: id, Sort: "Age", Filter: fmt.Sprintf("web-0%d", i)}, 0)
			if ctx.Err() != nil {
				return
			}
			windows.add(time.Since(t), err)
			if err == nil {
				_ = v.sock.unsubscribe(ctx, id)
			}
			t = time.Now()
			resp, body, err := v.id.get(ctx, pc, v.base+"/api/v1/pods?"+sortQuery(i, "filter="+fmt.Sprintf("web-1%d", i)), "")
			if ctx.Err() != nil {
				return
			}
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("%s: %.200s", resp.Status, body)
			}
			lists.add(time.Since(t), err)
		})
	}
	stop := func() []Figure {
		for _, s := range sockets {
			s.close()
		}
		sfx := attackSuffix(AttackViewHoard)
		fmt.Fprintf(log, "  victim during the hoard: new windows %s; new sorted lists %s\n", windows, lists)
		figs := []Figure{
			{ScenarioTenants, ArmBench, "hoarder: windows tried" + sfx, "count", float64(zt.Hoard)},
			{ScenarioTenants, ArmGateway, "hoarder: windows held" + sfx, "count", float64(held.Load())},
		}
		figs = append(figs, answerFigures(ScenarioTenants, "hoarder: windows", sfx, ans)...)
		figs = append(figs, windows.figures("victim new window during the hoard:", sfx)...)
		return append(figs, lists.figures("victim new sorted list during the hoard:", sfx)...)
	}
	return &attack{during: during, stop: stop}, nil
}

// startReviewFlood has the reviewer list ConfigMaps of every namespace by
// a random name at ReviewRate.
func startReviewFlood(ctx context.Context, u tenantsUsers, v *tenantVictim, zt TenantsSizes, log io.Writer) *attack {
	fctx, cancel := context.WithCancel(ctx)
	c := u.reviewer.client(256)
	ans := newRefusals()
	var mu sync.Mutex
	var lat []time.Duration
	var sent atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	wg.Go(func() {
		// As many in flight as the user's limit allows: the rate, not
		// the answers, sets the pace.
		paced(fctx, zt.ReviewRate, 256, func(ctx context.Context, seq int) {
			sent.Add(1)
			t0 := time.Now()
			resp, body, err := u.reviewer.get(ctx, c, v.base+"/api/v1/configmaps?"+fieldNameQuery(), "")
			d := time.Since(t0)
			if err != nil {
				if ctx.Err() == nil {
					ans.add(0, []byte(err.Error()), true, false)
				}
				return
			}
			ans.add(resp.StatusCode, body, true, resp.Header.Get("Retry-After") != "")
			if resp.StatusCode == http.StatusOK {
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		})
	})
	stop := func() []Figure {
		cancel()
		wg.Wait()
		c.CloseIdleConnections()
		secs := time.Since(start).Seconds()
		sfx := attackSuffix(AttackReviewFlood)
		fmt.Fprintf(log, "  reviewer: %d requests sent, %d answered in %.1fs (%.1f/s), %d with 200 (p50 %v, p99 %v); answers:%s\n", sent.Load(), ans.total(), secs,
			float64(ans.total())/secs, len(lat), Percentile(lat, 0.5).Round(time.Millisecond), Percentile(lat, 0.99).Round(time.Millisecond), ans)
		figs := []Figure{
			{ScenarioTenants, ArmGateway, "reviewer: requests/s sent" + sfx, "1/s", float64(sent.Load()) / secs},
			{ScenarioTenants, ArmGateway, "reviewer: requests/s reached" + sfx, "1/s", float64(ans.total()) / secs},
			{ScenarioTenants, ArmGateway, "reviewer: requests answered 200" + sfx, "count", float64(ans.count(200))},
		}
		figs = append(figs, latencyFigures(ScenarioTenants, ArmGateway, "reviewer: list latency", sfx, lat)...)
		return append(figs, answerFigures(ScenarioTenants, "reviewer: requests", sfx, ans)...)
	}
	return &attack{stop: stop}
}

// filledSocket is a socket of a socket filler; its reader notes how it
// ended.
type filledSocket struct {
	owner  int
	c      *websocket.Conn
	closed chan struct{}
	code   websocket.StatusCode // read after closed
}

// startSocketFill has every filler open up to SocketsPerIdentity sockets
// and hold them; during the phase the victim connects new sockets, each
// to its first window.
func startSocketFill(ctx context.Context, u tenantsUsers, v *tenantVictim, zt TenantsSizes, log io.Writer) (*attack, error) {
	type job struct{ owner int }
	var jobs []job
	for range zt.SocketsPerIdentity {
		for i := range u.fillers {
			jobs = append(jobs, job{i})
		}
	}
	var (
		mu       sync.Mutex // guards sockets and refused
		sockets  []*filledSocket
		refused  = newRefusals()
		rctx, rc = context.WithCancel(context.Background())
	)
	t0 := time.Now()
	err := openParallel(ctx, make([]*subscriber, len(jobs)), func(ctx context.Context, k int, _ *subscriber) error {
		owner := jobs[k].owner
		c, resp, err := u.fillers[owner].dialWS(ctx, v.wsURL)
		if err != nil {
			code := 0
			if resp != nil {
				code = resp.StatusCode
			}
			refused.add(code, []byte(err.Error()), false, false)
			return ctx.Err()
		}
		fs := &filledSocket{owner: owner, c: c, closed: make(chan struct{})}
		go func() {
			defer close(fs.closed)
			for {
				if _, _, err := c.Read(rctx); err != nil {
					fs.code = websocket.CloseStatus(err)
					return
				}
			}
		}()
		mu.Lock()
		sockets = append(sockets, fs)
		mu.Unlock()
		return nil
	})
	closeAll := func() {
		rc()
		for _, s := range sockets {
			s.c.CloseNow()
			<-s.closed
		}
	}
	if err != nil {
		closeAll()
		return nil, err
	}
	// Sockets over a cap are accepted, then closed: give the closes time
	// to arrive.
	time.Sleep(time.Second)
	held := func() (total, lo, hi int, byCode map[websocket.StatusCode]int) {
		per := make([]int, len(u.fillers))
		byCode = map[websocket.StatusCode]int{}
		for _, s := range sockets {
			select {
			case <-s.closed:
				byCode[s.code]++
			default:
				per[s.owner]++
				total++
			}
		}
		lo, hi = zt.SocketsPerIdentity, 0
		for _, n := range per {
			lo, hi = min(lo, n), max(hi, n)
		}
		return total, lo, hi, byCode
	}
	total, lo, hi, byCode := held()
	fmt.Fprintf(log, "  socket fillers: %d identities opened %d sockets in %v: %d held (%d to %d each), closed by the gateway %v; refused at the handshake:%s\n",
		len(u.fillers), len(sockets), time.Since(t0).Round(time.Millisecond), total, lo, hi, byCode, refused)
	conns := &probeTimes{}
	during := func(ctx context.Context) {
		every(ctx, zt.Duration, 6, func(i int) {
			t := time.Now()
			var d time.Duration
			s, err := openLiveSocket(ctx, v.id, v.wsURL)
			if err == nil {
				err = s.window(ctx, nameWindow(fmt.Sprintf("new-%d", i), 0), 0)
				d = time.Since(t)
				if err == nil {
					// A socket over a cap is closed just after it opens.
					time.Sleep(100 * time.Millisecond)
					if f := s.failuresSince(0); len(f) > 0 {
						err = errors.New(f[0])
					}
				}
				s.close()
			}
			if ctx.Err() == nil {
				conns.add(d, err)
			}
		})
	}
	stop := func() []Figure {
		total, lo, hi, byCode := held()
		closeAll()
		sfx := attackSuffix(AttackSocketFill)
		fmt.Fprintf(log, "  socket fillers at the end: %d held (%d to %d each), closed by the gateway %v; victim's new sockets: %s\n", total, lo, hi, byCode, conns)
		figs := []Figure{
			{ScenarioTenants, ArmBench, "socket fillers: identities" + sfx, "count", float64(len(u.fillers))},
			{ScenarioTenants, ArmBench, "socket fillers: sockets tried" + sfx, "count", float64(len(jobs))},
			{ScenarioTenants, ArmGateway, "socket fillers: sockets held" + sfx, "count", float64(total)},
			{ScenarioTenants, ArmGateway, "socket fillers: sockets held per identity (min)" + sfx, "count", float64(lo)},
			{ScenarioTenants, ArmGateway, "socket fillers: sockets held per identity (max)" + sfx, "count", float64(hi)},
			{ScenarioTenants, ArmGateway, "socket fillers: sockets closed by the gateway" + sfx, "count", float64(len(sockets) - total)},
			{ScenarioTenants, ArmGateway, "socket fillers: sockets refused at the handshake" + sfx, "count", float64(refused.total())},
		}
		return append(figs, conns.figures("victim new socket to its first window:", sfx)...)
	}
	return &attack{during: during, stop: stop}, nil
}
