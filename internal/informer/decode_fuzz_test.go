package informer

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/watch"
)

// FuzzDecodeObject feeds arbitrary bytes to objectDecoder.decode. It must
// never panic; it must reject what encoding/json rejects; it may reject
// more only where jsontext (RFC 7493) is stricter than encoding/json (RFC
// 8259): duplicate member names, invalid UTF-8 and escaped unpaired
// surrogates. What it accepts must match the old Unstructured path and
// encoding/json as in TestDecodeMatchesEncodingJSON.
func FuzzDecodeObject(f *testing.F) {
	for _, file := range corpusFiles(f) {
		f.Add(readFile(f, file))
	}
	for _, s := range []string{
		`{}`, `{"kind":""}`, `{"metadata":{"managedFields":[],"name":"a"}}`, `{"a":1,"a":2}`,
		"{\"a\":\"\xff\"}", `{"a":"\ud800"}`, `{"metadata":{"labels":{"a":null,"b":1}}}`,
		`{"spec":{"nodeName":1e400}}`, `{"spec":{"nodeName":-0.0e-0}}`, "{\n\t\"kind\":\r\"\"}",
	} {
		f.Add([]byte(s))
	}
	fields := append(append([]string(nil), podFields...), edgePaths...)
	fields = append(fields, "a", "a.b", "a.b.c", "metadata.name", "metadata.labels.a", "metadata.annotations.a")
	decoders := []*objectDecoder{newObjectDecoder(podGVK, false, fields), newObjectDecoder(podGVK, true, fields)}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, d := range decoders {
			in := bytes.Clone(b)
			o, err := d.decode(in)
			wantRaw, refErr := referenceRaw(d.gvk, d.keepManagedFields, b)
			if refErr != nil {
				if err == nil {
					t.Fatalf("decode accepted what encoding/json rejects (%v): %q", refErr, b)
				}
				continue
			}
			if err != nil {
				if jsontext.Value(b).IsValid() || !jsontext.Value(b).IsValid(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)) {
					t.Fatalf("decode rejected what encoding/json accepts, for no documented reason: %v\n%q", err, b)
				}
				continue
			}
			raw := bytes.Clone(o.Raw)
			clear(in)
			if !bytes.Equal(o.Raw, raw) {
				t.Fatal("Raw changed with the caller's buffer")
			}
			checkRaw(t, o.Raw)
			gotRaw, err := canonicalJSON(o.Raw)
			if err != nil {
				t.Fatalf("Raw: %v: %q", err, o.Raw)
			}
			if !bytes.Equal(gotRaw, wantRaw) {
				t.Fatalf("Raw differs from the reference: %s\n raw: %q\n  in: %q", firstDiff(gotRaw, wantRaw), o.Raw, b)
			}
			old, err := oldDecode(d.gvk, d.keepManagedFields, d.selectableFields, b)
			if err != nil {
				// Unstructured decodes numbers into float64 and so fails
				// on those beyond its range, which the decoder passes on.
				if strings.Contains(err.Error(), "cannot unmarshal number") {
					continue
				}
				t.Fatalf("the old path failed where the decoder did not: %v\n%q", err, b)
			}
			if diff := cmp.Diff(viewOf(old), viewOf(o)); diff != "" {
				t.Fatalf("Object differs from the old transform's (-old +new):\n%s\n%q", diff, b)
			}
		}
	})
}

// FuzzDecodeTable feeds arbitrary bytes to the Table paths: as a list
// body and as a Table watch stream, each read whole and a byte at a time.
// It must never panic; both readings must agree; what is accepted must
// be well formed: Raw and Cells one line of valid JSON, Cells an array,
// and every watch object given the listed columns.
func FuzzDecodeTable(f *testing.F) {
	for _, name := range []string{"pods-table.json", "widgets-table.json", "pods-page1.json", "pods-watch-table.jsonl", "widgets-watch-table.jsonl"} {
		f.Add(readFile(f, "testdata/tables/"+name))
	}
	for _, s := range []string{
		tableEvent("ADDED", "null", `["a",1]`, testPod),
		tableEvent("ADDED", "null", `["a",1]`, testPod, "rows", "kind"),
		`{"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"3"}}}`,
		`{"kind":"Table","rows":[{"cells":[],"object":null}]}`,
		`{"object":{"kind":"Table","rows":[{"object":{},"cells":[]}]},"type":"MODIFIED"}`,
	} {
		f.Add([]byte(s))
	}
	d := newObjectDecoder(podGVK, false, podFields)
	listed := &Columns{Raw: []byte(testColumns)}
	wellFormed := func(t *testing.T, o *Object) {
		checkRaw(t, o.Raw)
		if o.Cells != nil {
			if !oneLine(o.Cells) || !jsontext.Value(o.Cells).IsValid() || o.Cells[0] != '[' {
				t.Fatalf("Cells %q", o.Cells)
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		whole, err1 := d.decodeList(bytes.NewReader(b))
		bytewise, err2 := d.decodeList(iotest.OneByteReader(bytes.NewReader(b)))
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("list: whole %v, a byte at a time %v", err1, err2)
		}
		if err1 == nil {
			if len(whole.Items) != len(bytewise.Items) || (whole.table == nil) != (bytewise.table == nil) {
				t.Fatal("list: the readings differ")
			}
			for i, o := range whole.Items {
				wellFormed(t, o)
				if !bytes.Equal(o.Raw, bytewise.Items[i].Raw) || !bytes.Equal(o.Cells, bytewise.Items[i].Cells) {
					t.Fatalf("list item %d: the readings differ", i)
				}
			}
		}

		decs := []watch.Decoder{
			newTableWatchDecoder(io.NopCloser(bytes.NewReader(b)), d, listed, func(string) {}),
			newTableWatchDecoder(io.NopCloser(iotest.OneByteReader(bytes.NewReader(b))), d, listed, func(string) {}),
		}
		for i := 0; i < 100; i++ {
			typ1, obj1, err1 := decs[0].Decode()
			typ2, obj2, err2 := decs[1].Decode()
			if typ1 != typ2 || (err1 == nil) != (err2 == nil) {
				t.Fatalf("event %d: whole %s %v, a byte at a time %s %v", i, typ1, err1, typ2, err2)
			}
			if err1 != nil {
				return
			}
			o1, ok := obj1.(*Object)
			if !ok {
				continue // a Status
			}
			o2 := obj2.(*Object)
			wellFormed(t, o1)
			if !bytes.Equal(o1.Raw, o2.Raw) || !bytes.Equal(o1.Cells, o2.Cells) {
				t.Fatalf("event %d: the readings differ", i)
			}
			if typ1 != watch.Bookmark && (o1.Columns != listed || o1.Cells == nil) {
				t.Fatalf("event %d %s: columns %p, cells %q", i, typ1, o1.Columns, o1.Cells)
			}
		}
	})
}
