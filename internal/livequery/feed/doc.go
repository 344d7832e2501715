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
// The feeder drains its listener when woken, which a change does, and
// so does a bookmark (informer.ListenerOptions.WakeOnProgress): after
// each drain the table's version is the listener's Progress, so a quiet
// resource's table reaches the version its cache has, and a sorted list
// asked for a resourceVersion that a plain list just returned is served
// instead of timing out (504) until the resource's next change.
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
