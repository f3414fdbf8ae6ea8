package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// run --timeline under mpirun: the file world rank 0 writes, read as a viewer would.

// timelineFile is what the test reads of a Chrome trace.
type timelineFile struct {
	DisplayTimeUnit string          `json:"displayTimeUnit"`
	TraceEvents     []timelineEvent `json:"traceEvents"`
	OtherData       struct {
		Window struct{ Steps, Every int64 } `json:"window"`
		Ranks  []struct {
			WorldRank     int   `json:"world_rank"`
			StepsKept     int64 `json:"steps_kept"`
			StreamEndStep int64 `json:"stream_end_step"`
		} `json:"ranks"`
	} `json:"otherData"`
}

type timelineEvent struct {
	Ph   string   `json:"ph"`
	Name string   `json:"name"`
	Cat  string   `json:"cat"`
	Ts   *float64 `json:"ts"`
	Dur  *float64 `json:"dur"`
	Pid  *int     `json:"pid"`
	Tid  *int     `json:"tid"`
	Args struct {
		Name string `json:"name"`
		Step int64  `json:"step"`
	} `json:"args"`
}

func readTimeline(t *testing.T, path string) timelineFile {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f timelineFile
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("%s is not JSON: %v", path, err)
	}
	return f
}

// timelineRank is the world rank of a span's track: its tid less one (Perfetto keeps tid 0 for the
// kernel), or for a lane of a rank's copies or L3 I/O (tids from 1,000,000 on) the thousands of the
// tid's remainder.
func timelineRank(tid int) int {
	if tid < 1_000_000 {
		return tid - 1
	}
	return tid % 1_000_000 / 1000
}

// checkTimeline: a track per rank, named, in its CP group's process; every span a complete event
// with ts, dur, pid and tid; and only the window's steps (1, 1+every, ..., at most steps of them)
// before the workload's end. It returns the span categories the file has, with the consensus kinds
// as "consensus <kind>".
func checkTimeline(t *testing.T, f timelineFile, np, cp int, steps, every int64) map[string]bool {
	t.Helper()
	if f.DisplayTimeUnit != "ms" {
		t.Errorf("displayTimeUnit %q", f.DisplayTimeUnit)
	}
	named := map[string]bool{}
	cats := map[string]bool{}
	for _, e := range f.TraceEvents {
		if e.Pid == nil || e.Tid == nil {
			t.Fatalf("an event without pid or tid: %+v", e)
		}
		if e.Ph == "M" {
			named[fmt.Sprintf("%s %d %d %s", e.Name, *e.Pid, *e.Tid, e.Args.Name)] = true
			continue
		}
		if e.Ph != "X" || e.Ts == nil || e.Dur == nil || *e.Dur < 0 {
			t.Fatalf("not a complete event with ts and dur: %+v", e)
		}
		rank := timelineRank(*e.Tid)
		if rank < 0 || rank >= np || *e.Pid != rank/cp+1 {
			t.Fatalf("a span of rank %d in the process of CP group %d: %+v", rank, *e.Pid, e)
		}
		cats[e.Cat] = true
		if e.Cat == "consensus" {
			cats[e.Name] = true
		}
	}
	for rank := range np {
		for _, want := range []string{fmt.Sprintf("process_name %d %d CP group %d", rank/cp+1, rank/cp+1, rank/cp),
			fmt.Sprintf("thread_name %d %d rank %d (cp rank %d)", rank/cp+1, rank+1, rank, rank%cp)} {
			if !named[want] {
				t.Errorf("no metadata event %q", want)
			}
		}
	}
	if len(f.OtherData.Ranks) != np || f.OtherData.Window.Steps != steps ||
		f.OtherData.Window.Every != every {
		t.Fatalf("otherData: %+v", f.OtherData)
	}
	for _, r := range f.OtherData.Ranks {
		checkWindow(t, f, r.WorldRank, r.StreamEndStep, steps, every)
	}
	return cats
}

// checkWindow: before the workload's end, rank has exactly the steps of the window, and no span of
// another step.
func checkWindow(t *testing.T, f timelineFile, rank int, endStep, steps, every int64) {
	t.Helper()
	if endStep <= steps*every {
		t.Fatalf(
			"rank %d: the workload ended in step %d, inside the window: make it longer",
			rank,
			endStep,
		)
	}
	var kept int64
	for _, e := range f.TraceEvents {
		if e.Ph != "X" || e.Cat == "run" || timelineRank(*e.Tid) != rank || e.Args.Step >= endStep {
			continue
		}
		s := e.Args.Step
		if (s-1)%every != 0 || s > 1+(steps-1)*every {
			t.Fatalf(
				"rank %d: a span of step %d, outside the window (%d steps, every %d): %+v",
				rank,
				s,
				steps,
				every,
				e,
			)
		}
		if e.Cat == "step" {
			kept++
		}
	}
	if kept != steps {
		t.Errorf("rank %d: %d steps before the workload's end, want %d", rank, kept, steps)
	}
}

// TestTimelineShowsEveryRanksSteps: two jobs over one L3 directory at 4 ranks in 2 CP groups (the
// first writes blocks, the second reads them back), each with --timeline: every kind of span the
// issue names is in one file or the other, on its rank's track, and only the window's steps before
// the workload's end.
func TestTimelineShowsEveryRanksSteps(t *testing.T) {
	dir := t.TempDir()
	const np, cp, steps, every = 4, 2, 10, 3
	cats := map[string]bool{}
	for _, pass := range []string{"cold", "warm"} {
		path := filepath.Join(t.TempDir(), pass+".json")
		res := runMPI(
			t,
			np,
			180*time.Second,
			l3RunArgs(dir, "--cp", fmt.Sprint(cp), "--timeline", path,
				"--timeline-steps", fmt.Sprint(steps), "--timeline-every", fmt.Sprint(every))...)
		if res.exitCode != 0 {
			t.Fatalf("%s: exit %d\n%s%s", pass, res.exitCode, res.stdout, res.stderr)
		}
		for c := range checkTimeline(t, readTimeline(t, path), np, cp, steps, every) {
			cats[c] = true
		}
	}
	checkNoSegments(t)
	for _, want := range []string{"step", "broadcast", "consensus", "consensus step", "consensus l3_prefetch", "fill",
		"verify_load", "audit", "l3_exists", "copy", "l3_read", "l3_write", "finish", "run"} {
		if !cats[want] {
			t.Errorf("no %q span in either file (they have %v)", want, cats)
		}
	}
}

// TestFailedRunStillWritesItsTimeline: a run a copy error ends at step 5 still writes the file,
// every rank's steps up to the failing one, so that the user sees where its last steps' time went.
func TestFailedRunStillWritesItsTimeline(t *testing.T) {
	path := filepath.Join(t.TempDir(), "failed.json")
	res := runMPI(
		t,
		2,
		60*time.Second,
		"run",
		"--quiet",
		"--inject-copy-error",
		"1@5",
		"--timeline",
		path,
	)
	if res.exitCode == 0 {
		t.Fatalf("the job exited 0 despite a copy error:\n%s", res.stderr)
	}
	f := readTimeline(t, path)
	last := map[int]int64{}
	for _, e := range f.TraceEvents {
		if e.Ph == "X" && e.Cat == "step" {
			last[timelineRank(*e.Tid)] = max(last[timelineRank(*e.Tid)], e.Args.Step)
		}
	}
	for rank := range 2 {
		if last[rank] < 4 {
			t.Errorf(
				"rank %d's last step in the file is %d, want 4 or later (the copy error ends step 5 or 6)",
				rank,
				last[rank],
			)
		}
	}
	checkNoSegments(t)
}
