package rows

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/jsonpath"

	"kubegate/internal/cell"
	"kubegate/internal/informer"
)

// Live cells.
//
// kube-apiserver prints some cells relative to the time it prints them:
// every Age, CRD date columns, a pod's last restart ("3 (5m ago)"), a
// running job's duration, a cronjob's last schedule, an event's last and
// first seen. A row computed when the object arrives would show them
// frozen, so the printer keeps, for these columns, the time the cell
// counts from, read from the object (a relative Cell), and shows it at
// the time it is read: REST Tables against the gateway's clock, and
// WebSocket clients against theirs. Every other cell is kube-apiserver's
// bytes as they came.

// creationDoc is the description kube-apiserver's printers give their
// Age columns, and its default table convertor its Created At column.
var creationDoc = metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]

// liveColumns are the built-in columns, other than ages, whose cells
// count from a time in the object, by resource and column name.
var liveColumns = map[schema.GroupResource]map[string]liveCell{
	{Resource: "pods"}:                           {"Restarts": podRestarts},
	{Group: "batch", Resource: "jobs"}:           {"Duration": jobDuration},
	{Group: "batch", Resource: "cronjobs"}:       {"Last Schedule": cronJobLastSchedule},
	{Resource: "events"}:                         {"Last Seen": eventSeen(false), "First Seen": eventSeen(true)},
	{Group: "events.k8s.io", Resource: "events"}: {"Last Seen": eventSeen(false), "First Seen": eventSeen(true)},
}

// created is the cell of an Age column: the time since the object was
// created.
func created(o *informer.Object, _ Cell) Cell { return since(o.CreationTimestamp.Time) }

// createdAt is the generic Created At cell: the creation time, absolute.
func createdAt(o *informer.Object) Cell {
	if o.CreationTimestamp.IsZero() {
		return Cell{Raw: []byte("null")}
	}
	c := text(o.CreationTimestamp.UTC().Format(time.RFC3339))
	c.Typed = cell.Time(o.CreationTimestamp.Time)
	return c
}

// podRestarts is a pod's Restarts cell: its count, and since the last
// restart ("3 (5m ago)") when kube-apiserver printed one. Only then is
// the pod decoded.
func podRestarts(o *informer.Object, printed Cell) Cell {
	var s string
	if !bytes.Contains(printed.Raw, []byte(" (")) || unmarshal(printed.Raw, &s) != nil || !strings.Contains(s, " (") {
		return printed // most pods: a count alone, nothing to decode
	}
	pod := slim[podRestartFields](o)
	if pod == nil {
		return printed
	}
	if c := podRestartCell(pod); c.relative {
		return c
	}
	return printed
}

// jobDuration is a job's Duration cell: since its start while it runs.
func jobDuration(o *informer.Object, printed Cell) Cell {
	j := slim[jobDurationFields](o)
	if j == nil {
		return printed
	}
	c := jobDurationCell(j)
	if !c.relative {
		printed.Typed = c.Typed // a finished job's duration, in seconds
		return printed
	}
	return c
}

// cronJobLastSchedule is a cronjob's Last Schedule cell.
func cronJobLastSchedule(o *informer.Object, printed Cell) Cell {
	cj := slim[cronJobScheduleFields](o)
	if cj == nil {
		return printed
	}
	c := cronJobScheduleCell(cj)
	if !c.relative {
		printed.Typed = cell.Value{} // never scheduled: missing when sorted
		return printed
	}
	return c
}

// eventSeen is an event's Last Seen (first false) or First Seen (first
// true) cell, for core/v1 and events.k8s.io/v1 events alike.
func eventSeen(first bool) liveCell {
	return func(o *informer.Object, printed Cell) Cell {
		e := slim[eventSeenFields](o)
		if e == nil {
			return printed
		}
		last, firstSeen := eventSeenCells(e)
		c := last
		if first {
			c = firstSeen
		}
		if !c.relative {
			return printed
		}
		return c
	}
}

// dateColumn is the cell of a CRD date column other than the creation
// time: the time since the value its JSONPath finds.
func dateColumn(path string) liveCell {
	jp := jsonpath.New("date").AllowMissingKeys(true)
	if jp.Parse("{"+path+"}") != nil {
		return nil
	}
	var mu sync.Mutex // a JSONPath is not safe for concurrent use
	return func(o *informer.Object, printed Cell) Cell {
		var content map[string]any
		if json.Unmarshal(o.Raw, &content) != nil {
			return printed
		}
		mu.Lock()
		res, err := jp.FindResults(content)
		mu.Unlock()
		if err != nil || len(res) == 0 || len(res[0]) == 0 {
			return printed
		}
		s, ok := res[0][0].Interface().(string)
		if !ok {
			return printed
		}
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return printed
		}
		return Cell{Since: t, relative: true, Typed: cell.Time(t)}
	}
}

// NewPrinter returns the printer of a resource read as a Table with
// cols; crdPaths are its CRD version's printer columns' JSONPaths by
// name (nil for a built-in resource).
func NewPrinter(gr schema.GroupResource, cols *informer.Columns, crdPaths map[string]string) *Printer {
	p := &Printer{cols: cols, defs: cols.Raw, columns: make([]Column, len(cols.Definitions)),
		live: make([]liveCell, len(cols.Definitions))}
	for i, d := range cols.Definitions {
		p.columns[i] = Column{TableColumnDefinition: d}
		var live liveCell
		path := crdPaths[d.Name]
		if path == "" {
			path, _ = strings.CutPrefix(d.Description, crdColumnDoc)
		}
		switch {
		case d.Name == "Age" && d.Description == creationDoc, d.Type == "date" && path == ".metadata.creationTimestamp":
			live = created
		case d.Type == "date" && path != "":
			live = dateColumn(path)
		default:
			live = liveColumns[gr][d.Name]
		}
		if live != nil {
			p.live[i] = live
			p.columns[i].Relative, p.columns[i].Age = true, true
		}
	}
	// Restarts sorts by its count, not by the time since the last one.
	if gr == (schema.GroupResource{Resource: "pods"}) {
		for i := range p.columns {
			if p.columns[i].Name == "Restarts" {
				p.columns[i].Age = false
			}
		}
	}
	return p
}

// generic is the printer of resources kube-apiserver does not serve as
// a Table: the columns of its default table convertor.
var generic = func() *Printer {
	defs := []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		{Name: "Created At", Type: "date", Description: creationDoc},
	}
	raw, _ := json.Marshal(defs)
	return &Printer{defs: raw, columns: []Column{{TableColumnDefinition: defs[0]}, {TableColumnDefinition: defs[1]}},
		live: make([]liveCell, 2)}
}()

// Generic returns the printer of resources kube-apiserver does not serve
// as a Table.
func Generic() *Printer { return generic }

// printerKey keys a printer: the columns it serves, for a resource, with
// its CRD version's printer columns.
type printerKey struct {
	cols *informer.Columns
	gr   schema.GroupResource
	crd  *informer.Object
}

var (
	printersMu sync.Mutex
	printers   = map[printerKey]*Printer{}
)

// maxPrinters bounds the printers kept: one per resource and column set,
// so a bound is only reached when columns keep changing.
const maxPrinters = 4096

// ForResource returns the printer of r's rows: its columns as its cache
// holds them (informer.Resource.Columns), after waiting (bounded by ctx)
// for the cache to sync, or the generic printer when r is not read as a
// Table. A custom resource's CRD is read (through mgr's cache) for the
// JSONPaths of its date columns. The printer is shared by every caller
// for the same columns, so the rows it computes (Printer.Row, kept with
// each object version) are too.
func ForResource(ctx context.Context, mgr *informer.Manager, r *informer.Resource) *Printer {
	if r == nil || r.WaitForSync(ctx) != nil {
		return generic
	}
	cols := r.Columns()
	if cols == nil {
		return generic
	}
	key := printerKey{cols: cols, gr: r.Info.GVR.GroupResource()}
	var paths map[string]string
	if needsCRD(cols) {
		if key.crd = crdOf(ctx, mgr, r.Info); key.crd != nil {
			paths = crdDatePaths(key.crd, r.Info.GVR.Version)
		}
	}
	printersMu.Lock()
	defer printersMu.Unlock()
	if p := printers[key]; p != nil {
		return p
	}
	if len(printers) >= maxPrinters {
		clear(printers)
	}
	p := NewPrinter(key.gr, cols, paths)
	printers[key] = p
	return p
}

// crdColumnDoc begins the description kube-apiserver gives a CRD's
// printer column that has none of its own, before its JSONPath.
const crdColumnDoc = "Custom resource definition column (in JSONPath format): "

// needsCRD reports whether some column is a date column whose JSONPath
// only its CRD holds (one with a description of its own).
func needsCRD(cols *informer.Columns) bool {
	for _, d := range cols.Definitions {
		if d.Type == "date" && !strings.HasPrefix(d.Description, crdColumnDoc) {
			return true
		}
	}
	return false
}
