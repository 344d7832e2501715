package informer

import "sort"

// history keeps the most recent changes of one resource in resourceVersion
// order, so a listener can resume from a version it saw earlier. It is a
// circular buffer bounded by count and by object bytes. Not thread safe:
// the processor guards it.
//
// Modified entries also hold the previous state (Notification.prev) so a
// resumed listener sees selector transitions as a live one does. Only the
// new state is counted in bytes: the previous state is usually the entry
// before it, so counting both would halve the history for no memory saved.
type history struct {
	buf      []Notification // circular, len == max count
	start, n int
	bytes    int64
	maxBytes int64
	// since is the version after which the history is complete: every change
	// with RV > since is in buf (or still to come).
	since uint64
}

func newHistory(maxEvents int, maxBytes int64) *history {
	return &history{buf: make([]Notification, maxEvents), maxBytes: maxBytes}
}

func (h *history) at(i int) *Notification { return &h.buf[(h.start+i)%len(h.buf)] }

func (h *history) evictOldest() {
	old := h.at(0)
	h.since = old.RV
	h.bytes -= int64(len(old.Object.Raw))
	*old = Notification{}
	h.start = (h.start + 1) % len(h.buf)
	h.n--
}

// add appends a change whose RV is greater than every RV already held.
func (h *history) add(n Notification) {
	if len(h.buf) == 0 {
		h.since = n.RV
		return
	}
	size := int64(len(n.Object.Raw))
	for h.n > 0 && (h.n == len(h.buf) || h.bytes+size > h.maxBytes) {
		h.evictOldest()
	}
	*h.at(h.n) = n
	h.n++
	h.bytes += size
}

// reset forgets everything: the history is complete only after rv.
func (h *history) reset(rv uint64) {
	for h.n > 0 {
		h.evictOldest()
	}
	h.since = rv
}

// after appends the changes with RV > rv to buf. ok is false when the
// history no longer reaches back to rv.
func (h *history) after(rv uint64, buf []Notification) ([]Notification, bool) {
	if rv < h.since {
		return buf, false
	}
	i := sort.Search(h.n, func(i int) bool { return h.at(i).RV > rv })
	for ; i < h.n; i++ {
		buf = append(buf, *h.at(i))
	}
	return buf, true
}
