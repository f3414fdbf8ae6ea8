package cache

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestTakeHandsOutTheStacksPagesInAscendingOrder holds take to a plain last-in-first-out stack of
// free pages (pushed in the order give gets them), over random takes and gives: it pops the stack's
// top n pages, as it did, and hands them out in ascending order, so that pages freed together come
// back as runs of consecutive pages, which the copies, fills and load-back checks then handle as
// one block each. (Popped one by one they came back descending, and no run formed after the first
// evictions.) Which pages a node gets is each rank's own affair (the device buffer is private); how
// many is what the decisions count, and that is unchanged.
func TestTakeHandsOutTheStacksPagesInAscendingOrder(t *testing.T) {
	const pages = 64
	rng := rand.New(rand.NewPCG(7, 11))
	d := newDevicePool(pages)
	var model []int32 // the stack: its top is its end
	for p := int32(pages - 1); p >= 0; p-- {
		model = append(model, p)
	}
	var held [][]int32
	for step := range 5000 {
		if len(held) > 0 && rng.IntN(2) == 0 {
			i := rng.IntN(len(held))
			d.give(held[i])
			model = append(model, held[i]...)
			held = slices.Delete(held, i, i+1)
			continue
		}
		n := 1 + rng.IntN(12)
		got := d.take(n)
		if n > len(model) {
			if got != nil {
				t.Fatalf("step %d: took %d pages of %d free", step, n, len(model))
			}
			continue
		}
		want := slices.Clone(model[len(model)-n:])
		model = model[:len(model)-n]
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf(
				"step %d: take(%d) = %v, want the stack's top %d pages in ascending order %v",
				step,
				n,
				got,
				n,
				want,
			)
		}
		held = append(held, got)
	}
	if d.available() != len(model) {
		t.Fatalf("%d pages free, the model has %d", d.available(), len(model))
	}
}

// TestFreedRunsComeBackWhole: a node's pages given back together are taken again as the same
// consecutive run.
func TestFreedRunsComeBackWhole(t *testing.T) {
	d := newDevicePool(16)
	first, second := d.take(5), d.take(5)
	if !slices.Equal(first, []int32{0, 1, 2, 3, 4}) ||
		!slices.Equal(second, []int32{5, 6, 7, 8, 9}) {
		t.Fatalf("after a reset: %v then %v, want 0..4 then 5..9", first, second)
	}
	d.give(first)
	if again := d.take(5); !slices.Equal(again, first) {
		t.Fatalf("the freed run %v came back as %v", first, again)
	}
}
