package livequery

// tree is an order-statistic treap: a binary search tree whose nodes also
// carry random priorities in heap order, which keeps its expected depth
// logarithmic whatever the order of insertions, and subtree sizes, which
// give an element's rank and the element at a rank in O(log n) expected.
//
// Neither the standard library nor the module graph offers a sorted set
// with rank (github.com/google/btree keeps no subtree counts), and a
// treap is the shortest structure that has it.
//
// Elements are entries, held in the nodes (insert copies the entry it
// is given), ordered by cmp, which must be a total order on the elements
// held: no two elements compare equal. Not thread safe.
type tree struct {
	root *node
	cmp  func(a, b *entry) int
	rng  uint64 // splitmix64 state for priorities
}

// node is an element and its place in the tree: 64 bytes. A view holds
// one per row it shows, so its size is most of a view's memory, and of
// what a view build writes (one []node: newNodes).
type node struct {
	e    entry
	prio uint32
	size int32
	l, r *node
}

func newTree(cmp func(a, b *entry) int, seed uint64) *tree {
	return &tree{cmp: cmp, rng: seed}
}

func size(n *node) int {
	if n == nil {
		return 0
	}
	return int(n.size)
}

func (n *node) fix() { n.size = int32(1 + size(n.l) + size(n.r)) }

// next returns a pseudo-random priority (splitmix64's high half):
// priorities only need to be independent of the keys, not unpredictable,
// and equal ones only make a node's place among its equals arbitrary.
func (t *tree) next() uint32 {
	t.rng += 0x9e3779b97f4a7c15
	z := t.rng
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return uint32((z ^ (z >> 31)) >> 32)
}

// Len returns the number of elements.
func (t *tree) Len() int { return size(t.root) }

// build replaces the contents by nodes, whose entries must be in cmp
// order with no two equal, in O(n): it links them into a Cartesian tree
// on random priorities, which is the treap any insertion order would
// give. The tree keeps nodes' array. It calls pause, if not nil, every
// treeBuildCheck elements (see build.go), and gives up, reporting false
// and leaving t empty, as soon as pause does.
//
// The stack holds the tree's right spine. A node leaves it complete: its
// left child left the stack before it was pushed, and its right child is
// the node above it, which left just before it. So its size is set as it
// leaves, without another walk of the tree.
func (t *tree) build(nodes []node, pause func() bool) bool {
	var stack []*node
	pop := func() *node {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		n.fix()
		return n
	}
	for i := range nodes {
		if pause != nil && i > 0 && i%treeBuildCheck == 0 && !pause() {
			t.root = nil
			return false
		}
		n := &nodes[i]
		n.prio, n.l, n.r = t.next(), nil, nil
		var last *node
		for len(stack) > 0 && stack[len(stack)-1].prio < n.prio {
			last = pop()
		}
		n.l = last
		if len(stack) > 0 {
			stack[len(stack)-1].r = n
		}
		stack = append(stack, n)
	}
	t.root = nil
	for len(stack) > 0 {
		t.root = pop()
	}
	return true
}

// treeBuildCheck is how many elements tree.build places between two
// pauses: about a millisecond's work.
const treeBuildCheck = 16 * 1024

// split divides n into the elements before e and those at or after it.
func (t *tree) split(n *node, e *entry) (l, r *node) {
	if n == nil {
		return nil, nil
	}
	if t.cmp(&n.e, e) < 0 {
		n.r, r = t.split(n.r, e)
		n.fix()
		return n, r
	}
	l, n.l = t.split(n.l, e)
	n.fix()
	return l, n
}

// merge joins a and b, every element of a being before every one of b.
func merge(a, b *node) *node {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case a.prio > b.prio:
		a.r = merge(a.r, b)
		a.fix()
		return a
	}
	b.l = merge(a, b.l)
	b.fix()
	return b
}

// insert adds a copy of e, which must not be held yet, and returns its
// rank.
func (t *tree) insert(e *entry) int {
	x := &node{e: *e, prio: t.next(), size: 1}
	rank := 0
	link := &t.root
	for n := *link; n != nil; n = *link {
		if x.prio > n.prio {
			break
		}
		n.size++
		if t.cmp(e, &n.e) < 0 {
			link = &n.l
		} else {
			rank += size(n.l) + 1
			link = &n.r
		}
	}
	x.l, x.r = t.split(*link, e)
	x.fix()
	*link = x
	return rank + size(x.l)
}

// delete removes e and returns the rank it had, or -1 if it was not held.
func (t *tree) delete(e *entry) int {
	// Find it first, so that the sizes on the path are only decremented
	// when it is there.
	rank, found := t.find(e)
	if !found {
		return -1
	}
	link := &t.root
	for n := *link; ; n = *link {
		c := t.cmp(e, &n.e)
		if c == 0 {
			*link = merge(n.l, n.r)
			return rank
		}
		n.size--
		if c < 0 {
			link = &n.l
		} else {
			link = &n.r
		}
	}
}

// rank returns the number of elements before e; e need not be held.
func (t *tree) rank(e *entry) int {
	rank, _ := t.find(e)
	return rank
}

// find returns the number of elements before e and whether e is held.
func (t *tree) find(e *entry) (int, bool) {
	rank := 0
	for n := t.root; n != nil; {
		c := t.cmp(e, &n.e)
		switch {
		case c < 0:
			n = n.l
		case c == 0:
			return rank + size(n.l), true
		default:
			rank += size(n.l) + 1
			n = n.r
		}
	}
	return rank, false
}

// at returns the element of rank i, 0 <= i < Len(): the tree's own,
// which it never changes.
func (t *tree) at(i int) *entry {
	n := t.root
	for {
		ls := size(n.l)
		switch {
		case i < ls:
			n = n.l
		case i == ls:
			return &n.e
		default:
			i -= ls + 1
			n = n.r
		}
	}
}

// each calls fn with the elements of ranks from to to-1, in order, in
// O(log n + to-from): the tree's own, which it never changes.
func (t *tree) each(from, to int, fn func(*entry)) {
	eachIn(t.root, 0, from, to, fn)
}

// eachIn walks the subtree n, whose first element has rank base.
func eachIn(n *node, base, from, to int, fn func(*entry)) {
	if n == nil || from >= to {
		return
	}
	mid := base + size(n.l)
	if from < mid {
		eachIn(n.l, base, from, to, fn)
	}
	if from <= mid && mid < to {
		fn(&n.e)
	}
	if to > mid+1 {
		eachIn(n.r, mid+1, from, to, fn)
	}
}
