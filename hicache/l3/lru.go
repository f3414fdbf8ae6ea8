package l3

import (
	"container/list"
	"time"
)

// lruIndex orders one namespace's blocks by last use, most recent at the front, and sums their file sizes. It
// is this process's view: another job sharing the directory may have used, written or removed a block since,
// which evictOne checks against the file before it removes anything.
type lruIndex struct {
	order      *list.List // of *lruEntry
	byKey      map[uint64]*list.Element
	totalBytes int64
}

type lruEntry struct {
	key       uint64
	fileBytes int64
	lastUse   time.Time
}

func newLRU() *lruIndex { return &lruIndex{order: list.New(), byKey: map[uint64]*list.Element{}} }

// use records a use at t, the latest time this process has seen: the block moves to the front.
func (l *lruIndex) use(key uint64, fileBytes int64, t time.Time) {
	l.remove(key)
	l.byKey[key] = l.order.PushFront(&lruEntry{key, fileBytes, t})
	l.totalBytes += fileBytes
}

// place records a use at t, which may be older than others' (a file's mtime): the block goes where t puts it,
// after every block used at t or later, so that equal times keep their earlier order.
func (l *lruIndex) place(key uint64, fileBytes int64, t time.Time) {
	l.remove(key)
	e := &lruEntry{key, fileBytes, t}
	l.totalBytes += fileBytes
	for at := l.order.Back(); at != nil; at = at.Prev() {
		if !at.Value.(*lruEntry).lastUse.Before(t) {
			l.byKey[key] = l.order.InsertAfter(e, at)
			return
		}
	}
	l.byKey[key] = l.order.PushFront(e)
}

func (l *lruIndex) remove(key uint64) {
	if at, ok := l.byKey[key]; ok {
		l.totalBytes -= at.Value.(*lruEntry).fileBytes
		l.order.Remove(at)
		delete(l.byKey, key)
	}
}

// oldest is the least recently used block, or nil.
func (l *lruIndex) oldest() *lruEntry {
	if at := l.order.Back(); at != nil {
		return at.Value.(*lruEntry)
	}
	return nil
}

func (l *lruIndex) has(key uint64) bool { _, ok := l.byKey[key]; return ok }

// keys lists the blocks from the least to the most recently used (tests).
func (l *lruIndex) keys() []uint64 {
	var out []uint64
	for at := l.order.Back(); at != nil; at = at.Prev() {
		out = append(out, at.Value.(*lruEntry).key)
	}
	return out
}
