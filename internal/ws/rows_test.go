package ws

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/coder/websocket"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"

	"kubegate/internal/informer"
	"kubegate/internal/rows"
	"kubegate/internal/testenv"
)

// wireRow is a row frame's row.
type wireRow struct {
	Name            string            `json:"name"`
	Namespace       string            `json:"namespace"`
	ResourceVersion string            `json:"resourceVersion"`
	UID             string            `json:"uid"`
	Cells           []json.RawMessage `json:"cells"`
}

// relative is a relative cell as a row frame sends it.
type relative struct {
	Prefix string `json:"prefix"`
	Since  string `json:"since"`
	Suffix string `json:"suffix"`
}

func (f frame) row(t *testing.T) wireRow {
	t.Helper()
	if f.Row == nil || f.Object != nil {
		t.Fatalf("frame %v carries no row (or an object too)", f)
	}
	var r wireRow
	if err := json.Unmarshal(f.Row, &r); err != nil {
		t.Fatalf("row %s: %v", f.Row, err)
	}
	return r
}

// apiTable is kube-apiserver's Table of one object, and the gateway
// test's clock around the request.
type apiTable struct {
	metav1.Table
	before, after time.Time
	meta          metav1.PartialObjectMetadata
}

func getTable(t *testing.T, path string) apiTable {
	t.Helper()
	env := testenv.Get(t)
	var at apiTable
	at.before = time.Now()
	raw, err := env.Client.CoreV1().RESTClient().Get().AbsPath(path).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Do(t.Context()).Raw()
	at.after = time.Now()
	if err != nil {
		t.Fatalf("GET %s as Table: %v", path, err)
	}
	if err := json.Unmarshal(raw, &at.Table); err != nil {
		t.Fatal(err)
	}
	if len(at.Rows) != 1 {
		t.Fatalf("GET %s: %d rows", path, len(at.Rows))
	}
	if err := json.Unmarshal(at.Rows[0].Object.Raw, &at.meta); err != nil {
		t.Fatal(err)
	}
	return at
}

// checkColumns checks that a subscription's columns are kube-apiserver's.
func checkColumns(t *testing.T, cols []column, at apiTable) {
	t.Helper()
	var got, want []string
	for _, c := range cols {
		got = append(got, fmt.Sprintf("%s/%s/%d", c.Name, c.Type, c.Priority))
	}
	for _, c := range at.ColumnDefinitions {
		want = append(want, fmt.Sprintf("%s/%s/%d", c.Name, c.Type, c.Priority))
	}
	if !slices.Equal(got, want) {
		t.Errorf("columns %v, kube-apiserver's %v", got, want)
	}
}

// checkRow checks a row frame against kube-apiserver's Table of the
// object at path, which must not have changed since the frame's version:
// the same version and identity, and every cell equal to the apiserver's,
// relative cells shown at the time of the apiserver's answer. It returns
// the row.
func checkRow(t *testing.T, f frame, cols []column, path string) wireRow {
	t.Helper()
	r := f.row(t)
	at := getTable(t, path)
	if r.ResourceVersion != at.meta.ResourceVersion || f.RV != r.ResourceVersion || r.UID != string(at.meta.UID) ||
		r.Name != at.meta.Name || r.Namespace != at.meta.Namespace {
		t.Fatalf("row %s %s/%s uid %s at %s (frame rv %s); apiserver has %s/%s uid %s at %s",
			f.Type, r.Namespace, r.Name, r.UID, r.ResourceVersion, f.RV, at.meta.Namespace, at.meta.Name, at.meta.UID, at.meta.ResourceVersion)
	}
	want := at.Rows[0].Cells
	if len(r.Cells) != len(want) || len(cols) != len(want) {
		t.Fatalf("row %s: %d cells, %d columns; apiserver %d cells", r.Name, len(r.Cells), len(cols), len(want))
	}
	for i, raw := range r.Cells {
		var rel relative
		if json.Unmarshal(raw, &rel) == nil && rel.Since != "" {
			if !cols[i].Relative {
				t.Errorf("%s: relative cell %s in column %s, not marked relative", r.Name, raw, cols[i].Name)
			}
			since, err := time.Parse(time.RFC3339Nano, rel.Since)
			if err != nil {
				t.Fatalf("%s: cell %s: %v", r.Name, raw, err)
			}
			// The apiserver showed it at a moment between before and after.
			shown := map[string]bool{}
			for _, now := range []time.Time{at.before, at.after} {
				shown[rel.Prefix+duration.HumanDuration(now.Sub(since))+rel.Suffix] = true
			}
			if !shown[fmt.Sprint(want[i])] {
				t.Errorf("%s column %s: %s shows as %v, apiserver %q", r.Name, cols[i].Name, raw, shown, want[i])
			}
			continue
		}
		var got any
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		// Both decoded from JSON: numbers are float64 on both sides.
		if fmt.Sprintf("%T %v", got, got) != fmt.Sprintf("%T %v", want[i], want[i]) {
			t.Errorf("%s column %s: %s, apiserver %v", r.Name, cols[i].Name, raw, want[i])
		}
	}
	return r
}

// sinceOf returns the time a relative cell of column name counts from.
func sinceOf(t *testing.T, r wireRow, cols []column, name string) time.Time {
	t.Helper()
	for i, c := range cols {
		if c.Name == name {
			var rel relative
			if err := json.Unmarshal(r.Cells[i], &rel); err != nil || rel.Since == "" {
				t.Fatalf("%s cell %s is not relative", name, r.Cells[i])
			}
			ts, err := time.Parse(time.RFC3339Nano, rel.Since)
			if err != nil {
				t.Fatal(err)
			}
			return ts
		}
	}
	t.Fatalf("no column %s", name)
	return time.Time{}
}

func asTableRows(m map[string]any) { m["as"] = "Table" }

// TestRowsMatchAPIServer subscribes with rows to pods and to a custom
// resource with printer columns, and checks every row it gets (snapshot,
// live changes, a resume, the snapshot after a RESET) against
// kube-apiserver's own Table of the same object version.
func TestRowsMatchAPIServer(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ctx := t.Context()
	crd := testenv.NewCRD("rows.example.com", "gadgets", "Gadget")
	crd.Object["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any)["additionalPrinterColumns"] = []any{
		map[string]any{"name": "Color", "type": "string", "jsonPath": ".spec.color"},
		map[string]any{"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
		map[string]any{"name": "Seen", "type": "date", "jsonPath": ".spec.seen", "priority": int64(1)},
		map[string]any{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
	}
	env.CreateCRD(t, crd)
	gadgets := env.Dynamic.Resource(schema.GroupVersionResource{Group: "rows.example.com", Version: "v1", Resource: "gadgets"}).Namespace(ns)
	seen := time.Now().Add(-2 * time.Hour).UTC().Truncate(time.Second)
	g, err := gadgets.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rows.example.com/v1", "kind": "Gadget", "metadata": map[string]any{"name": "g1"},
		"spec": map[string]any{"color": "red", "size": int64(3), "seen": seen.Format(time.RFC3339)}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods := env.Client.CoreV1().Pods(ns)
	pod, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	podPath := func(name string) string { return "/api/v1/namespaces/" + ns + "/pods/" + name }
	gadgetPath := "/apis/rows.example.com/v1/namespaces/" + ns + "/gadgets/g1"

	m := startManager(t, env.Config, func(o *informer.Options) { o.HistoryEvents = 3 })
	ts := startServer(t, m, nil)
	c := dial(t, ts)
	c.subscribe("pods", "pods", ns, asTableRows)
	ack := c.expect("ack", "pods")
	podCols := ack.Columns
	checkColumns(t, podCols, getTable(t, podPath("web-1")))
	f := c.expect("ADDED", "pods")
	r := checkRow(t, f, podCols, podPath("web-1"))
	if got := sinceOf(t, r, podCols, "Age"); !got.Equal(pod.CreationTimestamp.Time) {
		t.Errorf("Age counts from %v, pod created at %v", got, pod.CreationTimestamp)
	}
	c.expect("END_OF_SNAPSHOT", "pods")

	c.subscribe("gadgets", "gadgets", ns, asTableRows)
	ack = c.expect("ack", "gadgets")
	gadgetCols := ack.Columns
	checkColumns(t, gadgetCols, getTable(t, gadgetPath))
	r = checkRow(t, c.expect("ADDED", "gadgets"), gadgetCols, gadgetPath)
	if got := sinceOf(t, r, gadgetCols, "Seen"); !got.Equal(seen) {
		t.Errorf("Seen counts from %v, want %v", got, seen)
	}
	c.expect("END_OF_SNAPSHOT", "gadgets")

	// Live: a restart makes RESTARTS relative; the gadget changes.
	lastRestart := metav1.NewTime(time.Now().Add(-10 * time.Minute).Truncate(time.Second))
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7", PodIPs: []corev1.PodIP{{IP: "10.0.0.7"}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Image: "registry.k8s.io/pause:3.10", Ready: true, RestartCount: 3,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: lastRestart}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1,
				StartedAt: metav1.NewTime(lastRestart.Add(-time.Hour)), FinishedAt: lastRestart}}}}}
	if pod, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r = checkRow(t, c.expect("MODIFIED", "pods"), podCols, podPath("web-1"))
	if got := sinceOf(t, r, podCols, "Restarts"); !got.Equal(lastRestart.Time) {
		t.Errorf("Restarts counts from %v, last restart %v", got, lastRestart)
	}
	if err := unstructured.SetNestedField(g.Object, "blue", "spec", "color"); err != nil {
		t.Fatal(err)
	}
	if _, err := gadgets.Update(ctx, g, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	checkRow(t, c.expect("MODIFIED", "gadgets"), gadgetCols, gadgetPath)
	rv := r.ResourceVersion
	_ = c.c.Close(websocket.StatusNormalClosure, "")

	// Resume: the change missed while away arrives as a row.
	pod.Labels["tier"] = "front"
	if pod, err = pods.Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c = dial(t, ts)
	c.subscribe("pods", "pods", ns, asTableRows, func(m map[string]any) { m["resourceVersion"] = rv })
	if ack := c.expect("ack", "pods"); !slices.Equal(ack.Columns, podCols) {
		t.Errorf("resumed subscription's columns %v, want %v", ack.Columns, podCols)
	}
	r = checkRow(t, c.expect("MODIFIED", "pods"), podCols, podPath("web-1"))
	rv = r.ResourceVersion

	// A resume older than the history: RESET, then a snapshot of rows.
	for i := range 4 {
		if _, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("web-x", i)},
			Spec: pod.Spec}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.expect("ADDED", "pods") // the gateway has seen it
	}
	c2 := dial(t, ts)
	c2.subscribe("pods", "pods", ns, asTableRows, func(m map[string]any) { m["resourceVersion"] = rv })
	c2.expect("ack", "pods")
	if f := c2.expect("RESET", "pods"); f.Reason != "Expired" {
		t.Fatalf("RESET reason %q", f.Reason)
	}
	var names []string
	for {
		f := c2.next()
		if f.Type == "END_OF_SNAPSHOT" {
			break
		}
		if f.Type != "ADDED" {
			t.Fatalf("in the snapshot after RESET: %v", f)
		}
		names = append(names, checkRow(t, f, podCols, podPath(f.name())).Name)
	}
	slices.Sort(names)
	if want := []string{"web-1", "web-x0", "web-x1", "web-x2", "web-x3"}; !slices.Equal(names, want) {
		t.Errorf("snapshot after RESET: %v, want %v", names, want)
	}

	// DELETED carries the last state's row (after a MODIFIED that
	// marks the deletion, if the apiserver sends one).
	if err := pods.Delete(ctx, "web-x0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f = c2.next()
	if f.Type == "MODIFIED" && f.name() == "web-x0" {
		f = c2.next()
	}
	if f.Type != "DELETED" || f.row(t).Name != "web-x0" || len(f.row(t).Cells) != len(podCols) {
		t.Errorf("deletion: %v row %s", f, f.Row)
	}
}

// TestRowsEncodedOncePerChange subscribes with rows from several sockets
// and checks that each object version's row was encoded once, whatever
// the number of subscriptions, and that they all got the same bytes.
func TestRowsEncodedOncePerChange(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	for _, n := range []string{"a", "b", "c"} {
		createCM(t, ns, n, nil)
	}
	m := startManager(t, env.Config, nil)
	ts := startServer(t, m, nil)
	res, err := m.Resource(t.Context(), "configmaps")
	if err != nil {
		t.Fatal(err)
	}
	printer := rows.ForResource(t.Context(), m, res) // the one the server prints with
	before := printer.Encodes()

	const sockets, perSocket = 3, 2
	var clients []*client
	for range sockets {
		c := dial(t, ts)
		for i := range perSocket {
			c.subscribe(fmt.Sprint("rows-", i), "configmaps", ns, asTableRows)
		}
		c.subscribe("objects", "configmaps", ns)
		clients = append(clients, c)
	}
	// Every subscription's frames, by id; the rows must be the same bytes.
	type key struct{ typ, name, rv string }
	seen := map[key]string{}
	read := func(c *client, want int) {
		t.Helper()
		got := map[string]int{}
		for total := 0; total < want; {
			f := c.next()
			switch {
			case f.Type == "ack" || f.Type == "END_OF_SNAPSHOT":
				continue
			case f.ID == "objects":
				if f.Object == nil || f.Row != nil {
					t.Fatalf("object subscription got %v", f)
				}
				continue
			}
			k := key{f.Type, f.name(), f.RV}
			if prev, ok := seen[k]; ok && prev != string(f.Row) {
				t.Fatalf("%v: rows differ between subscriptions:\n%s\n%s", k, prev, f.Row)
			}
			seen[k] = string(f.Row)
			got[f.ID]++
			total++
		}
		for i := range perSocket {
			if id := fmt.Sprint("rows-", i); got[id] != want/perSocket {
				t.Fatalf("%s got %d rows, want %d", id, got[id], want/perSocket)
			}
		}
	}
	for _, c := range clients {
		read(c, 3*perSocket)
	}
	d := createCM(t, ns, "d", nil)
	updateCM(t, d, "1")
	deleteCM(t, ns, "d")
	for _, c := range clients {
		read(c, 3*perSocket)
	}
	// 3 snapshot objects and 3 changes, for 6 subscriptions.
	if n := printer.Encodes() - before; n != 6 {
		t.Errorf("%d rows encoded for 6 object versions sent to %d subscriptions", n, sockets*perSocket)
	}
	if len(seen) != 6 {
		t.Errorf("%d distinct frames, want 6: %v", len(seen), seen)
	}
}

// TestRowsRefused checks that a subscribe asking for a form the gateway
// does not serve is refused with a complete 400 Status.
func TestRowsRefused(t *testing.T) {
	env := testenv.Get(t)
	ts := startServer(t, startManager(t, env.Config, nil), nil)
	c := dial(t, ts)
	c.subscribe("p", "pods", "", func(m map[string]any) { m["as"] = "PartialObjectMetadata" })
	f := c.expect("error", "p")
	st := f.Status
	if f.Request != "subscribe" || st.Kind != "Status" || st.APIVersion != "v1" || st.Status != metav1.StatusFailure ||
		st.Code != 400 || st.Reason != metav1.StatusReasonBadRequest || st.Message == "" {
		t.Fatalf("error frame %+v status %+v", f, st)
	}
	// The socket goes on.
	c.subscribe("p", "configmaps", env.Namespace(t), asTableRows)
	if ack := c.expect("ack", "p"); len(ack.Columns) != 3 || ack.Columns[2].Name != "Age" || !ack.Columns[2].Relative {
		t.Fatalf("configmap rows' columns %+v", ack.Columns)
	}
	c.expect("END_OF_SNAPSHOT", "p")
}
