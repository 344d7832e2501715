package informer

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// selectableField is a field that field selectors may use for a resource,
// beyond metadata.name and metadata.namespace, and how its value is read
// from the object's JSON when the object enters the cache.
type selectableField struct {
	// name is the field as clients write it, e.g. "spec.nodeName".
	name string
	// paths are the JSON paths the value is read from, in order: the
	// first that holds a non-empty value gives it. kube-apiserver
	// computes some values from several fields (an Event's source is
	// source.component, else reportingComponent). None: the field is
	// accepted but never has a value (kube-apiserver's status.podIPs).
	paths [][]string
	// unset is the value of an object that has none of the paths:
	// kube-apiserver reads built-in types' fields from Go structs, in
	// which an absent bool is false and an absent number 0.
	unset string
}

// fieldSet is what field selectors may use for one resource.
type fieldSet struct {
	// names are the fields a selector may name, metadata.name first,
	// then metadata.namespace when the resource serves it.
	names []string
	// fields are the fields beyond metadata.name and metadata.namespace,
	// whose values the decoder extracts.
	fields []selectableField
	// aliases are further names that mean another field, as
	// kube-apiserver's field label conversion maps them (a pod's
	// spec.host is its spec.nodeName).
	aliases map[string]string
}

func newFieldSet(namespace bool, fields []selectableField, aliases map[string]string) *fieldSet {
	s := &fieldSet{names: []string{"metadata.name"}, fields: fields, aliases: aliases}
	if namespace {
		s.names = append(s.names, "metadata.namespace")
	}
	for _, f := range fields {
		s.names = append(s.names, f.name)
	}
	return s
}

// equal reports whether s and o select the same way.
func (s *fieldSet) equal(o *fieldSet) bool {
	if !slices.Equal(s.names, o.names) || len(s.aliases) != len(o.aliases) {
		return false
	}
	for k, v := range s.aliases {
		if o.aliases[k] != v {
			return false
		}
	}
	return slices.EqualFunc(s.fields, o.fields, func(a, b selectableField) bool {
		return a.name == b.name && a.unset == b.unset && slices.EqualFunc(a.paths, b.paths, slices.Equal)
	})
}

// sharedFields holds a resource's fieldSet, shared by every ResourceInfo
// of the resource. A custom resource's changes when its CRD's
// selectableFields are edited (see listWatch.refreshFields).
type sharedFields struct {
	p atomic.Pointer[fieldSet]
	// crd: the fields come from a CustomResourceDefinition, or might
	// (reading it failed), and are read again as the informer lists and
	// watches.
	crd bool
}

func newSharedFields(s *fieldSet, crd bool) *sharedFields {
	f := &sharedFields{crd: crd}
	f.p.Store(s)
	return f
}

func (f *sharedFields) load() *fieldSet { return f.p.Load() }

// field is a selectable field whose value is the string at path, or "".
func field(path string) selectableField {
	return selectableField{name: path, paths: [][]string{strings.Split(path, ".")}}
}

// boolField is a bool field: false when unset.
func boolField(path string) selectableField {
	f := field(path)
	f.unset = "false"
	return f
}

// countField is the integer at path, under name: 0 when unset.
func countField(name, path string) selectableField {
	f := field(path)
	f.name, f.unset = name, "0"
	return f
}

// builtin describes the field selectors of a built-in resource.
type builtin struct {
	namespace bool // metadata.namespace is accepted
	fields    []selectableField
	aliases   map[string]string
}

// builtinFields are the field selectors kube-apiserver v1.37 serves for
// built-in resources beyond metadata.name: the labels its field label
// conversion functions accept (k8s.io/kubernetes
// pkg/apis/<group>/<version>/conversion.go, AddFieldLabelConversionFunc),
// with the values its GetAttrs functions compute
// (pkg/registry/<group>/<resource>/strategy.go, read here from the
// served JSON). Resources not listed accept metadata.name and
// metadata.namespace (runtime.DefaultMetaV1FieldSelectorConversion),
// cluster-scoped ones included. TestFieldSelectorsMatchKubeAPIServer
// checks both against kube-apiserver.
var builtinFields = map[schema.GroupResource]builtin{
	{Resource: "pods"}: {namespace: true, fields: []selectableField{
		field("spec.nodeName"), field("spec.restartPolicy"), field("spec.schedulerName"),
		field("spec.serviceAccountName"), boolField("spec.hostNetwork"), field("status.phase"),
		// kube-apiserver's status.podIP is status.podIPs[0].ip, which
		// its v1 conversion keeps equal to the served status.podIP.
		field("status.podIP"),
		// Accepted, but kube-apiserver's field set has no value for it:
		// status.podIPs=<ip> selects no pod, status.podIPs!=<ip> all.
		{name: "status.podIPs"},
		field("status.nominatedNodeName"),
	}, aliases: map[string]string{"spec.host": "spec.nodeName"}},
	{Resource: "nodes"}:      {fields: []selectableField{boolField("spec.unschedulable")}},
	{Resource: "namespaces"}: {fields: []selectableField{field("status.phase")}},
	{Resource: "replicationcontrollers"}: {namespace: true, fields: []selectableField{
		countField("status.replicas", "status.replicas")}},
	{Resource: "secrets"}:  {namespace: true, fields: []selectableField{field("type")}},
	{Resource: "services"}: {namespace: true, fields: []selectableField{field("spec.clusterIP"), field("spec.type")}},
	{Resource: "events"}: {namespace: true, fields: []selectableField{
		field("involvedObject.kind"), field("involvedObject.namespace"), field("involvedObject.name"),
		field("involvedObject.uid"), field("involvedObject.apiVersion"), field("involvedObject.resourceVersion"),
		field("involvedObject.fieldPath"), field("reason"), field("reportingComponent"),
		{name: "source", paths: [][]string{{"source", "component"}, {"reportingComponent"}}},
		field("type"),
	}},
	// events.k8s.io's names for the same fields (its conversion maps
	// them to the core fields above, which are these).
	{Group: "events.k8s.io", Resource: "events"}: {namespace: true, fields: []selectableField{
		field("regarding.kind"), field("regarding.namespace"), field("regarding.name"), field("regarding.uid"),
		field("regarding.apiVersion"), field("regarding.resourceVersion"), field("regarding.fieldPath"),
		field("reason"), field("reportingController"), field("type"),
	}},
	{Group: "batch", Resource: "jobs"}: {namespace: true, fields: []selectableField{
		countField("status.successful", "status.succeeded")}},
	{Group: "certificates.k8s.io", Resource: "certificatesigningrequests"}: {fields: []selectableField{field("spec.signerName")}},
	{Group: "certificates.k8s.io", Resource: "clustertrustbundles"}:        {fields: []selectableField{field("spec.signerName")}},
	{Group: "certificates.k8s.io", Resource: "podcertificaterequests"}: {fields: []selectableField{
		field("spec.signerName"), field("spec.podName"), field("spec.nodeName")}},
	{Group: "resource.k8s.io", Resource: "resourceslices"}: {fields: []selectableField{
		field("spec.nodeName"), field("spec.driver"), field("spec.pool.name")}},
}

// builtinFieldSet returns the field set of a built-in resource (or of
// any resource kube-apiserver gives no fields of its own).
func builtinFieldSet(gr schema.GroupResource) *fieldSet {
	b, ok := builtinFields[gr]
	if !ok {
		return newFieldSet(true, nil, nil)
	}
	return newFieldSet(b.namespace, b.fields, b.aliases)
}

// crdFieldSet returns the field set of a custom resource: metadata.name,
// metadata.namespace when it is namespaced, and the selectableFields of
// its version, named by their jsonPath without its leading dot, as
// kube-apiserver names them. Their values are strings, integers and
// booleans, as kube-apiserver renders them (fmt.Sprint); "" when unset.
func crdFieldSet(namespaced bool, jsonPaths []string) (*fieldSet, error) {
	var fields []selectableField
	for _, jp := range jsonPaths {
		path, err := parseFieldPath(jp)
		if err != nil {
			return nil, fmt.Errorf("selectableField %q: %w", jp, err)
		}
		fields = append(fields, selectableField{name: strings.TrimPrefix(jp, "."), paths: [][]string{path}})
	}
	return newFieldSet(namespaced, fields, nil), nil
}

// parseFieldPath splits a CRD selectableField's jsonPath, a simple path
// such as .spec.color or .spec['a.b'] (what kube-apiserver accepts:
// fields only, no array indexing), into its segments.
func parseFieldPath(p string) ([]string, error) {
	var segs []string
	for rest := p; rest != ""; {
		switch {
		case strings.HasPrefix(rest, "['") || strings.HasPrefix(rest, `["`):
			q := rest[1]
			end := strings.IndexByte(rest[2:], q)
			if end < 0 || !strings.HasPrefix(rest[2+end+1:], "]") {
				return nil, errors.New("unterminated bracket")
			}
			segs = append(segs, rest[2:2+end])
			rest = rest[2+end+2:]
		case rest[0] == '.':
			rest = rest[1:]
			end := strings.IndexAny(rest, ".[")
			if end < 0 {
				end = len(rest)
			}
			if end == 0 {
				return nil, errors.New("empty segment")
			}
			segs = append(segs, rest[:end])
			rest = rest[end:]
		default:
			return nil, fmt.Errorf("unexpected %q", rest)
		}
	}
	if len(segs) == 0 {
		return nil, errors.New("empty path")
	}
	return segs, nil
}
