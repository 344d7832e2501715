// Package rows serves the rows of Kubernetes objects as kubectl shows
// them: per resource, the columns kube-apiserver's Table gives it, and
// per object version, its cells, exactly as kube-apiserver prints them,
// built-in resources and custom resources alike.
//
// Data comes from the informer's cache: the gateway's one list and watch
// of a resource asks kube-apiserver for its Table rows with the objects
// embedded, so every cached object arrives with its cells
// (informer.Object.Cells) and the columns they follow. A Printer turns
// them into a Row once per object version (kept with the object,
// Object.Derive): each cell's bytes as kube-apiserver printed them, and
// its typed value (cell.Value) for sorting and searching: counts as
// numbers, ages as times, the rest as text. Rows go to REST Table answers
// (internal/http), to WebSocket row frames (internal/ws), which send the
// row encoded once per object version (by the first frame to carry it:
// most rows of a large table are never shown), and to the live tables
// (internal/livequery/wire), which sort by the typed values.
//
// kube-apiserver prints some cells relative to the time it prints them:
// ages and a few others (live.go). Those are kept as the time they count
// from, read from the object (a relative Cell), so a row computed once
// stays true: REST renders them against its clock, WebSocket clients
// against theirs. A resource kube-apiserver does not serve as a Table
// gets the columns of its default table convertor, Name and Created At.
package rows
