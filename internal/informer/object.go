package informer

import (
	"fmt"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
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

	// Raw is the object's JSON encoding (apiVersion and kind set,
	// metadata.managedFields stripped unless configured otherwise).
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

// transformer converts informer objects into *Object before they enter the
// informer's store, so the Unstructured maps become garbage immediately.
type transformer struct {
	gvk               schema.GroupVersionKind
	keepManagedFields bool
	selectableFields  []string // beyond metadata.name/namespace
}

// Transform is a cache.TransformFunc.
func (t *transformer) Transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *Object, cache.DeletedFinalStateUnknown:
		return o, nil
	case *unstructured.Unstructured:
		return t.fromUnstructured(o)
	default:
		return nil, fmt.Errorf("unexpected object type %T", obj)
	}
}

func (t *transformer) fromUnstructured(u *unstructured.Unstructured) (*Object, error) {
	if !t.keepManagedFields {
		unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
	}
	if u.GetKind() == "" {
		u.SetAPIVersion(t.gvk.GroupVersion().String())
		u.SetKind(t.gvk.Kind)
	}
	raw, err := u.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encode %s %s/%s: %w", t.gvk.Kind, u.GetNamespace(), u.GetName(), err)
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
	for _, f := range t.selectableFields {
		if v, ok := nestedFieldString(u.Object, f); ok {
			o.extra = append(o.extra, f, v)
		}
	}
	return o, nil
}

// nestedFieldString reads a dotted path such as "spec.nodeName" and renders
// scalars the way the apiserver's field selectors compare them.
func nestedFieldString(obj map[string]any, path string) (string, bool) {
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
