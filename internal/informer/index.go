package informer

import (
	"slices"

	"k8s.io/apimachinery/pkg/selection"
)

// listenerIndex finds the listeners a change could concern without
// offering it to every listener, as kube-apiserver's cacher keys its
// watchers by trigger values. A listener is filed under each namespace it
// watches ("" for all namespaces) and, within a namespace, under one
// equality its selectors require, when they require one: a label
// (app=web, or app in (web,api) under each value) or a selectable field
// (spec.nodeName=node-1). A change is then offered to the unkeyed
// listeners of its namespace scopes and to those keyed by a value the
// object (or its previous state) has. Not thread safe: the processor
// guards it.
type listenerIndex struct {
	scopes map[string]*scopeListeners
	n      int
}

// scopeListeners are the listeners of one namespace scope.
type scopeListeners struct {
	plain  map[*Listener]struct{}
	labels map[string]map[string]map[*Listener]struct{} // key → value → listeners
	fields map[string]map[string]map[*Listener]struct{} // field → value → listeners
	n      int
}

// indexKey is where a listener is filed within a scope: under a label or
// field equality, or (kind 0) unkeyed.
type indexKey struct {
	kind   uint8 // 0 plain, keyLabel or keyField
	key    string
	values []string
}

const (
	keyLabel uint8 = iota + 1
	keyField
)

// indexKeyOf picks the equality to file f's listener under: a field
// equality first (spec.nodeName=x is usually the most selective), else a
// label one, else none.
func indexKeyOf(f *Filter) indexKey {
	if f.Field != nil {
		for _, r := range f.Field.Requirements() {
			if r.Operator == selection.Equals || r.Operator == selection.DoubleEquals {
				return indexKey{kind: keyField, key: r.Field, values: []string{r.Value}}
			}
		}
	}
	if f.Label != nil {
		reqs, selectable := f.Label.Requirements()
		if selectable {
			for _, r := range reqs {
				switch r.Operator() {
				case selection.Equals, selection.DoubleEquals, selection.In:
					return indexKey{kind: keyLabel, key: r.Key(), values: r.ValuesUnsorted()}
				}
			}
		}
	}
	return indexKey{}
}

func newListenerIndex() *listenerIndex {
	return &listenerIndex{scopes: map[string]*scopeListeners{}}
}

// scopesOf lists the namespace scopes a filter's listener is filed under.
func scopesOf(f *Filter) []string {
	if nss := f.namespaces(); nss != nil {
		return nss
	}
	return []string{""}
}

func (x *listenerIndex) add(l *Listener) {
	for _, ns := range scopesOf(&l.filter) {
		s := x.scopes[ns]
		if s == nil {
			s = &scopeListeners{}
			x.scopes[ns] = s
		}
		s.add(l, l.key)
	}
	x.n++
}

func (x *listenerIndex) remove(l *Listener) {
	for _, ns := range scopesOf(&l.filter) {
		if s := x.scopes[ns]; s != nil && s.remove(l, l.key) && s.n == 0 {
			delete(x.scopes, ns)
		}
	}
	x.n--
}

func (s *scopeListeners) add(l *Listener, k indexKey) {
	s.n++
	switch k.kind {
	case keyLabel:
		s.labels = addKeyed(s.labels, k, l)
	case keyField:
		s.fields = addKeyed(s.fields, k, l)
	default:
		if s.plain == nil {
			s.plain = map[*Listener]struct{}{}
		}
		s.plain[l] = struct{}{}
	}
}

func addKeyed(m map[string]map[string]map[*Listener]struct{}, k indexKey, l *Listener) map[string]map[string]map[*Listener]struct{} {
	if m == nil {
		m = map[string]map[string]map[*Listener]struct{}{}
	}
	byValue := m[k.key]
	if byValue == nil {
		byValue = map[string]map[*Listener]struct{}{}
		m[k.key] = byValue
	}
	for _, v := range k.values {
		set := byValue[v]
		if set == nil {
			set = map[*Listener]struct{}{}
			byValue[v] = set
		}
		set[l] = struct{}{}
	}
	return m
}

// remove reports whether l was filed here.
func (s *scopeListeners) remove(l *Listener, k indexKey) bool {
	var m map[string]map[string]map[*Listener]struct{}
	switch k.kind {
	case keyLabel:
		m = s.labels
	case keyField:
		m = s.fields
	default:
		if _, ok := s.plain[l]; !ok {
			return false
		}
		delete(s.plain, l)
		s.n--
		return true
	}
	byValue := m[k.key]
	found := false
	for _, v := range k.values {
		if set := byValue[v]; set != nil {
			if _, ok := set[l]; ok {
				found = true
				delete(set, l)
				if len(set) == 0 {
					delete(byValue, v)
				}
			}
		}
	}
	if len(byValue) == 0 {
		delete(m, k.key)
	}
	if found {
		s.n--
	}
	return found
}

// all returns every listener, once each.
func (x *listenerIndex) all() []*Listener {
	seen := make(map[*Listener]struct{}, x.n)
	add := func(set map[*Listener]struct{}) {
		for l := range set {
			seen[l] = struct{}{}
		}
	}
	for _, s := range x.scopes {
		add(s.plain)
		for _, m := range []map[string]map[string]map[*Listener]struct{}{s.labels, s.fields} {
			for _, byValue := range m {
				for _, set := range byValue {
					add(set)
				}
			}
		}
	}
	out := make([]*Listener, 0, len(seen))
	for l := range seen {
		out = append(out, l)
	}
	return out
}

// each calls fn once for every listener that could want a change of o,
// whose previous state was prev (nil unless the change is a
// modification). A listener keyed by a value is visited when o or prev
// has the value, so one that o leaves still learns of it.
func (x *listenerIndex) each(o, prev *Object, fn func(*Listener)) {
	x.scope("", o, prev, fn)
	if o.Namespace != "" {
		x.scope(o.Namespace, o, prev, fn)
	}
}

func (x *listenerIndex) scope(ns string, o, prev *Object, fn func(*Listener)) {
	s := x.scopes[ns]
	if s == nil {
		return
	}
	for l := range s.plain {
		fn(l)
	}
	for key, byValue := range s.labels {
		v, ok := o.Labels[key]
		if ok {
			for l := range byValue[v] {
				fn(l)
			}
		}
		if prev != nil {
			if pv, pok := prev.Labels[key]; pok && (!ok || pv != v) {
				for l := range byValue[pv] {
					// A listener of several values (app in (web,db))
					// may have been visited for o's value already.
					if !ok || !slices.Contains(l.key.values, v) {
						fn(l)
					}
				}
			}
		}
	}
	for field, byValue := range s.fields {
		// As a field selector reads it, a field the object lacks is "".
		v := o.Get(field)
		for l := range byValue[v] {
			fn(l)
		}
		if prev != nil {
			if pv := prev.Get(field); pv != v {
				for l := range byValue[pv] {
					fn(l)
				}
			}
		}
	}
}
