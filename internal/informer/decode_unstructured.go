package informer

// The decoder API the upstream uses, still decoding through Unstructured
// and the transform of object.go; the streaming decoder replaces it.

import (
	"encoding/json"
	"io"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

type objectDecoder struct{ t *transformer }

func newObjectDecoder(gvk schema.GroupVersionKind, keep bool, sel []string) *objectDecoder {
	return &objectDecoder{&transformer{gvk: gvk, keepManagedFields: keep, selectableFields: sel}}
}

func (d *objectDecoder) decode(b []byte) (*Object, error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		return nil, err
	}
	return d.t.fromUnstructured(u)
}

type objectList struct {
	metav1.TypeMeta
	metav1.ListMeta `json:"metadata"`
	Items           []runtime.Object
}

func (l *objectList) DeepCopyObject() runtime.Object { c := *l; return &c }

func (d *objectDecoder) decodeList(r io.Reader) (*objectList, error) {
	var raw struct {
		Metadata metav1.ListMeta   `json:"metadata"`
		Items    []json.RawMessage `json:"items"`
	}
	if err := json.NewDecoder(r).Decode(&raw); err != nil {
		return nil, err
	}
	l := &objectList{ListMeta: raw.Metadata}
	for _, it := range raw.Items {
		o, err := d.decode(it)
		if err != nil {
			return nil, err
		}
		l.Items = append(l.Items, o)
	}
	return l, nil
}

type stubWatchDecoder struct {
	rc  io.ReadCloser
	jd  *json.Decoder
	dec *objectDecoder
}

func newWatchDecoder(rc io.ReadCloser, d *objectDecoder) watch.Decoder {
	return &stubWatchDecoder{rc: rc, jd: json.NewDecoder(rc), dec: d}
}

func (w *stubWatchDecoder) Decode() (watch.EventType, runtime.Object, error) {
	var ev struct {
		Type   watch.EventType `json:"type"`
		Object json.RawMessage `json:"object"`
	}
	if err := w.jd.Decode(&ev); err != nil {
		return "", nil, err
	}
	switch ev.Type {
	case watch.Error:
		st := &metav1.Status{}
		err := json.Unmarshal(ev.Object, st)
		return ev.Type, st, err
	case watch.Bookmark:
		var m struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if err := json.Unmarshal(ev.Object, &m); err != nil {
			return "", nil, err
		}
		o := &Object{}
		o.ResourceVersion = m.Metadata.ResourceVersion
		o.RV, _ = strconv.ParseUint(o.ResourceVersion, 10, 64)
		o.Annotations = m.Metadata.Annotations
		return ev.Type, o, nil
	}
	o, err := w.dec.decode(ev.Object)
	return ev.Type, o, err
}

func (w *stubWatchDecoder) Close() { _ = w.rc.Close() }
