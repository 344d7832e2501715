package informer

import (
	"bytes"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"
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
