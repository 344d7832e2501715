package informer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"unsafe"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

// The files in testdata/tables were captured from kube-apiserver v1.37.2,
// each pair from one state of the cluster: the same list (or watch) asked
// for as plain JSON and as a Table with includeObject=Object.
var (
	widgetGVK    = schema.GroupVersionKind{Group: "probe.example.com", Version: "v1", Kind: "Widget"}
	tableCorpora = []struct {
		name string
		gvk  schema.GroupVersionKind
	}{{"pods", podGVK}, {"widgets", widgetGVK}}
)

// servedTable is a Table as encoding/json reads it.
type servedTable struct {
	Metadata          metav1.ListMeta
	ColumnDefinitions json.RawMessage
	Rows              []struct {
		Cells  json.RawMessage
		Object json.RawMessage
	}
}

func readTable(t *testing.T, b []byte) servedTable {
	t.Helper()
	var tbl servedTable
	if err := json.Unmarshal(b, &tbl); err != nil {
		t.Fatal(err)
	}
	return tbl
}

// compact returns b compacted, as the decoder keeps cells and columns of
// what an apiserver serves (compact already).
func compact(t *testing.T, b []byte) []byte {
	t.Helper()
	v := jsontext.Value(bytes.Clone(b))
	if err := v.Compact(); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestDecodeTableListMatchesPlain decodes the same list served as a Table
// and as plain JSON: every row's object must decode as the plain item,
// with the row's cells as Cells, in Raw's allocation. Raw is the row's
// object as served: the plain item's JSON, except that kube-apiserver
// embeds it with its kind and apiVersion, first, where the decoder adds
// them to a plain list's items of built-in types.
func TestDecodeTableListMatchesPlain(t *testing.T) {
	for _, c := range tableCorpora {
		d := newObjectDecoder(c.gvk, false, []string{"spec.nodeName", "spec.owner"})
		plainBody := readFile(t, "testdata/tables/"+c.name+"-plain.json")
		tableBody := readFile(t, "testdata/tables/"+c.name+"-table.json")
		plain, err := d.decodeList(bytes.NewReader(plainBody))
		if err != nil {
			t.Fatal(err)
		}
		served := readTable(t, tableBody)
		for rname, r := range readers(tableBody) {
			t.Run(c.name+"/"+rname, func(t *testing.T) {
				l, err := d.decodeList(r())
				if err != nil {
					t.Fatal(err)
				}
				if l.table == nil || l.table.partial {
					t.Fatalf("table = %+v, want a full Table", l.table)
				}
				if !bytes.Equal(l.table.columns, served.ColumnDefinitions) {
					t.Errorf("columns differ from the served columnDefinitions")
				}
				if l.ResourceVersion != plain.ResourceVersion || len(l.Items) != len(plain.Items) {
					t.Fatalf("Table: rv %s, %d items; plain: rv %s, %d items", l.ResourceVersion, len(l.Items), plain.ResourceVersion, len(plain.Items))
				}
				for i, o := range l.Items {
					want := plain.Items[i]
					alone, err := d.decode(served.Rows[i].Object)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(o.Raw, alone.Raw) {
						t.Errorf("row %d: Raw differs from the row's object decoded alone: %s", i, firstDiff(o.Raw, alone.Raw))
					}
					got, err := canonicalJSON(o.Raw)
					if err != nil {
						t.Fatal(err)
					}
					if wantRaw, _ := canonicalJSON(want.Raw); !bytes.Equal(got, wantRaw) {
						t.Errorf("row %d: Raw differs from the plain item's: %s", i, firstDiff(got, wantRaw))
					}
					if diff := cmp.Diff(viewOf(want), viewOf(o)); diff != "" {
						t.Errorf("row %d (-plain +table):\n%s", i, diff)
					}
					if !bytes.Equal(o.Cells, compact(t, served.Rows[i].Cells)) {
						t.Errorf("row %d: Cells %s, want %s", i, o.Cells, served.Rows[i].Cells)
					}
					checkRaw(t, o.Raw)
					if cap(o.Cells) != len(o.Cells) || unsafe.Add(unsafe.Pointer(unsafe.SliceData(o.Raw)), len(o.Raw)) != unsafe.Pointer(unsafe.SliceData(o.Cells)) {
						t.Errorf("row %d: Cells are not right after Raw in one allocation", i)
					}
					if o.Columns != nil {
						t.Errorf("row %d: decodeList set Columns; the list's caller does", i)
					}
				}
			})
		}
	}
}

// TestDecodeTablePages decodes a paged Table list: the continue token and
// remaining count come through, and the pages' columns are the same bytes.
func TestDecodeTablePages(t *testing.T) {
	d := newObjectDecoder(podGVK, false, nil)
	var cols []byte
	var names []string
	for i, file := range []string{"pods-page1.json", "pods-page2.json"} {
		l, err := d.decodeList(bytes.NewReader(readFile(t, "testdata/tables/"+file)))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			cols = l.table.columns
			if l.Continue == "" || l.RemainingItemCount == nil || *l.RemainingItemCount != 1 {
				t.Fatalf("page 1 metadata %+v, want a continue token and 1 remaining", l.ListMeta)
			}
		} else if !bytes.Equal(cols, l.table.columns) || l.Continue != "" {
			t.Fatalf("page 2: other columns, or continue %q", l.Continue)
		}
		for _, o := range l.Items {
			names = append(names, o.Name)
		}
	}
	if diff := cmp.Diff([]string{"p1", "p2", "p3"}, names); diff != "" {
		t.Fatalf("objects (-want +got):\n%s", diff)
	}
}

// TestDecodeTableWatchMatchesPlain decodes the same watch served as Tables
// and as plain JSON, pods (with the bookmark rows kube-apiserver prints
// for empty objects) and a custom resource with columns of every type.
func TestDecodeTableWatchMatchesPlain(t *testing.T) {
	for _, c := range tableCorpora {
		d := newObjectDecoder(c.gvk, false, []string{"spec.nodeName", "spec.owner"})
		tableStream := readFile(t, "testdata/tables/"+c.name+"-watch-table.jsonl")
		plainStream := readFile(t, "testdata/tables/"+c.name+"-watch-plain.jsonl")
		var served []struct {
			Type   watch.EventType
			Object servedTable
		}
		for line := range bytes.Lines(tableStream) {
			var e struct {
				Type   watch.EventType
				Object json.RawMessage
			}
			if err := json.Unmarshal(line, &e); err != nil {
				t.Fatal(err)
			}
			served = append(served, struct {
				Type   watch.EventType
				Object servedTable
			}{e.Type, readTable(t, e.Object)})
		}
		listed, err := columnsOf(nil, served[0].Object.ColumnDefinitions)
		if err != nil {
			t.Fatal(err)
		}
		for rname, r := range readers(tableStream) {
			t.Run(c.name+"/"+rname, func(t *testing.T) {
				plain := newWatchDecoder(io.NopCloser(bytes.NewReader(plainStream)), d)
				dec := newTableWatchDecoder(io.NopCloser(r()), d, listed, func(reason string) {
					t.Errorf("plain called: %s", reason)
				})
				for i, s := range served {
					typ, obj, err := dec.Decode()
					if err != nil {
						t.Fatalf("event %d: %v", i, err)
					}
					ptyp, pobj, err := plain.Decode()
					if err != nil {
						t.Fatal(err)
					}
					if typ != s.Type || typ != ptyp {
						t.Fatalf("event %d: %s, want %s (plain: %s)", i, typ, s.Type, ptyp)
					}
					o, p := obj.(*Object), pobj.(*Object)
					if !bytes.Equal(o.Raw, p.Raw) {
						t.Errorf("event %d: Raw differs from the plain event's: %s", i, firstDiff(o.Raw, p.Raw))
					}
					if diff := cmp.Diff(viewOf(p), viewOf(o)); diff != "" {
						t.Errorf("event %d (-plain +table):\n%s", i, diff)
					}
					if typ == watch.Bookmark {
						if o.Cells != nil || o.Columns != nil || o.RV == 0 || o.ResourceVersion != s.Object.Metadata.ResourceVersion {
							t.Errorf("bookmark %d: cells %s, columns %p, rv %q; want no cells and the Table's version %q",
								i, o.Cells, o.Columns, o.ResourceVersion, s.Object.Metadata.ResourceVersion)
						}
						continue
					}
					if !bytes.Equal(o.Cells, compact(t, s.Object.Rows[0].Cells)) || o.Columns != listed {
						t.Errorf("event %d: cells %s columns %p; want %s and %p", i, o.Cells, o.Columns, s.Object.Rows[0].Cells, listed)
					}
				}
				if _, _, err := dec.Decode(); err != io.EOF {
					t.Fatalf("after the last event: %v, want io.EOF", err)
				}
			})
		}
	}
}

// tableEvent renders a Table watch event the way kube-apiserver does, with
// members in the given order; cells and object are raw JSON.
func tableEvent(typ string, columns, cells, object string, order ...string) string {
	members := map[string]string{
		"kind":              `"kind":"Table"`,
		"apiVersion":        `"apiVersion":"meta.k8s.io/v1"`,
		"metadata":          `"metadata":{"resourceVersion":"9"}`,
		"columnDefinitions": `"columnDefinitions":` + columns,
		"rows":              `"rows":[{"cells":` + cells + `,"object":` + object + `}]`,
	}
	if len(order) == 0 {
		order = []string{"kind", "apiVersion", "metadata", "columnDefinitions", "rows"}
	}
	var parts []string
	for _, m := range order {
		parts = append(parts, members[m])
	}
	return fmt.Sprintf(`{"type":%q,"object":{%s}}`, typ, strings.Join(parts, ","))
}

const (
	testColumns = `[{"name":"Name","type":"string","format":"name","description":"","priority":0},{"name":"Size","type":"integer","format":"","description":"","priority":0}]`
	testPod     = `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","namespace":"ns","resourceVersion":"9","managedFields":[{"manager":"x"}]},"spec":{"nodeName":"n1"}}`
)

// TestDecodeTableWatchShapes covers what other encoders and odd orders
// send, and what makes the watch end so that the reflector lists again.
func TestDecodeTableWatchShapes(t *testing.T) {
	d := newObjectDecoder(podGVK, false, []string{"spec.nodeName"})
	listed, err := columnsOf(nil, []byte(testColumns))
	if err != nil {
		t.Fatal(err)
	}
	const cells = "[\"a\",\n\t7]" // with a line break: made one line
	for _, tc := range []struct {
		name  string
		event string
		// ok: the event decodes to an object with the cells and columns;
		// else it ends the watch with a 410 (plain says whether the
		// upstream is then read as plain JSON).
		ok, plain bool
	}{
		{"apiserver order", tableEvent("ADDED", testColumns, cells, testPod), true, false},
		{"no columns after the first event", tableEvent("MODIFIED", "null", cells, testPod), true, false},
		{"rows before kind", tableEvent("ADDED", "null", cells, testPod, "rows", "kind", "metadata"), true, false},
		{"rows only, then kind", tableEvent("ADDED", "null", cells, testPod, "columnDefinitions", "rows", "apiVersion", "kind"), true, false},
		{"object before type", `{"object":` + strings.TrimSuffix(strings.TrimPrefix(tableEvent("ADDED", "null", cells, testPod), `{"type":"ADDED","object":`), "}") + `,"type":"ADDED"}`, true, false},
		{"object before cells", `{"type":"DELETED","object":{"kind":"Table","rows":[{"object":` + testPod + `,"conditions":[],"cells":` + cells + `}]}}`, true, false},
		{"equal columns encoded otherwise", tableEvent("ADDED", strings.ReplaceAll(testColumns, `,"priority":0`, ""), cells, testPod), true, false},
		{"other columns", tableEvent("ADDED", `[{"name":"Name","type":"string"}]`, cells, testPod), false, false},
		{"other columns on a bookmark", tableEvent("BOOKMARK", `[{"name":"Name","type":"string"}]`, `["",null]`, `{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"9"}}`), false, false},
		{"a plain object", `{"type":"ADDED","object":` + testPod + `}`, false, true},
		{"metadata only", tableEvent("ADDED", "null", cells, `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"a"}}`), false, true},
		{"no object", tableEvent("MODIFIED", "null", cells, "null"), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plain := ""
			dec := newTableWatchDecoder(io.NopCloser(strings.NewReader(tc.event+"\n"+tc.event+"\n")), d, listed, func(reason string) { plain = reason })
			typ, obj, err := dec.Decode()
			if err != nil {
				t.Fatal(err)
			}
			if !tc.ok {
				st, ok := obj.(*metav1.Status)
				if typ != watch.Error || !ok || st.Code != 410 || st.Reason != metav1.StatusReasonExpired {
					t.Fatalf("Decode = %s %#v, want an ERROR 410 Expired", typ, obj)
				}
				if (plain != "") != tc.plain {
					t.Fatalf("plain called with %q, want called: %v", plain, tc.plain)
				}
				if _, _, err := dec.Decode(); err != io.EOF {
					t.Fatalf("Decode after the ERROR: %v, want io.EOF", err)
				}
				return
			}
			o := obj.(*Object)
			if string(o.Cells) != `["a",7]` || o.Columns != listed || o.Name != "a" || o.Get("spec.nodeName") != "n1" ||
				bytes.Contains(o.Raw, []byte("managedFields")) || plain != "" {
				t.Fatalf("object %s cells %s columns %p (want %p), plain %q", o.Raw, o.Cells, o.Columns, listed, plain)
			}
			if _, _, err := dec.Decode(); err != nil {
				t.Fatalf("the next event: %v", err)
			}
		})
	}

	// Bookmarks: kube-apiserver's Table row with an empty object, and the
	// bare object another kubegate sends; both give the version and the
	// annotations the reflector reads.
	for _, ev := range []string{
		tableEvent("BOOKMARK", "null", `["","0/0",""]`, `{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"241","annotations":{"k8s.io/initial-events-end":"true"}},"spec":{"containers":null},"status":{}}`),
		`{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"241","annotations":{"k8s.io/initial-events-end":"true"}}}}`,
	} {
		dec := newTableWatchDecoder(io.NopCloser(strings.NewReader(ev)), d, listed, func(string) { t.Error("plain called for a bookmark") })
		typ, obj, err := dec.Decode()
		o, _ := obj.(*Object)
		if err != nil || typ != watch.Bookmark || o.RV != 241 || o.Annotations[metav1.InitialEventsAnnotationKey] != "true" || o.Cells != nil {
			t.Errorf("bookmark %s: %s %+v, %v", ev, typ, obj, err)
		}
	}

	// ERROR events are a plain Status in Table watches too.
	st := `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (225)","reason":"Expired","code":410}}`
	dec := newTableWatchDecoder(io.NopCloser(strings.NewReader(st)), d, listed, func(string) { t.Error("plain called for an ERROR") })
	if typ, obj, err := dec.Decode(); err != nil || typ != watch.Error || obj.(*metav1.Status).Message != "too old resource version: 1 (225)" {
		t.Errorf("ERROR: %s %+v, %v", typ, obj, err)
	}

	for _, bad := range []string{
		tableEvent("ADDED", "null", `{"a":1}`, testPod),
		`{"type":"ADDED","object":{"kind":"Table","rows":[{"object":` + testPod + `}]}}`,
		`{"type":"ADDED","object":{"kind":"Table","rows":[]}}`,
		`{"type":"ADDED","object":{"kind":"Table","rows":[{"cells":[],"object":` + testPod + `},{"cells":[],"object":` + testPod + `}]}}`,
		`{"type":"ADDED","object":{"kind":"Table","rows":{}}}`,
		`{"type":"BOOKMARK","object":{"kind":"Table","rows":[{"cells":[]}]}}`,
		tableEvent("ADDED", `[{"name":1}]`, cells, testPod),
	} {
		dec := newTableWatchDecoder(io.NopCloser(strings.NewReader(bad)), d, listed, func(string) {})
		typ, obj, err := dec.Decode()
		if st, ok := obj.(*metav1.Status); err == nil && !(typ == watch.Error && ok && st.Code == 410) {
			t.Errorf("Decode(%s) = %s %+v, want an error or a 410", bad, typ, obj)
		}
	}
}

func TestDecodeTableListShapes(t *testing.T) {
	d := newObjectDecoder(podGVK, false, nil)
	row := `{"cells":["a"],"object":` + testPod + `}`
	for _, tc := range []struct {
		in      string
		n       int
		partial bool
	}{
		{`{"kind":"Table","columnDefinitions":[],"rows":[]}`, 0, false},
		{`{"rows":[` + row + `,` + row + `],"metadata":{"resourceVersion":"3"}}`, 2, false},
		{`{"kind":"Table","rows":[{"cells":["a"],"object":{"kind":"PartialObjectMetadata","metadata":{"name":"a"}}},` + row + `]}`, 1, true},
		{`{"kind":"Table","rows":[{"cells":["a"]}]}`, 0, true},
	} {
		l, err := d.decodeList(strings.NewReader(tc.in))
		if err != nil {
			t.Errorf("decodeList(%s): %v", tc.in, err)
			continue
		}
		if l.table == nil || len(l.Items) != tc.n || l.table.partial != tc.partial {
			t.Errorf("decodeList(%s) = %d items, table %+v; want %d, partial %v", tc.in, len(l.Items), l.table, tc.n, tc.partial)
		}
		if l.table != nil && l.table.columns == nil {
			t.Errorf("decodeList(%s): no columns", tc.in)
		}
	}
	for _, bad := range []string{
		`{"columnDefinitions":[]}`,
		`{"rows":[],"items":[]}`,
		`{"rows":[{"cells":{},"object":` + testPod + `}]}`,
		`{"rows":[{"object":` + testPod + `}]}`,
		`{"rows":[1]}`,
	} {
		if l, err := d.decodeList(strings.NewReader(bad)); err == nil {
			t.Errorf("decodeList(%s) = %+v, want an error", bad, l)
		}
	}
}

// TestColumnsOf checks that equal definitions give the same pointer.
func TestColumnsOf(t *testing.T) {
	c, err := columnsOf(nil, []byte(" "+testColumns+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if string(c.Raw) != testColumns || len(c.Definitions) != 2 || c.Definitions[1].Type != "integer" {
		t.Fatalf("columnsOf = %+v", c)
	}
	for _, same := range []string{testColumns, strings.ReplaceAll(testColumns, `"format":"",`, "")} {
		if got, err := columnsOf(c, []byte(same)); err != nil || got != c {
			t.Errorf("columnsOf(c, %s) = %p, %v; want c (%p)", same, got, err, c)
		}
	}
	other, err := columnsOf(c, []byte(`[{"name":"Name","type":"string"}]`))
	if err != nil || other == c {
		t.Errorf("other columns: %p, %v", other, err)
	}
	if none, err := columnsOf(nil, []byte("null")); err != nil || string(none.Raw) != "[]" || len(none.Definitions) != 0 {
		t.Errorf("null columns: %+v, %v", none, err)
	}
}

var _ runtime.Object = (*objectList)(nil)
