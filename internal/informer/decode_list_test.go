package informer

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// chunkReader returns 1 to 7 bytes per Read, in a sequence fixed by seed.
type chunkReader struct {
	r   io.Reader
	rng *rand.Rand
}

func newChunkReader(r io.Reader, seed uint64) *chunkReader {
	return &chunkReader{r: r, rng: rand.New(rand.NewPCG(seed, seed))}
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if n := 1 + c.rng.IntN(7); n < len(p) {
		p = p[:n]
	}
	return c.r.Read(p)
}

// readers returns the ways a test streams b: whole, a byte at a time, in
// small chunks, and with io.EOF returned along with the last bytes.
func readers(b []byte) map[string]func() io.Reader {
	return map[string]func() io.Reader{
		"whole":   func() io.Reader { return bytes.NewReader(b) },
		"onebyte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) },
		"chunks":  func() io.Reader { return newChunkReader(bytes.NewReader(b), 1) },
		"dataerr": func() io.Reader { return iotest.DataErrReader(newChunkReader(bytes.NewReader(b), 2)) },
	}
}

// listItems returns the items of a list body as served, and its metadata.
func listItems(t *testing.T, body []byte) ([]json.RawMessage, metav1.ListMeta) {
	t.Helper()
	var l struct {
		Metadata metav1.ListMeta
		Items    []json.RawMessage
	}
	if err := json.Unmarshal(body, &l); err != nil {
		t.Fatal(err)
	}
	return l.Items, l.Metadata
}

func TestDecodeList(t *testing.T) {
	for _, file := range []string{"pods.json", "pods-page.json"} {
		body := readFile(t, "testdata/lists/"+file)
		items, wantMeta := listItems(t, body)
		if len(items) < 2 {
			t.Fatalf("%s has %d items, want at least 2", file, len(items))
		}
		d := newObjectDecoder(podGVK, false, podFields)
		for name, r := range readers(body) {
			t.Run(file+"/"+name, func(t *testing.T) {
				l, err := d.decodeList(r())
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(wantMeta, l.ListMeta); diff != "" {
					t.Errorf("ListMeta (-want +got):\n%s", diff)
				}
				if len(l.Items) != len(items) {
					t.Fatalf("decoded %d items, want %d", len(l.Items), len(items))
				}
				for i, item := range items {
					want, err := d.decode(item)
					if err != nil {
						t.Fatal(err)
					}
					got := l.Items[i]
					checkRaw(t, got.Raw)
					if !bytes.Equal(got.Raw, want.Raw) {
						t.Errorf("item %d Raw differs from decoding it alone: %s", i, firstDiff(got.Raw, want.Raw))
					}
					if diff := cmp.Diff(viewOf(want), viewOf(got)); diff != "" {
						t.Errorf("item %d differs from decoding it alone (-alone +list):\n%s", i, diff)
					}
				}
			})
		}
	}
}

func TestDecodeListPage(t *testing.T) {
	d := newObjectDecoder(podGVK, false, podFields)
	l, err := d.decodeList(bytes.NewReader(readFile(t, "testdata/lists/pods-page.json")))
	if err != nil {
		t.Fatal(err)
	}
	acc, err := meta.ListAccessor(l)
	if err != nil {
		t.Fatal(err)
	}
	if acc.GetResourceVersion() == "" || acc.GetContinue() == "" {
		t.Errorf("resourceVersion %q, continue %q: want both", acc.GetResourceVersion(), acc.GetContinue())
	}
	if n := acc.GetRemainingItemCount(); n == nil || *n != 2 {
		t.Errorf("remainingItemCount = %v, want 2", n)
	}
}

// TestDecodeListMetaHelpers checks that client-go's pager and reflector
// can take the list apart.
func TestDecodeListMetaHelpers(t *testing.T) {
	d := newObjectDecoder(podGVK, false, podFields)
	l, err := d.decodeList(bytes.NewReader(readFile(t, "testdata/lists/pods.json")))
	if err != nil {
		t.Fatal(err)
	}
	var obj runtime.Object = l
	for name, extract := range map[string]func(runtime.Object) ([]runtime.Object, error){
		"ExtractList": meta.ExtractList, "ExtractListWithAlloc": meta.ExtractListWithAlloc,
	} {
		objs, err := extract(obj)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(objs) != len(l.Items) {
			t.Fatalf("%s: %d objects, want %d", name, len(objs), len(l.Items))
		}
		for i, o := range objs {
			if o != runtime.Object(l.Items[i]) {
				t.Errorf("%s: object %d is %T, not the item", name, i, o)
			}
		}
	}
	for name, each := range map[string]func(runtime.Object, func(runtime.Object) error) error{
		"EachListItem": meta.EachListItem, "EachListItemWithAlloc": meta.EachListItemWithAlloc,
	} {
		var names []string
		err := each(obj, func(o runtime.Object) error {
			m, err := meta.Accessor(o)
			if err != nil {
				return err
			}
			names = append(names, m.GetName())
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(names) != len(l.Items) || names[0] != l.Items[0].Name {
			t.Errorf("%s visited %v", name, names)
		}
	}
	if !meta.IsListType(obj) {
		t.Error("meta.IsListType = false")
	}
	c := obj.DeepCopyObject().(*objectList)
	c.Items[0] = nil
	c.ResourceVersion = "changed"
	if l.Items[0] == nil || l.ResourceVersion == "changed" {
		t.Error("DeepCopyObject shares the items slice or ListMeta")
	}
}

func TestDecodeListTruncated(t *testing.T) {
	body := readFile(t, "testdata/lists/pods.json")
	d := newObjectDecoder(podGVK, false, podFields)
	end := len(bytes.TrimRight(body, "\n"))
	for i := 0; i < end; i += 1 + i%97 {
		_, err := d.decodeList(bytes.NewReader(body[:i]))
		if err == nil {
			t.Fatalf("decodeList of the first %d of %d bytes succeeded", i, end)
		}
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("decodeList of the first %d bytes: %v, want io.ErrUnexpectedEOF", i, err)
		}
	}
	if _, err := d.decodeList(bytes.NewReader(body[:end])); err != nil {
		t.Fatalf("the body without its newline: %v", err)
	}
}

func TestDecodeListErrors(t *testing.T) {
	d := newObjectDecoder(podGVK, false, podFields)
	for _, in := range []string{
		`[]`, `null`, `{"items":[1]}`, `{"items":{}}`, `{"items":[{}],"items":[]}`, `{"items":[{"a":1,"a":1}]}`,
		`{"metadata":{"remainingItemCount":"x"}}`, `{"metadata":{"remainingItemCount":1.5}}`, `{"metadata":{"continue":1}}`,
		`{"metadata":[]}`, `{"items":[]} {}`, `{"items":[{}]`,
	} {
		if _, err := d.decodeList(strings.NewReader(in)); err == nil {
			t.Errorf("decodeList(%s) succeeded, want an error", in)
		}
	}
	for in, want := range map[string]int{`{"items":null}`: 0, `{"items":[]}`: 0, `{"items":[{},{"kind":"Pod"}]}`: 2, `{}`: 0} {
		l, err := d.decodeList(strings.NewReader(in))
		if err != nil || len(l.Items) != want {
			t.Errorf("decodeList(%s) = %v, %v; want %d items", in, l, err, want)
		}
	}
}

// TestDecodeListStreams checks that a list is not held whole: the bytes
// kept at any time stay within a few items however long the list.
func TestDecodeListStreams(t *testing.T) {
	item := readFile(t, "testdata/objects/pods-list-item-1.json")
	const n = 300
	var body bytes.Buffer
	body.WriteString(`{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[`)
	for i := range n {
		if i > 0 {
			body.WriteByte(',')
		}
		body.Write(item)
	}
	body.WriteString("]}")
	size := body.Len()
	s := newStream(nil, newObjectDecoder(podGVK, false, podFields))
	kept := 0
	s.rec.r = readerFunc(func(p []byte) (int, error) {
		kept = max(kept, cap(s.rec.buf))
		return body.Read(p)
	})
	l, err := s.list()
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != n {
		t.Fatalf("decoded %d items, want %d", len(l.Items), n)
	}
	if limit := 4 * len(item); kept > limit {
		t.Errorf("kept up to %d bytes of a %d-byte list, want at most %d", kept, size, limit)
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }
