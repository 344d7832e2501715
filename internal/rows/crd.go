package rows

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/jsonpath"

	"kubegate/internal/cell"
	"kubegate/internal/informer"
)

// PrinterColumn is one of a CRD version's additionalPrinterColumns.
type PrinterColumn struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Format      string `json:"format"`
	Description string `json:"description"`
	Priority    int32  `json:"priority"`
	JSONPath    string `json:"jsonPath"`
}

// New returns the printer of a resource: its built-in printer if it has
// one, else the generic columns: Name, the CRD's printer columns cols
// (nil for none), and Age unless a column already shows the
// creationTimestamp (as CRDs usually name it Age). Built-in printers are
// shared; a generic one is new at each call (see ForResource).
func New(info *informer.ResourceInfo, cols []PrinterColumn) *Printer {
	if p, ok := builtin[info.GVR]; ok {
		return p
	}
	columns := []Column{{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Name", Type: "string",
		Format: "name", Description: "Name must be unique within a namespace."}}}
	for _, c := range cols {
		columns = append(columns, Column{TableColumnDefinition: metav1.TableColumnDefinition{Name: c.Name, Type: c.Type,
			Format: c.Format, Description: c.Description, Priority: c.Priority}, Relative: c.Type == "date", Age: c.Type == "date"})
	}
	age := !ageColumn(cols)
	if age {
		columns = append(columns, Column{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Age", Type: "string",
			Description: "Time since the object was created."}, Relative: true, Age: true})
	}
	parsed := make([]*jsonpath.JSONPath, len(cols))
	for i, c := range cols {
		jp := jsonpath.New(c.Name).AllowMissingKeys(true)
		if jp.Parse("{"+c.JSONPath+"}") == nil {
			parsed[i] = jp
		}
	}
	return &Printer{columns: columns, generic: true, row: func(o *informer.Object) *Row {
		cells := make([]Cell, 0, len(columns))
		cells = append(cells, text(o.Name))
		if len(cols) > 0 {
			var content map[string]any
			_ = json.Unmarshal(o.Raw, &content)
			for i, c := range cols {
				cells = append(cells, columnValue(parsed[i], c, content))
			}
		}
		if age {
			cells = append(cells, since(o.CreationTimestamp.Time))
		}
		return &Row{Cells: cells}
	}}
}

// ageColumn reports whether a CRD's columns already show the age.
func ageColumn(cols []PrinterColumn) bool {
	for _, c := range cols {
		if c.JSONPath == ".metadata.creationTimestamp" {
			return true
		}
	}
	return false
}

// columnValue evaluates a printer column: the first value found, dates
// as the time since them, nil when absent. Numbers sort as numbers, and
// so does text that is one (a quantity such as "500m" or "2Gi", which a
// column shows as text, whatever its type); dates sort as times, the rest
// as text.
func columnValue(jp *jsonpath.JSONPath, c PrinterColumn, content map[string]any) Cell {
	if jp == nil || content == nil {
		return nothing()
	}
	res, err := jp.FindResults(content)
	if err != nil || len(res) == 0 || len(res[0]) == 0 {
		return nothing()
	}
	v := res[0][0].Interface()
	if c.Type == "date" {
		if s, ok := v.(string); ok {
			if ts, err := time.Parse(time.RFC3339, s); err == nil {
				return Cell{Since: ts, relative: true, Typed: cell.Time(ts)}
			}
		}
	}
	switch v := v.(type) {
	case nil:
		return nothing()
	case string:
		return Cell{Value: v, Typed: cell.Parse(v)}
	case bool:
		return Cell{Value: v, Typed: cell.String(strconv.FormatBool(v))}
	case float64:
		return Cell{Value: v, Typed: number(v, c.Type == "integer")}
	case int64:
		return Cell{Value: v, Typed: cell.Int(v)}
	case int:
		return Cell{Value: v, Typed: cell.Int(int64(v))}
	}
	return text(fmt.Sprint(v))
}

// number types a JSON number: an integer column's value as an integer
// (truncated, as kube-apiserver shows it), another as a quantity.
func number(f float64, integer bool) cell.Value {
	if integer {
		return cell.Int(int64(f))
	}
	q, err := resource.ParseQuantity(strconv.FormatFloat(f, 'f', -1, 64))
	if err != nil {
		return cell.String(strconv.FormatFloat(f, 'g', -1, 64))
	}
	return cell.Quantity(q)
}

// crdOf returns the cached CustomResourceDefinition of a custom
// resource, or nil for built-in resources, or when CRDs cannot be read.
func crdOf(ctx context.Context, mgr *informer.Manager, info *informer.ResourceInfo) *informer.Object {
	if !strings.Contains(info.GVR.Group, ".") || strings.HasSuffix(info.GVR.Group, ".k8s.io") {
		return nil
	}
	crds, err := mgr.Resource(ctx, "customresourcedefinitions.apiextensions.k8s.io")
	if err != nil || crds.WaitForSync(ctx) != nil {
		return nil
	}
	o, _ := crds.Get("", info.GVR.Resource+"."+info.GVR.Group)
	return o
}

// printerColumns returns the additionalPrinterColumns of version in a
// CustomResourceDefinition, nil for none.
func printerColumns(crd *informer.Object, version string) []PrinterColumn {
	var def struct {
		Spec struct {
			Versions []struct {
				Name    string          `json:"name"`
				Columns []PrinterColumn `json:"additionalPrinterColumns"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if json.Unmarshal(crd.Raw, &def) != nil {
		return nil
	}
	for _, v := range def.Spec.Versions {
		if v.Name == version {
			return v.Columns
		}
	}
	return nil
}

// printerKey keys a CRD version's printer on the CRD object.
type printerKey struct{ version string }

// generic is the printer of resources without a built-in printer or
// CRD columns.
var generic = New(&informer.ResourceInfo{}, nil)

// ForResource returns the printer of a resource as New does, with its
// CRD's printer columns. The printer is kept with the CRD object
// (Object.Derive), so the CRD is decoded once per CRD version, not per
// request, and the printer is shared by every caller for the same
// resource and CRD version: rows it encodes (Encoded) are shared too. A
// change to the CRD gives a new printer to new callers.
func ForResource(ctx context.Context, mgr *informer.Manager, info *informer.ResourceInfo) *Printer {
	if p, ok := builtin[info.GVR]; ok {
		return p
	}
	crd := crdOf(ctx, mgr, info)
	if crd == nil {
		return generic
	}
	return crd.Derive(printerKey{info.GVR.Version}, func(o *informer.Object) any {
		cols := printerColumns(o, info.GVR.Version)
		if len(cols) == 0 {
			return generic
		}
		return New(info, cols)
	}).(*Printer)
}
