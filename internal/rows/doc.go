// Package rows computes the rows of Kubernetes objects as kubectl shows
// them: per resource, the columns kube-apiserver's Table gives it
// (built-in printers for common resources, a CRD's
// additionalPrinterColumns, else Name and Age), and per object version,
// its cells.
//
// Data comes from the informer's cache: a Printer decodes an
// *informer.Object's stored JSON (Raw) into its cells. It goes to REST
// Table answers (internal/http), which show each cell at the time of the
// request, and to WebSocket row frames (internal/ws), which send the row
// encoded once per object version and printer (Printer.Encoded, kept on
// the object) to every subscription that asks for rows.
//
// A cell never depends on the time it is computed at: an age, a time
// since or a running duration is kept as the time it counts from (a
// relative Cell), which REST renders against its clock and WebSocket
// clients against theirs. So a row computed once stays true. Each cell
// also has a typed value (cell.Value) for sorting and searching:
// counts as numbers, ages as times, the rest as text.
package rows
