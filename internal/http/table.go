package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"kubegate/internal/informer"
	"kubegate/internal/rows"
)

// tableOptions is a request for the meta.k8s.io Table form, which kubectl
// asks for with Accept: application/json;as=Table;v=v1;g=meta.k8s.io.
type tableOptions struct {
	version       string // v1 or v1beta1
	includeObject metav1.IncludeObjectPolicy
	// namespaceColumn adds a Namespace column; see forRequest.
	namespaceColumn bool
}

// forRequest decides the Namespace column: shown (at priority 1, so
// kubectl prints it with -o wide) for requests in one namespace, and left
// out of cluster-wide ones, where kubectl -A adds its own NAMESPACE column
// from the rows' metadata (unless the rows carry no object).
func (t *tableOptions) forRequest(info *informer.ResourceInfo, rq apiRequest) *tableOptions {
	if t != nil {
		t.namespaceColumn = info.Namespaced && (rq.namespace != "" || t.includeObject == metav1.IncludeNone)
	}
	return t
}

// writeTable answers objs as a Table: the columns of printer p (the
// resource's, see rows.New), with a Namespace column for generic ones as
// forRequest decides. A page with a continue token carries the number of
// objects after it (remaining), as a list does.
func (s *Server) writeTable(w http.ResponseWriter, r *http.Request, p *rows.Printer, objs []*informer.Object,
	rv uint64, cont string, remaining int, opts *tableOptions, pretty bool) {
	t := buildTable(p, objs, opts, true, s.opts.Clock.Now())
	t.ResourceVersion = strconv.FormatUint(rv, 10)
	t.Continue = cont
	if cont != "" {
		n := int64(remaining)
		t.RemainingItemCount = &n
	}
	b, err := json.Marshal(t)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, append(b, '\n'), pretty)
}

// printer returns the printer of a resource, with its CRD's columns.
func (s *Server) printer(ctx context.Context, info *informer.ResourceInfo) *rows.Printer {
	return rows.ForResource(ctx, s.opts.Manager, info)
}

// buildTable builds the Table of objs with printer p; headers false
// omits the column definitions. Relative cells (ages) are shown at now.
func buildTable(p *rows.Printer, objs []*informer.Object, opts *tableOptions, headers bool, now time.Time) *metav1.Table {
	if opts.namespaceColumn {
		p = p.WithNamespace()
	}
	t := &metav1.Table{TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/" + opts.version},
		Rows: make([]metav1.TableRow, 0, len(objs))}
	if headers {
		t.ColumnDefinitions = p.Definitions()
	}
	for _, o := range objs {
		r := p.Row(o)
		t.Rows = append(t.Rows, tableRow(o, r.Display(now), r.Conditions, opts))
	}
	return t
}

// tableRow is o's row with its object as includeObject asks.
func tableRow(o *informer.Object, cells []any, conds []metav1.TableRowCondition, opts *tableOptions) metav1.TableRow {
	row := metav1.TableRow{Cells: cells, Conditions: conds}
	switch opts.includeObject {
	case metav1.IncludeObject:
		row.Object = runtime.RawExtension{Raw: o.Raw}
	case metav1.IncludeMetadata:
		// The object's whole stored metadata, as from the apiserver;
		// the cached ObjectMeta is only a subset.
		var b bytes.Buffer
		if appendPartialMetadata(&b, "v1", o) != nil {
			m, _ := json.Marshal(&metav1.PartialObjectMetadata{
				TypeMeta:   metav1.TypeMeta{Kind: "PartialObjectMetadata", APIVersion: "meta.k8s.io/v1"},
				ObjectMeta: o.ObjectMeta})
			b.Reset()
			b.Write(m)
		}
		row.Object = runtime.RawExtension{Raw: b.Bytes()}
	}
	return row
}
