package pool

import "math/bits"

// freeBitmap records which slots are free, with a summary tree so that finding the lowest free slot
// at or after a position costs O(levels) and not O(slots), as in the Go runtime's page allocator.
//
// levels[0] bit s is set <=> global slot s is free, for s in [0, slots); bits at and above slots
// are 0. levels[k+1] bit j is set <=> levels[k][j] != 0, so a set bit always leads down to a free
// slot. Each level has ceil(len(levels[k])/64) words; the top level is a single word. With 64 bits
// per word, 2^24 slots need four levels (2^18, 2^12, 2^6 and 1 words) and 2^14 slots need three.
type freeBitmap struct {
	levels [][]uint64
	slots  int
	// lowFreeSlot is a lower bound of the lowest free slot: no slot below it is free. Placement
	// asks for the lowest free slot on every reservation, and in a pool filled from the bottom the
	// search from 0 would climb every summary level and come back down (7 dependent reads at 2^24
	// slots); from lowFreeSlot it usually ends in the first word it reads.
	lowFreeSlot int
}

const wordBits = 64

func newFreeBitmap(slots int) freeBitmap {
	b := freeBitmap{slots: slots}
	for words := (slots + wordBits - 1) / wordBits; ; words = (words + wordBits - 1) / wordBits {
		b.levels = append(b.levels, make([]uint64, words))
		if words == 1 {
			break
		}
	}
	b.fill()
	return b
}

// fill marks every slot free and rebuilds the summaries from level 0 up.
func (b *freeBitmap) fill() {
	b.lowFreeSlot = 0
	for k, level := range b.levels {
		count := b.slots
		if k > 0 {
			count = len(b.levels[k-1])
		}
		for w := range level {
			level[w] = ^uint64(0)
		}
		if tail := count % wordBits; tail != 0 {
			level[len(level)-1] = 1<<tail - 1
		}
	}
}

// nextFree returns the lowest free slot >= pos, or -1 if there is none. A search that starts at or
// below lowFreeSlot starts at lowFreeSlot and moves it up to what it found.
func (b *freeBitmap) nextFree(pos int) int {
	if pos > b.lowFreeSlot {
		return b.search(pos)
	}
	found := b.search(b.lowFreeSlot)
	if found < 0 {
		b.lowFreeSlot = b.slots
	} else {
		b.lowFreeSlot = found
	}
	return found
}

// search returns the lowest free slot >= pos, or -1. It climbs while the rest of the current word
// is empty and then descends along lowest set bits: at most 2*len(levels) word reads.
func (b *freeBitmap) search(pos int) int {
	if pos >= b.slots {
		return -1
	}
	level, bit := 0, pos
	for {
		w := bit / wordBits
		if w >= len(b.levels[level]) {
			return -1
		}
		word := b.levels[level][w] & (^uint64(0) << (bit % wordBits))
		if word != 0 {
			bit = w*wordBits + bits.TrailingZeros64(word)
			break
		}
		if level == len(b.levels)-1 {
			return -1
		}
		level, bit = level+1, w+1
	}
	for ; level > 0; level-- {
		bit = bit*wordBits + bits.TrailingZeros64(b.levels[level-1][bit])
	}
	return bit
}

// freeRun returns how many consecutive slots starting at pos are free, capped at maxSlots.
func (b *freeBitmap) freeRun(pos, maxSlots int) int {
	run := 0
	for run < maxSlots {
		s := pos + run
		offset := s % wordBits
		ones := bits.TrailingZeros64(^(b.levels[0][s/wordBits] >> offset))
		run += ones
		if ones < wordBits-offset {
			break
		}
	}
	return min(run, maxSlots)
}

// take marks the slots [base, limit) used. It asserts, on the words it writes anyway, that every
// slot of the range was free before and that level 1 agrees with each written word after: a slot
// taken twice would hand one page to two objects. The loop counts in uint, which the range check
// makes safe and which turns the divisions into shifts: that pays for the asserts.
func (b *freeBitmap) take(base, limit int) {
	b.assertRange("take", base, limit)
	level0 := b.levels[0]
	for s := uint(base); s < uint(limit); {
		w, offset := s/wordBits, s%wordBits
		runSlots := min(wordBits-offset, uint(limit)-s)
		mask := runMask(int(offset), int(runSlots))
		word := level0[w]
		if word&mask != mask {
			panic(b.slotBroken("take", base, limit, int(w), mask&^word, "is not free"))
		}
		word &^= mask
		level0[w] = word
		if word == 0 {
			b.summaryClear(1, int(w))
		}
		if !b.summaryAgrees(w, word) {
			panic(b.summaryBroken("take", int(w)))
		}
		s += runSlots
	}
}

// give marks the slots [base, limit) free. It asserts, on the words it writes anyway, that every
// slot of the range was used before and that level 1 agrees with each written word after: a slot
// given twice means two objects held it.
func (b *freeBitmap) give(base, limit int) {
	b.assertRange("give", base, limit)
	b.lowFreeSlot = min(b.lowFreeSlot, base)
	level0 := b.levels[0]
	for s := uint(base); s < uint(limit); {
		w, offset := s/wordBits, s%wordBits
		runSlots := min(wordBits-offset, uint(limit)-s)
		mask := runMask(int(offset), int(runSlots))
		word := level0[w]
		if word&mask != 0 {
			panic(b.slotBroken("give", base, limit, int(w), mask&word, "is already free"))
		}
		level0[w] = word | mask
		if word == 0 {
			b.summarySet(1, int(w))
		}
		if !b.summaryAgrees(w, word|mask) {
			panic(b.summaryBroken("give", int(w)))
		}
		s += runSlots
	}
}

// slotBroken describes the failure of take's or give's precondition: the lowest bit of wrong, in
// word w, is a slot of [base, limit) in the wrong state. Out of line, to keep the loops of take and
// give short.
//
//go:noinline
func (b *freeBitmap) slotBroken(op string, base, limit, w int, wrong uint64, state string) string {
	return b.broken(
		w,
		"%s [%d, %d): slot %d %s",
		op,
		base,
		limit,
		w*wordBits+bits.TrailingZeros64(wrong),
		state,
	)
}

// assertRange checks that [base, limit) is a non-empty range of slots: callers never take or give
// nothing, and a range past the end would write the zero bits beyond slots.
func (b *freeBitmap) assertRange(op string, base, limit int) {
	if base < 0 || base >= limit || limit > b.slots {
		panic(b.rangeBroken(op, base, limit))
	}
}

// rangeBroken describes assertRange's failure, out of line so that the check inlines.
//
//go:noinline
func (b *freeBitmap) rangeBroken(op string, base, limit int) string {
	return b.broken(
		0,
		"%s [%d, %d): not a non-empty range of the %d slots",
		op,
		base,
		limit,
		b.slots,
	)
}

// summaryAgrees reports whether level 1 says whether word w of level 0, now `word`, has a free
// slot: one bit, read after the write that should have set or cleared it. The levels above are
// checked by checkSummaries.
func (b *freeBitmap) summaryAgrees(w uint, word uint64) bool {
	if len(b.levels) == 1 {
		return true
	}
	return (b.levels[1][w/wordBits]&(1<<(w%wordBits)) != 0) == (word != 0)
}

// summaryBroken describes the failure of summaryAgrees after op, out of line to keep take and give
// short.
//
//go:noinline
func (b *freeBitmap) summaryBroken(op string, w int) string {
	return b.broken(
		w,
		"%s: the level 1 summary bit of free bitmap word %d disagrees with the word",
		op,
		w,
	)
}

// runMask has runSlots set bits starting at bit offset; runSlots in [1, 64-offset].
func runMask(offset, runSlots int) uint64 {
	if runSlots == wordBits {
		return ^uint64(0)
	}
	return (1<<runSlots - 1) << offset
}

// summaryClear clears bit `bit` of level `level` because the word below became empty, and climbs
// while words keep becoming empty.
func (b *freeBitmap) summaryClear(level, bit int) {
	for ; level < len(b.levels); level++ {
		w := bit / wordBits
		b.levels[level][w] &^= 1 << (bit % wordBits)
		if b.levels[level][w] != 0 {
			return
		}
		bit = w
	}
}

// summarySet sets bit `bit` of level `level` because the word below became non-empty, and climbs
// while words were empty before.
func (b *freeBitmap) summarySet(level, bit int) {
	for ; level < len(b.levels); level++ {
		w := bit / wordBits
		wasEmpty := b.levels[level][w] == 0
		b.levels[level][w] |= 1 << (bit % wordBits)
		if !wasEmpty {
			return
		}
		bit = w
	}
}

// freeSlotsIn counts the free slots in [base, limit) from level 0; for invariant checks,
// O(limit-base).
func (b *freeBitmap) freeSlotsIn(base, limit int) int {
	count := 0
	for s := base; s < limit; {
		w, offset := s/wordBits, s%wordBits
		runSlots := min(wordBits-offset, limit-s)
		count += bits.OnesCount64(b.levels[0][w] & runMask(offset, runSlots))
		s += runSlots
	}
	return count
}

// checkSummaries returns the first level and word whose summary disagrees with the level below, or
// level -1 when all agree, and whether any bit at or above slots is set.
func (b *freeBitmap) checkSummaries() (level, word int) {
	for k := 1; k < len(b.levels); k++ {
		below := b.levels[k-1]
		for w := range b.levels[k] {
			var want uint64
			for j := 0; j < wordBits && w*wordBits+j < len(below); j++ {
				if below[w*wordBits+j] != 0 {
					want |= 1 << j
				}
			}
			if b.levels[k][w] != want {
				return k, w
			}
		}
	}
	if tail := b.slots % wordBits; tail != 0 && b.levels[0][len(b.levels[0])-1]>>tail != 0 {
		return 0, len(b.levels[0]) - 1
	}
	return -1, 0
}
