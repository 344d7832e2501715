package auth

import (
	"net/url"
	"testing"

	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/selection"
)

// The cases follow k8s.io/apiserver's RequestInfoFactory: the name comes
// from a metadata.name = or == requirement, and from nothing else.
func TestSelectedName(t *testing.T) {
	for _, tc := range []struct {
		query, want string
	}{
		{"", ""},
		{"fieldSelector=metadata.name%3Dcm-1", "cm-1"},
		{"fieldSelector=metadata.name%3D%3Dcm-1", "cm-1"},
		{"fieldSelector=metadata.name%3Dcm-1&watch=true&resourceVersion=5&allowWatchBookmarks=true", "cm-1"},
		{"fieldSelector=metadata.namespace%3Dns,metadata.name%3Dcm-1", "cm-1"},
		{"fieldSelector=metadata.name%3Dcm-1&labelSelector=app%3Dweb", "cm-1"},
		// Two names: the first; nothing matches both anyway.
		{"fieldSelector=metadata.name%3Da,metadata.name%3Db", "a"},
		{"fieldSelector=metadata.name!%3Dcm-1", ""},
		{"fieldSelector=metadata.namespace%3Dns", ""},
		{"fieldSelector=metadata.name%3D", ""},
		{"fieldSelector=metadata.name", ""},                // malformed
		{"fieldSelector=metadata.name%3Da%3Db", ""},        // malformed: a second operator
		{"fieldSelector=metadata.name%3D..", ""},           // not a path segment
		{"fieldSelector=metadata.name%3Da%2Fb", ""},        // "/"
		{"fieldSelector=metadata.name%3Da%25b", ""},        // "%"
		{"fieldSelector=metadata.name%3Dcm-1&limit=x", ""}, // any parameter failing drops the name
		{"fieldSelector=metadata.name%3Dcm-1&labelSelector=%3D%3D", ""},
		{"fieldSelector=metadata.name%3Dcm-1&timeoutSeconds=soon", ""},
		{"fieldselector=metadata.name%3Dcm-1", ""}, // parameter names are case-sensitive
	} {
		t.Run(tc.query, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			if got := SelectedName(q); got != tc.want {
				t.Fatalf("SelectedName(%s) = %q, want %q", tc.query, got, tc.want)
			}
		})
	}
}

// FuzzSelectedName checks the property authorization relies on: when a
// selector yields a name, it matches no object of another name.
func FuzzSelectedName(f *testing.F) {
	for _, s := range []string{"metadata.name=cm-1", "metadata.name==a,metadata.namespace=b", "metadata.name!=a", "a=b,metadata.name=c", `metadata.name=a\,b`} {
		f.Add(s, "")
	}
	f.Add("metadata.name=x", "limit=1")
	f.Fuzz(func(t *testing.T, selector, rest string) {
		q, err := url.ParseQuery(rest)
		if err != nil {
			return
		}
		q.Set("fieldSelector", selector)
		name := SelectedName(q)
		if name == "" {
			return
		}
		if errs := content.IsPathSegmentName(name); len(errs) != 0 {
			t.Fatalf("name %q from %q: %v", name, selector, errs)
		}
		sel, err := fields.ParseSelector(selector)
		if err != nil {
			t.Fatalf("name %q from a selector that does not parse: %q: %v", name, selector, err)
		}
		other := fields.Set{"metadata.name": name + "-other"}
		for _, r := range sel.Requirements() {
			if r.Field != "metadata.name" && r.Operator != selection.NotEquals {
				other[r.Field] = r.Value // satisfy the terms on other fields
			}
		}
		if sel.Matches(other) {
			t.Fatalf("selector %q yields name %q but matches %v", selector, name, other)
		}
	})
}
