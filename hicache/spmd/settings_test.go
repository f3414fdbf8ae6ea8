package spmd

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// jobSettings is a command's settings as the CLI gives them; last is the world's last rank.
func jobSettings(seed string) []Setting {
	return []Setting{
		{Name: "the command", Value: "run"},
		{Name: "--cp", Value: "2"},
		{Name: "--seed", Value: seed, Source: "CPHICACHE_SEED"},
	}
}

// Every rank agrees on the settings every rank holds, on a value only some ranks know, and finds
// the same differing settings, each rank naming its own value; a different list of settings
// (another command or build) is found too. At one rank nothing can differ.
func TestAgreeOnSettings(t *testing.T) {
	rank, last := testWorld.Rank(), testWorld.Size()-1
	if err := AgreeOnSettings(testWorld, jobSettings("7")); err != nil {
		t.Fatalf("the same settings everywhere: %v", err)
	}
	unknown := append(
		jobSettings("7"),
		Setting{Name: "--trace's content", Value: "size 10", Unknown: rank == 0},
	)
	if rank == 0 {
		unknown[3].Value = "unreadable"
	}
	if err := AgreeOnSettings(testWorld, unknown); err != nil {
		t.Errorf("a setting rank 0 does not know: %v", err)
	}

	seed := "7"
	if rank == last {
		seed = "8"
	}
	err := AgreeOnSettings(testWorld, jobSettings(seed))
	var se *SettingsError
	switch {
	case last == 0 && err != nil:
		t.Errorf("one rank: %v", err)
	case last > 0 && !errors.As(err, &se):
		t.Errorf("rank %d holds --seed %s: got %v, want a *SettingsError", rank, seed, err)
	case last > 0:
		want := fmt.Sprintf(
			`--seed is %q here (from CPHICACHE_SEED) and differs on another rank`,
			seed,
		)
		if len(se.Differ) != 1 || !se.SameList || !strings.Contains(err.Error(), want) ||
			ExitStatus(err) != ExitUsage ||
			ScopeOf(err) != RankScope {
			t.Errorf(
				"got %+v (%q, exit %d), want only --seed, %q, exit %d, printed by every rank",
				se,
				err,
				ExitStatus(err),
				want,
				ExitUsage,
			)
		}
	}

	longer := jobSettings("7")
	if rank == last {
		longer = append(longer, Setting{Name: "--l3-dir", Value: ""})
	}
	err = AgreeOnSettings(testWorld, longer)
	if last > 0 &&
		(!errors.As(err, &se) || se.SameList || len(se.Differ) != 0 || !strings.Contains(err.Error(), "different commands or builds")) {
		t.Errorf("another list on rank %d: got %v, want the lists named as different", last, err)
	}
}
