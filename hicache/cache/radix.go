package cache

import (
	"bytes"
	"fmt"
	"unsafe"

	"github.com/cphicache/cphicache/pool"
)

// The radix cache maps token prefixes, at page granularity, to where their KV lives: device pages
// (L1) and an object in the shared L2 pool. Every rank of a CP group holds an identical tree,
// because every decision is a pure function of the event stream: children are kept in insertion
// order, candidates are chosen by logical clock with node id as the tie-break, and nothing iterates
// a map.

// treeNode is one edge of the radix tree: a run of whole pages.
type treeNode struct {
	id       uint64
	parent   *treeNode
	children []*treeNode // insertion order; matched by first page, linear search (fan-out is small)

	tokens   []int32 // len is a multiple of the page size
	startPos int     // tokens before this node on its path

	devicePages []int32 // L1 pages in page order; nil when not in L1

	l2 pool.ObjectID // 0 when the node has no L2 copy (or one being written)
	// the node's first page within the L2 object (nodes split after backup share it)
	l2Offset int
	// its L2 object was prefetched from the L3 and it has not been hit since: an L3 hit
	fromL3 bool

	lastAccess uint64 // logical clock of the last hit
	hits       int    // for write_through_selective
	lockRefs   int    // requests of the current step using this node: not evictable

	// The eviction queue's bookkeeping (evictqueue.go): queued says the queue holds an entry for
	// this node under (queuedAccess, id), its latest; held keeps it out of the L1 eviction in
	// progress.
	queued       bool
	queuedAccess uint64
	held         bool
}

func (n *treeNode) pages(pageTokens int) int { return len(n.tokens) / pageTokens }

// inL1 reports whether the node's KV is on the device.
func (n *treeNode) inL1() bool { return n.devicePages != nil }

// radixTree owns the nodes. It does no copies and no collectives; the controller drives it.
type radixTree struct {
	root       *treeNode
	pageTokens int
	nextID     uint64
	nodes      int
	onSplit    func(head, tail *treeNode) // lets the owner keep indexes into nodes right
}

func newRadixTree(pageTokens int) *radixTree {
	t := &radixTree{pageTokens: pageTokens}
	t.reset()
	return t
}

func (t *radixTree) reset() {
	t.root = &treeNode{id: 0}
	t.nextID = 1
	t.nodes = 0
}

func (t *radixTree) newNode(parent *treeNode, tokens []int32, startPos int) *treeNode {
	if len(tokens) == 0 || len(tokens)%t.pageTokens != 0 ||
		startPos != parent.startPos+len(parent.tokens) {
		panic(
			fmt.Sprintf(
				"cache: broken invariant: a new node of %d tokens at position %d under %s: whole pages, right after its parent\n",
				len(tokens),
				startPos,
				parent.describe(),
			),
		)
	}
	n := &treeNode{id: t.nextID, parent: parent, tokens: tokens, startPos: startPos}
	t.nextID++
	t.nodes++
	parent.children = append(parent.children, n)
	return n
}

// samePage reports whether two pages (or any two runs of tokens of one length) hold the same
// tokens. It compares their bytes with bytes.Equal, which the runtime does many bytes at a time:
// the tree's walks compare every matched token of every request's prefix, and a loop of int32
// comparisons was 4% of a replay's CPU.
func samePage(a, b []int32) bool {
	return len(a) == len(b) && bytes.Equal(tokenBytes(a), tokenBytes(b))
}

// tokenBytes is the memory of tokens, read as bytes (for comparisons only: their order is the
// machine's).
func tokenBytes(tokens []int32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(tokens))), 4*len(tokens))
}

// matchedAfterFirstPage is how many tokens of node, from its first page (which childFor matched)
// on, whole pages of tokens match: the whole run at once when it matches, as a long shared prefix
// does, else page by page.
func matchedAfterFirstPage(node, tokens []int32, pageTokens int) int {
	n := min(len(node), len(tokens)) / pageTokens * pageTokens
	if n <= pageTokens || samePage(node[pageTokens:n], tokens[pageTokens:n]) {
		return max(n, pageTokens)
	}
	matched := pageTokens
	for matched+pageTokens <= n && samePage(node[matched:matched+pageTokens], tokens[matched:matched+pageTokens]) {
		matched += pageTokens
	}
	return matched
}

// childFor finds the child whose first page equals page.
func (t *radixTree) childFor(n *treeNode, page []int32) *treeNode {
	for _, c := range n.children {
		// Most children differ at their first token: that comparison, inline, spares them the call.
		if c.tokens[0] == page[0] && samePage(c.tokens[:t.pageTokens], page) {
			return c
		}
	}
	return nil
}

// walk follows tokens (whole pages) down the tree as far as they match, splitting the last node at
// the page where they diverge, and returns the nodes of the matched path, each lying wholly inside
// tokens.
func (t *radixTree) walk(tokens []int32, path []*treeNode) []*treeNode {
	p := t.pageTokens
	cur, pos := t.root, 0
	for pos+p <= len(tokens) {
		child := t.childFor(cur, tokens[pos:pos+p])
		if child == nil {
			break
		}
		matched := matchedAfterFirstPage(child.tokens, tokens[pos:], p)
		if matched < len(child.tokens) {
			child = t.split(child, matched)
		}
		path = append(path, child)
		cur, pos = child, pos+matched
	}
	return path
}

// split cuts n after its first `at` tokens. A new node takes the first part and becomes n's parent,
// so n keeps its identity (and its id) for the suffix; both halves keep pointing into the same L2
// object.
func (t *radixTree) split(n *treeNode, at int) *treeNode {
	if at <= 0 || at >= len(n.tokens) || at%t.pageTokens != 0 || n == t.root {
		panic(
			fmt.Sprintf(
				"cache: broken invariant: a split after %d tokens of %s: only inside a node, at a page boundary\n",
				at,
				n.describe(),
			),
		)
	}
	pagesAt := at / t.pageTokens
	head := &treeNode{
		id: t.nextID, parent: n.parent, tokens: n.tokens[:at:at], startPos: n.startPos,
		l2: n.l2, l2Offset: n.l2Offset, fromL3: n.fromL3, lastAccess: n.lastAccess, hits: n.hits, lockRefs: n.lockRefs,
	}
	t.nextID++
	t.nodes++
	if n.devicePages != nil {
		head.devicePages = n.devicePages[:pagesAt:pagesAt]
		n.devicePages = n.devicePages[pagesAt:]
	}
	for i, c := range n.parent.children {
		if c == n {
			n.parent.children[i] = head
		}
	}
	head.children = []*treeNode{n}
	n.parent = head
	n.tokens = n.tokens[at:]
	n.startPos += at
	if n.l2 != 0 {
		n.l2Offset += pagesAt
	}
	if t.onSplit != nil {
		t.onSplit(head, n)
	}
	return head
}

// remove deletes a childless node from its parent.
func (t *radixTree) remove(n *treeNode) {
	if len(n.children) != 0 || n == t.root {
		panic(
			fmt.Sprintf(
				"cache: broken invariant: removing %s, which has %d children or is the root\n",
				n.describe(),
				len(n.children),
			),
		)
	}
	kids := n.parent.children
	for i, c := range kids {
		if c == n {
			n.parent.children = append(kids[:i], kids[i+1:]...)
			break
		}
	}
	t.nodes--
}

// forEach visits every node (not the root) depth first, children in insertion order.
func (t *radixTree) forEach(fn func(*treeNode)) {
	var visit func(*treeNode)
	visit = func(n *treeNode) {
		for _, c := range n.children {
			fn(c)
			visit(c)
		}
	}
	visit(t.root)
}

// older orders eviction candidates: least recently used first, ties by the lower node id.
func older(a, b *treeNode) bool {
	if a.lastAccess != b.lastAccess {
		return a.lastAccess < b.lastAccess
	}
	return a.id < b.id
}
