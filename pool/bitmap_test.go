package pool

import "testing"

// TestFreeBitmapAgainstBools drives bitmaps of three and four summary levels (the model comparison
// uses small pools with fewer) with random takes and gives of runs, and checks nextFree, freeRun,
// freeSlotsIn and the summaries against a slice of bools.
func TestFreeBitmapAgainstBools(t *testing.T) {
	for _, c := range []struct {
		slots     int
		startFree bool
	}{{4200, true}, {4200, false}, {270_001, true}, {270_001, false}} {
		slots := c.slots
		b := newFreeBitmap(slots)
		free := make([]bool, slots)
		for s := range free {
			free[s] = true
		}
		if !c.startFree {
			// Starting full makes whole upper-level words go from empty to non-empty and back.
			b.take(0, slots)
			clear(free)
		}
		src := &splitmixSource{state: uint64(slots) + 1}
		for step := range 3000 {
			base := src.next(slots)
			limit := min(slots, base+1+src.next(300))
			// Take or give only a run that is entirely in the other state, as the allocator does.
			wantFree := src.next(2) == 0
			for s := base; s < limit; s++ {
				if free[s] == wantFree {
					limit = s
				}
			}
			if limit > base {
				if wantFree {
					b.give(base, limit)
				} else {
					b.take(base, limit)
				}
				for s := base; s < limit; s++ {
					free[s] = wantFree
				}
			}
			if level, word := b.checkSummaries(); level >= 0 {
				t.Fatalf(
					"slots %d step %d: summary level %d word %d wrong",
					slots,
					step,
					level,
					word,
				)
			}
			pos := src.next(slots + 2)
			if step%3 == 0 {
				pos = 0 // placement's own query, the one that moves lowFreeSlot
			}
			want := -1
			for s := pos; s < slots; s++ {
				if free[s] {
					want = s
					break
				}
			}
			if got := b.nextFree(pos); got != want {
				t.Fatalf(
					"slots %d step %d: nextFree(%d) = %d, want %d",
					slots,
					step,
					pos,
					got,
					want,
				)
			}
			if want >= 0 {
				run := 0
				for want+run < slots && free[want+run] && run < 200 {
					run++
				}
				if got := b.freeRun(want, 200); got != run {
					t.Fatalf(
						"slots %d step %d: freeRun(%d) = %d, want %d",
						slots,
						step,
						want,
						got,
						run,
					)
				}
			}
		}
		count := 0
		for _, f := range free {
			if f {
				count++
			}
		}
		if got := b.freeSlotsIn(0, slots); got != count {
			t.Fatalf("slots %d: freeSlotsIn %d, want %d", slots, got, count)
		}
		if len(b.levels) < 3 {
			t.Fatalf(
				"slots %d has only %d levels: the test misses the deep paths",
				slots,
				len(b.levels),
			)
		}
	}
}
