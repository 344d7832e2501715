package informer

import (
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

	// extra holds additional selectable fields as key, value pairs (for
	// example "spec.nodeName", "node-1" for pods). A slice, not a map: most
	// resources have none and pods have a handful.
	extra []string
}

var _ runtime.Object = (*Object)(nil)

// GetObjectKind implements runtime.Object. The kind lives in Raw.
func (o *Object) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object. Objects are immutable, so the
// copy shares Raw and labels.
func (o *Object) DeepCopyObject() runtime.Object {
	c := *o
	return &c
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
