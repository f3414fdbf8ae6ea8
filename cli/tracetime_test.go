package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAReplayPastTheJobsEndIsWarned: a serving-clock replay whose last arrival, at its
// --time-scale, falls after the job's end (SLURM_JOB_END_TIME) is warned with the scale that would
// fit; one that fits, or a job without an end time, is not.
func TestAReplayPastTheJobsEndIsWarned(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	end := fmt.Sprint(now.Unix() + 880)
	for _, tc := range []struct {
		latestMs  int64
		timeScale float64
		end       string
		want      string // "" for no warning
	}{
		{1_030_000, 1, end, "arrives at 1030 s of trace time, at least 1030 s of this replay at --time-scale 1, but the job ends in 880 s (SLURM_JOB_END_TIME)"},
		{1_030_000, 1, end, "give --time-scale 1.2 or more (the sbatch scripts' CPHICACHE_SBATCH_TIME_SCALE)"},
		{1_030_000, 0.01, end, "give --time-scale 1.2 or more"},
		{1_030_000, 2, end, ""},
		{1_030_000, 1, "", ""},
		{1_030_000, 1, fmt.Sprint(now.Unix() - 5), "no --time-scale can fit it: the job has already ended"},
	} {
		var b strings.Builder
		warned := warnPastJobEnd(&b, tc.latestMs, tc.timeScale, tc.end, now)
		if warned != (tc.want != "") || !strings.Contains(b.String(), tc.want) ||
			strings.Count(b.String(), "\n") > 1 {
			t.Errorf(
				"%d ms at scale %g, end %q: warned %v %q, want %q",
				tc.latestMs,
				tc.timeScale,
				tc.end,
				warned,
				b.String(),
				tc.want,
			)
		}
	}
	if got := roundUp(1234); got != 1300 {
		t.Errorf("roundUp(1234) = %g, want 1300 (never below the scale needed)", got)
	}
}

// TestRunWarnsAtStartWhenTheTraceWillNotFitTheJob: the real binary, given a job end (as Slurm
// 23.02's batch environment, or the sbatch scripts on 22.05, give it) before its trace's last
// arrival at --time-scale, warns once, at start-up, and still runs.
func TestRunWarnsAtStartWhenTheTraceWillNotFitTheJob(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "t.jsonl")
	var lines []string
	for i, ms := range []int{0, 100, 20000} {
		lines = append(
			lines,
			fmt.Sprintf(
				`{"timestamp": %d, "input_length": 64, "output_length": 1, "hash_ids": [%d]}`,
				ms,
				i,
			),
		)
	}
	if err := os.WriteFile(trace, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append(
		[]string{
			"run",
			"--quiet",
			"--trace",
			trace,
			"--gpu",
			"h200",
			"--prefill-model",
			"deepseek-v3",
			"--time-scale",
			"5",
		},
		mooncakeFlags...)
	cmd := exec.Command(binPath, args...)
	cmd.Env = append(os.Environ(), fmt.Sprintf("SLURM_JOB_END_TIME=%d", time.Now().Unix()+2))
	out, err := cmd.CombinedOutput()
	want := "warning: the trace's last request arrives at 20 s of trace time, at least 4 s of this replay at --time-scale 5"
	if err != nil || strings.Count(string(out), want) != 1 {
		t.Errorf("run: %v, want one %q:\n%s", err, want, out)
	}
}
