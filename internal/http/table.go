package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/util/jsonpath"

	"kubegate/internal/informer"
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

// printerColumn is one of a CRD version's additionalPrinterColumns.
type printerColumn struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Format      string `json:"format"`
	Description string `json:"description"`
	Priority    int32  `json:"priority"`
	JSONPath    string `json:"jsonPath"`
}

// crdColumns returns the additionalPrinterColumns of a custom resource,
// read from the cached CustomResourceDefinition, or nil for built-in
// resources, CRDs without columns, or when CRDs cannot be read.
func (s *Server) crdColumns(ctx context.Context, info *informer.ResourceInfo) []printerColumn {
	if !strings.Contains(info.GVR.Group, ".") || strings.HasSuffix(info.GVR.Group, ".k8s.io") {
		return nil
	}
	crds, err := s.opts.Manager.Resource(ctx, "customresourcedefinitions.apiextensions.k8s.io")
	if err != nil || crds.WaitForSync(ctx) != nil {
		return nil
	}
	o, ok := crds.Get("", info.GVR.Resource+"."+info.GVR.Group)
	if !ok {
		return nil
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name    string          `json:"name"`
				Columns []printerColumn `json:"additionalPrinterColumns"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if json.Unmarshal(o.Raw, &crd) != nil {
		return nil
	}
	for _, v := range crd.Spec.Versions {
		if v.Name == info.GVR.Version {
			return v.Columns
		}
	}
	return nil
}

// writeTable answers objs as a Table: the columns of builtinPrinters for
// the resources it knows, else NAME, NAMESPACE (see forRequest), the CRD's
// printer columns, and AGE (unless the CRD has a creationTimestamp
// column, as CRDs usually name it Age).
func (s *Server) writeTable(w http.ResponseWriter, r *http.Request, info *informer.ResourceInfo, objs []*informer.Object,
	rv uint64, cont string, opts *tableOptions, pretty bool) {
	t := buildTable(info, s.crdColumns(r.Context(), info), objs, opts, true, s.opts.Clock.Now())
	t.ResourceVersion = strconv.FormatUint(rv, 10)
	t.Continue = cont
	b, err := json.Marshal(t)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, append(b, '\n'), pretty)
}

// buildTable builds the Table of objs with a CRD's printer columns cols
// (nil for none); headers false omits the column definitions. Ages are
// relative to now.
func buildTable(info *informer.ResourceInfo, cols []printerColumn, objs []*informer.Object,
	opts *tableOptions, headers bool, now time.Time) *metav1.Table {
	t := &metav1.Table{TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/" + opts.version},
		Rows: make([]metav1.TableRow, 0, len(objs))}
	if p, ok := builtinPrinters[info.GVR]; ok {
		if headers {
			t.ColumnDefinitions = p.columns
		}
		for _, o := range objs {
			cells, conds, err := p.cells(o.Raw, now)
			if err != nil {
				// Stored objects come from the apiserver and decode; should
				// one not, its row still names it.
				cells = make([]any, len(p.columns))
				for i, c := range p.columns {
					if c.Name == "Name" {
						cells[i] = o.Name
					}
				}
			}
			t.Rows = append(t.Rows, tableRow(o, cells, conds, opts))
		}
		return t
	}
	if headers {
		t.ColumnDefinitions = append(t.ColumnDefinitions, metav1.TableColumnDefinition{Name: "Name", Type: "string",
			Format: "name", Description: "Name must be unique within a namespace."})
		if opts.namespaceColumn {
			t.ColumnDefinitions = append(t.ColumnDefinitions, metav1.TableColumnDefinition{Name: "Namespace",
				Type: "string", Priority: 1, Description: "The object's namespace."})
		}
		for _, c := range cols {
			t.ColumnDefinitions = append(t.ColumnDefinitions, metav1.TableColumnDefinition{Name: c.Name, Type: c.Type,
				Format: c.Format, Description: c.Description, Priority: c.Priority})
		}
		if !ageColumn(cols) {
			t.ColumnDefinitions = append(t.ColumnDefinitions, metav1.TableColumnDefinition{Name: "Age", Type: "string",
				Description: "Time since the object was created."})
		}
	}
	var parsed []*jsonpath.JSONPath
	for _, c := range cols {
		jp := jsonpath.New(c.Name).AllowMissingKeys(true)
		if jp.Parse("{"+c.JSONPath+"}") != nil {
			jp = nil
		}
		parsed = append(parsed, jp)
	}
	for _, o := range objs {
		cells := []any{o.Name}
		if opts.namespaceColumn {
			cells = append(cells, o.Namespace)
		}
		if len(cols) > 0 {
			var content map[string]any
			_ = json.Unmarshal(o.Raw, &content)
			for i, c := range cols {
				cells = append(cells, columnValue(parsed[i], c, content, now))
			}
		}
		if !ageColumn(cols) {
			cells = append(cells, age(o.CreationTimestamp, now))
		}
		t.Rows = append(t.Rows, tableRow(o, cells, nil, opts))
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

// ageColumn reports whether a CRD's columns already show the age.
func ageColumn(cols []printerColumn) bool {
	for _, c := range cols {
		if c.JSONPath == ".metadata.creationTimestamp" {
			return true
		}
	}
	return false
}

func age(ts metav1.Time, now time.Time) string {
	if ts.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(ts.Time))
}

// columnValue evaluates a printer column as the apiserver does: the first
// value found, dates as ages, nil when absent.
func columnValue(jp *jsonpath.JSONPath, c printerColumn, content map[string]any, now time.Time) any {
	if jp == nil || content == nil {
		return nil
	}
	res, err := jp.FindResults(content)
	if err != nil || len(res) == 0 || len(res[0]) == 0 {
		return nil
	}
	v := res[0][0].Interface()
	if c.Type == "date" {
		if s, ok := v.(string); ok {
			if ts, err := time.Parse(time.RFC3339, s); err == nil {
				return duration.HumanDuration(now.Sub(ts))
			}
		}
	}
	switch v.(type) {
	case string, bool, float64, int64, int, nil:
		return v
	}
	return fmt.Sprint(v)
}
