package informer

import (
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Object is the compact cached form of one Kubernetes object: the few
// metadata fields needed to index and filter it, plus its JSON encoding.
//
// Objects are immutable once built and are shared by the cache, the event
// history and every listener: callers must not modify anything reachable
// from an Object.
type Object struct {
	// ObjectMeta holds only Namespace, Name, UID, ResourceVersion, Labels,
	// CreationTimestamp and DeletionTimestamp. Embedding it makes *Object a
	// metav1.Object, so client-go's key functions and indexers work as is.
	metav1.ObjectMeta

	// RV is ResourceVersion parsed as a number; 0 if it is not numeric.
	RV uint64

	// Raw is the object's JSON as the apiserver served it, with
	// apiVersion and kind set and metadata.managedFields cut out unless
	// configured otherwise; no newline, no trailing newline (see decode.go).
	Raw []byte

	// Cells is the object's row as kube-apiserver printed it: the JSON
	// array of its cells, in Columns.Definitions order, on one line; nil
	// when the resource is not read as a Table. Cells that kube-apiserver
	// computes at send time (ages such as "5m") are as they were sent.
	Cells []byte
	// Columns are the columns Cells follow; nil with Cells. Objects
	// printed with equal columns share one *Columns.
	Columns *Columns
	// RowConditions is the row's conditions as kube-apiserver printed
	// them (the JSON array; pods that completed or failed have one), nil
	// for none.
	RowConditions []byte

	// extra holds additional selectable fields as key, value pairs (for
	// example "spec.nodeName", "node-1" for pods). A slice, not a map: most
	// resources have none and pods have a handful.
	extra []string

	// derived is the head of the list of values computed from the object
	// and kept with it (see Derive); nil until the first.
	derived atomic.Pointer[derivedValue]
}

// derivedValue is one value of an Object's Derive list. Entries are only
// ever prepended, so a list read once stays valid.
type derivedValue struct {
	key  any
	once sync.Once
	val  any
	next *derivedValue
}

var _ runtime.Object = (*Object)(nil)

// GetObjectKind implements runtime.Object. The kind lives in Raw.
func (o *Object) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object. Objects are immutable, so the
// copy shares Raw, Cells, Columns and labels; it derives its values
// afresh.
func (o *Object) DeepCopyObject() runtime.Object {
	return &Object{ObjectMeta: o.ObjectMeta, RV: o.RV, Raw: o.Raw, Cells: o.Cells, Columns: o.Columns, RowConditions: o.RowConditions, extra: o.extra}
}

// Derive returns the value that derive computes from o for key. The
// first call for a key computes it, once, and o keeps it for as long as
// o lives; calls for the same key at the same time wait for it, and later
// ones return it. So a form of the object that many consumers send (a
// row, say) is computed once per object version, however many read it.
// Keys are compared with ==; a package uses keys of its own type, and
// every derive for one key must compute the same value. derive must not
// call Derive on o.
func (o *Object) Derive(key any, derive func(*Object) any) any {
	for {
		head := o.derived.Load()
		for d := head; d != nil; d = d.next {
			if d.key == key {
				d.once.Do(func() { d.val = derive(o) })
				return d.val
			}
		}
		d := &derivedValue{key: key, next: head}
		if o.derived.CompareAndSwap(head, d) {
			d.once.Do(func() { d.val = derive(o) })
			return d.val
		}
	}
}

// Key returns the object's cache key, "namespace/name" or "name".
func (o *Object) Key() string {
	if o.Namespace == "" {
		return o.Name
	}
	return o.Namespace + "/" + o.Name
}

// Has implements fields.Fields so field selectors match objects without
// building a map per object.
func (o *Object) Has(field string) bool {
	_, ok := o.field(field)
	return ok
}

// Get implements fields.Fields.
func (o *Object) Get(field string) string {
	v, _ := o.field(field)
	return v
}

func (o *Object) field(f string) (string, bool) {
	switch f {
	case "metadata.name":
		return o.Name, true
	case "metadata.namespace":
		return o.Namespace, true
	}
	for i := 0; i+1 < len(o.extra); i += 2 {
		if o.extra[i] == f {
			return o.extra[i+1], true
		}
	}
	return "", false
}
