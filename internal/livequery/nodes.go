package livequery

import (
	"math/bits"
	"sync"
)

// A view build writes its view's first nodes into one array, 64 bytes
// a row: 6.4 MB at 100,000 rows. Allocated afresh, that array is
// often memory the runtime has just taken from the operating system
// (for a growing heap, or again after giving it back), and the
// build's first write to each of its pages faults. On a 2-CPU
// Firecracker VM a fault costs about 12 µs, so under viewchurn's
// churner writing the nodes took 17 ms of a build's 40 (1,600
// faults), more than sorting them. So the array of a view that is
// dropped (index.drop) is kept for the next build of about its size,
// whose pages are then resident: in a sync.Pool, which gives it back
// to the collector once two collections have passed without a build
// taking it. Until then it keeps the rows its nodes pointed to, which
// the table may have replaced since.
//
// Arrays are sized in classes of 16 steps per power of two, so that a
// view of 100,000 rows reuses the array of one of 99,000: at most
// 1/16 more than the build needs, which the view's later insertions
// do not use. Arrays of fewer than minPooledNodes are allocated
// exactly, as small objects.
//
// Reuse is safe because a view's nodes are reachable only from its
// tree: entries handed out (tree.at, tree.each) are read under the
// table's lock by windows on the view, and a dropped view has none
// open; a window closed or evicted reads its view no more (its
// methods check closed under the lock). index.drop clears the view's
// tree, so that a read it missed fails at once instead of reading
// another view's rows.

// nodeSteps is the number of array sizes between two powers of two.
const nodeSteps = 16

// minPooledNodes is the smallest array kept for reuse: 64 KB.
const minPooledNodes = 1024

// nodePools holds the arrays of dropped views, by size class: index b,
// k for a capacity of (nodeSteps+1+k) steps of 2^(b-1)/nodeSteps.
var nodePools [bits.UintSize][nodeSteps]sync.Pool

// nodeClass returns the capacity of the array for n nodes, and its pool
// (nil: n is below minPooledNodes, so the array is exact and not kept).
func nodeClass(n int) (int, *sync.Pool) {
	if n < minPooledNodes {
		return n, nil
	}
	b := bits.Len(uint(n - 1)) // 2^(b-1) < n <= 2^b
	step := 1 << (b - 1) / nodeSteps
	c := (n + step - 1) / step * step
	return c, &nodePools[b][c/step-nodeSteps-1]
}

// newNodes returns an array of n nodes, with the capacity of n's class:
// a dropped view's, when one is kept, else a new one. Its nodes hold
// whatever they held: the caller writes each before linking it.
func newNodes(n int) []node {
	c, p := nodeClass(n)
	if p != nil {
		if s, ok := p.Get().(*[]node); ok {
			nodes := (*s)[:c]
			clear(nodes[n:]) // rows of the view before, never read again
			return nodes[:n]
		}
	}
	return make([]node, n, c)
}

// freeNodes keeps nodes, from newNodes, for a later build. Nothing may
// refer to them any more.
func freeNodes(nodes []node) {
	if _, p := nodeClass(cap(nodes)); p != nil {
		p.Put(&nodes)
	}
}
