package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"kubegate/internal/auth"
	"kubegate/internal/config"
	"kubegate/internal/controlplane"
	"kubegate/internal/gateway"
	"kubegate/internal/gateway/gatewaytest"
	"kubegate/internal/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Users: []controlplane.User{{Name: "alice"}}})
}

// liveBudget is how soon a change made through the apiserver must show in
// the page.
const liveBudget = time.Second

// gatewayOptions adjusts the gateway of one test.
type gatewayOptions struct {
	config         func(*config.Config)
	wrapAuthorizer func(auth.Authorizer) auth.Authorizer
}

// startGateway runs the gateway with the dashboard as `make run` does
// (no authentication, every read allowed) against the package's
// apiserver, until the test ends. It returns the gateway's base URL.
func startGateway(t *testing.T, o gatewayOptions) string {
	t.Helper()
	cfg := gatewaytest.Config()
	cfg.Auth.Authn, cfg.Auth.Authz = "none", "always-allow"
	cfg.ShutdownTimeout = config.Duration(5 * time.Second)
	if o.config != nil {
		o.config(&cfg)
	}
	return gatewaytest.Start(t, cfg, gateway.Options{WrapAuthorizer: o.wrapAuthorizer}).URL()
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

// cell is the JavaScript for the text of the row's cell in the column
// headed column (or undefined).
func cell(ns, name, column string) string {
	return fmt.Sprintf(`(() => { const i = [...document.querySelectorAll("#thead span")].findIndex((h) => h.textContent === %s);
		return i < 0 ? undefined : %s?.children[i]?.textContent; })()`, strconv.Quote(column), row(ns, name))
}

// cellIs is the JavaScript condition "the row's cell in column has this text".
func cellIs(ns, name, column, text string) string {
	return fmt.Sprintf(`(%s === %s)`, cell(ns, name, column), strconv.Quote(text))
}

// headers is the JavaScript for the table's column headers.
const headers = `[...document.querySelectorAll("#thead span")].map((h) => h.textContent)`

// names is the JavaScript for the names of the rows drawn, in order.
const names = `[...document.querySelectorAll("#rows .row:not(.placeholder)")].map((r) => r.dataset.key.split("/").pop())`

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

// The table shows kubectl's columns for the objects; a create, an update
// and a delete through the apiserver show in the page within liveBudget;
// ages move on; a click shows the object.
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
	waitFor(t, ctx, 30*time.Second, "first rows", `document.body.dataset.synced !== "" && document.getElementById("count").textContent === "3"`)
	if got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](headers)); err != nil || strings.Join(got, ",") != "Name,Data,Age" {
		t.Fatalf("headers = %q (%v), want kubectl's Name, Data, Age", got, err)
	}
	for i := range 3 {
		waitFor(t, ctx, time.Second, "row cm-"+strconv.Itoa(i), cellIs(ns, fmt.Sprintf("cm-%d", i), "Data", "1"))
	}
	waitFor(t, ctx, 5*time.Second, "connected", `kubegate.connection === "connected"`)

	// Create.
	if _, err := cms.Create(t.Context(), configMap("live", map[string]string{"app": "new"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := waitFor(t, ctx, liveBudget, "created object", cellIs(ns, "live", "Data", "1")+` && `+row(ns, "live")+`.classList.contains("changed")`)
	t.Logf("create visible after %v", d)

	// Update.
	cm, err := cms.Get(t.Context(), "live", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["tier"] = "front"
	if _, err := cms.Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	d = waitFor(t, ctx, liveBudget, "updated object", cellIs(ns, "live", "Data", "2"))
	t.Logf("update visible after %v", d)

	// Delete.
	if err := cms.Delete(t.Context(), "cm-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	d = waitFor(t, ctx, liveBudget, "deleted object", row(ns, "cm-0")+` === null && document.getElementById("count").textContent === "3"`)
	t.Logf("delete visible after %v", d)

	waitFor(t, ctx, time.Second, "event log", `(() => { const t = document.getElementById("log").innerText;
		return /ADDED\s+configmaps \S+\/live/.test(t) && /MODIFIED\s+configmaps \S+\/live/.test(t) && /DELETED\s+configmaps \S+\/cm-0/.test(t); })()`)

	// Age is a relative cell: kubectl's text for the time since the
	// object's creation, rewritten as time passes with nothing sent.
	age, err := chromedp.Run(ctx, chromedp.Evaluate[string](cell(ns, "cm-1", "Age")))
	if err != nil || !regexp.MustCompile(`^\d+s$`).MatchString(age) {
		t.Fatalf("Age of cm-1 = %q (%v), want seconds", age, err)
	}
	if err := chromedp.Do(ctx, evalVoid(`(window.tableFrames = 0, kubegate.client.on("frame", (f) => { if (f.id === kubegate.window.id) window.tableFrames++; }))`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 5*time.Second, "age moves on", fmt.Sprintf(`/^\d+s$/.test(%s) && %[1]s !== %q`, cell(ns, "cm-1", "Age"), age))
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.tableFrames`)); err != nil || n != 0 {
		t.Errorf("%d frames for the table while the age moved on (%v): ages must move without the gateway", n, err)
	}
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

// kubectlTable runs kubectl get (with args) against the package's
// apiserver and returns its header and rows, cells split on runs of two
// or more spaces (kubectl's padding; a cell never holds two spaces).
func kubectlTable(t *testing.T, args ...string) (header []string, rows [][]string) {
	t.Helper()
	env := testenv.Get(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.CP.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), env.Kubectl(t), append([]string{"--kubeconfig", kubeconfig, "get"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get %v: %v\n%s", args, err, out)
	}
	split := regexp.MustCompile(`\s{2,}`)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for i, l := range lines {
		cells := split.Split(strings.TrimSpace(l), -1)
		if i == 0 {
			header = cells
		} else {
			rows = append(rows, cells)
		}
	}
	return header, rows
}

// Pods show kubectl's columns, and its wide columns on demand; a status
// change shows in place; selectors filter.
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
	waitFor(t, ctx, 30*time.Second, "pending pod", cellIs(ns, "p", "Status", "Pending"))
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP = "10.1.2.3"
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Ready: true, RestartCount: 2, Image: "busybox", ImageID: "x",
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
	if _, err := pods.UpdateStatus(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, liveBudget, "running pod", cellIs(ns, "p", "Status", "Running")+" && "+cellIs(ns, "p", "Ready", "1/1"))

	// kubectl's columns and cells (all but Age, which moves on between
	// the two readings), then its wide ones.
	for _, wide := range []bool{false, true} {
		args := []string{"pods", "-n", ns, "-l", "app=x"}
		if wide {
			if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#wide`))); err != nil {
				t.Fatal(err)
			}
			waitFor(t, ctx, 5*time.Second, "wide columns", `location.hash.includes("wide=1") && `+headers+`.includes("Node") && `+row(ns, "p")+` !== null`)
			args = append(args, "-o", "wide")
		}
		kh, krows := kubectlTable(t, args...)
		type page struct {
			Headers []string `json:"headers"`
			Cells   []string `json:"cells"`
		}
		got, err := chromedp.Run(ctx, chromedp.Evaluate[page](`({headers: `+headers+`, cells: [...`+row(ns, "p")+`.children].map((c) => c.textContent)})`))
		if err != nil {
			t.Fatal(err)
		}
		for i := range got.Headers {
			got.Headers[i] = strings.ToUpper(got.Headers[i])
		}
		if strings.Join(got.Headers, "|") != strings.Join(kh, "|") || len(krows) != 1 {
			t.Fatalf("wide=%v: headers %q, kubectl's %q (%d rows)", wide, got.Headers, kh, len(krows))
		}
		for i, h := range kh {
			if h != "AGE" && got.Cells[i] != krows[0][i] {
				t.Errorf("wide=%v: %s = %q, kubectl shows %q", wide, h, got.Cells[i], krows[0][i])
			}
		}
	}

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

// A click on a column sorts by it, a second click reverses the order; the
// search box filters by name or cell; the field selector applies; the URL
// keeps all of it and a reload restores the view.
func TestDashboardSortAndSearch(t *testing.T) {
	env := testenv.Get(t)
	ctx := newBrowser(t)
	base := startGateway(t, gatewayOptions{})
	ns := env.Namespace(t)
	cms := env.Client.CoreV1().ConfigMaps(ns)
	// cm-<i> has i%3 keys, so that sorting by Data groups them.
	for i := range 6 {
		data := map[string]string{}
		for k := range i % 3 {
			data[fmt.Sprintf("k%d", k)] = "v"
		}
		if _, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}, Data: data}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/#resource=configmaps&namespace="+ns)); err != nil {
		t.Fatal(err)
	}
	rowsAre := func(what string, want ...string) {
		t.Helper()
		w, _ := json.Marshal(want)
		waitFor(t, ctx, 10*time.Second, what, fmt.Sprintf(`JSON.stringify(%s) === %q`, names, w))
	}
	rowsAre("by name", "cm-0", "cm-1", "cm-2", "cm-3", "cm-4", "cm-5")
	clickHeader := func(label string) {
		t.Helper()
		sel := fmt.Sprintf(`#thead span[data-sort=%q]`, label)
		waitFor(t, ctx, 5*time.Second, "header "+label, fmt.Sprintf(`document.querySelector(%q) !== null`, sel))
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
			t.Fatal(err)
		}
	}
	clickHeader("Data")
	rowsAre("by data, ascending", "cm-0", "cm-3", "cm-1", "cm-4", "cm-2", "cm-5")
	waitFor(t, ctx, time.Second, "sorted header", `document.querySelector('#thead span[data-sort="Data"]').getAttribute("aria-sort") === "ascending"`)
	clickHeader("Data")
	// Ties stay by name, ascending whatever the order (docs/protocol.md).
	rowsAre("by data, descending", "cm-2", "cm-5", "cm-1", "cm-4", "cm-0", "cm-3")
	waitFor(t, ctx, time.Second, "hash", `location.hash.includes("sort=Data") && location.hash.includes("order=desc")`)

	// The search applies as the user types (debounced).
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS(`#search`), "m-4")); err != nil {
		t.Fatal(err)
	}
	rowsAre("searched", "cm-4")
	waitFor(t, ctx, time.Second, "count and hash", `document.getElementById("count").textContent === "1" && location.hash.includes("q=m-4")`)

	// A reload restores the view from the URL.
	if err := chromedp.Do(ctx, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	rowsAre("after a reload", "cm-4")
	waitFor(t, ctx, 5*time.Second, "restored inputs", `document.getElementById("search").value === "m-4" &&
		document.querySelector('#thead span[data-sort="Data"]')?.getAttribute("aria-sort") === "descending"`)

	// The field selector.
	if err := chromedp.Do(ctx, evalVoid(`document.getElementById("search").value = ""`),
		evalVoid(`document.getElementById("fields").value = "metadata.name!=cm-2"`),
		chromedp.Click(chromedp.CSS(`#query button[type=submit]`))); err != nil {
		t.Fatal(err)
	}
	rowsAre("field selector", "cm-5", "cm-1", "cm-4", "cm-0", "cm-3")
	waitFor(t, ctx, time.Second, "hash", `location.hash.includes("fields=metadata.name%21%3Dcm-2") && !location.hash.includes("q=")`)
}

// A reconnect sends the window again where it was, showing what changed
// meanwhile; the event log resumes with exactly the missed changes, and
// starts afresh when the gateway's history no longer covers them.
func TestDashboardReconnect(t *testing.T) {
	env := testenv.Get(t)
	ctx := newBrowser(t)
	const history = 20
	base := startGateway(t, gatewayOptions{config: func(c *config.Config) { c.Cache.HistoryEvents = history }})
	ns := env.Namespace(t)
	cms := env.Client.CoreV1().ConfigMaps(ns)
	const n = 300
	g, gctx := errgroup.WithContext(t.Context())
	g.SetLimit(16)
	for i := range n {
		g.Go(func() error {
			_, err := cms.Create(gctx, configMap(fmt.Sprintf("cm-%03d", i), nil), metav1.CreateOptions{})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/#resource=configmaps&namespace="+ns)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 30*time.Second, "first rows", `document.getElementById("count").textContent === "300" && `+row(ns, "cm-000")+` !== null`)
	// Scroll to row 200: the window follows.
	if err := chromedp.Do(ctx, evalVoid(`document.getElementById("viewport").scrollTop = 200 * 26`)); err != nil {
		t.Fatal(err)
	}
	firstName := `document.querySelector("#rows .row:not(.placeholder)")?.dataset.key.split("/").pop()`
	waitFor(t, ctx, 5*time.Second, "row 200 at the top", firstName+` === "cm-200" && document.querySelectorAll("#rows .placeholder").length === 0`)
	offset, err := chromedp.Run(ctx, chromedp.Evaluate[int](`kubegate.window.offset`))
	if err != nil || offset == 0 {
		t.Fatalf("window offset %d (%v) after scrolling", offset, err)
	}

	// Inside the history: the window comes back at its offset, showing
	// the objects as they are; the log gets exactly the missed changes.
	if err := chromedp.Do(ctx, evalVoid(`kubegate.disconnect()`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 5*time.Second, "offline", `kubegate.connection === "reconnecting"`)
	if err := cms.Delete(t.Context(), "cm-000", metav1.DeleteOptions{}); err != nil { // above the view: rows shift up one
		t.Fatal(err)
	}
	if _, err := cms.Create(t.Context(), configMap("cm-205a", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, evalVoid(`kubegate.connect()`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 10*time.Second, "back where it was", `kubegate.connection === "connected" && kubegate.window.synced && `+
		fmt.Sprintf(`kubegate.window.offset === %d && `, offset)+firstName+` === "cm-201" && `+row(ns, "cm-205a")+` !== null`)
	waitFor(t, ctx, 5*time.Second, "missed changes logged", `(() => { const t = document.getElementById("log").innerText;
		return /DELETED\s+configmaps \S+\/cm-000/.test(t) && /ADDED\s+configmaps \S+\/cm-205a/.test(t) && !/RESET/.test(t); })()`)
	if resets, err := chromedp.Run(ctx, chromedp.Evaluate[int](`kubegate.stats.resets`)); err != nil || resets != 0 {
		t.Fatalf("resets after an in-history resume = %d (%v), want 0", resets, err)
	}

	// Outside the history: the log's resume is refused (RESET Expired)
	// and it starts afresh; the window shows the new state.
	if err := chromedp.Do(ctx, evalVoid(`kubegate.disconnect()`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 5*time.Second, "offline", `kubegate.connection === "reconnecting"`)
	for i := range history + 5 {
		cm := configMap("cm-203", nil)
		cm.Data = map[string]string{"gen": strconv.Itoa(i), "k": "v"}
		if _, err := cms.Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := chromedp.Do(ctx, evalVoid(`kubegate.connect()`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 10*time.Second, "log reset, window current", `kubegate.stats.resets > 0 && /RESET\s+log-\d+ Expired/.test(document.getElementById("log").innerText) &&
		`+cellIs(ns, "cm-203", "Data", "2"))
	screenshot(t, ctx, "dashboard-reconnect.png")
	// The log's new subscription follows live changes.
	if _, err := cms.Create(t.Context(), configMap("cm-209a", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 5*time.Second, "live after the reset", `/ADDED\s+configmaps \S+\/cm-209a/.test(document.getElementById("log").innerText) && `+row(ns, "cm-209a")+` !== null`)
}

// With token authentication the page asks for a token on 401 and passes it
// as the WebSocket subprotocol and the REST Authorization header.
func TestDashboardToken(t *testing.T) {
	env := testenv.Get(t)
	ctx := newBrowser(t)
	base := startGateway(t, gatewayOptions{config: func(c *config.Config) { c.Auth.Authn = "kubernetes" }})
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

// The dashboard retries a refused read as client-go does: at 5 requests
// a second (burst 3) for its client address, its discovery (some 25
// reads at once, one per API group) is answered 429 with Retry-After,
// and still lists every group's resources, a custom resource's
// included, with no error shown.
func TestDashboardRetriesRefusedReads(t *testing.T) {
	env := testenv.Get(t)
	env.CreateCRD(t, testenv.NewCRD("retry.kubegate.io", "gadgets", "Gadget"))
	ns := env.Namespace(t)
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(t.Context(), configMap("throttled", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx := newBrowser(t)
	base := startGateway(t, gatewayOptions{config: func(c *config.Config) { c.Auth.UserQPS, c.Auth.UserBurst = 5, 3 }})
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/#resource=configmaps&namespace="+ns)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 60*time.Second, "every group's resources in the picker", `(() => {
		const values = [...document.getElementById("resource").options].map((o) => o.value);
		return ["configmaps", "deployments.v1.apps", "leases.v1.coordination.k8s.io", "gadgets.v1.retry.kubegate.io"].every((v) => values.includes(v));
	})()`)
	waitFor(t, ctx, 30*time.Second, "table", `kubegate.connection === "connected" && `+row(ns, "throttled")+` !== null`)
	shown, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("sub-error").textContent`))
	if err != nil {
		t.Fatal(err)
	}
	if shown != "" {
		t.Errorf("error shown: %q", shown)
	}
	// The reads were refused on the way: the gateway counted them. Its
	// /metrics shares the page's limit, so this read may be refused too.
	limited := regexp.MustCompile(`(?m)^kubegate_auth_rate_limited_total\{limit="rate"\} (\d+)`)
	var refused int
	err = wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		res, err := http.Get(base + "/metrics")
		if err != nil {
			return false, err
		}
		defer res.Body.Close()
		if res.StatusCode == http.StatusTooManyRequests {
			return false, nil
		}
		b, err := io.ReadAll(res.Body)
		if err != nil {
			return false, err
		}
		m := limited.FindSubmatch(b)
		if res.StatusCode != http.StatusOK || m == nil {
			return false, fmt.Errorf("GET /metrics: %d, no rate_limited_total{limit=\"rate\"} in %d bytes", res.StatusCode, len(b))
		}
		refused, err = strconv.Atoi(string(m[1]))
		return true, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if refused == 0 {
		t.Fatal("no request was refused: the test no longer tests retries")
	}
	t.Logf("%d requests refused with 429 and retried", refused)
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
	waitFor(t, ctx, 30*time.Second, "custom object", cellIs(ns, "w1", "Name", "w1")+` && `+headers+`.join() === "Name,Age"`)

	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#status-toggle`))); err != nil {
		t.Fatal(err)
	}
	// Three subscriptions on one socket: the namespaces, the window (a
	// listener of the live table's) and the event log (a listener).
	waitFor(t, ctx, 10*time.Second, "status view", `(() => {
		const rows = [...document.querySelectorAll("#informers tbody tr")].map((r) => r.innerText);
		const dl = document.getElementById("status-summary").innerText;
		return rows.some((r) => /^widgets\.web\.kubegate\.io\t1\t2 listeners/.test(r)) && rows.some((r) => r.startsWith("namespaces")) && /Sockets\s+1\b/.test(dl) && /Subscriptions\s+3\b/.test(dl);
	})()`)
	screenshot(t, ctx, "dashboard-status.png")
}
