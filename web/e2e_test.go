package web_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"kubegate/internal/auth"
	"kubegate/internal/controlplane"
	httpapi "kubegate/internal/http"
	"kubegate/internal/informer"
	"kubegate/internal/testenv"
	"kubegate/internal/ws"
	"kubegate/web"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Users: []controlplane.User{{Name: "alice"}}})
}

// liveBudget is how soon a change made through the apiserver must show in
// the page.
const liveBudget = time.Second

// gatewayOptions adjusts the in-process gateway of one test.
type gatewayOptions struct {
	informer func(*informer.Options)
	http     func(*httpapi.Options)
}

// startGateway runs an informer.Manager, the WebSocket server and the HTTP
// server with the dashboard, against the package's apiserver, until the
// test ends. It returns the gateway's base URL.
func startGateway(t *testing.T, o gatewayOptions) string {
	t.Helper()
	env := testenv.Get(t)
	reg := prometheus.NewRegistry()
	iopts := informer.Options{Config: env.Config, Logger: zaptest.NewLogger(t).Named("informer"), Registerer: reg}
	if o.informer != nil {
		o.informer(&iopts)
	}
	mgr, err := informer.New(iopts)
	if err != nil {
		t.Fatal(err)
	}
	wsServer, err := ws.New(ws.Options{Manager: mgr, Logger: zaptest.NewLogger(t).Named("ws"), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hopts := httpapi.Options{Manager: mgr, Listener: ln, Registry: reg, Logger: zaptest.NewLogger(t).Named("http"),
		WebSocket: wsServer, Web: web.Handler(), ShutdownTimeout: 5 * time.Second}
	if o.http != nil {
		o.http(&hopts)
	}
	srv, err := httpapi.New(hopts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for name, start := range map[string]func(context.Context) error{"manager": mgr.Start, "http": srv.Start, "ws": wsServer.Start} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := start(ctx); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}()
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return "http://" + ln.Addr().String()
}

// chromiumPath finds Debian's chromium ($CHROMIUM overrides). Without it
// the end-to-end tests fail, except under -short where they are skipped.
func chromiumPath(t *testing.T) string {
	t.Helper()
	p := os.Getenv("CHROMIUM")
	if p == "" {
		p = "/usr/bin/chromium"
	}
	if _, err := exec.LookPath(p); err != nil {
		msg := fmt.Sprintf("chromium not found at %s (install it with `apt-get install -y chromium` or set $CHROMIUM): %v", p, err)
		if testing.Short() {
			t.Skip(msg)
		}
		t.Fatal(msg)
	}
	return p
}

// newBrowser starts a headless chromium for the test and returns a tab's
// context. Uncaught exceptions and console errors in the page fail the test.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		acancel()
		t.Fatalf("start chromium: %v", err)
	}
	// The listener runs in chromedp's reading goroutine: it only records.
	var (
		mu       sync.Mutex // guards problems
		problems []string
	)
	err := chromedp.Listen(ctx, func(ev any) {
		var p string
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			p = "page exception: " + ev.ExceptionDetails.Text
			if ex := ev.ExceptionDetails.Exception; ex != nil {
				p += " " + ex.Description
			}
		case *runtime.EventConsoleAPICalled:
			if ev.Type != runtime.ConsoleAPICalledTypeError {
				return
			}
			var args []string
			for _, a := range ev.Args {
				args = append(args, string(a.Value)+a.Description)
			}
			p = "console.error: " + strings.Join(args, " ")
		default:
			return
		}
		mu.Lock()
		problems = append(problems, p)
		mu.Unlock()
	})
	if err != nil {
		acancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		acancel()
		mu.Lock()
		defer mu.Unlock()
		for _, p := range problems {
			t.Error(p)
		}
	})
	return ctx
}

// waitFor polls a JavaScript boolean expression in the page until it holds
// or timeout passes, and returns how long that took.
func waitFor(t *testing.T, ctx context.Context, timeout time.Duration, what, expr string) time.Duration {
	t.Helper()
	start := time.Now()
	var last error
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		if last = err; err != nil {
			return false, nil
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %v (last evaluation error: %v)\n  expression: %s\n  page: %s", what, timeout, last, expr, pageState(ctx))
	}
	return time.Since(start)
}

// pageState describes the page for failure messages.
func pageState(ctx context.Context) string {
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify({conn: document.getElementById("conn").textContent,
		count: document.getElementById("count").textContent, error: document.getElementById("sub-error").textContent,
		rows: [...document.querySelectorAll("#rows .row")].slice(0, 20).map(r => r.innerText.replace(/\s+/g, " ")),
		log: [...document.querySelectorAll("#log li")].slice(0, 10).map(l => l.innerText)})`))
	return s
}

// row is the JavaScript for the table row of namespace/name (or null).
func row(ns, name string) string {
	return fmt.Sprintf(`([...document.querySelectorAll("#rows .row")].find((r) => r.dataset.key === %s) ?? null)`, strconv.Quote(ns+"/"+name))
}

// cellIs is the JavaScript condition "the row's cell has this text".
func cellIs(ns, name, cell, text string) string {
	return fmt.Sprintf(`(%s?.querySelector(".c-%s")?.textContent === %s)`, row(ns, name), cell, strconv.Quote(text))
}

// screenshot saves the page as a test artifact in $KUBEGATE_ARTIFACTS (or
// the test's temp dir) and returns the file's path.
func screenshot(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100 is PNG
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	dir := os.Getenv("KUBEGATE_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
	return p
}

// evalVoid runs JavaScript for its effect.
func evalVoid(expr string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Evaluate[bool]("("+expr+", true)")(ctx, t)
		return chromedp.Void{}, err
	}
}

func configMap(name string, labels map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Data: map[string]string{"k": "v"}}
}

// The table shows the objects; a create, an update and a delete through the
// apiserver show in the page within liveBudget; a click shows the object.
func TestDashboardLive(t *testing.T) {
	env := testenv.Get(t)
	ctx := newBrowser(t)
	base := startGateway(t, gatewayOptions{})
	ns := env.Namespace(t)
	cms := env.Client.CoreV1().ConfigMaps(ns)
	for i := range 3 {
		if _, err := cms.Create(t.Context(), configMap(fmt.Sprintf("cm-%d", i), map[string]string{"app": "web"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/#resource=configmaps&namespace="+ns)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 30*time.Second, "snapshot", `document.body.dataset.synced !== "" && document.getElementById("count").textContent === "3"`)
	for i := range 3 {
		waitFor(t, ctx, time.Second, "row cm-"+strconv.Itoa(i), cellIs(ns, fmt.Sprintf("cm-%d", i), "labels", "app=web"))
	}
	waitFor(t, ctx, 5*time.Second, "connected", `kubegate.connection === "connected"`)

	// Create.
	if _, err := cms.Create(t.Context(), configMap("live", map[string]string{"app": "new"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := waitFor(t, ctx, liveBudget, "created object", cellIs(ns, "live", "labels", "app=new")+` && `+row(ns, "live")+`.classList.contains("changed")`)
	t.Logf("create visible after %v", d)

	// Update.
	cm, err := cms.Get(t.Context(), "live", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Labels["tier"] = "front"
	if _, err := cms.Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	d = waitFor(t, ctx, liveBudget, "updated object", cellIs(ns, "live", "labels", "app=new, tier=front"))
	t.Logf("update visible after %v", d)

	// Delete.
	if err := cms.Delete(t.Context(), "cm-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	d = waitFor(t, ctx, liveBudget, "deleted object", row(ns, "cm-0")+` === null && document.getElementById("count").textContent === "3"`)
	t.Logf("delete visible after %v", d)

	waitFor(t, ctx, time.Second, "event log", `(() => { const t = document.getElementById("log").innerText;
		return /ADDED\s+configmaps \S+\/live/.test(t) && /MODIFIED\s+configmaps \S+\/live/.test(t) && /DELETED\s+configmaps \S+\/cm-0/.test(t); })()`)
	screenshot(t, ctx, "dashboard-live.png")

	// Object detail from REST get, as YAML then JSON.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#rows .row[data-key="`+ns+`/live"]`))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 5*time.Second, "YAML view", `document.getElementById("object").open && document.getElementById("object-body").textContent.includes("name: live\n") && document.getElementById("object-body").textContent.includes("tier: front")`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#fmt-json`))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, time.Second, "JSON view", `JSON.parse(document.getElementById("object-body").textContent).metadata.name === "live"`)
}

// Pods show their phase; a status change shows in place.
func TestDashboardPodStatus(t *testing.T) {
	env := testenv.Get(t)
	ctx := newBrowser(t)
	base := startGateway(t, gatewayOptions{})
	ns := env.Namespace(t)
	pods := env.Client.CoreV1().Pods(ns)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"app": "x"}},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	pod, err := pods.Create(t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/#resource=pods&namespace="+ns+"&labels=app%3Dx")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 30*time.Second, "pending pod", cellIs(ns, "p", "status", "Pending"))
	pod.Status.Phase = corev1.PodRunning
	if _, err := pods.UpdateStatus(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, liveBudget, "running pod", cellIs(ns, "p", "status", "Running"))
	// The label selector applies: another pod stays out of the table.
	other := pod.DeepCopy()
	other.ObjectMeta = metav1.ObjectMeta{Name: "q", Labels: map[string]string{"app": "y"}}
	other.Status = corev1.PodStatus{}
	if _, err := pods.Create(t.Context(), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, time.Second, "log shows only selected pods", `!document.getElementById("log").innerText.includes("/q") && document.getElementById("count").textContent === "1"`)

	// A bad selector is named in the page; a good one recovers.
	apply := func(sel string) {
		t.Helper()
		if err := chromedp.Do(ctx, evalVoid(fmt.Sprintf(`document.getElementById("selector").value = %s`, strconv.Quote(sel))),
			chromedp.Click(chromedp.CSS(`#query button[type=submit]`))); err != nil {
			t.Fatal(err)
		}
	}
	apply("app in (x")
	waitFor(t, ctx, 5*time.Second, "selector error", `document.getElementById("sub-error").textContent.length > 2 && document.getElementById("count").textContent === "0"`)
	apply("app=y")
	waitFor(t, ctx, 5*time.Second, "recovered", `document.getElementById("sub-error").textContent === "" && `+row(ns, "q")+` !== null && `+row(ns, "p")+` === null && location.hash.includes("labels=app%3Dy")`)
}

// A reconnect inside the gateway's history resumes without a snapshot; one
// outside it gets RESET and the page redraws from the fresh snapshot.
func TestDashboardResumeAndReset(t *testing.T) {
	env := testenv.Get(t)
	ctx := newBrowser(t)
	const history = 20
	base := startGateway(t, gatewayOptions{informer: func(o *informer.Options) { o.HistoryEvents = history }})
	ns := env.Namespace(t)
	cms := env.Client.CoreV1().ConfigMaps(ns)
	for _, n := range []string{"a", "b"} {
		if _, err := cms.Create(t.Context(), configMap(n, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/#resource=configmaps&namespace="+ns)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 30*time.Second, "snapshot", `document.body.dataset.synced !== "" && document.getElementById("count").textContent === "2"`)

	// Inside the history: the missed change arrives, no RESET.
	if err := chromedp.Do(ctx, evalVoid(`kubegate.disconnect()`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 5*time.Second, "offline", `kubegate.connection === "reconnecting"`)
	if _, err := cms.Create(t.Context(), configMap("c", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, evalVoid(`kubegate.connect()`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 5*time.Second, "resumed", `kubegate.connection === "connected" && `+row(ns, "c")+` !== null && document.getElementById("count").textContent === "3"`)
	if resets, err := chromedp.Run(ctx, chromedp.Evaluate[int](`kubegate.stats.resets`)); err != nil || resets != 0 {
		t.Fatalf("resets after an in-history resume = %d (%v), want 0", resets, err)
	}

	// Outside the history: RESET, then the table equals the new state.
	if err := chromedp.Do(ctx, evalVoid(`kubegate.disconnect()`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 5*time.Second, "offline", `kubegate.connection === "reconnecting"`)
	if err := cms.Delete(t.Context(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range history + 5 {
		cm := configMap("b", map[string]string{"gen": strconv.Itoa(i)})
		if _, err := cms.Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cms.Create(t.Context(), configMap("d", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, evalVoid(`kubegate.connect()`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 10*time.Second, "reset and redrawn", `kubegate.stats.resets > 0 && /RESET\s+table-\d+ Expired/.test(document.getElementById("log").innerText) &&
		document.getElementById("count").textContent === "3" && `+row(ns, "a")+` === null && `+row(ns, "d")+` !== null && `+
		cellIs(ns, "b", "labels", "gen="+strconv.Itoa(history+4)))
	screenshot(t, ctx, "dashboard-reset.png")

	// Cut off mid-snapshot: a snapshot's ADDED frames are not resume
	// points, so the page must start afresh rather than resume from one
	// and keep what it had received. The frames are handed to the page as
	// if the gateway had sent them: a RESET, then one ADDED of the new
	// snapshot carrying a current rv.
	rv, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => {
		const s = [...kubegate.subs.values()].find((s) => s.id.startsWith("table-"));
		const rv = s.rv;
		kubegate.frame({type: "RESET", id: s.id, reason: "Reauthorized"});
		kubegate.frame({type: "ADDED", id: s.id, rv, object: {apiVersion: "v1", kind: "ConfigMap",
			metadata: {name: "phantom", namespace: `+strconv.Quote(ns)+`, resourceVersion: rv}}});
		return s.rv;
	})()`))
	if err != nil || rv != "" {
		t.Fatalf("resume point after a snapshot's first ADDED = %q (%v), want none", rv, err)
	}
	if err := chromedp.Do(ctx, evalVoid(`kubegate.disconnect()`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 5*time.Second, "offline", `kubegate.connection === "reconnecting"`)
	if err := chromedp.Do(ctx, evalVoid(`kubegate.connect()`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 10*time.Second, "fresh snapshot", `kubegate.connection === "connected" && document.body.dataset.synced !== "" &&
		document.getElementById("count").textContent === "3" && `+row(ns, "phantom")+` === null && `+row(ns, "d")+` !== null`)
}

// With token authentication the page asks for a token on 401 and passes it
// as the WebSocket subprotocol and the REST Authorization header.
func TestDashboardToken(t *testing.T) {
	env := testenv.Get(t)
	ctx := newBrowser(t)
	tr, err := auth.NewTokenReview(auth.TokenReviewOptions{Client: env.Client})
	if err != nil {
		t.Fatal(err)
	}
	authn, err := auth.NewBearer(auth.BearerOptions{Tokens: tr})
	if err != nil {
		t.Fatal(err)
	}
	base := startGateway(t, gatewayOptions{http: func(o *httpapi.Options) { o.Authenticator = authn }})
	ns := env.Namespace(t)
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(t.Context(), configMap("secret-ish", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Without a token the gateway refuses.
	res, err := http.Get(base + "/api")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /api without a token: %d, want 401", res.StatusCode)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/#resource=configmaps&namespace="+ns)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 10*time.Second, "token prompt", `document.getElementById("login").open && kubegate.connection === "unauthorized"`)
	token := env.CP.UserConfig("alice").BearerToken
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(`#token`), token),
		chromedp.Click(chromedp.CSS(`#login-form button[type=submit]`)),
	); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 30*time.Second, "table after login", `kubegate.connection === "connected" && `+row(ns, "secret-ish")+` !== null`)
}

// Custom resources appear in the resource picker and their objects in the
// table; the status view lists the gateway's informers and its sockets.
func TestDashboardCRDAndStatus(t *testing.T) {
	env := testenv.Get(t)
	env.CreateCRD(t, testenv.NewCRD("web.kubegate.io", "widgets", "Widget"))
	ns := env.Namespace(t)
	gvr := schema.GroupVersionResource{Group: "web.kubegate.io", Version: "v1", Resource: "widgets"}
	w := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "web.kubegate.io/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w1", "labels": map[string]any{"color": "blue"}}}}
	if _, err := env.Dynamic.Resource(gvr).Namespace(ns).Create(t.Context(), w, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx := newBrowser(t)
	base := startGateway(t, gatewayOptions{})
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/#resource=widgets.v1.web.kubegate.io&namespace="+ns)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 30*time.Second, "CRD in the picker", `[...document.getElementById("resource").options].some((o) => o.value === "widgets.v1.web.kubegate.io" && o.text === "widgets.web.kubegate.io")`)
	waitFor(t, ctx, 30*time.Second, "custom object", cellIs(ns, "w1", "labels", "color=blue"))

	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#status-toggle`))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 10*time.Second, "status view", `(() => {
		const rows = [...document.querySelectorAll("#informers tbody tr")].map((r) => r.innerText);
		const dl = document.getElementById("status-summary").innerText;
		return rows.some((r) => /^widgets\.web\.kubegate\.io\t1\t1 listeners/.test(r)) && rows.some((r) => r.startsWith("namespaces")) && /Sockets\s+1\b/.test(dl) && /Subscriptions\s+2\b/.test(dl);
	})()`)
	screenshot(t, ctx, "dashboard-status.png")
}

// 5,000 objects: the table is virtualized (a few dozen row elements) and
// no single task of the page (one WebSocket message, one draw) runs long
// while the snapshot and a burst of changes arrive.
func TestDashboardManyObjects(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 5,000 objects")
	}
	env := testenv.Get(t)
	const n = 5000
	ns := env.Namespace(t)
	cms := env.Client.CoreV1().ConfigMaps(ns)
	create := func(from, to int) error {
		g, ctx := errgroup.WithContext(t.Context())
		g.SetLimit(16)
		for i := from; i < to; i++ {
			g.Go(func() error {
				_, err := cms.Create(ctx, configMap(fmt.Sprintf("cm-%05d", i), map[string]string{"i": strconv.Itoa(i)}), metav1.CreateOptions{})
				return err
			})
		}
		return g.Wait()
	}
	if err := create(0, n-500); err != nil {
		t.Fatal(err)
	}
	ctx := newBrowser(t)
	base := startGateway(t, gatewayOptions{})
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/#resource=configmaps&namespace="+ns)); err != nil {
		t.Fatal(err)
	}
	// Record the longest gap between animation frames from here on.
	if err := chromedp.Do(ctx, evalVoid(`(() => { window.maxGap = 0; let last = performance.now();
		const tick = (t) => { window.maxGap = Math.max(window.maxGap, t - last); last = t; requestAnimationFrame(tick); };
		requestAnimationFrame(tick); })()`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 60*time.Second, "snapshot", fmt.Sprintf(`document.getElementById("count").textContent === "%d"`, n-500))
	if err := create(n-500, n); err != nil { // live, while the page shows the rest
		t.Fatal(err)
	}
	waitFor(t, ctx, 30*time.Second, "live burst", fmt.Sprintf(`document.getElementById("count").textContent === "%d"`, n))
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#rows .row").length`))
	if err != nil {
		t.Fatal(err)
	}
	if rows == 0 || rows > 200 {
		t.Errorf("%d row elements for %d objects; want a virtualized window", rows, n)
	}
	// Scrolling to the end draws the last objects.
	if err := chromedp.Do(ctx, evalVoid(`document.getElementById("viewport").scrollTop = 1e9`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 5*time.Second, "last row after scrolling", row(ns, fmt.Sprintf("cm-%05d", n-1))+" !== null")
	type pageTimes struct {
		Gap     float64 `json:"gap"`
		Message float64 `json:"message"`
		Draw    float64 `json:"draw"`
	}
	times, err := chromedp.Run(ctx, chromedp.Evaluate[pageTimes](`({gap: window.maxGap, message: kubegate.stats.maxMessageMs, draw: kubegate.stats.maxDrawMs})`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d objects, %d row elements; longest message %.0fms, longest draw %.0fms, longest gap between frames %.0fms",
		n, rows, times.Message, times.Draw, times.Gap)
	// The page's own tasks stay short, so it never freezes. Frame gaps are
	// only logged: on a shared CI machine they measure the machine's load
	// as much as the page.
	const maxTask = 500.0
	if times.Message > maxTask || times.Draw > maxTask {
		t.Errorf("longest message %.0fms, longest draw %.0fms; want both under %.0fms", times.Message, times.Draw, maxTask)
	}
}
