package informer

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Filter selects the objects a listener, list or snapshot sees.
type Filter struct {
	// Namespace restricts to one namespace; "" means all namespaces.
	Namespace string
	// Namespaces, when non-nil, further restricts to the namespaces in the
	// set (cluster-scoped objects never match a non-nil set). Authorization
	// uses it for "all namespaces the caller may read". An empty non-nil
	// set matches nothing.
	Namespaces sets.Set[string]
	// Label selects by labels; nil selects everything.
	Label labels.Selector
	// Field selects by the fields named in ResourceInfo.SelectableFields;
	// nil selects everything.
	Field fields.Selector
	// Shard selects one shard of a sharded list or watch (see
	// ShardSelector); nil selects everything.
	Shard *ShardSelector
}

// Matches reports whether o passes the filter.
func (f *Filter) Matches(o *Object) bool {
	if f.Namespace != "" && o.Namespace != f.Namespace {
		return false
	}
	if f.Namespaces != nil && !f.Namespaces.Has(o.Namespace) {
		return false
	}
	if f.Label != nil && !f.Label.Matches(labels.Set(o.Labels)) {
		return false
	}
	if f.Field != nil && !f.Field.Matches(o) {
		return false
	}
	if f.Shard != nil && !f.Shard.Matches(o) {
		return false
	}
	return true
}

// maxSelectorLen bounds selector strings from clients; the apiserver has no
// such limit, but nothing legitimate comes close.
const maxSelectorLen = 4096

// ParseFilter builds a Filter from the query-style strings clients send,
// checking field selectors against the resource's selectable fields.
func ParseFilter(info *ResourceInfo, namespace, labelSelector, fieldSelector string) (Filter, error) {
	f := Filter{Namespace: namespace}
	if len(labelSelector) > maxSelectorLen {
		return f, &InvalidFilterError{"labelSelector", fmt.Errorf("longer than %d bytes", maxSelectorLen)}
	}
	if len(fieldSelector) > maxSelectorLen {
		return f, &InvalidFilterError{"fieldSelector", fmt.Errorf("longer than %d bytes", maxSelectorLen)}
	}
	if labelSelector != "" {
		sel, err := labels.Parse(labelSelector)
		if err != nil {
			return f, &InvalidFilterError{"labelSelector", err}
		}
		if !sel.Empty() {
			f.Label = sel
		}
	}
	if fieldSelector != "" {
		sel, err := fields.ParseSelector(fieldSelector)
		if err != nil {
			return f, &InvalidFilterError{"fieldSelector", err}
		}
		set := info.fieldSet()
		// As kube-apiserver's field label conversion: every field must be
		// the resource's, and an alias means the field it names.
		sel, err = sel.Transform(func(field, value string) (string, string, error) {
			if a, ok := set.aliases[field]; ok {
				return a, value, nil
			}
			if !slices.Contains(set.names, field) {
				return "", "", fmt.Errorf("field %q is not supported for %s; supported fields: %s",
					field, info.GVR.GroupResource(), strings.Join(set.names, ", "))
			}
			return field, value, nil
		})
		if err != nil {
			return f, &InvalidFilterError{"fieldSelector", err}
		}
		if !sel.Empty() {
			f.Field = sel
		}
	}
	return f, nil
}

// namespaces lists the namespaces whose index a listener or scan with this
// filter needs, or nil when it needs every object.
func (f *Filter) namespaces() []string {
	switch {
	case f.Namespace != "":
		return []string{f.Namespace}
	case f.Namespaces != nil:
		return sets.List(f.Namespaces)
	}
	return nil
}
