package auth

import (
	"net/url"

	"k8s.io/apimachinery/pkg/api/validate/content"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SelectedName returns the object name kube-apiserver authorizes a list
// or watch with the query parameters q as: the value of a metadata.name=
// (or ==) requirement of its fieldSelector, so that RBAC rules with
// resourceNames apply to it. It returns "" when there is none: no
// fieldSelector, metadata.name!= only, a name that cannot be a path
// segment ("." "..", or containing "/" or "%"), or any of the list
// parameters failing to decode (a malformed selector, a limit that is not
// a number). It mirrors k8s.io/apiserver's RequestInfoFactory, which
// decodes the parameters with the same codec and drops the name when
// anything fails.
//
// Every object such a selector matches has that name, so authorizing the
// name authorizes everything the request can return.
func SelectedName(q url.Values) string {
	if q.Get("fieldSelector") == "" {
		return "" // most requests: nothing to decode
	}
	var opts metainternalversion.ListOptions
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(q, metav1.SchemeGroupVersion, &opts); err != nil {
		return ""
	}
	if opts.FieldSelector == nil {
		return ""
	}
	name, ok := opts.FieldSelector.RequiresExactMatch("metadata.name")
	if !ok || len(content.IsPathSegmentName(name)) != 0 {
		return ""
	}
	return name
}
