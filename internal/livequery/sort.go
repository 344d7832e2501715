package livequery

import (
	"cmp"
	"slices"
	"sync"
)

// A view build sorts up to every row of a table, so the sort is where a
// new sort order's time goes. It sorts keyed entries: each carries its
// prefix in the index's order (index.prefix: a rank, then hi and lo) and
// seq, its place among the rows in key order, which is their (namespace,
// name) order (rowKey). A stable radix sort on rank and prefix, of the
// entries in seq order, gives index.compare's order wherever prefixes
// are exact; runs of equal prefixes that are not exact (strings of 16
// bytes or more that share their first 15, quantities between two
// integers) are then sorted by comparing their values. So a sort costs a
// few passes over the entries, skipping the bytes every prefix shares,
// and compares values only where prefixes cannot tell them apart. The
// sorted entries are written once, into the nodes of the view's tree.

// keyed is an entry as a view build sorts it: its row is rows[seq], so
// that keyed entries hold no pointer for the collector to scan.
type keyed struct {
	hi, lo uint64
	seq    uint32
	rank   uint8
	exact  bool
}

// scratch is a view build's transient memory, kept between builds: at
// 100,000 rows, some 6 MB that each build would otherwise allocate, zero
// and fault in. Its pointers are cleared before it is put back, so that
// it holds no row.
type scratch struct {
	rows    []*row
	rs      []*Row
	cells   []*Value
	vals    []Value
	ks, tmp []keyed
}

var scratches = sync.Pool{New: func() any { return new(scratch) }}

// release clears sc's pointers and puts it back in scratches.
func (sc *scratch) release() {
	clear(sc.rows[:cap(sc.rows)])
	clear(sc.rs[:cap(sc.rs)])
	clear(sc.cells[:cap(sc.cells)])
	clear(sc.vals[:cap(sc.vals)])
	scratches.Put(sc)
}

// sized returns s with length n, reusing its array when it can.
func sized[T any](s []T, n int) []T { return slices.Grow(s[:0], n)[:n] }

// sortEntries returns the nodes of the entries in x of rows, which must
// be in key order, in x's order (index.compare), not yet linked
// (tree.build). It calls pause, if not nil, between its passes and
// every buildCheck rows within them (see build.go), and gives up,
// reporting false, as soon as pause does.
func (x *index) sortEntries(rows []*row, sc *scratch, pause func() bool) ([]node, bool) {
	if pause == nil {
		pause = func() bool { return true }
	}
	sc.vals = sized(sc.vals, len(rows))
	sc.ks = sized(sc.ks, len(rows))
	vals, ks := sc.vals, sc.ks
	inexact := 0 // entries whose prefix is not exact
	for start := 0; start < len(rows); start += buildCheck {
		if start > 0 && !pause() {
			return nil, false
		}
		end := min(start+buildCheck, len(rows))
		x.values(rows[start:end], vals[start:end], sc)
		for i := start; i < end; i++ {
			k := keyed{seq: uint32(i)}
			k.rank, k.hi, k.lo, k.exact = x.prefix(vals[i])
			ks[i] = k
			if !k.exact {
				inexact++
			}
		}
	}
	if !pause() {
		return nil, false
	}
	sc.tmp = sized(sc.tmp, len(ks))
	var sorted bool
	if ks, sorted = radixSort(ks, sc.tmp, pause); !sorted {
		return nil, false
	}
	desc := x.spec.Desc
	compared := 0 // entries sorted by comparison since the last pause
	for i := 0; i < len(ks); {
		j := i + 1
		exact := ks[i].exact
		for j < len(ks) && ks[j].rank == ks[i].rank && ks[j].hi == ks[i].hi && ks[j].lo == ks[i].lo {
			exact = exact && ks[j].exact
			j++
		}
		if !exact {
			slices.SortFunc(ks[i:j], func(a, b keyed) int {
				c := Compare(vals[a.seq], vals[b.seq])
				if desc {
					c = -c
				}
				if c != 0 {
					return c
				}
				return cmp.Compare(a.seq, b.seq)
			})
			if compared += j - i; compared >= buildCheck {
				if !pause() {
					return nil, false
				}
				compared = 0
			}
		}
		i = j
	}
	nodes := newNodes(len(ks)) // one array for the view's first nodes
	// Values kept by entries whose prefix is not exact (index.parsed),
	// in one allocation too.
	var kept []Value
	if x.parsed && inexact > 0 {
		kept = make([]Value, 0, inexact)
	}
	for i, k := range ks {
		if i > 0 && i%buildCheck == 0 && !pause() {
			freeNodes(nodes)
			return nil, false
		}
		e := &nodes[i].e
		*e = entry{r: rows[k.seq], hi: k.hi, lo: k.lo, rank: k.rank, exact: k.exact}
		if x.parsed && !k.exact {
			kept = append(kept, vals[k.seq]) // within its capacity: never moved
			e.val = &kept[len(kept)-1]
		}
	}
	return nodes, true
}

// values sets vals[i] to the sort value of rows[i], using sc.
//
// A column's value is two loads away (the row, its cells; the row keeps
// the Row's cells for this), each likely a cache miss at a table's size,
// the second depending on the first: a loop that follows the chain row by
// row waits for each miss in turn, and a processor runs only a few
// iterations ahead. values follows one link of every row's chain per pass
// instead, each pass a short loop, so that a pass's loads do not depend
// on each other and many misses are in flight at once; the prefixes are
// computed in a pass of their own afterwards. At 100,000 Pods this took
// a view build's sort values from about 40 ms to about 5 ms
// (BenchmarkFirstWindow, index=new), with the Row a third load between
// the two; computing each prefix as its value is read took them back to
// 16 ms. A build reads them a block of buildCheck rows at a time, which
// leaves as many misses in flight as a processor can have.
func (x *index) values(rows []*row, vals []Value, sc *scratch) {
	if x.col < 0 {
		sc.rs = sized(sc.rs, len(rows))
		rs := sc.rs
		for i, r := range rows {
			rs[i] = r.Row
		}
		for i, r := range rs {
			vals[i] = x.value(r)
		}
		return
	}
	sc.cells = sized(sc.cells, len(rows))
	cells := sc.cells
	for i, r := range rows {
		cells[i] = nil
		if x.col < len(r.cells) {
			cells[i] = &r.cells[x.col]
		}
	}
	for i, c := range cells {
		vals[i] = Value{}
		if c != nil {
			vals[i] = *c
		}
	}
}

// radixPasses are the bytes a radix sort orders keyed entries by, least
// significant first: lo's 8, hi's 8, then rank.
const radixPasses = 17

// radixByte returns k's byte for radix pass p.
func radixByte(k *keyed, p int) byte {
	switch {
	case p < 8:
		return byte(k.lo >> (8 * p))
	case p < 16:
		return byte(k.hi >> (8 * (p - 8)))
	}
	return k.rank
}

// radixSort sorts ks stably by rank, then hi, then lo, using tmp (of
// ks' length) as scratch, and returns the sorted slice: ks or tmp. A
// pass whose byte is the same in every entry is skipped. It calls pause
// between passes and every buildCheck entries within them, and gives
// up, reporting false, as soon as pause does.
func radixSort(ks, tmp []keyed, pause func() bool) ([]keyed, bool) {
	if len(ks) < 2 {
		return ks, true
	}
	var counts [radixPasses][256]int
	for start := 0; start < len(ks); start += buildCheck {
		if start > 0 && !pause() {
			return nil, false
		}
		for i := start; i < min(start+buildCheck, len(ks)); i++ {
			for p := range radixPasses {
				counts[p][radixByte(&ks[i], p)]++
			}
		}
	}
	for p := range radixPasses {
		c := &counts[p]
		if c[radixByte(&ks[0], p)] == len(ks) {
			continue
		}
		sum := 0
		for b, n := range c {
			c[b] = sum
			sum += n
		}
		for start := 0; start < len(ks); start += buildCheck {
			if !pause() {
				return nil, false
			}
			for i := start; i < min(start+buildCheck, len(ks)); i++ {
				b := radixByte(&ks[i], p)
				tmp[c[b]] = ks[i]
				c[b]++
			}
		}
		ks, tmp = tmp, ks
	}
	return ks, true
}
