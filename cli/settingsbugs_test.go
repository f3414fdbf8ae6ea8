package cli

import (
	"strings"
	"testing"
)

// The settings walk catches the deliberate bug "a flag left out of the comparison"
// (settingsbugs_on.go), for a flag that moves placements (--seed: a divergence, exit 1, where exit
// 2 naming it was promised) and for one that moves none (--time-scale: silence): it names the
// flag, on every command that has it, and nothing else. Only a build with -tags simbugs has the
// bug (make sim-bugs).
func TestTheSettingsWalkCatchesAFlagLeftOut(t *testing.T) {
	if !settingsBugsCompiled {
		t.Skip("the deliberate bugs are compiled only with -tags simbugs (make sim-bugs)")
	}
	for _, left := range []struct {
		flag     string
		commands []string // some of the commands that have it, each of which must be named
	}{
		{"seed", []string{"run", "validate", "sweep", "gen-trace"}},
		{"time-scale", []string{"run"}},
	} {
		leaveOutOfSettings(left.flag)
		problems, _, _ := settingsProblems(t)
		leaveOutOfSettings("")
		for _, p := range problems {
			if !strings.Contains(p, " --"+left.flag+" ") || !strings.Contains(p, "not compared") {
				t.Errorf("--%s left out: the walk also found %q, want only --%s not compared",
					left.flag, p, left.flag)
			}
		}
		for _, cmd := range left.commands {
			if !containsPrefix(problems, cmd+" --"+left.flag+" ") {
				t.Errorf("--%s left out: the walk did not name it on %s; it found %q",
					left.flag, cmd, problems)
			}
		}
	}
}

// containsPrefix says whether one of list begins with prefix.
func containsPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}
