// Package sink is the step every sink (a REST watch, a WebSocket writer,
// a webhook sender) takes between its listeners and its wire: pop the
// listeners in bounded chunks, in order, and hand each notification to the
// sink's encoder.
//
// Data comes from informer.Listener (whose processor wakes the sink) and
// goes to a sink-specific Encoder, which writes or renders it. The package
// starts no goroutine and does not wait: each sink keeps its own way of
// waiting for a wake (a request's goroutine, a writer started on demand, a
// sender that pops only when idle) and calls Popper.Pop when woken.
package sink
