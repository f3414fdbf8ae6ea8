package serving

import "math"

// PoissonArrivalsNs is n arrival times of a Poisson process at ratePerSecond, in nanoseconds from
// 0, a pure function of the seed: exponential gaps from a splitmix64 stream, the first arrival at
// 0.
func PoissonArrivalsNs(n int, ratePerSecond float64, seed uint64) []int64 {
	out := make([]int64, n)
	state := seed
	var at float64
	for i := 1; i < n; i++ {
		state += 0x9e3779b97f4a7c15
		z := state
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		u := (float64(z>>11) + 0.5) / (1 << 53) // in (0, 1): the log below is finite
		at += -math.Log(u) / ratePerSecond * 1e9
		out[i] = int64(at)
	}
	return out
}
