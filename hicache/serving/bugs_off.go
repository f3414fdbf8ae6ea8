//go:build !simbugs

package serving

// hitLeavesL1Out and l3ReadFree are constant false without the simbugs tag, so the serving
// clock's deliberate bugs are dead code and the charges cost what they did.
func hitLeavesL1Out() bool { return false }

func l3ReadFree() bool { return false }

// BreakHitChargeForTest installs nothing without the simbugs tag (bugs_on.go carries the bug).
func BreakHitChargeForTest() (restore func()) { return func() {} }

// BreakL3ReadChargeForTest installs nothing without the simbugs tag (bugs_on.go carries the bug).
func BreakL3ReadChargeForTest() (restore func()) { return func() {} }
