package scenario

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"kubegate/bench/workload"

	"github.com/coder/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The relist scenario: subscribers on every arm while updates flow, and in
// the middle of them kube-apiserver is stopped and started again. Every
// arm has to survive it as a real client would:
//
//   - kube-apiserver's watchers re-watch from the last resourceVersion they
//     saw, retrying while it is down, and relist (LIST, then watch from the
//     list's resourceVersion) when the watch answers 410 Gone or an ERROR
//     event, as client-go's reflector does;
//   - the gateway's sockets stay up (the gateway did not restart), and its
//     upstream re-watches or relists; a subscriber whose socket drops
//     resumes with its last resourceVersion as in the reconnect scenario,
//     and one that gets RESET takes the snapshot that follows.
//
// A relist or a snapshot is taken as an informer takes it: every object
// whose resourceVersion is newer than the phase's start and not yet seen
// counts as that write received; one seen already is not a duplicate.
// Events on a stream are recorded as they come, so a stream that repeats
// one counts as duplicated.
//
// The restart alone does not make the gateway relist: kube-apiserver sends
// a last bookmark to every watcher that asked for them as it shuts down,
// and the new watch cache starts at etcd's revision, so the reflector
// resumes exactly. A write to etcd while kube-apiserver is down (another
// kube-apiserver of an HA control plane would make one) moves the
// revision on: the new watch cache starts past the gateway's bookmark and
// answers its watch with 410, and the gateway relists. The gateway's
// kubegate_cache_relists_total for Pods, before and after, shows it did.

// relistWatcher is one subscriber of the relist scenario. Its goroutine
// is the only writer of its fields until it has exited.
type relistWatcher struct {
	namespace string
	// from is the resourceVersion the phase started at: objects at or
	// below it are unchanged since.
	from uint64
	// last is the resume point.
	last uint64
	// seen holds every resourceVersion received (events and relists).
	seen map[uint64]bool
	// events are the stream's events in order, duplicates included.
	events []uint64
	count  atomic.Int64
	// reconnects, relists and snapshots count what the watcher had to do.
	reconnects, relists, snapshots int
}

func newRelistWatcher(ns string, from uint64) *relistWatcher {
	return &relistWatcher{namespace: ns, from: from, last: from, seen: map[uint64]bool{}}
}

// event records a change that arrived on a stream.
func (w *relistWatcher) event(rv uint64) {
	w.events = append(w.events, rv)
	w.seen[rv] = true
	w.last = rv
	w.count.Add(1)
}

// listed records an object of a list or snapshot: a change if it is newer
// than the phase's start and new to the watcher.
func (w *relistWatcher) listed(rv uint64) {
	if rv > w.from && !w.seen[rv] {
		w.events = append(w.events, rv)
		w.seen[rv] = true
		w.count.Add(1)
	}
}

// relistArm runs watchers against one server until ctx ends.
type relistArm interface {
	Name() string
	run(ctx context.Context, w *relistWatcher)
}

// retryPause is how long a watcher waits before reconnecting.
const retryPause = 200 * time.Millisecond

func pause(ctx context.Context) {
	select {
	case <-time.After(retryPause):
	case <-ctx.Done():
	}
}

// apiRelistArm watches kube-apiserver with JSON or protobuf over HTTP/1.1,
// one connection per watch, and lists with client-go's typed client in the
// same encoding.
type apiRelistArm struct {
	name   string
	proto  bool
	host   string
	token  string
	client *http.Client
	lister kubernetes.Interface
}

func newAPIRelistArm(env *Env, proto bool) (*apiRelistArm, error) {
	c, err := http1Client(env.APIServer)
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(env.APIServer)
	cfg.ContentType, cfg.AcceptContentTypes = "application/json", "application/json"
	cfg.DisableCompression = true
	name := ArmJSON
	if proto {
		cfg, name = protoConfig(env.APIServer), ArmProto
	}
	lister, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &apiRelistArm{name: name, proto: proto, host: env.APIServer.Host, token: env.APIServer.BearerToken, client: c, lister: lister}, nil
}

func (a *apiRelistArm) Name() string { return a.name }

func (a *apiRelistArm) run(ctx context.Context, w *relistWatcher) {
	defer a.client.CloseIdleConnections()
	for ctx.Err() == nil {
		// A watch that ends without a 410 is resumed from w.last, whatever
		// ended it.
		expired, _ := a.watch(ctx, w)
		if ctx.Err() != nil {
			return
		}
		if expired {
			if err := a.relist(ctx, w); err != nil {
				pause(ctx)
			}
			continue
		}
		w.reconnects++
		pause(ctx)
	}
}

// watch watches from w.last until the stream ends. expired reports a 410
// or an ERROR event: the watcher must relist.
func (a *apiRelistArm) watch(ctx context.Context, w *relistWatcher) (expired bool, err error) {
	q := url.Values{"watch": {"1"}, "resourceVersion": {strconv.FormatUint(w.last, 10)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.host+podsPath(w.namespace)+"?"+q.Encode(), nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	if a.proto {
		req.Header.Set("Accept", "application/vnd.kubernetes.protobuf;stream=watch")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusGone:
		return true, nil
	default:
		return false, fmt.Errorf("watch: %s", resp.Status)
	}
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	var buf []byte
	for {
		var (
			typ []byte
			rv  uint64
		)
		if a.proto {
			if buf, err = readProtoFrame(br, buf); err != nil {
				return false, err
			}
			var perr error
			typ, rv, perr = scanProtoEvent(buf)
			if string(typ) == "ERROR" {
				return true, nil
			}
			if perr != nil {
				return false, perr
			}
		} else {
			line, err := readLine(br)
			if err != nil {
				return false, err
			}
			var ok bool
			typ, rv, ok = scanWatchEvent(line)
			if !ok {
				return false, fmt.Errorf("bad watch event: %.200s", line)
			}
			if string(typ) == "ERROR" {
				return true, nil
			}
		}
		switch string(typ) {
		case "ADDED", "MODIFIED", "DELETED":
			w.event(rv)
		case "BOOKMARK":
			w.last = rv
		}
	}
}

// readLine reads one line of a JSON watch stream; only its head is kept
// (scanWatchEvent reads the type and metadata at the front).
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	head := line
	for errors.Is(err, bufio.ErrBufferFull) {
		if len(head) == len(line) {
			head = append([]byte(nil), line[:min(len(line), 2048)]...)
		}
		_, err = br.ReadSlice('\n')
	}
	return head, err
}

// relist lists the watcher's scope and continues from the list's
// resourceVersion.
func (a *apiRelistArm) relist(ctx context.Context, w *relistWatcher) error {
	l, err := a.lister.CoreV1().Pods(w.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	rv, err := strconv.ParseUint(l.ResourceVersion, 10, 64)
	if err != nil {
		return err
	}
	for i := range l.Items {
		if r, err := strconv.ParseUint(l.Items[i].ResourceVersion, 10, 64); err == nil {
			w.listed(r)
		}
	}
	w.relists++
	w.last = rv
	return nil
}

// gatewayRelistArm subscribes through the gateway's /ws, one subscription
// per socket, resuming with the last resourceVersion when a socket drops.
type gatewayRelistArm struct{ url string }

func (a *gatewayRelistArm) Name() string { return ArmGateway }

func (a *gatewayRelistArm) run(ctx context.Context, w *relistWatcher) {
	for ctx.Err() == nil {
		_ = a.session(ctx, w)
		if ctx.Err() != nil {
			return
		}
		w.reconnects++
		pause(ctx)
	}
}

// session is one socket: subscribe from w.last, then record frames until
// the socket ends. After a RESET the snapshot that follows is taken as a
// relist, up to END_OF_SNAPSHOT, whose rv is the new resume point.
func (a *gatewayRelistArm) session(ctx context.Context, w *relistWatcher) error {
	c, _, err := websocket.Dial(ctx, a.url, &websocket.DialOptions{Subprotocols: []string{"kubegate.v1"}})
	if err != nil {
		return err
	}
	defer c.CloseNow()
	c.SetReadLimit(-1)
	f := subscribeFrame{Type: "subscribe", ID: "s", Resource: "pods", Namespace: w.namespace,
		SendInitialEvents: new(bool), ResourceVersion: strconv.FormatUint(w.last, 10)}
	b, _ := json.Marshal(f)
	if err := c.Write(ctx, websocket.MessageText, b); err != nil {
		return err
	}
	var buf bytes.Buffer
	inSnapshot := false
	for {
		_, r, err := c.Reader(ctx)
		if err != nil {
			return err
		}
		buf.Reset()
		if _, err := buf.ReadFrom(r); err != nil {
			return err
		}
		var ferr error
		err = scanFrames(buf.Bytes(), func(typ, id, rvb []byte) {
			rv, _ := strconv.ParseUint(string(rvb), 10, 64)
			switch string(typ) {
			case "RESET":
				inSnapshot = true
				w.snapshots++
			case "ADDED":
				if inSnapshot {
					w.listed(rv)
				} else {
					w.event(rv)
				}
			case "END_OF_SNAPSHOT":
				inSnapshot = false
				w.last = rv
			case "MODIFIED", "DELETED":
				w.event(rv)
			case "error":
				ferr = fmt.Errorf("error frame: %.300s", buf.Bytes())
			}
		})
		if err != nil {
			return err
		}
		if ferr != nil {
			return ferr
		}
	}
}

// scenarioRelist runs z.Relist subscribers per arm (each watching one
// namespace, plus one watching all), writes z.RelistUpdates updates at
// z.RelistRate, restarts kube-apiserver when half of them are written, and
// checks every subscriber against the writes and the final state.
func scenarioRelist(ctx context.Context, env *Env, z Sizes, log io.Writer) ([]Figure, error) {
	pods := make([]workload.PodKey, env.Workload.Pods)
	for j := range pods {
		pods[j] = workload.PodAt(j, len(env.Namespaces))
	}
	// At most one write per Pod, so every write is its Pod's final state
	// and a relist that collapses versions cannot hide a missed one.
	plan := workload.UpdatePlan{Count: min(z.RelistUpdates, len(pods)), Rate: z.RelistRate, Retry: true}

	jsonArm, err := newAPIRelistArm(env, false)
	if err != nil {
		return nil, err
	}
	protoArm, err := newAPIRelistArm(env, true)
	if err != nil {
		return nil, err
	}
	arms := []relistArm{&gatewayRelistArm{url: strings.Replace(env.GatewayURL, "http://", "ws://", 1) + "/ws"}, jsonArm, protoArm}

	relists0, counted, err := gatewayRelists(ctx, env)
	if err != nil {
		return nil, err
	}
	from, err := currentRV(ctx, env.Client())
	if err != nil {
		return nil, err
	}
	watchers := map[string][]*relistWatcher{}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	for _, a := range arms {
		for i := range z.Relist + 1 {
			ns := ""
			if i < z.Relist {
				ns = env.Namespaces[i%len(env.Namespaces)]
			}
			w := newRelistWatcher(ns, from)
			watchers[a.Name()] = append(watchers[a.Name()], w)
			wg.Go(func() { a.run(wctx, w) })
		}
	}
	// Give every watch time to be established before writing (the
	// watchers start from `from`, so nothing is lost either way).
	time.Sleep(z.Settle)

	type result struct {
		writes []workload.Write
		err    error
	}
	done := make(chan result, 1)
	t0 := time.Now()
	go func() {
		w, _, err := workload.Update(ctx, env.Client(), pods, plan)
		done <- result{w, err}
	}()
	// Restart kube-apiserver once half the writes are due.
	halfway := time.Duration(float64(plan.Count) / plan.Rate / 2 * float64(time.Second))
	select {
	case <-time.After(halfway):
	case <-ctx.Done():
	}
	fmt.Fprintf(log, "  restarting kube-apiserver %v into the writes\n", time.Since(t0).Round(time.Millisecond))
	t1 := time.Now()
	if err := env.cp.StopAPIServer(); err != nil {
		stop()
		wg.Wait()
		return nil, fmt.Errorf("stop kube-apiserver: %w", err)
	}
	down := time.Since(t1)
	// Another writer moves etcd's revision on while kube-apiserver is
	// down, as the other kube-apiservers of a real control plane would.
	// Without it the gateway resumes exactly: kube-apiserver sends every
	// watcher that asked for bookmarks (the reflector does) a last one as
	// it shuts down, and the new watch cache starts at that revision.
	if err := etcdPut(ctx, env.cp.EtcdURL(), "/kubegate-bench/relist", time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
		stop()
		wg.Wait()
		return nil, fmt.Errorf("write to etcd: %w", err)
	}
	if err := env.cp.StartAPIServer(ctx); err != nil {
		stop()
		wg.Wait()
		return nil, fmt.Errorf("start kube-apiserver: %w", err)
	}
	env.APIServerPID = env.cp.APIServerPID()
	outage := time.Since(t1)
	fmt.Fprintf(log, "  kube-apiserver stopped in %v, back after %v (pid %d)\n", down.Round(time.Millisecond), outage.Round(time.Millisecond), env.APIServerPID)
	res := <-done
	if res.err != nil {
		stop()
		wg.Wait()
		return nil, res.err
	}
	writes := res.writes
	fmt.Fprintf(log, "  %d writes in %v\n", len(writes), time.Since(t0).Round(time.Millisecond))

	// The final state: what every subscriber must have reached.
	final, err := env.Client().CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		stop()
		wg.Wait()
		return nil, err
	}
	type change struct {
		ns  string
		rv  uint64
		pod int
	}
	var changed []change // Pods written in the phase, at their final version
	for i := range final.Items {
		p := &final.Items[i]
		rv, _ := strconv.ParseUint(p.ResourceVersion, 10, 64)
		if rv > from {
			changed = append(changed, change{ns: p.Namespace, rv: rv})
		}
	}
	wrote := map[uint64]workload.Write{}
	for _, w := range writes {
		wrote[w.RV] = w
	}
	inScope := func(w *relistWatcher, ns string) bool { return w.namespace == "" || w.namespace == ns }
	expect := func(w *relistWatcher) int {
		n := 0
		for _, c := range changed {
			if inScope(w, c.ns) {
				n++
			}
		}
		return n
	}
	drained := waitFor(ctx, z.Drain, func() bool {
		for _, ws := range watchers {
			for _, w := range ws {
				if int(w.count.Load()) < expect(w) {
					return false
				}
			}
		}
		return true
	})
	// Whatever arrives after this is not counted.
	stop()
	wg.Wait()
	if !drained {
		fmt.Fprintf(log, "  not every subscriber reached the final state within %v\n", z.Drain)
	}
	relists1, _, err := gatewayRelists(ctx, env)
	if err != nil {
		return nil, err
	}

	var figs []Figure
	for _, a := range arms {
		var missed, finalMissed, dup, reordered, reconnects, relists, snapshots int
		for _, w := range watchers[a.Name()] {
			reconnects += w.reconnects
			relists += w.relists
			snapshots += w.snapshots
			got := map[uint64]int{}
			lastOfPod := map[int]uint64{}
			for _, rv := range w.events {
				got[rv]++
				if got[rv] > 1 {
					dup++
					continue
				}
				if wr, ok := wrote[rv]; ok {
					if rv < lastOfPod[wr.Pod] {
						reordered++
					}
					lastOfPod[wr.Pod] = rv
				}
			}
			for _, wr := range writes {
				if inScope(w, pods[wr.Pod].Namespace) && got[wr.RV] == 0 {
					missed++
				}
			}
			for _, c := range changed {
				if inScope(w, c.ns) && got[c.rv] == 0 {
					finalMissed++
				}
			}
		}
		fmt.Fprintf(log, "  %s: %d subscribers; missed %d writes, final state missed %d, duplicated %d, out of order %d; %d reconnects, %d relists, %d snapshots\n",
			a.Name(), len(watchers[a.Name()]), missed, finalMissed, dup, reordered, reconnects, relists, snapshots)
		figs = append(figs,
			Figure{"relist", a.Name(), "missed", "count", float64(missed)},
			Figure{"relist", a.Name(), "final state not reached", "count", float64(finalMissed)},
			Figure{"relist", a.Name(), "duplicated", "count", float64(dup)},
			Figure{"relist", a.Name(), "out of order", "count", float64(reordered)},
			Figure{"relist", a.Name(), "reconnects", "count", float64(reconnects)},
		)
		if a.Name() == ArmGateway {
			figs = append(figs, Figure{"relist", a.Name(), "snapshots after RESET", "count", float64(snapshots)})
		} else {
			figs = append(figs, Figure{"relist", a.Name(), "relists", "count", float64(relists)})
		}
	}
	if counted {
		fmt.Fprintf(log, "  gateway upstream relists of pods: %.0f\n", relists1-relists0)
		figs = append(figs, Figure{"relist", ArmGateway, "upstream relists", "count", relists1 - relists0})
	} else {
		fmt.Fprintf(log, "  this gateway does not export kubegate_cache_relists_total: its relists are not counted\n")
	}
	figs = append(figs,
		Figure{"relist", ArmBench, "writes", "count", float64(len(writes))},
		Figure{"relist", ArmBench, "kube-apiserver outage", "ms", Milliseconds(outage)},
	)
	return figs, nil
}

// gatewayRelists is the gateway's kubegate_cache_relists_total for Pods;
// found is false when the gateway does not export it (builds before the
// upstream's rewrite).
func gatewayRelists(ctx context.Context, env *Env) (n float64, found bool, err error) {
	return gatewayPodsMetric(ctx, env, "kubegate_cache_relists_total")
}

// etcdPut writes one key through etcd's JSON gateway (/v3/kv/put).
func etcdPut(ctx context.Context, etcd, key, value string) error {
	body, _ := json.Marshal(map[string]string{
		"key":   base64.StdEncoding.EncodeToString([]byte(key)),
		"value": base64.StdEncoding.EncodeToString([]byte(value)),
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, etcd+"/v3/kv/put", bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, b)
	}
	return nil
}
