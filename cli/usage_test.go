package cli

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/internal/errscope"
)

// TestUsageErrorsExitTwo: an unknown command, an unknown flag, a value that does not parse and a
// stray argument exit 2 (not 1, and not the watchdog's 3), with one message that names what is
// wrong with two dashes.
func TestUsageErrorsExitTwo(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"runn"}, `unknown command "runn"; the commands are run, validate`},
		{[]string{"run", "--foo"}, "unknown flag --foo"},
		{[]string{"run", "--cp", "x"}, `invalid --cp: "x" is not a whole number`},
		{[]string{"run", "--quiet", "trace.jsonl"}, `run takes flags only, not the argument "trace.jsonl" (a trace is given as --trace trace.jsonl)`},
		{[]string{"gen-trace", "extra"}, `gen-trace takes flags only, not the argument "extra"`},
		{[]string{"l3", "stat", "--l3-dir", ".", "junk"}, `l3 stat takes flags only`},
		{[]string{"run", "--report", "/no/such/dir/r.json"}, "invalid --report"},
	} {
		cmd := exec.Command(binPath, tc.args...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != spmd.ExitUsage ||
			!strings.Contains(string(out), tc.want) {
			t.Errorf("%v: %v, want exit 2 and %q:\n%s", tc.args, err, tc.want, out)
		}
		if strings.Contains(
			string(out),
			" -"+strings.TrimPrefix(tc.args[len(tc.args)-1], "--")+":",
		) {
			t.Errorf("%v: a single-dash flag name in %s", tc.args, out)
		}
	}
}

// TestFlagValueErrorsSayWhatTheValueShouldBe: a duration without a unit says "missing unit" on the
// command line as in the environment, and a value from the environment says which variable gave it;
// a size flag takes units.
func TestFlagValueErrorsSayWhatTheValueShouldBe(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		env, flag string
		want      []string
	}{
		{[]string{"run", "--watchdog-timeout", "5"}, "", "watchdog-timeout", []string{`"5" is not a duration (missing unit`}},
		{[]string{"run"}, "CPHICACHE_WATCHDOG_TIMEOUT=5", "watchdog-timeout", []string{`"5" (from CPHICACHE_WATCHDOG_TIMEOUT) is not a duration (missing unit`}},
		{[]string{"run"}, "CPHICACHE_CP=x", "cp", []string{`"x" (from CPHICACHE_CP) is not a whole number`}},
		{[]string{"run"}, "CPHICACHE_CP=0", "cp", []string{"0 is not a group size", "(the value came from CPHICACHE_CP)"}},
		{[]string{"run", "--slab-bytes-max", "64 parsecs"}, "", "slab-bytes-max", []string{"is not a size"}},
		{[]string{"run", "--l2-bytes", "99999999TiB"}, "", "l2-bytes", []string{`"99999999TiB" is too large: it overflows`}},
	} {
		t.Run(strings.Join(tc.args, " ")+" "+tc.env, func(t *testing.T) {
			if name, value, ok := strings.Cut(tc.env, "="); ok {
				t.Setenv(name, value)
			}
			err := newApp().Run(append([]string{"cphicache"}, tc.args...))
			var ce *errscope.ConfigError
			if !errors.As(err, &ce) || ce.Flag != tc.flag {
				t.Fatalf("error %v, want an invalid --%s", err, tc.flag)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%q does not say %q", err, want)
				}
			}
		})
	}
	// Given on the command line, the same value's error does not blame the environment.
	t.Setenv("CPHICACHE_CP", "0")
	if err := newApp().Run([]string{"cphicache", "run", "--cp=0"}); err == nil ||
		strings.Contains(err.Error(), "CPHICACHE_CP") {
		t.Errorf("--cp=0 with CPHICACHE_CP=0 set: %v, want no mention of the environment", err)
	}
	os.Unsetenv("CPHICACHE_CP")
	if got := captureRun(t, "--slab-bytes-max", "64MiB"); got.SlabBytesMax != 64<<20 {
		t.Errorf("--slab-bytes-max 64MiB: %d bytes", got.SlabBytesMax)
	}
	if got := captureRun(t, "--slab-bytes-max", "1PiB"); got.SlabBytesMax != 1<<50 {
		t.Errorf("--slab-bytes-max 1PiB: %d bytes", got.SlabBytesMax)
	}
}

// TestExitStatusesAreListed: every exit status is in --help (the program's and a command's) and the
// README, in the same words.
func TestExitStatusesAreListed(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, status := range []string{"0", "1", "2", "3", "4", "5", "128+N"} {
		if !strings.Contains(exitStatusHelp, "\n   "+status+" ") {
			t.Errorf("exitStatusHelp does not list %s", status)
		}
	}
	for _, args := range [][]string{{"--help"}, {"run", "--help"}, {"bench", "--help"}, {"bench", "copy", "--help"}} {
		out, _ := exec.Command(binPath, args...).CombinedOutput()
		if !strings.Contains(string(out), exitStatusHelp) {
			t.Errorf("%v does not list the exit statuses:\n%s", args, out)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(exitStatusHelp), "\n") {
		if !strings.Contains(string(readme), line+"\n") {
			t.Errorf("the README does not have %q", line)
		}
	}
}

// TestJobErrorsSayTheirValueCameFromTheEnvironment: errors found once the job runs, a --cp the
// launch cannot hold and an L2 the node cannot, also name the CPHICACHE_ variable that gave the
// value.
func TestJobErrorsSayTheirValueCameFromTheEnvironment(t *testing.T) {
	besideOthers(t)
	for _, tc := range []struct{ env, want string }{
		{"CPHICACHE_CP=3", "invalid --cp: 3 is larger than the 2 ranks of the job (launch more ranks with mpirun -np) (the value came from CPHICACHE_CP)"},
		{"CPHICACHE_L2_BYTES=100000TiB", "(the value came from CPHICACHE_L2_BYTES)"},
	} {
		res := runMPIEnv(t, 2, 60*time.Second, []string{tc.env}, "run", "--quiet")
		if res.exitCode != spmd.ExitUsage || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("%s: exit %d, want 2 and %q:\n%s", tc.env, res.exitCode, tc.want, res.stderr)
		}
	}
	checkNoSegments(t)
}

// TestMisspelledFlagGetsTheNearestName: --l2-slot is refused with exit 2 and the flag it was
// probably meant to be, as CPHICACHE_L2_SLOT is (TestMisspelledEnvironmentVariableIsRefused); a
// name near none gets no guess.
func TestMisspelledFlagGetsTheNearestName(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--l2-slot", "5"}, "unknown flag --l2-slot (did you mean --l2-slots?)"},
		{[]string{"l3", "stat", "--l3-dirr", "/tmp"}, "unknown flag --l3-dirr (did you mean --l3-dir?)"},
		{[]string{"run", "--zzzz"}, "unknown flag --zzzz"},
	} {
		err := newApp().Run(append([]string{"cphicache"}, tc.args...))
		if err == nil || !strings.Contains(err.Error(), tc.want) ||
			exitStatus(err) != spmd.ExitUsage {
			t.Errorf(
				"%v: %v (exit %d), want %q and exit %d",
				tc.args,
				err,
				exitStatus(err),
				tc.want,
				spmd.ExitUsage,
			)
		}
		if strings.HasSuffix(tc.want, "zzzz") && strings.Contains(err.Error(), "did you mean") {
			t.Errorf("%v: %v, want no guess for a name near none", tc.args, err)
		}
	}
}
