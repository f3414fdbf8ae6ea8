package sim

import "github.com/cphicache/cphicache/pool"

// rng is the simulator's only source of randomness: splitmix64 from one seed, so that a seed
// replays exactly.
type rng struct{ s uint64 }

func newRNG(seed uint64) *rng { return &rng{s: seed} }

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	return pool.Mix64(r.s)
}

// intn is uniform in [0, n).
func (r *rng) intn(n int) int { return int(r.next() % uint64(n)) }

// between is uniform in [lo, hi].
func (r *rng) between(lo, hi int) int { return lo + r.intn(hi-lo+1) }

// chance is true with probability perMille/1000.
func (r *rng) chance(perMille int) bool { return r.intn(1000) < perMille }

// pick returns one of choices.
func pick[T any](r *rng, choices ...T) T { return choices[r.intn(len(choices))] }
