//go:build simbugs

package cli

// settingsBugsCompiled says whether this build carries the deliberate bug of the settings: it does.
const settingsBugsCompiled = true

// leftOutOfSettings is the deliberate bug "a flag left out of the comparison": the flag so named
// (none when "") is missing from every command's compared settings, so ranks given different values
// of it run instead of being refused (a divergence, or silence for a flag that moves no placement).
// Only the test that shows the settings walk catches it sets it.
var leftOutOfSettings string

// settingLeftOut says whether the deliberate bug leaves the flag name out of the comparison.
func settingLeftOut(name string) bool {
	return leftOutOfSettings != "" && name == leftOutOfSettings
}

// leaveOutOfSettings turns the deliberate bug on for the flag name ("": off).
func leaveOutOfSettings(name string) { leftOutOfSettings = name }
