package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
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
// answer is always JSON. Entries are parsed by mime.ParseMediaType. One
// that cannot be parsed but asks for a form (as=) is a form the gateway
// cannot serve, since it cannot tell which: it does not answer with
// another in its place. When every entry asks for a form the gateway
// does not serve for this verb, the answer is 406 NotAcceptable naming
// them; a header with no entry at all (or only unparsable ones that ask
// for no form) gets the objects.
func parseAccept(r *http.Request, verb string) (representation, error) {
	accept := r.Header.Get("Accept")
	if !strings.Contains(accept, "as=") {
		return representation{}, nil
	}
	var unserved []string
	for part := range strings.SplitSeq(accept, ",") {
		part = strings.TrimSpace(part)
		// With a malformed parameter, ParseMediaType still returns
		// the media type.
		mt, params, err := mime.ParseMediaType(part)
		switch mt {
		case "application/json", "application/vnd.kubernetes.protobuf", "application/cbor", "application/yaml",
			"*/*", "application/*", "":
		default:
			continue
		}
		if err != nil {
			if strings.Contains(part, "as=") {
				unserved = append(unserved, part+" (malformed: "+err.Error()+")")
			}
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
		unserved = append(unserved, part)
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

// metadataReader reads stored JSON with a jsontext.Decoder. A bytes.Buffer
// lets the decoder parse the object in place; readers are pooled because
// a decoder is too large to build per object of a list.
type metadataReader struct {
	in  bytes.Buffer
	dec jsontext.Decoder
}

var metadataReaders = sync.Pool{New: func() any { return new(metadataReader) }}

// rawMetadata returns the "metadata" value of an object's stored JSON, as
// a slice of raw (not a copy). It reads the top-level members as JSON
// tokens and skips their values without decoding them, stopping at
// metadata (which encoders write right after apiVersion and kind), so
// spec and status are not read. raw is JSON the gateway validated when it
// stored it, so the checks that cost a pass of their own (duplicate
// names, UTF-8) are off; malformed input is still an error, never a panic.
func rawMetadata(raw []byte) ([]byte, error) {
	r := metadataReaders.Get().(*metadataReader)
	defer func() {
		r.in = bytes.Buffer{}
		r.dec.Reset(&r.in) // drop the reference to raw
		metadataReaders.Put(r)
	}()
	r.in = *bytes.NewBuffer(raw)
	r.dec.Reset(&r.in, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	m, err := r.metadata()
	if err != nil {
		return nil, err
	}
	// The decoder's offsets slice raw itself, whatever it buffers.
	end := r.dec.InputOffset()
	return raw[end-int64(len(m)) : end], nil
}

// metadataKey derives an object version's metadata (metadataOf).
type metadataKey struct{}

// derivedMetadata is what metadataOf keeps with an object version.
type derivedMetadata struct {
	m   []byte
	err error
}

// metadataOf returns rawMetadata(o.Raw), found once per object version
// and kept with it (Object.Derive): every PartialObjectMetadata answer,
// and every row of a Table (kubectl's default, whose rows embed it),
// then copies it as a JSON list copies Raw, rather than reading the
// object's JSON up to the end of its metadata again.
func metadataOf(o *informer.Object) ([]byte, error) {
	d := o.Derive(metadataKey{}, func(o *informer.Object) any {
		m, err := rawMetadata(o.Raw)
		return &derivedMetadata{m: m, err: err}
	}).(*derivedMetadata)
	return d.m, d.err
}

func (r *metadataReader) metadata() (jsontext.Value, error) {
	dec := &r.dec
	if dec.PeekKind() != '{' {
		return nil, errMalformed
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, fmt.Errorf("%w: %w", errMalformed, err)
	}
	for dec.PeekKind() != '}' {
		name, err := dec.ReadValue()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errMalformed, err)
		}
		v, err := dec.ReadValue()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errMalformed, err)
		}
		if string(name) == `"metadata"` {
			if v.Kind() != '{' {
				return nil, errNoMetadata
			}
			return v, nil
		}
	}
	return nil, errNoMetadata
}

// appendPartialMetadata writes o as a PartialObjectMetadata of the given
// meta.k8s.io version: kind, apiVersion and the object's stored metadata
// (managedFields are stripped at storage unless cache.keepManagedFields).
func appendPartialMetadata(b *bytes.Buffer, version string, o *informer.Object) error {
	m, err := metadataOf(o)
	if err != nil {
		return err
	}
	b.Write(appendPartialObjectMetadata(b.AvailableBuffer(), version, m))
	return nil
}

// appendPartialObjectMetadata appends a PartialObjectMetadata of
// meta.k8s.io/version holding the stored metadata m.
func appendPartialObjectMetadata(b []byte, version string, m []byte) []byte {
	b = append(b, `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/`...)
	b = append(b, version...)
	b = append(b, `","metadata":`...)
	b = append(b, m...)
	return append(b, '}')
}
