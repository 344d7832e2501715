// Package feed keeps a livequery.Table per resource equal to the
// informer's cache, and opens windows on it.
//
// Data comes from one informer.Listener per resource (all namespaces, no
// selector, with an initial snapshot) and goes to the resource's Table:
//
//	informer.Resource ──Listener (collapse on overflow)──▶ feeder goroutine
//	    snapshot ADDED… END_OF_SNAPSHOT   ─▶ Table.Replace
//	    ADDED, MODIFIED / DELETED          ─▶ Table.Upsert / Table.Delete
//	    RESET, snapshot                    ─▶ Table.Replace (net effect)
//	    progress (bookmarks), on drain     ─▶ Table.SetVersion
//	    ENDED (resource no longer served)  ─▶ Table.End
//	                                            └─▶ livequery.Windows
//
// The feeder drains its listener when woken, which a change does and a
// bookmark alone does not: a table's version moves with its resource's
// changes, and to a bookmark's version only at the next change. A
// window's rv may therefore stay behind the apiserver's latest
// resourceVersion (other resources' writes take versions too) for as
// long as its resource does not change.
//
// Rows are built once per change by a RowFunc (MetadataRow by default),
// chosen per resource with the Table's options by Options.Schema, which
// also gives the table data its windows hand out (Window.Data).
//
// Tables is the registry. The first Open for a resource waits for its
// cache to sync, attaches the listener and starts the feeder; Open
// returns once the first snapshot is in the table. When a resource's last
// window closes, its feeder keeps the table for Options.IdleGrace, then
// stops its listener, exits and drops the table; a window opened
// meanwhile reuses it. A resource that ends (Ended) or a Tables that
// stops ends the table: its windows' consumers pop what they hold, then
// find Window.Err set.
package feed
