package informer

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Columns are a resource's Table columns as kube-apiserver printed them.
// Immutable once made; shared by every object printed with them.
//
// The upstream reads each resource as kube-apiserver's Table, with every
// row's object embedded (see listWatch), so that Object.Cells are the
// columns kubectl prints, exactly as kube-apiserver prints them, for
// built-in types and custom resources alike. Equal definitions give the
// same *Columns for as long as the resource's informer runs, so
// consumers may compare pointers.
type Columns struct {
	Definitions []metav1.TableColumnDefinition
	Raw         []byte // the columnDefinitions JSON array as the apiserver sent it
}

// columnsOf returns the columns raw defines: ref when they are equal to
// ref's (the same bytes, or the same definitions encoded otherwise), else
// new Columns. raw is not kept: a new *Columns holds a copy, on one line.
// null defines no columns.
func columnsOf(ref *Columns, raw []byte) (*Columns, error) {
	if ref != nil && bytes.Equal(ref.Raw, raw) {
		return ref, nil
	}
	v := jsontext.Value(bytes.Clone(raw))
	if err := v.Compact(); err != nil {
		return nil, fmt.Errorf("columnDefinitions: %w", err)
	}
	var defs []metav1.TableColumnDefinition
	if err := json.Unmarshal(v, &defs); err != nil {
		return nil, fmt.Errorf("columnDefinitions: %w", err)
	}
	if string(v) == "null" {
		v = jsontext.Value("[]")
	}
	if ref != nil && apiequality.Semantic.DeepEqual(ref.Definitions, defs) {
		return ref, nil
	}
	return &Columns{Definitions: defs, Raw: v}, nil
}
