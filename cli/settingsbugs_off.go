//go:build !simbugs

package cli

// settingsBugsCompiled says whether this build carries the deliberate bug of the settings: it does
// not.
const settingsBugsCompiled = false

// settingLeftOut is constant false without the simbugs tag: every flag but the rank-own is
// compared.
func settingLeftOut(string) bool { return false }

// leaveOutOfSettings does nothing without the simbugs tag: the bug is not compiled in.
func leaveOutOfSettings(string) {}
