package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubegate/internal/informer"
	"kubegate/internal/rows"
)

// tableOptions is a request for the meta.k8s.io Table form, which kubectl
// asks for with Accept: application/json;as=Table;v=v1;g=meta.k8s.io.
type tableOptions struct {
	version       string // v1 or v1beta1
	includeObject metav1.IncludeObjectPolicy
}

// writeTable answers objs as a Table of printer p's columns. A page with
// a continue token carries the number of objects after it (remaining),
// as a list does.
func (s *Server) writeTable(w http.ResponseWriter, r *http.Request, p *rows.Printer, objs []*informer.Object,
	rv uint64, cont string, remaining int, opts *tableOptions, pretty bool) {
	b := make([]byte, 0, 4096+len(objs)*256)
	b = appendTable(b, p, objs, opts, true, s.opts.Clock.Now(), func(b []byte) []byte {
		b = append(b, `{"resourceVersion":`...)
		b = appendString(b, strconv.FormatUint(rv, 10))
		if cont != "" {
			b = append(b, `,"continue":`...)
			b = appendString(b, cont)
			b = append(b, `,"remainingItemCount":`...)
			b = strconv.AppendInt(b, int64(remaining), 10)
		}
		return append(b, '}')
	})
	writeJSON(w, r, http.StatusOK, append(b, '\n'), pretty)
}

// printer returns the printer of a resource's rows (rows.ForResource).
func (s *Server) printer(ctx context.Context, res *informer.Resource) *rows.Printer {
	return rows.ForResource(ctx, s.opts.Manager, res)
}

// appendTable appends the Table of objs, as kube-apiserver encodes one:
// kind, apiVersion, metadata (written by meta), the column definitions
// (null without headers, as a watch's later events carry them), and a row
// per object with its cells shown at now and its object as opts asks.
// Each row is the object version's cached row (rows.Printer.Row):
// kube-apiserver's bytes for static cells, and relative cells rendered;
// nothing is decoded here.
func appendTable(b []byte, p *rows.Printer, objs []*informer.Object, opts *tableOptions, headers bool, now time.Time,
	meta func([]byte) []byte) []byte {
	b = append(b, `{"kind":"Table","apiVersion":"meta.k8s.io/`...)
	b = append(b, opts.version...)
	b = append(b, `","metadata":`...)
	b = meta(b)
	b = append(b, `,"columnDefinitions":`...)
	if headers {
		b = append(b, p.RawDefinitions()...)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"rows":[`...)
	for i, o := range objs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendTableRow(b, p, o, opts, now)
	}
	return append(b, "]}"...)
}

// appendTableRow appends o's Table row: its cells, its conditions, and
// its object as includeObject asks (the object as stored, its metadata
// as a PartialObjectMetadata, or nothing).
func appendTableRow(b []byte, p *rows.Printer, o *informer.Object, opts *tableOptions, now time.Time) []byte {
	r := p.Row(o)
	b = append(b, `{"cells":`...)
	b = r.AppendCells(b, now)
	if len(o.RowConditions) > 0 && p.Follows(o.Columns) {
		b = append(b, `,"conditions":`...)
		b = append(b, o.RowConditions...)
	}
	b = append(b, `,"object":`...)
	switch opts.includeObject {
	case metav1.IncludeObject:
		b = append(b, o.Raw...)
	case metav1.IncludeMetadata:
		// The object's whole stored metadata, as from the apiserver; the
		// cached ObjectMeta is only a subset.
		if m, err := metadataOf(o); err == nil {
			b = appendPartialObjectMetadata(b, "v1", m)
		} else {
			j, _ := json.Marshal(&metav1.PartialObjectMetadata{
				TypeMeta:   metav1.TypeMeta{Kind: "PartialObjectMetadata", APIVersion: "meta.k8s.io/v1"},
				ObjectMeta: o.ObjectMeta})
			b = append(b, j...)
		}
	default:
		b = append(b, "null"...)
	}
	return append(b, '}')
}

// appendString appends s as a JSON string, escaped as kube-apiserver's
// encoder escapes it (HTML characters included).
func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s)
	return append(b, q...)
}
