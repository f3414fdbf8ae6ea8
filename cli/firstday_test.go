package cli

// What a new user met on a first day (issue 34): help that says what the product does and nothing
// of how it was built, flags only where they do something, output that counts in English, and no
// path outside the repository.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/hicache/spmd"
)

// helpTexts visits every text a command's --help shows: its usage and description, and each flag's
// usage and category, with the command's path.
func helpTexts(visit func(path, text string, cmd *cli.Command)) {
	var walk func(prefix string, cmds []*cli.Command)
	walk = func(prefix string, cmds []*cli.Command) {
		for _, cmd := range cmds {
			path := strings.TrimSpace(prefix + " " + cmd.Name)
			visit(path, cmd.Usage, cmd)
			visit(path, cmd.Description, cmd)
			for _, f := range cmd.Flags {
				if d, ok := f.(cli.DocGenerationFlag); ok {
					visit(path+" --"+f.Names()[0], d.GetUsage(), cmd)
				}
				if c, ok := f.(cli.CategorizableFlag); ok {
					visit(path+" --"+f.Names()[0]+" (category)", c.GetCategory(), cmd)
				}
			}
			walk(path, cmd.Subcommands)
		}
	}
	walk("", newApp().Commands)
}

// TestHelpSaysNothingOfTheProjectsHistory: help is for users; an issue number or "the seed design"
// means nothing to them, and the version's line says what the MPI library implements in plain
// words.
func TestHelpSaysNothingOfTheProjectsHistory(t *testing.T) {
	history := regexp.MustCompile(`(?i)\bissue \d+|seed design|standard that implements`)
	helpTexts(func(path, text string, _ *cli.Command) {
		if m := history.FindString(text); m != "" {
			t.Errorf("%s: %q in %q", path, m, text)
		}
	})
}

// TestTopoHelpAllowsGroupsOverNodes: a CP group may span nodes, so topo's help must not say it
// fails on one.
func TestTopoHelpAllowsGroupsOverNodes(t *testing.T) {
	helpTexts(func(path, text string, _ *cli.Command) {
		if path == "topo" && strings.Contains(text, "span two nodes") {
			t.Errorf("topo's help says a group over nodes fails: %q", text)
		}
	})
}

// TestFlagCategoriesNameOnlyTheCommandsFlags: a group title that names a flag ("when no --trace")
// names one the command has.
func TestFlagCategoriesNameOnlyTheCommandsFlags(t *testing.T) {
	flagName := regexp.MustCompile(`--([a-z0-9-]+)`)
	helpTexts(func(path, text string, cmd *cli.Command) {
		if !strings.HasSuffix(path, "(category)") {
			return
		}
		for _, m := range flagName.FindAllStringSubmatch(text, -1) {
			if !hasFlag(cmd, m[1]) {
				t.Errorf("%s: %q names --%s, which %s does not have", path, text, m[1], cmd.Name)
			}
		}
	})
}

func hasFlag(cmd *cli.Command, name string) bool {
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}

// TestSweepOffersOnlyFlagsThatChangeIt: sweep runs in one process with every step's copies drained,
// so the step consensus's transport, the watchdog and --sync-copies would do nothing there.
func TestSweepOffersOnlyFlagsThatChangeIt(t *testing.T) {
	for _, cmd := range newApp().Commands {
		if cmd.Name != "sweep" {
			continue
		}
		for _, name := range []string{"collective", "watchdog-timeout", "sync-copies"} {
			if hasFlag(cmd, name) {
				t.Errorf("sweep --help lists --%s, which does nothing in a sweep", name)
			}
		}
		return
	}
	t.Fatal("no sweep command")
}

// TestNothingPointsOutsideTheRepository: no file of the product (its Go sources but tests, its make
// files and scripts) names a path of one machine; data a command needs by default lies in the
// repository.
func TestNothingPointsOutsideTheRepository(t *testing.T) {
	machinePath := regexp.MustCompile(`"/(work|home|data|scratch|mnt)/`)
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "build" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		name := d.Name()
		product := (strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go")) ||
			strings.HasSuffix(
				name,
				".mk",
			) || name == "Makefile" || strings.HasSuffix(name, ".sbatch")
		if d.IsDir() || !product {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if m := machinePath.Find(b); m != nil {
			t.Errorf("%s names a machine's path: %s...", path, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestBenchReplayNeedsATrace: bench replay has no default trace outside the repository; without
// --trace it says so as a usage error, naming the flag and the repository's excerpt.
func TestBenchReplayNeedsATrace(t *testing.T) {
	out, err := exec.Command(binPath, "bench", "replay", "--np", "1").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != spmd.ExitUsage ||
		!strings.Contains(string(out), "invalid --trace: no trace given") ||
		!strings.Contains(string(out), "testdata/mooncake/synthetic_first200.jsonl") {
		t.Errorf("bench replay without --trace: %v\n%s", err, out)
	}
}

// TestRefusedSweepPrintsNoHeader: a sweep refused before its first point (an L1 shorter than the
// workload's longest request) prints its error alone, not a header that reads as a start.
func TestRefusedSweepPrintsNoHeader(t *testing.T) {
	cmd := exec.Command(binPath, "sweep", "--l2-slots", "64", "--device-pages", "16")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != spmd.ExitUsage ||
		!strings.Contains(stderr.String(), "invalid --device-pages") {
		t.Fatalf("exit %v, want %d and the flag named:\n%s", err, spmd.ExitUsage, stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("the refused sweep printed:\n%s", stdout.String())
	}
}

// TestMissingTraceIsAUsageError: a --trace that is not there is a bad flag, as a missing --l3-dir
// is: exit 2 and the flag named, alone and under mpirun (CP rank 0 reads the trace; its peers learn
// it failed).
func TestMissingTraceIsAUsageError(t *testing.T) {
	besideOthers(t)
	missing := filepath.Join(t.TempDir(), "nonexist.jsonl")
	out, err := exec.Command(binPath, "run", "--quiet", "--trace", missing).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != spmd.ExitUsage ||
		!strings.Contains(string(out), "invalid --trace: "+missing) {
		t.Errorf("one process: %v, want exit %d naming --trace:\n%s", err, spmd.ExitUsage, out)
	}
	res := runMPI(t, 2, 60*time.Second, "run", "--quiet", "--trace", missing)
	if res.exitCode != spmd.ExitUsage ||
		!strings.Contains(res.stderr, "invalid --trace: "+missing) {
		t.Errorf(
			"mpirun -np 2: exit %d, want %d naming --trace:\n%s",
			res.exitCode,
			spmd.ExitUsage,
			res.stderr,
		)
	}
	checkNoSegments(t)
}

// TestMisspelledEnvironmentVariableIsRefused: CPHICACHE_L2_SLOT=5 is refused as --l2-slot would be,
// with exit 2 and the name it was probably meant to be; the settings no flag reads, and the
// scripts' own, pass.
func TestMisspelledEnvironmentVariableIsRefused(t *testing.T) {
	known := knownVariables(newApp().Commands)
	for _, name := range []string{"CPHICACHE_L2_SLOTS", "CPHICACHE_NODE_NAME", "CPHICACHE_MPI_YIELD", "CPHICACHE_SBATCH_ARGS", "CPHICACHE_BENCH_STEP_ITERS", "CPHICACHE_BIN"} {
		if err := unknownVariables([]string{name + "=1", "HOME=/root"}, known); err != nil {
			t.Errorf("%s refused: %v", name, err)
		}
	}
	err := unknownVariables([]string{"CPHICACHE_L2_SLOT=5"}, known)
	if err == nil ||
		!strings.Contains(
			err.Error(),
			"unknown environment variable CPHICACHE_L2_SLOT (did you mean CPHICACHE_L2_SLOTS?)",
		) {
		t.Errorf("CPHICACHE_L2_SLOT: %v", err)
	}
	cmd := exec.Command(binPath, "run", "--quiet")
	cmd.Env = append(os.Environ(), "CPHICACHE_L2_SLOT=5")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != spmd.ExitUsage ||
		!strings.Contains(string(out), "did you mean CPHICACHE_L2_SLOTS?") {
		t.Errorf(
			"run with CPHICACHE_L2_SLOT=5: %v, want exit %d naming the variable:\n%s",
			err,
			spmd.ExitUsage,
			out,
		)
	}
}

// TestSignalToOneRankIsNamedByThatRank: SIGINT to one rank that is not rank 0 (kill -INT of its
// pid) ends the job, and that rank says it received it: the launcher ends the others with a SIGTERM
// that does not say why.
func TestSignalToOneRankIsNamedByThatRank(t *testing.T) {
	besideOthers(t)
	trace := writeLongTrace(t)
	var outputs []string
	// mpirun, ending the job, now and then drops the ranks' last lines (TestSignalsUnderMpirun)
	for range 3 {
		res, _ := runMPIOnMarker(
			t,
			2,
			60*time.Second,
			"# cphicache ",
			func(cmd *exec.Cmd) { // every rank handles signals
				for _, pid := range childPids(t, cmd.Process.Pid) {
					if env, _ := os.ReadFile(filepath.Join("/proc", fmt.Sprint(pid), "environ")); strings.Contains(
						"\x00"+string(env),
						"\x00OMPI_COMM_WORLD_RANK=1\x00",
					) {
						syscall.Kill(pid, syscall.SIGINT)
					}
				}
			},
			"run",
			"--trace",
			trace,
		)
		if res.exitCode == 0 {
			t.Fatalf("the job exited 0 after SIGINT to rank 1:\n%s", res.stderr)
		}
		checkNoSegments(t)
		if strings.Contains(res.stderr, "world rank 1 received SIGINT; run abandoned") {
			return
		}
		outputs = append(outputs, res.stderr)
	}
	t.Errorf(
		"rank 1 did not say it received SIGINT in 3 tries:\n%s",
		strings.Join(outputs, "---\n"),
	)
}

// TestStrictFailsWhatWasNotCovered: an "OK, but ..." exits 0, and with --strict (or
// CPHICACHE_STRICT) exit status 5, naming what was not covered: a run that verified nothing, and
// validate with skipped checks.
func TestStrictFailsWhatWasNotCovered(t *testing.T) {
	besideOthers(t)
	small := []string{
		"--quiet",
		"--conversations",
		"4",
		"--turns-max",
		"2",
		"--device-pages",
		"4096",
	}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want int
	}{
		{"run", nil, append([]string{"run"}, small...), 0},
		{"run --strict", nil, append([]string{"run", "--strict"}, small...), spmd.ExitNotCovered},
		{"CPHICACHE_STRICT=true run", []string{"CPHICACHE_STRICT=true"}, append([]string{"run"}, small...), spmd.ExitNotCovered},
	} {
		res := runMPIEnv(t, 2, 60*time.Second, tc.env, tc.args...)
		if res.exitCode != tc.want ||
			!strings.Contains(res.stdout, "result: OK, but no data verified") {
			t.Errorf(
				"%s: exit %d, want %d:\n%s%s",
				tc.name,
				res.exitCode,
				tc.want,
				res.stdout,
				res.stderr,
			)
		}
		if tc.want == spmd.ExitNotCovered &&
			!strings.Contains(res.stderr, "OK, but no data verified (0 load-backs) (--strict") {
			t.Errorf("%s: the error does not say what was not covered:\n%s", tc.name, res.stderr)
		}
	}
	// --sync-copies: which paths a small workload takes must not depend on the node's load (at load
	// 20 the asynchronous copies of this one landed too late for any L2 miss or load-back).
	cmd := exec.Command(
		binPath,
		"validate",
		"--strict",
		"--quiet",
		"--sync-copies",
		"--conversations",
		"8",
		"--turns-max",
		"3",
		"--device-pages",
		"64",
	)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != spmd.ExitNotCovered ||
		!strings.Contains(
			string(out),
			"3 checks skipped (placement_identical, divergence_detected, l3_roundtrip)",
		) {
		t.Errorf(
			"validate --strict at cp 1: %v, want exit %d naming the skipped checks:\n%s",
			err,
			spmd.ExitNotCovered,
			out,
		)
	}
	checkNoSegments(t)
}

// TestManPageListsEveryExitStatus: the man page's EXIT STATUS has --strict's 5 too.
func TestManPageListsEveryExitStatus(t *testing.T) {
	out, err := exec.Command(binPath, "man").Output()
	if err != nil ||
		!strings.Contains(string(out), "nothing failed, but not everything was checked") {
		t.Errorf("cphicache man: %v; no --strict exit status in:\n%.2000s", err, out)
	}
}
