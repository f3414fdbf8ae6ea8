package l3

import (
	"container/heap"
	"fmt"
	"sort"
	"time"
)

// lruIndex orders one namespace's blocks by last use and sums their file sizes. It is this
// process's view: another job sharing the directory may have used, written or removed a block
// since, which evictOverBudget checks against the file before it removes anything.
//
// It is a heap on (lastUse, rank), the least recently used at its root, so that every operation is
// O(log n): a directory holds tens of thousands of blocks, and a rank places each block another
// rank wrote (Adopt, Exists) by its file's mtime. (A list walked from its oldest end to find that
// place made a warm 40,000-block replay spend three quarters of its CPU there.) rank breaks ties of
// equal times the way a list would: a use goes in front of every block (rank counts up), a placed
// block behind every block of the same time (rank counts down).
type lruIndex struct {
	entries    lruHeap
	byKey      map[uint64]*lruEntry
	totalBytes int64

	// the latest use recorded, so that a use is never older than any block
	newest          time.Time
	frontRank, back int64
}

type lruEntry struct {
	key       uint64
	fileBytes int64
	lastUse   time.Time
	rank      int64 // the tie-break among equal lastUse, older first
	at        int   // the entry's index in the heap
}

func newLRU() *lruIndex { return &lruIndex{byKey: map[uint64]*lruEntry{}} }

// use records a use at t, the latest time this process has seen: the block becomes the most recent,
// even if a placed block's mtime (another node's clock) is later than t.
func (l *lruIndex) use(key uint64, fileBytes int64, t time.Time) {
	if t.Before(l.newest) {
		t = l.newest
	}
	l.newest = t
	l.frontRank++
	l.insert(&lruEntry{key: key, fileBytes: fileBytes, lastUse: t, rank: l.frontRank})
}

// place records a use at t, which may be older than others' (a file's mtime): the block goes where
// t puts it, behind every block used at t or later, so that equal times keep their earlier order.
func (l *lruIndex) place(key uint64, fileBytes int64, t time.Time) {
	if t.After(l.newest) {
		l.newest = t
	}
	l.back--
	l.insert(&lruEntry{key: key, fileBytes: fileBytes, lastUse: t, rank: l.back})
}

func (l *lruIndex) insert(e *lruEntry) {
	if e.fileBytes < 0 {
		panic(l.broken(e.key, "block %016x entered with %d bytes", e.key, e.fileBytes))
	}
	l.remove(e.key)
	l.byKey[e.key] = e
	l.totalBytes += e.fileBytes
	heap.Push(&l.entries, e)
	if l.entries[e.at] != e || len(l.entries) != len(l.byKey) {
		panic(l.broken(e.key, "block %016x inserted at heap index %d", e.key, e.at))
	}
}

func (l *lruIndex) remove(key uint64) {
	if e, ok := l.byKey[key]; ok {
		if l.entries[e.at] != e {
			panic(l.broken(key, "block %016x is not at its heap index %d", key, e.at))
		}
		l.totalBytes -= e.fileBytes
		heap.Remove(&l.entries, e.at)
		delete(l.byKey, key)
	}
	if l.totalBytes < 0 || len(l.entries) != len(l.byKey) {
		panic(l.broken(key, "after removing block %016x", key))
	}
}

// broken is a broken invariant of the index (its bytes are the blocks' sum, every entry at its heap
// index), with a dump of its counts and the entry of key.
func (l *lruIndex) broken(key uint64, format string, args ...any) string {
	e := l.byKey[key]
	return "l3: broken invariant: " + fmt.Sprintf(format, args...) + fmt.Sprintf(
		"\nLRU: %d entries in the heap, %d by key, %d bytes; entry of %016x: %+v\n",
		len(l.entries),
		len(l.byKey),
		l.totalBytes,
		key,
		e,
	)
}

// oldest is the least recently used block, or nil.
func (l *lruIndex) oldest() *lruEntry {
	if len(l.entries) == 0 {
		return nil
	}
	return l.entries[0]
}

func (l *lruIndex) has(key uint64) bool { _, ok := l.byKey[key]; return ok }

// keys lists the blocks from the least to the most recently used (tests).
func (l *lruIndex) keys() []uint64 {
	sorted := append(lruHeap(nil), l.entries...)
	sort.Slice(sorted, sorted.Less)
	out := make([]uint64, len(sorted))
	for i, e := range sorted {
		out[i] = e.key
	}
	return out
}

// lruHeap is container/heap's view of the entries, the least recently used first.
type lruHeap []*lruEntry

func (h lruHeap) Len() int { return len(h) }
func (h lruHeap) Less(i, j int) bool {
	if !h[i].lastUse.Equal(h[j].lastUse) {
		return h[i].lastUse.Before(h[j].lastUse)
	}
	return h[i].rank < h[j].rank
}
func (h lruHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].at, h[j].at = i, j
}
func (h *lruHeap) Push(x any) {
	e := x.(*lruEntry)
	e.at = len(*h)
	*h = append(*h, e)
}
func (h *lruHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
