// Package informer is kubegate's engine: one upstream LIST+WATCH per
// resource type feeds a compact cache and a processor whose listeners are
// clients.
//
// Data flows one way:
//
//	kube-apiserver ──Table LIST (paged), then WATCH, objects embedded──▶ listWatch (upstream.go)
//	    └─ objectDecoder: bytes ─▶ *Object (+ its row's Cells) as they stream in (decode.go)
//	        └─ client-go Reflector ─▶ boundedFIFO (RealFIFO of deltas, bounded)
//	            └─ cache.New process loop ─▶ processor.process, one delta at a time
//	                └─ processor (one per resource): the only store + bounded history
//	                    └─ Listener (one per WebSocket subscription, HTTP watch or webhook)
//	                         filter + bounded growing ring + own resync period
//	                         └─ consumer goroutine calls Pop and writes to its sink
//
// A listener owns no goroutine. The processor only filters and appends to
// listener rings; consumers are woken through a channel and pull. A slow
// consumer therefore never slows the upstream or other listeners: when its
// ring reaches its bound the listener's overflow policy collapses or
// resets its backlog instead of growing without limit.
//
// A resource the apiserver stops serving (its CRD deleted) ends: once
// discovery confirms a 404, its upstream stops, it leaves the Manager, and
// each listener pops Ended after what it holds (see Manager).
//
// Each object comes with its Table row as kube-apiserver printed it
// (Object.Cells, following the shared Object.Columns), unless the upstream
// serves no Tables (see listWatch). Field selectors accept what
// kube-apiserver accepts, built-in and CRD selectableFields (fields.go).
//
// Everything handed out by this package (*Object, its Raw bytes, Cells,
// Columns, labels) is shared by all readers and must not be modified.
package informer
