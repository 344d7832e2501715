// Package livequery serves live windows on a resource: a page of its
// objects, filtered and sorted, that a consumer keeps equal to "filter,
// sort, slice" as the objects change, and scrolls, at a cost that grows
// with the window and the logarithm of the object count, not with the
// object count.
//
// # Model
//
// Data comes from one feeder per resource, the goroutine that applies
// the informer's ordered changes: Table.Upsert, Table.Delete and
// Table.Replace (a relist's net effect), each with the resourceVersion
// it brings the table to; Table.SetVersion when the resource progressed
// with no change (a bookmark); Table.End when the resource is gone, after
// which windows report Window.Err once popped and nothing changes. A Row is an object as the table needs it:
// namespace, name, labels, selectable fields, creation time, typed cells
// for the table's columns, and an opaque payload.
//
// Data goes to windows. Table.Open(Query) returns a Window: a sort
// (SortSpec: a metadata key, a column or a resolvable field path,
// ascending or descending, ties broken by namespace then name, both
// ascending), a Filter (namespaces allowed, label and field selectors, a
// case-insensitive substring of the name or a cell) and a Range (Limit,
// plus an Offset or a Cursor). Its consumer holds a copy of the window's
// rows and edits it by the operations Window.Pop and Window.Move return:
// insert, remove, move and update at positions in the window, count (the
// rows matching the filter, and the window's offset among them), and
// reset (drop everything; the window follows whole). After applying what
// Pop returned, the copy equals the window as of the version Pop
// returned.
//
// Values sort typed: numbers (integers and resource.Quantity together,
// and text that is one: Parse), then times, then strings (byte order),
// then missing values. A descending sort reverses that, so missing values
// come first; the namespace/name tiebreak stays ascending. A sort whose
// direction is the reverse of its clients' (SortSpec.Reversed: an age,
// ascending when its time is descending) keeps missing values where the
// clients' direction puts them.
//
// An offset window is a slice [Offset, Offset+Limit): a row inserted
// above it shifts its content down one (the last row leaves, the row
// before it enters at the top), and one removed above shifts it up. A
// cursor window is anchored at a sort key tuple (value, namespace, name)
// and shows the Limit rows at or after it: changes above it change only
// its offset, and it survives the anchor row's deletion. Scrolling an
// offset window whose rows shift under it is the consumer's choice to
// make; a dashboard at the top of a list wants the offset, one scrolled
// down the cursor (Window.CursorAt gives the cursor of a row). A consumer
// that reads a window once instead of following it (a REST page) takes
// its Window.Snapshot, and starts the next page at Window.CursorAfter
// its last row: every row sorted after that row then, whatever changed
// in between.
//
// Per change, a window's operations are the least that take its copy to
// the new rows: none for a row that stays outside it, an update for one
// that keeps its place, a move for one that moves inside it, and at most
// a removal and an insertion otherwise, plus a count when the count or
// offset changes. Consecutive counts are merged. Operations wait in the
// window for its consumer; past 4×Limit+Options.MaxPending of them they
// are dropped and the next Pop sends a reset and the window whole, so a
// stalled consumer costs O(Limit) memory.
//
// # Indexes and views
//
// An index is one sort order of a table; a view is an index through one
// filter, held as an order-statistic tree (a treap with subtree sizes,
// tree.go) of the rows that match, each with its sort value's prefix
// (index.compare reads the value itself only where prefixes are equal
// and not exact). A view is built on the first Open that needs it,
// without the table's lock (see Building), and shared by every window
// that sorts and filters alike (equal Filter.key). A view whose last
// window closes is kept, up to date, among the table's idle views
// (Options.IdleViews, least recently used dropped first), so that a
// window reopened alike finds it built; an index goes with its last
// view. A view per distinct filter is what keeps counting and selecting
// the k-th matching row logarithmic whatever the filter's selectivity:
// a text filter or an RBAC namespace set is maintained incrementally
// like any other, at the price of memory and of matching each change
// once per view.
//
// # Building
//
// The rows are kept in a B-tree (github.com/google/btree) by key, which
// clones in O(1), copy on write, as kube-apiserver's cacher clones its
// own. The Open that needs a new view registers a build, whose
// goroutine waits for a slot (below), then clones the rows under the
// lock, and filters the clone, computes sort values and sorts, with no
// lock held, while
// changes, pops, moves and other Opens go on. The changes made meanwhile
// queue on the build; it applies them off the lock while many are
// queued, then the last few under it, with which it installs the view
// and opens its waiters' windows. Opens of a view being built wait for
// it (or for their context); a build whose every Open has given up
// stops at its next check, every 1024 rows.
//
// A build's time goes to memory: what a filter or a sort value reads of
// a row lies a few dependent loads away (row, Row, its cells), each a
// likely cache miss at a table's size. So a build filters in blocks of
// 1024 rows, loading each block's rows, Rows, and the allocation holding
// their flattened labels and text, a pass per link, before matching
// them (matcher.load); and it reads sort values one link of every row
// per pass (index.values). A pass's loads do not depend on each other,
// so many misses are in flight at once. It writes the view's nodes into
// the array of a view dropped before, when one of about its size is
// kept, rather than into fresh memory whose every page faults
// (nodes.go).
//
// Builds scan in slots (Options.BuildSlots, which a gateway shares
// between all its tables): at most max(1, GOMAXPROCS/2) scan at once,
// so that builds never take every CPU from changes and other windows.
// A build waits for its slot in the FIFO queue of its owner (the
// Query.Owner of the Open that started it), and a free slot goes to the
// owner served least recently, so an owner's queue of builds delays
// another owner's new view by no more than the builds already scanning.
// Nor, mostly, by those: a scanning build whose owner had been served
// more recently than the owner of a build that queues gives its slot up
// to it at its next check (between blocks of rows and passes of its
// sort), keeping its snapshot and work, and resumes after it (see
// BuildSlots). With BuildSlotsOptions.OwnerShare, an owner's builds are
// also held to that share of one CPU on average: one that owes scanning
// time gets no slot until its share has paid for it. The slot is held from the snapshot to the end of the
// scan, pauses aside: a queued build holds no snapshot and queues no
// changes, and one whose Opens
// all gave up leaves the queue without scanning; catching up and
// installing happen after the slot is released. A table that ends drops
// its queued builds, whose Opens get its error. Lock order: the table's
// lock, then the slots' own; the slots never call into a table.
//
// # Shares
//
// A table holds at most Options.MaxViews views (idle ones and builds
// included), and each owner (Query.Owner, a user) at most
// Options.MaxViewsPerOwner of them: those it holds windows on or waits
// to have built. Past its share an owner's Open fails with a 429
// (TooManyViewsError). When the table holds MaxViews, the least recently
// used idle view makes room; with none idle, the owner holding the most
// views gives way if it holds more than the one asking would: its least
// recently opened view (one it alone holds, if any) ends, and that
// view's windows end with a 429 (ViewEvictedError, Window.Err).
// Otherwise the Open fails with a 429.
//
// # Costs
//
// With n rows, I indexes, V views in all, m rows in a view, W windows in
// all, L a window's limit and p the cost of evaluating one filter:
//
//   - a change (Upsert, Delete): O(log n) in the rows' B-tree, O(I) sort
//     value extractions (two per index: the row's old value, to find
//     it, and its new one), O(V·p) filter evaluations, O(log m) per view
//     it touches, O(1) per window of those views plus O(log m) for each
//     row that enters a window, and O(1) per view being built. It is
//     independent of n but for the logarithms; with many windows on the
//     view it is O(W), each window getting at most its count.
//   - Open on an existing view: O(log m + L). On a new view: O(n·p) to
//     filter and extract, O(m) to sort by prefixes (sort.go) and O(r log
//     r) for each run of r equal prefixes, all off the lock, and O(k log
//     m) for the k changes made meanwhile.
//   - Move (scrolling): O(log m + k) for k rows entering the window, and
//     one removal per row leaving it (a reset when none stays).
//   - Pop: O(operations), or O(log m + L) after a reset.
//   - memory: O(n) for the rows, O(m) per view; O(L) per window. Views
//     are bounded per table (Options.MaxViews), so a table's memory is
//     O(MaxViews·n) at worst, whatever its windows ask for.
//
// # Locking
//
// One mutex per Table guards its rows, indexes, views, builds and every
// window's state; a Window has no lock or goroutine of its own. The
// feeder holds it while it applies one change (or one Replace, a
// relist's net effect) and computes every window's operations;
// consumers hold it while they Pop, Move or Close, and Open holds it to
// attach to a view, or to register a build. No view is built under it.
// The consumers of windows with something new to pop are woken
// (Query.Wake) after it is released, so a wake may call back into the
// table. The only goroutines are builds' (Table.Wait waits for them);
// nothing blocks on I/O.
//
// Everything handed out (Rows, and the Row in an Op) is shared and must
// not be modified.
package livequery
