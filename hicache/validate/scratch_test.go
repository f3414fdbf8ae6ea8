package validate

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestSweepRemovesOnlyProvablyStaleScratchDirs: the sweep at validate's start removes a scratch
// directory whose every owner is a process of this boot and PID namespace that has ended, and
// leaves every other one: a running owner, a dead and a running one, another boot's, no owner file,
// an owner file it cannot read, a directory of another name, and a link to a stale directory.
func TestSweepRemovesOnlyProvablyStaleScratchDirs(t *testing.T) {
	if testWorld.Rank() != 0 {
		return // a test of one process's directories
	}
	me, err := selfID()
	if err != nil {
		t.Skipf("no /proc to say which process made a directory: %v", err)
	}
	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	dead := processID{
		Boot:         me.Boot,
		PIDNamespace: me.PIDNamespace,
		PID:          ended.Process.Pid,
		Start:        "1",
	}
	otherBoot := dead
	otherBoot.Boot = "another-boot"
	base := t.TempDir()
	mkdir := func(name string, owners ...string) string {
		dir := filepath.Join(base, name)
		if err := os.MkdirAll(filepath.Join(dir, "ns", "block"), 0o755); err != nil {
			t.Fatal(err)
		}
		for i, o := range owners {
			if err := os.WriteFile(
				filepath.Join(dir, validateOwnerPrefix+string(rune('0'+i))), []byte(o), 0o644,
			); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	stale := mkdir(validateDirPrefix+"1-stale", dead.String())
	kept := []string{
		mkdir(validateDirPrefix+"2-running", me.String()),
		mkdir(validateDirPrefix+"3-one-running", dead.String(), me.String()),
		mkdir(validateDirPrefix+"4-other-boot", otherBoot.String()),
		mkdir(validateDirPrefix + "5-no-owner"),
		mkdir(validateDirPrefix+"6-unreadable-owner", "not an owner file"),
		mkdir("other-7", dead.String()),
	}
	target := mkdir("link-target", dead.String())
	link := filepath.Join(base, validateDirPrefix+"8-link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	kept = append(kept, link, target)
	sweepStaleScratchDirs(base, slog.New(slog.DiscardHandler))
	if _, err := os.Lstat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the directory of an ended validate is still there (%v)", err)
	}
	for _, dir := range kept {
		if _, err := os.Lstat(dir); err != nil {
			t.Errorf(
				"%s was not provably stale, but the sweep removed it: %v",
				filepath.Base(dir),
				err,
			)
		}
	}
	if entries, _ := os.ReadDir(base); len(entries) != len(kept) {
		t.Errorf(
			"%d entries left, want %d (the swept directory renamed, not removed?)",
			len(entries),
			len(kept),
		)
	}
}
