package informer

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzParseFilter feeds client-supplied selectors to ParseFilter: it must
// return a Filter or an *InvalidFilterError, never panic, and a Filter it
// returns must be usable on any object.
func FuzzParseFilter(f *testing.F) {
	for _, s := range [][2]string{
		{"", ""},
		{"app=web,tier!=db", "metadata.name=x"},
		{"env in (a,b),!legacy", "spec.nodeName!=n1,metadata.namespace=ns"},
		{"a notin (", "status.phase=="},
		{"x=y", "spec.unknown=z"},
		{strings.Repeat("a", 5000), ""},
		{"a.b/c-d_e=f", "metadata.name=\\,"},
	} {
		f.Add(s[0], s[1])
	}
	info := &ResourceInfo{GVR: podsGVR, Namespaced: true,
		fields: testFields("spec.nodeName", "status.phase")}
	obj := &Object{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x", Labels: map[string]string{"app": "web", "env": "a"}},
		extra: []string{"spec.nodeName", "n1", "status.phase", "Running"}}
	f.Fuzz(func(t *testing.T, labelSel, fieldSel string) {
		flt, err := ParseFilter(info, "ns", labelSel, fieldSel)
		if err != nil {
			var ife *InvalidFilterError
			if !errors.As(err, &ife) {
				t.Fatalf("error %T %v is not an *InvalidFilterError", err, err)
			}
			if ife.Param != "labelSelector" && ife.Param != "fieldSelector" {
				t.Fatalf("error names parameter %q", ife.Param)
			}
			return
		}
		_ = flt.Matches(obj)
	})
}
