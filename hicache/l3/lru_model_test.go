package l3

import (
	"container/list"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// listLRU is the naive model of lruIndex: a list, most recent at the front, a placed block found
// its place by walking from the oldest end (the index's own implementation until the walk proved
// quadratic).
type listLRU struct {
	order *list.List // of *lruEntry
	byKey map[uint64]*list.Element
	bytes int64
}

func (l *listLRU) remove(key uint64) {
	if at, ok := l.byKey[key]; ok {
		l.bytes -= at.Value.(*lruEntry).fileBytes
		l.order.Remove(at)
		delete(l.byKey, key)
	}
}

func (l *listLRU) use(key uint64, fileBytes int64, t time.Time) {
	l.remove(key)
	l.byKey[key] = l.order.PushFront(&lruEntry{key: key, fileBytes: fileBytes, lastUse: t})
	l.bytes += fileBytes
}

func (l *listLRU) place(key uint64, fileBytes int64, t time.Time) {
	l.remove(key)
	e := &lruEntry{key: key, fileBytes: fileBytes, lastUse: t}
	l.bytes += fileBytes
	for at := l.order.Back(); at != nil; at = at.Prev() {
		if !at.Value.(*lruEntry).lastUse.Before(t) {
			l.byKey[key] = l.order.InsertAfter(e, at)
			return
		}
	}
	l.byKey[key] = l.order.PushFront(e)
}

func (l *listLRU) keys() []uint64 {
	var out []uint64
	for at := l.order.Back(); at != nil; at = at.Prev() {
		out = append(out, at.Value.(*lruEntry).key)
	}
	return out
}

// TestLRUIndexMatchesTheListModel drives the heap and the list with the same uses (at this
// process's clock, which never goes back), placements at any mtime, and removals, and compares
// their whole order, their oldest and their bytes after every operation.
func TestLRUIndexMatchesTheListModel(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		got := newLRU()
		want := &listLRU{order: list.New(), byKey: map[uint64]*list.Element{}}
		base, now := time.Unix(1_700_000_000, 0), 0
		for op := 0; op < 300; op++ {
			key, size := uint64(rng.IntN(40)), int64(1+rng.IntN(5))
			switch r := rng.IntN(10); {
			case r < 4:
				now += rng.IntN(2) // equal times are the interesting ones
				got.use(key, size, base.Add(time.Duration(now)*time.Second))
				want.use(key, size, base.Add(time.Duration(now)*time.Second))
			case r < 8:
				at := base.Add(time.Duration(rng.IntN(now+3)) * time.Second)
				got.place(key, size, at)
				want.place(key, size, at)
				if at.After(base.Add(time.Duration(now) * time.Second)) {
					now = int(
						at.Sub(base) / time.Second,
					) // a later mtime is the newest use from now on
				}
			default:
				got.remove(key)
				want.remove(key)
			}
			if g, w := got.keys(), want.keys(); !slices.Equal(g, w) ||
				got.totalBytes != want.bytes {
				t.Fatalf(
					"seed %d op %d: order %v (%d bytes), the model's %v (%d bytes)",
					seed,
					op,
					g,
					got.totalBytes,
					w,
					want.bytes,
				)
			}
			if o := got.oldest(); (o == nil) != (want.order.Len() == 0) ||
				(o != nil && o.key != want.keys()[0]) {
				t.Fatalf(
					"seed %d op %d: oldest %+v, the model's order %v",
					seed,
					op,
					o,
					want.keys(),
				)
			}
		}
	}
}
