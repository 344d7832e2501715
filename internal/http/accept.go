package httpapi

import (
	"bytes"
	"errors"
	"mime"
	"net/http"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubegate/internal/apistatus"
	"kubegate/internal/informer"
)

// representation is the form of an answer that the Accept header chose:
// the objects themselves (the zero value), a Table, or only their
// metadata.
type representation struct {
	// table is non-nil for a meta.k8s.io Table.
	table *tableOptions
	// metadata is the meta.k8s.io version ("v1" or "v1beta1") for
	// PartialObjectMetadata (get, watch) or PartialObjectMetadataList
	// (list); "" otherwise.
	metadata string
}

// parseAccept reads the Accept header as the apiserver does for verb
// ("list", "get" or "watch"): the first entry the gateway can serve wins.
// An entry without as= is the objects themselves. as=Table (v1, v1beta1)
// is a Table for every verb; as=PartialObjectMetadataList is served for
// lists, as=PartialObjectMetadata for gets and watches. Entries of other
// media types (protobuf, CBOR, YAML) are read for their as= only: the
// answer is always JSON. When every entry asks for a form the gateway
// does not serve for this verb, the answer is 406 NotAcceptable; a header
// with no entry at all (or only unparsable ones) gets the objects.
func parseAccept(r *http.Request, verb string) (representation, error) {
	accept := r.Header.Get("Accept")
	if !strings.Contains(accept, "as=") {
		return representation{}, nil
	}
	var unserved []string
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case "application/json", "application/vnd.kubernetes.protobuf", "application/cbor", "application/yaml",
			"*/*", "application/*":
		default:
			continue
		}
		as, v := params["as"], params["v"]
		if as == "" {
			return representation{}, nil
		}
		metaVersion := params["g"] == "meta.k8s.io" && (v == "v1" || v == "v1beta1")
		switch {
		case as == "Table" && metaVersion:
			t, err := parseIncludeObject(r, v)
			return representation{table: t}, err
		case as == "PartialObjectMetadataList" && metaVersion && verb == "list",
			as == "PartialObjectMetadata" && metaVersion && verb != "list":
			return representation{metadata: v}, nil
		}
		unserved = append(unserved, strings.TrimSpace(part))
	}
	if len(unserved) == 0 {
		return representation{}, nil
	}
	want := "as=PartialObjectMetadata"
	if verb == "list" {
		want = "as=PartialObjectMetadataList"
	}
	return representation{}, statusErr(apistatus.New(http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable,
		"none of the accepted forms can be served for a "+verb+" ("+strings.Join(unserved, ", ")+
			"); the gateway serves application/json, with as=Table or "+want+" (g=meta.k8s.io, v=v1 or v1beta1)"))
}

func parseIncludeObject(r *http.Request, version string) (*tableOptions, error) {
	t := &tableOptions{version: version, includeObject: metav1.IncludeMetadata}
	switch v := metav1.IncludeObjectPolicy(r.URL.Query().Get("includeObject")); v {
	case "":
	case metav1.IncludeNone, metav1.IncludeMetadata, metav1.IncludeObject:
		t.includeObject = v
	default:
		return nil, badRequestError("invalid includeObject %q: want None, Metadata or Object", v)
	}
	return t, nil
}

// errNoMetadata is returned for stored JSON without a metadata object,
// which the informer never stores.
var errNoMetadata = errors.New("object has no metadata object")

// errMalformed is returned for input that is not a JSON object.
var errMalformed = errors.New("malformed JSON object")

// rawMetadata returns the "metadata" value of an object's stored JSON, as
// a slice of raw (not a copy). It walks the top-level keys and skips their
// values without decoding them, stopping at metadata (which encoders
// write right after apiVersion and kind), so spec and status are not
// scanned. raw is JSON the gateway encoded itself; the walk still checks
// bounds at every step, so malformed input is an error, never a panic.
func rawMetadata(raw []byte) ([]byte, error) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, errMalformed
	}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return nil, errNoMetadata
	}
	for {
		if i >= len(raw) || raw[i] != '"' {
			return nil, errMalformed
		}
		kEnd, err := skipString(raw, i)
		if err != nil {
			return nil, err
		}
		key := raw[i+1 : kEnd-1]
		i = skipSpace(raw, kEnd)
		if i >= len(raw) || raw[i] != ':' {
			return nil, errMalformed
		}
		i = skipSpace(raw, i+1)
		vEnd, err := skipValue(raw, i)
		if err != nil {
			return nil, err
		}
		if string(key) == "metadata" {
			if raw[i] != '{' {
				return nil, errNoMetadata
			}
			return raw[i:vEnd], nil
		}
		i = skipSpace(raw, vEnd)
		switch {
		case i < len(raw) && raw[i] == ',':
			i = skipSpace(raw, i+1)
		case i < len(raw) && raw[i] == '}':
			return nil, errNoMetadata
		default:
			return nil, errMalformed
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string that starts at b[i].
func skipString(b []byte, i int) (int, error) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, nil
		}
	}
	return 0, errMalformed
}

// skipValue returns the index after the JSON value that starts at b[i].
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errMalformed
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		// The closers expected, innermost last: a '}' closing a '[' (or
		// the reverse) is malformed, not the end of the value.
		var stack [32]byte // deeper nesting grows onto the heap
		closers := stack[:0]
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, err := skipString(b, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{':
				closers = append(closers, '}')
			case '[':
				closers = append(closers, ']')
			case '}', ']':
				if b[j] != closers[len(closers)-1] {
					return 0, errMalformed
				}
				closers = closers[:len(closers)-1]
				if len(closers) == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errMalformed
	}
	j := i // a number, true, false or null
	for j < len(b) && !strings.ContainsRune(",}] \t\r\n", rune(b[j])) {
		j++
	}
	if j == i {
		return 0, errMalformed
	}
	return j, nil
}

// appendPartialMetadata writes o as a PartialObjectMetadata of the given
// meta.k8s.io version: kind, apiVersion and the object's stored metadata
// (managedFields are stripped at storage unless cache.keepManagedFields).
func appendPartialMetadata(b *bytes.Buffer, version string, o *informer.Object) error {
	m, err := rawMetadata(o.Raw)
	if err != nil {
		return err
	}
	b.WriteString(`{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/`)
	b.WriteString(version)
	b.WriteString(`","metadata":`)
	b.Write(m)
	b.WriteByte('}')
	return nil
}
