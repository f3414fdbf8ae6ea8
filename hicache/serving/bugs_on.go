//go:build simbugs

package serving

// The serving clock's deliberate bugs (simbugs builds only), as pool's are: process-wide switches
// that the simulator installs for one serving-clock job at a time (hicache/sim runs its jobs one
// after another, on one goroutine), since the charges are pure functions with no configuration of
// their own. hicache/cache's Bugs list them (BugHitChargeIgnoresL1, BugL3ReadFree).
var brokenHitCharge, brokenL3ReadCharge bool

func hitLeavesL1Out() bool { return brokenHitCharge }

func l3ReadFree() bool { return brokenL3ReadCharge }

// BreakHitChargeForTest is FOR THE SIMULATOR'S DELIBERATE BUGS ONLY: until the returned restore
// function is called, Hit.Tokens leaves a request's L1 hit out of its cached tokens, so that it is
// computed again: a hit that does not lower the charge (a mistake that takes an L1 hit, already on
// the GPU, for nothing the step need count).
func BreakHitChargeForTest() (restore func()) {
	brokenHitCharge = true
	return func() { brokenHitCharge = false }
}

// BreakL3ReadChargeForTest is FOR THE SIMULATOR'S DELIBERATE BUGS ONLY: until the returned restore
// function is called, a step's L3 hits are charged their load-backs but not their reads: an L3
// read charged nothing.
func BreakL3ReadChargeForTest() (restore func()) {
	brokenL3ReadCharge = true
	return func() { brokenL3ReadCharge = false }
}
