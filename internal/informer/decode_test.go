package informer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// oldTransform is the Unstructured → *Object transform the informer used
// before objectDecoder (transformer.fromUnstructured), kept here as the
// decoder's oracle.
func oldTransform(gvk schema.GroupVersionKind, keepManagedFields bool, selectableFields []string, u *unstructured.Unstructured) (*Object, error) {
	if !keepManagedFields {
		unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
	}
	if u.GetKind() == "" {
		u.SetAPIVersion(gvk.GroupVersion().String())
		u.SetKind(gvk.Kind)
	}
	raw, err := u.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encode %s %s/%s: %w", gvk.Kind, u.GetNamespace(), u.GetName(), err)
	}
	o := &Object{Raw: raw}
	o.Namespace = u.GetNamespace()
	o.Name = u.GetName()
	o.UID = u.GetUID()
	o.ResourceVersion = u.GetResourceVersion()
	o.RV, _ = strconv.ParseUint(o.ResourceVersion, 10, 64)
	o.Labels = u.GetLabels()
	o.CreationTimestamp = u.GetCreationTimestamp()
	o.DeletionTimestamp = u.GetDeletionTimestamp()
	for _, f := range selectableFields {
		if v, ok := oldNestedFieldString(u.Object, f); ok {
			o.extra = append(o.extra, f, v)
		}
	}
	return o, nil
}

// oldNestedFieldString is object.go's nestedFieldString, as oldTransform
// used it.
func oldNestedFieldString(obj map[string]any, path string) (string, bool) {
	v, ok, err := unstructured.NestedFieldNoCopy(obj, strings.Split(path, ".")...)
	if err != nil || !ok {
		return "", false
	}
	switch x := v.(type) {
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	}
	return "", false
}

// oldDecode is what the informer did per object before objectDecoder:
// Unstructured.UnmarshalJSON, then the transform. List items of built-in
// types have no kind, which UnmarshalJSON reports after decoding; the old
// path got them from an UnstructuredList and so never saw that error.
func oldDecode(gvk schema.GroupVersionKind, keep bool, fields []string, b []byte) (*Object, error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil && !runtime.IsMissingKind(err) {
		return nil, err
	}
	return oldTransform(gvk, keep, fields, u)
}

// objectView is what decode promises about an Object besides Raw.
type objectView struct {
	Namespace, Name   string
	UID               types.UID
	ResourceVersion   string
	RV                uint64
	Labels            map[string]string
	CreationTimestamp metav1.Time
	DeletionTimestamp *metav1.Time
	Extra             []string
}

func viewOf(o *Object) objectView {
	v := objectView{o.Namespace, o.Name, o.UID, o.ResourceVersion, o.RV, o.Labels,
		o.CreationTimestamp, o.DeletionTimestamp, o.extra}
	// Unstructured gives an empty map for "labels":{}; the decoder gives
	// nil, which selects the same and costs nothing.
	if len(v.Labels) == 0 {
		v.Labels = nil
	}
	return v
}

// canonicalJSON decodes b with encoding/json, keeping numbers as written,
// and encodes it again: two encodings of the same JSON value give the
// same bytes.
func canonicalJSON(b []byte) ([]byte, error) {
	v, err := decodeAny(b)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

func decodeAny(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("data after the value: %v", err)
	}
	return v, nil
}

// referenceRaw is what Raw must hold for input b, canonicalised: b with
// metadata.managedFields deleted (unless kept) and apiVersion and kind set
// as the old transform set them. Numbers keep their digits: the old path
// rounded integers beyond int64 through float64, the decoder keeps what
// the apiserver served.
func referenceRaw(gvk schema.GroupVersionKind, keep bool, b []byte) ([]byte, error) {
	v, err := decodeAny(b)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("not an object: %T", v)
	}
	if md, ok := m["metadata"].(map[string]any); ok && !keep {
		delete(md, "managedFields")
	}
	if k, _ := m["kind"].(string); k == "" {
		m["apiVersion"] = gvk.GroupVersion().String()
		m["kind"] = gvk.Kind
	}
	return json.Marshal(m)
}

// checkRaw checks what Raw must be whatever the input: one line of valid
// JSON in an exactly sized buffer.
func checkRaw(t testing.TB, raw []byte) {
	t.Helper()
	if i := bytes.IndexAny(raw, "\n\r\t"); i >= 0 {
		t.Fatalf("Raw has %q at %d: %s", raw[i], i, raw)
	}
	if !jsontext.Value(raw).IsValid() {
		t.Fatalf("Raw is not valid JSON: %s", raw)
	}
	if len(raw) != cap(raw) {
		t.Fatalf("Raw has len %d, cap %d", len(raw), cap(raw))
	}
}

// compareWithOracle decodes b with d and checks the result against the
// old path (metadata, labels, timestamps, selectable fields) and against
// encoding/json (Raw).
func compareWithOracle(t testing.TB, d *objectDecoder, b []byte) *Object {
	t.Helper()
	o, err := d.decode(b)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	checkRaw(t, o.Raw)
	want, err := oldDecode(d.gvk, d.keepManagedFields, d.selectableFields, b)
	if err != nil {
		t.Fatalf("old decode: %v", err)
	}
	if diff := cmp.Diff(viewOf(want), viewOf(o)); diff != "" {
		t.Errorf("Object differs from the old transform's (-old +new):\n%s", diff)
	}
	wantRaw, err := referenceRaw(d.gvk, d.keepManagedFields, b)
	if err != nil {
		t.Fatalf("reference Raw: %v", err)
	}
	gotRaw, err := canonicalJSON(o.Raw)
	if err != nil {
		t.Fatalf("Raw: %v\n%s", err, o.Raw)
	}
	if !bytes.Equal(gotRaw, wantRaw) {
		t.Errorf("Raw differs from the reference, canonicalised: %s", firstDiff(gotRaw, wantRaw))
	}
	return o
}

func hasKind(t testing.TB, b []byte) bool {
	t.Helper()
	v, err := decodeAny(b)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := v.(map[string]any)["kind"].(string)
	return k != ""
}

// firstDiff describes where got and want part, with some context.
func firstDiff(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(0, i-60)
	return fmt.Sprintf("at byte %d (len %d, want %d):\n got: …%s…\nwant: …%s…",
		i, len(got), len(want), got[from:min(len(got), i+60)], want[from:min(len(want), i+60)])
}

// corpusResource configures the decoder for the corpus files whose names
// start with its key.
type corpusResource struct {
	gvk    schema.GroupVersionKind
	fields []string
}

var (
	// podFields are the paths of pods' selectable fields that are read
	// from one path each, as the old transform read them.
	podFields = []string{"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
		"spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"}
	podGVK      = schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	oddityGVK   = schema.GroupVersionKind{Group: "test.kubegate.io", Version: "v1", Kind: "Oddity"}
	oddityPaths = []string{"spec.color", "spec.size", "spec.pi", "spec.tiny", "spec.exp", "spec.negZero",
		"spec.huge", "spec.bigInt64", "spec.beyondInt64", "spec.unicode", "spec.t", "spec.f", "spec.null",
		"spec.kind", "spec.nested.a", "spec.nested.c", "spec.a<b>&c", "spec.tab\tkey", "spec.managedFields",
		"metadata.labels.managedFields", "metadata.annotations.note", "metadata.generation", "metadata.managedFields",
		"metadata.name", "kind", "apiVersion"}
	// edgePaths reach into every part of the decoder's walk.
	edgePaths = []string{"kind", "apiVersion", "kind.x", "metadata", "metadata.uid", "metadata.creationTimestamp",
		"metadata.labels.app", "metadata.labels.a", "metadata.labels.managedFields", "metadata.managedFields",
		"metadata.annotations.managedFields", "spec", "spec.big", "spec.a.b", "spec.managedFields"}

	corpusResources = map[string]corpusResource{
		"pods":  {podGVK, podFields},
		"nodes": {schema.GroupVersionKind{Version: "v1", Kind: "Node"}, []string{"spec.unschedulable"}},
		"events": {schema.GroupVersionKind{Version: "v1", Kind: "Event"}, []string{"involvedObject.kind", "involvedObject.namespace",
			"involvedObject.name", "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
			"involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"}},
		"deployments": {schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, nil},
		"customresourcedefinitions": {schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1",
			Kind: "CustomResourceDefinition"}, []string{"spec.group", "spec.scope"}},
		"oddities": {oddityGVK, oddityPaths},
		"edge":     {podGVK, append(append([]string(nil), podFields...), edgePaths...)},
	}
)

func corpusConfig(t testing.TB, file string) corpusResource {
	t.Helper()
	prefix, _, _ := strings.Cut(filepath.Base(file), "-")
	r, ok := corpusResources[prefix]
	if !ok {
		t.Fatalf("%s: no corpusResources entry for %q", file, prefix)
	}
	return r
}

func corpusFiles(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/objects/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 20 {
		t.Fatalf("found %d corpus files, want at least 20", len(files))
	}
	return files
}

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecodeMatchesEncodingJSON decodes objects captured from
// kube-apiserver (GETs, which carry kind, and LIST items, which for
// built-in types do not) and hand-written edge cases, and compares the
// result with the old Unstructured path and encoding/json.
func TestDecodeMatchesEncodingJSON(t *testing.T) {
	for _, keep := range []bool{false, true} {
		for _, file := range corpusFiles(t) {
			t.Run(fmt.Sprintf("keepManagedFields=%v/%s", keep, filepath.Base(file)), func(t *testing.T) {
				r := corpusConfig(t, file)
				b := readFile(t, file)
				o := compareWithOracle(t, newObjectDecoder(r.gvk, keep, r.fields), b)
				if !keep && bytes.Contains(o.Raw, []byte(`"managedFields":[{`)) {
					t.Errorf("Raw still has managedFields: %s", o.Raw)
				}
			})
		}
	}
}

// TestDecodeKeepsServedBytes checks that Raw is the apiserver's bytes, not
// a re-encoding: with nothing to cut, insert or compact, it is the input
// without its trailing newline.
func TestDecodeKeepsServedBytes(t *testing.T) {
	n := 0
	for _, file := range corpusFiles(t) {
		b := readFile(t, file)
		body := bytes.TrimRight(b, "\n")
		if bytes.ContainsAny(body, "\n\r\t") || !hasKind(t, body) || strings.HasPrefix(filepath.Base(file), "edge-") {
			continue
		}
		n++
		r := corpusConfig(t, file)
		o, err := newObjectDecoder(r.gvk, true, r.fields).decode(b)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if !bytes.Equal(o.Raw, body) {
			t.Errorf("%s: Raw is not the served bytes: %s", file, firstDiff(o.Raw, body))
		}
	}
	if n < 5 {
		t.Fatalf("checked %d files, want at least 5", n)
	}
}

// TestDecodeKeepsDigits pins the one intended difference from the old
// path: numbers keep the digits they were served with, where
// Unstructured rounded integers beyond int64 through float64.
func TestDecodeKeepsDigits(t *testing.T) {
	b := readFile(t, "testdata/objects/edge-numbers.json")
	d := newObjectDecoder(podGVK, false, podFields)
	o, err := d.decode(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, digits := range []string{"123456789012345678901234567890", "9223372036854775808", "12345678901234567890", "-1e-400", "1.5e3"} {
		if !bytes.Contains(o.Raw, []byte(digits)) {
			t.Errorf("Raw lost %s: %s", digits, o.Raw)
		}
	}
	old, err := oldDecode(podGVK, false, podFields, b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(old.Raw, []byte("1.2345678901234568e+29")) {
		t.Errorf("the old path no longer rounds; update this test: %s", old.Raw)
	}
	// The selectable fields render as they always did.
	if got, want := o.Get("spec.nodeName"), "123456789012345680000000000000"; got != want {
		t.Errorf("spec.nodeName = %q, want %q", got, want)
	}
}

// TestDecodeSemantics pins the decoder's choices on edge cases.
func TestDecodeSemantics(t *testing.T) {
	d := newObjectDecoder(podGVK, false, []string{"spec.nodeName", "status.phase", "kind", "apiVersion", "kind.x"})
	for _, c := range []struct {
		name, in, raw string
		extra         []string
	}{
		{"kind missing", `{"metadata":{"name":"a"},"spec":{"nodeName":"n"}}`,
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":{"nodeName":"n"}}`,
			[]string{"spec.nodeName", "n", "kind", "Pod", "apiVersion", "v1"}},
		{"kind empty, apiVersion replaced", `{"kind":"","apiVersion":"x/v1","metadata":{}}`,
			`{"apiVersion":"v1","kind":"Pod","metadata":{}}`, []string{"kind", "Pod", "apiVersion", "v1"}},
		{"kind and apiVersion only", `{"apiVersion":"x/v1","kind":""}`,
			`{"apiVersion":"v1","kind":"Pod"}`, []string{"kind", "Pod", "apiVersion", "v1"}},
		{"kind set, apiVersion missing is left alone", `{"kind":"Pod","metadata":{}}`,
			`{"kind":"Pod","metadata":{}}`, []string{"kind", "Pod"}},
		{"empty object", `{}`, `{"apiVersion":"v1","kind":"Pod"}`, []string{"kind", "Pod", "apiVersion", "v1"}},
		{"managedFields first", `{"kind":"Pod","metadata":{"managedFields":[],"name":"a"}}`,
			`{"kind":"Pod","metadata":{"name":"a"}}`, []string{"kind", "Pod"}},
		{"managedFields middle", `{"kind":"Pod","metadata":{"name":"a" , "managedFields" : [ ] ,"uid":"u"}}`,
			`{"kind":"Pod","metadata":{"name":"a" ,"uid":"u"}}`, []string{"kind", "Pod"}},
		{"managedFields last", `{"kind":"Pod","metadata":{"name":"a","managedFields":[{}] }}`,
			`{"kind":"Pod","metadata":{"name":"a" }}`, []string{"kind", "Pod"}},
		{"managedFields only", `{"kind":"Pod","metadata":{ "managedFields":[] }}`,
			`{"kind":"Pod","metadata":{  }}`, []string{"kind", "Pod"}},
		{"escaped managedFields", `{"kind":"Pod","metadata":{"managed\u0046ields":[]}}`,
			`{"kind":"Pod","metadata":{}}`, []string{"kind", "Pod"}},
		{"line breaks compacted", "{\n\"kind\": \"Pod\",\n\t\"metadata\": {}\r\n}\n",
			`{"kind":"Pod","metadata":{}}`, []string{"kind", "Pod"}},
		{"plain spaces kept", `{ "kind" : "Pod" }  `, `{ "kind" : "Pod" }`, []string{"kind", "Pod"}},
		{"numbers beyond float64 have no field value", `{"kind":"Pod","spec":{"nodeName":1e400},"status":{"phase":-1E999}}`,
			`{"kind":"Pod","spec":{"nodeName":1e400},"status":{"phase":-1E999}}`, []string{"kind", "Pod"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			o, err := d.decode([]byte(c.in))
			if err != nil {
				t.Fatal(err)
			}
			checkRaw(t, o.Raw)
			if string(o.Raw) != c.raw {
				t.Errorf("Raw = %s, want %s", o.Raw, c.raw)
			}
			if diff := cmp.Diff(c.extra, o.extra); diff != "" {
				t.Errorf("extra (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecodeErrors checks that malformed input fails cleanly, including
// what encoding/json would accept but the decoder (RFC 7493) does not.
func TestDecodeErrors(t *testing.T) {
	d := newObjectDecoder(podGVK, false, podFields)
	for _, in := range []string{
		``, ` `, `null`, `[]`, `"x"`, `1`, `{`, `{"a":}`, `{"a":1,}`, `{"a" 1}`, `{"metadata":{"name":"x"}`,
		`{"a":1}{}`, `{"a":1} x`, `{"a":1}]`, `{'a':1}`, `{"a":01}`, `{"a":NaN}`, `{"a":"\x"}`,
		"{\"a\":\"\x00\"}", "\xef\xbb\xbf{}",
		// Accepted by encoding/json, rejected by jsontext:
		`{"a":1,"a":2}`, `{"metadata":{"name":"a","n\u0061me":"b"}}`, // duplicate names
		"{\"a\":\"\xff\"}", "{\"\xc3\":1}", // invalid UTF-8
		`{"a":"\ud800"}`, `{"a":"\udc00\ud800"}`, // unpaired surrogates
	} {
		if o, err := d.decode([]byte(in)); err == nil {
			t.Errorf("decode(%q) = %s, want an error", in, o.Raw)
		}
	}
}

// TestDecodeRawOwnsItsBytes checks that the caller may reuse its buffer.
func TestDecodeRawOwnsItsBytes(t *testing.T) {
	b := readFile(t, "testdata/objects/pods-get.json")
	d := newObjectDecoder(podGVK, false, podFields)
	o, err := d.decode(b)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(o.Raw)
	wantName := o.Name
	for i := range b {
		b[i] = 'x'
	}
	if !bytes.Equal(o.Raw, want) || o.Name != wantName {
		t.Fatal("Object changed with the caller's buffer")
	}
}

// TestDecodeConcurrent runs decoders side by side, for the race detector.
func TestDecodeConcurrent(t *testing.T) {
	files := corpusFiles(t)
	d := newObjectDecoder(podGVK, false, podFields)
	want := make([]*Object, len(files))
	inputs := make([][]byte, len(files))
	for i, f := range files {
		inputs[i] = readFile(t, f)
		o, err := d.decode(inputs[i])
		if err != nil {
			t.Fatal(err)
		}
		want[i] = o
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				k := (g + i) % len(files)
				o, err := d.decode(inputs[k])
				if err != nil {
					t.Error(err)
					return
				}
				if !bytes.Equal(o.Raw, want[k].Raw) || !cmp.Equal(viewOf(o), viewOf(want[k])) {
					t.Errorf("%s: concurrent decode differs", files[k])
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestDecodeBookmarkAnnotationsOnlyInWatch(t *testing.T) {
	d := newObjectDecoder(podGVK, false, nil)
	o, err := d.decode([]byte(`{"kind":"Pod","metadata":{"annotations":{"a":"b"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if o.Annotations != nil {
		t.Errorf("Annotations = %v, want none outside bookmarks", o.Annotations)
	}
}
