// Package informer is kubegate's engine: one upstream LIST+WATCH per
// resource type feeds a compact cache and a processor whose listeners are
// clients.
//
// Data flows one way:
//
//	kube-apiserver ──LIST/WATCH──▶ client-go shared informer (dynamic factory)
//	    └─ transform: Unstructured ─▶ *Object (JSON bytes encoded once)
//	        └─ processor (one per resource): own indexer + bounded history
//	            └─ Listener (one per WebSocket subscription, HTTP watch or webhook)
//	                 filter + bounded growing ring + own resync period
//	                 └─ consumer goroutine calls Pop and writes to its sink
//
// A listener owns no goroutine. The informer's handler only filters and
// appends to listener rings; consumers are woken through a channel and
// pull. A slow consumer therefore never slows the informer or other
// listeners: when its ring reaches its bound the listener's overflow policy
// collapses or resets its backlog instead of growing without limit.
//
// Everything handed out by this package (*Object, its Raw bytes, labels) is
// shared by all readers and must not be modified.
package informer
