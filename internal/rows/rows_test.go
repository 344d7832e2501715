package rows

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"

	"kubegate/internal/cell"
	"kubegate/internal/informer"
	"kubegate/internal/rows/rowstest"
)

// typedString shows a typed value as kind:text.
func typedString(v cell.Value) string {
	switch v.Kind() {
	case cell.KindNumber:
		return "number:" + v.String()
	case cell.KindTime:
		return "time:" + v.String()
	case cell.KindString:
		return "string:" + v.String()
	}
	return "missing"
}

// upstream returns the Table of rowstest's testdata name.
func upstream(t *testing.T, name string) (*informer.Columns, []*informer.Object) {
	t.Helper()
	tbl, err := rowstest.Read(name)
	if err != nil {
		t.Fatal(err)
	}
	return tbl.Columns, tbl.Objects
}

// printedCells returns the cells kube-apiserver printed for objs (the
// testdata's), each as its JSON bytes.
func printedCells(t *testing.T, objs []*informer.Object) [][]string {
	t.Helper()
	var out [][]string
	for _, o := range objs {
		var cells []json.RawMessage
		if err := json.Unmarshal(o.Cells, &cells); err != nil {
			t.Fatal(err)
		}
		var row []string
		for _, c := range cells {
			row = append(row, string(c))
		}
		out = append(out, row)
	}
	return out
}

// tableCells returns p's Table cells of o at now, each as JSON.
func tableCells(t *testing.T, p *Printer, o *informer.Object, now time.Time) []string {
	t.Helper()
	var cells []json.RawMessage
	if err := json.Unmarshal(p.Row(o).AppendCells(nil, now), &cells); err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(cells))
	for i, c := range cells {
		out[i] = string(c)
	}
	return out
}

// TestUpstreamPods: a pod's cells are kube-apiserver's bytes, but for
// its age, which counts from its creation and shows as of the time the
// Table is read; the typed values sort counts as numbers.
func TestUpstreamPods(t *testing.T) {
	cols, objs := upstream(t, "pods")
	p := NewPrinter(schema.GroupResource{Resource: "pods"}, cols, nil)
	for _, c := range p.Columns() {
		relative, age := c.Name == "Age" || c.Name == "Restarts", c.Name == "Age"
		if c.Relative != relative || c.Age != age {
			t.Errorf("column %s: relative %v, age %v; want %v, %v", c.Name, c.Relative, c.Age, relative, age)
		}
	}
	if !bytes.Equal(p.RawDefinitions(), cols.Raw) {
		t.Error("the column definitions are not kube-apiserver's bytes")
	}
	printed := printedCells(t, objs)
	for i, o := range objs {
		now := o.CreationTimestamp.Add(90 * time.Minute)
		got := tableCells(t, p, o, now)
		want := slices.Clone(printed[i])
		want[4] = `"90m"` // Age, as kube-apiserver would print it at now
		if !slices.Equal(got, want) {
			t.Errorf("%s at +90m: cells %v, want %v", o.Name, got, want)
		}
		r := p.Row(o)
		if c := r.Cell(4); !c.Relative() || !c.Since.Equal(o.CreationTimestamp.Time) {
			t.Errorf("%s: Age %+v, want relative to the creation time", o.Name, r.Cell(4))
		}
		for j, want := range []string{"string:" + o.Name, "number:0/2", "string:Pending", "number:0", "time:" + o.CreationTimestamp.UTC().Format(time.RFC3339)} {
			if got := typedString(r.Typed[j]); got != want {
				t.Errorf("%s: cell %s typed %s, want %s", o.Name, cols.Definitions[j].Name, got, want)
			}
		}
	}
}

// TestUpstreamCustomResource: a CRD's columns, of every type; its date
// columns (Expires, and Age on the creation time) count from their
// times, shown as kube-apiserver does ("<invalid>" for a time to come,
// escaped as its encoder escapes it).
func TestUpstreamCustomResource(t *testing.T) {
	cols, objs := upstream(t, "widgets")
	p := NewPrinter(schema.GroupResource{Group: "probe.example.com", Resource: "widgets"}, cols, nil)
	for _, c := range p.Columns() {
		if relative := c.Type == "date"; c.Relative != relative || c.Age != relative {
			t.Errorf("column %s: relative %v, age %v; want %v", c.Name, c.Relative, c.Age, relative)
		}
	}
	printed := printedCells(t, objs)
	expires := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC) // w1's, in the testdata
	for i, o := range objs {
		for _, now := range []time.Time{expires.Add(-time.Hour), expires.Add(26 * time.Hour)} {
			got := tableCells(t, p, o, now)
			want := slices.Clone(printed[i])
			want[6] = fmt.Sprintf("%q", duration.HumanDuration(now.Sub(o.CreationTimestamp.Time)))
			switch o.Name {
			case "w1":
				want[3] = `"\u003cinvalid\u003e"`
				if now.After(expires) {
					want[3] = `"26h"`
				}
			case "w2":
				want[3] = fmt.Sprintf("%q", duration.HumanDuration(now.Sub(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))))
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s at %s: cells %v, want %v", o.Name, now, got, want)
			}
		}
	}
	var typed []string
	for _, o := range objs {
		for _, v := range p.Row(o).Typed[1:6] {
			typed = append(typed, typedString(v))
		}
	}
	want := []string{
		"number:3", "string:team-a", "time:2026-12-01T00:00:00Z", "number:1.5", "string:true",
		"number:0", "string:", "time:2020-01-01T00:00:00Z", "number:2", "string:false",
		"missing", "string:team-b", "missing", "missing", "missing",
	}
	if !slices.Equal(typed, want) {
		t.Errorf("typed values %v, want %v", typed, want)
	}
}

// TestStaleColumns: an object printed with other columns than the
// printer's (a relist after a CRD changed them has not reached it yet)
// shows its name alone, never cells under the wrong headers.
func TestStaleColumns(t *testing.T) {
	cols, objs := upstream(t, "pods")
	p := NewPrinter(schema.GroupResource{Resource: "pods"}, cols, nil)
	other := &informer.Object{ObjectMeta: objs[0].ObjectMeta, Raw: objs[0].Raw, Cells: objs[0].Cells,
		Columns: &informer.Columns{Definitions: cols.Definitions, Raw: cols.Raw}} // equal, but another set
	got := tableCells(t, p, other, time.Now())
	want := []string{`"p1"`, "null", "null", "null", "null", "null", "null", "null", "null"}
	if !slices.Equal(got, want) {
		t.Errorf("cells %v, want %v", got, want)
	}
	if !p.Follows(cols) || p.Follows(other.Columns) {
		t.Error("Follows does not tell the printer's columns from others")
	}
}

// TestLiveCells: the cells that count from a time in the object keep
// that time, read from the object, whatever kube-apiserver printed then.
func TestLiveCells(t *testing.T) {
	at := func(d time.Duration) string { return goldenNow.Add(-d).UTC().Format(time.RFC3339) }
	for _, c := range []struct {
		resource, name, column string
		printed                string // as kube-apiserver printed it, some time ago
		json                   string // as WebSocket rows carry it
		typed                  string
	}{
		{"pods", "running", "Restarts", `"2 (58m ago)"`, `{"prefix":"2 (","since":"` + at(time.Hour) + `","suffix":" ago)"}`, "number:2"},
		{"pods", "pending", "Restarts", `"0"`, `"0"`, "number:0"},
		{"jobs", "busy", "Duration", `"37s"`, `{"since":"` + at(40*time.Second) + `"}`, "time:" + at(40*time.Second)},
		{"jobs", "done", "Duration", `"10m"`, `"10m"`, "number:10m"}, // sorts as 600 seconds
		{"jobs", "paused", "Duration", `""`, `""`, "missing"},
		{"cronjobs", "nightly", "Last Schedule", `"8h"`, `{"since":"` + at(9*time.Hour) + `"}`, "time:" + at(9*time.Hour)},
		{"cronjobs", "never", "Last Schedule", `"\u003cnone\u003e"`, `"\u003cnone\u003e"`, "missing"},
		{"events", "web.1", "Last Seen", `"1m"`, `{"since":"` + at(2*time.Minute) + `"}`, "time:" + at(2*time.Minute)},
		{"events", "web.2", "Last Seen", `"2s"`, `{"since":"` + at(5*time.Second) + `"}`, "time:" + at(5*time.Second)},
		{"events", "web.2", "First Seen", `"58s"`, `{"since":"` + at(time.Minute) + `"}`, "time:" + at(time.Minute)},
	} {
		gr := schema.GroupResource{Resource: c.resource}
		if c.resource == "jobs" || c.resource == "cronjobs" {
			gr.Group = "batch"
		}
		live := liveColumns[gr][c.column]
		if live == nil {
			t.Fatalf("%s %s is not a live column", c.resource, c.column)
		}
		var o *informer.Object
		for _, f := range fixtureObjects(t, c.resource) {
			if f.Name == c.name {
				o = f
			}
		}
		got := live(o, Cell{Raw: []byte(c.printed), Typed: cell.Parse(strings.Trim(c.printed, `"`))})
		if b, _ := got.MarshalJSON(); string(b) != c.json || typedString(got.Typed) != c.typed {
			t.Errorf("%s %s %s: %s typed %s, want %s typed %s", c.resource, c.name, c.column, b, typedString(got.Typed), c.json, c.typed)
		}
		if got.Relative() {
			want := got.Prefix + duration.HumanDuration(goldenNow.Sub(got.Since)) + got.Suffix
			if d := got.Display(goldenNow); d != want {
				t.Errorf("%s %s %s shows %v, want %q", c.resource, c.name, c.column, d, want)
			}
		}
	}
}

// TestEventsAPIEvents: an events.k8s.io Event's Last Seen reads its own
// field names, as kube-apiserver's printer reads them once converted.
func TestEventsAPIEvents(t *testing.T) {
	raw := fmt.Sprintf(`{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"e"},"eventTime":null,`+
		`"deprecatedFirstTimestamp":%q,"deprecatedLastTimestamp":%q,"deprecatedCount":3}`, at(time.Hour), at(time.Minute))
	live := liveColumns[schema.GroupResource{Group: "events.k8s.io", Resource: "events"}]["Last Seen"]
	got := live(&informer.Object{ObjectMeta: metav1.ObjectMeta{Name: "e"}, Raw: []byte(raw)}, text("1m"))
	if !got.Relative() || got.Since.UTC().Format(time.RFC3339) != at(time.Minute) {
		t.Errorf("Last Seen %+v, want since %s", got, at(time.Minute))
	}
}

func at(d time.Duration) string { return goldenNow.Add(-d).UTC().Format(time.RFC3339) }

// TestEncodedRows: rows as WebSocket row frames carry them, computed once
// per object version and printer, whoever asks, and again for another
// version.
func TestEncodedRows(t *testing.T) {
	cols, objs := upstream(t, "pods")
	p := NewPrinter(schema.GroupResource{Resource: "pods"}, cols, nil)
	o := objs[0]
	want := fmt.Sprintf(`{"name":"p1","namespace":%q,"resourceVersion":%q,"uid":%q,"cells":["p1","0/2","Pending","0",{"since":%q},`+
		`"\u003cnone\u003e","\u003cnone\u003e","\u003cnone\u003e","\u003cnone\u003e"]}`,
		o.Namespace, o.ResourceVersion, o.UID, o.CreationTimestamp.UTC().Format(time.RFC3339))
	first := p.Encoded(o)
	if string(first) != want {
		t.Errorf("encoded\n %s\nwant\n %s", first, want)
	}
	r, b := p.RowEncoded(o)
	if &b[0] != &first[0] || r != p.Row(o) || p.Encodes() != 1 {
		t.Errorf("a second reader of one object version got another encoding (%d encodes)", p.Encodes())
	}
	p.Encoded(o.DeepCopyObject().(*informer.Object))
	if n := p.Encodes(); n != 2 {
		t.Errorf("%d encodes after a new object version, want 2", n)
	}
}

// TestGeneric: a resource kube-apiserver does not serve as a Table gets
// its default table convertor's columns, Name and Created At.
func TestGeneric(t *testing.T) {
	o := &informer.Object{ObjectMeta: metav1.ObjectMeta{Name: "db", CreationTimestamp: metav1.NewTime(goldenNow)}}
	p := Generic()
	var names []string
	for _, c := range p.Columns() {
		names = append(names, c.Name)
	}
	got := tableCells(t, p, o, goldenNow.Add(time.Hour))
	if !slices.Equal(names, []string{"Name", "Created At"}) || !slices.Equal(got, []string{`"db"`, `"2026-11-23T12:00:00Z"`}) {
		t.Errorf("generic columns %v, cells %v", names, got)
	}
}

// TestRowIsSmall measures a typical pod's row against its JSON: a row is
// what a subscription with rows sends in place of the object.
func TestRowIsSmall(t *testing.T) {
	cols, objs := upstream(t, "pods")
	p := NewPrinter(schema.GroupResource{Resource: "pods"}, cols, nil)
	o := objs[0]
	row := p.Encoded(o)
	t.Logf("pod: object %d bytes, row %d bytes (%.1f× smaller)", len(o.Raw), len(row), float64(len(o.Raw))/float64(len(row)))
	if len(row)*4 > len(o.Raw) {
		t.Errorf("row of %d bytes for an object of %d", len(row), len(o.Raw))
	}
}

// TestPodRestarts follows printPod's RESTARTS through init containers:
// restartable ones (sidecars) count once the pod is initialized, all of
// them while it initializes, and the last restart is the latest of those
// counted.
func TestPodRestarts(t *testing.T) {
	at := func(d time.Duration) string { return goldenNow.Add(-d).UTC().Format(time.RFC3339) }
	terminated := func(d time.Duration) string {
		return `"lastState":{"terminated":{"exitCode":1,"finishedAt":"` + at(d) + `"}}`
	}
	for _, c := range []struct {
		name, pod string
		want      string
	}{
		{"sidecar and container, initialized", `{"spec":{"initContainers":[{"name":"i1"},{"name":"side","restartPolicy":"Always"}]},
			"status":{"conditions":[{"type":"Initialized","status":"True"}],
			"initContainerStatuses":[{"name":"i1","restartCount":5,"state":{"terminated":{"exitCode":0}},` + terminated(time.Minute) + `},
			  {"name":"side","restartCount":2,"started":true,` + terminated(10*time.Minute) + `}],
			"containerStatuses":[{"name":"c","restartCount":1,` + terminated(5*time.Minute) + `}]}}`,
			`{"prefix":"3 (","since":"` + at(5*time.Minute) + `","suffix":" ago)"}`},
		{"initializing", `{"spec":{"initContainers":[{"name":"i1"}]},
			"status":{"conditions":[{"type":"Initialized","status":"False"}],
			"initContainerStatuses":[{"name":"i1","restartCount":4,"state":{"waiting":{"reason":"CrashLoopBackOff"}},` + terminated(time.Minute) + `}],
			"containerStatuses":[{"name":"c","restartCount":7,` + terminated(30*time.Second) + `}]}}`,
			`{"prefix":"4 (","since":"` + at(time.Minute) + `","suffix":" ago)"}`},
		{"restarts without a time", `{"status":{"containerStatuses":[{"name":"c","restartCount":2}]}}`, `"2"`},
	} {
		o := &informer.Object{Raw: []byte(c.pod)}
		got := podRestartCell(slim[podRestartFields](o))
		if b, _ := got.MarshalJSON(); string(b) != c.want {
			t.Errorf("%s: %s, want %s", c.name, b, c.want)
		}
	}
}
