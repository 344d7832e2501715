package informer

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Columns are a resource's Table columns as kube-apiserver printed them.
// Immutable once made; shared by every object printed with them.
type Columns struct {
	Definitions []metav1.TableColumnDefinition
	// Raw is the columnDefinitions JSON array as the apiserver sent it.
	Raw []byte
}

// Columns returns the columns of the objects the resource's cache holds
// (nil when it is not read as a Table).
func (r *Resource) Columns() *Columns { return nil }
