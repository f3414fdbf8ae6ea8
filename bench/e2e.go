package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/spmd"
)

// E2EConfig is the end-to-end benchmark: the main job (`cphicache run`) launched once per (ranks,
// assert interval, repeat), each launch its own mpirun, because one MPI job cannot change its
// number of ranks.
type E2EConfig struct {
	NPs         []int
	AssertEvery []int64 // --placement-assert-every values; 0 = only at the end of the run
	Repeats     int     // launches per configuration; rows report the median
	// the mpirun command and its flags; "-np N" goes right after the command
	Launcher       []string
	Binary         string   // the cphicache binary to launch
	RunArgs        []string // extra flags of `cphicache run`
	OutDir         string   // each launch's report (JSON) and output (log) are kept here
	TimeoutSeconds float64  // per launch
}

// Validate returns a *errscope.ConfigError naming the first unusable field as its flag of
// `cphicache bench e2e`, or, for the binary, which no flag sets, a plain error.
func (c E2EConfig) Validate() error {
	switch {
	case len(c.NPs) == 0:
		return configErrorf("np-list", "no rank counts")
	case len(c.AssertEvery) == 0:
		return configErrorf("assert-every-list", "no assert intervals")
	case c.Repeats < 1:
		return configErrorf("repeats", "%d must be 1 or more", c.Repeats)
	case c.TimeoutSeconds <= 0:
		return configErrorf("timeout", "%g s must be positive", c.TimeoutSeconds)
	case len(c.Launcher) == 0:
		return configErrorf("mpirun", "no launcher")
	case c.OutDir == "":
		return configErrorf("out-dir", "no output folder")
	case c.Binary == "":
		return fmt.Errorf("e2e: no cphicache binary to launch")
	}
	for _, np := range c.NPs {
		if np < 1 {
			return configErrorf("np-list", "%d ranks", np)
		}
	}
	for _, every := range c.AssertEvery {
		if every < 0 {
			return configErrorf("assert-every-list", "assert interval %d is negative", every)
		}
	}
	return nil
}

// E2ERun is one launch.
type E2ERun struct {
	NP          int     `json:"np"`
	AssertEvery int64   `json:"placement_assert_every"`
	Repeat      int     `json:"repeat"`
	ReportPath  string  `json:"report"`
	StepsPerSec float64 `json:"steps_per_s"`
	// PromptTokensPerSec is the prompt tokens replayed (L1 hits + L2 hits + computed) per wall
	// second: unlike steps, a unit whose cost should not grow with the length of the replay.
	PromptTokensPerSec float64 `json:"prompt_tokens_per_s"`
	report             *report.Report
}

// E2ERow is one (ranks, assert interval): medians over the repeats.
type E2ERow struct {
	NP              int     `json:"np"`
	CP              int     `json:"cp"`
	DP              int     `json:"dp"`
	AssertEvery     int64   `json:"placement_assert_every"`
	Runs            int     `json:"runs"`
	Steps           int64   `json:"steps"`
	Requests        int64   `json:"requests"`
	PlacementChecks int64   `json:"placement_checks"`
	WallSeconds     float64 `json:"wall_seconds"`
	StepsPerSecond  float64 `json:"steps_per_s"`
	// L1 hits + L2 hits + computed, of the first run
	PromptTokens          int64   `json:"prompt_tokens"`
	PromptTokensPerSecond float64 `json:"prompt_tokens_per_s"` // median
	WritingCheckP50Us     float64 `json:"writing_check_p50_us"`
	WritingCheckP99Us     float64 `json:"writing_check_p99_us"`
	// AssertOverheadPct is 100 x (1 - steps/s here / steps/s with the assert at the end only) at
	// the same ranks; 0 on the rows of the end-only interval itself.
	AssertOverheadPct float64 `json:"assert_overhead_pct"`
	// AssertTimePct is the median share of the wall time the slowest rank spent inside placement
	// asserts, measured in the same run: an upper bound of the assert's cost that the noise between
	// launches cannot blur.
	AssertTimePct float64 `json:"assert_time_pct"`
	// placement divergences + load-back mismatches, over all runs
	Wrong int64 `json:"wrong"`
}

// RunE2E launches every configuration, interleaved (repeat, then ranks, then interval) so that a
// change of the machine's load affects all configurations alike, and summarises the reports.
// Cancelling ctx (a signal) ends the launch in flight, and the error wraps context.Canceled.
func RunE2E(ctx context.Context, cfg E2EConfig, progress io.Writer) ([]E2ERow, []E2ERun, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, nil, err
	}
	var runs []E2ERun
	for repeat := range cfg.Repeats {
		for _, np := range cfg.NPs {
			for _, every := range cfg.AssertEvery {
				run, err := launchE2E(ctx, cfg, np, every, repeat)
				if err != nil {
					return nil, runs, err
				}
				fmt.Fprintf(
					progress,
					"# e2e: np %d, assert every %d, repeat %d: %.1f steps/s, %.0f prompt tokens/s (%s)\n",
					np,
					every,
					repeat,
					run.StepsPerSec,
					run.PromptTokensPerSec,
					run.ReportPath,
				)
				runs = append(runs, run)
			}
		}
	}
	return SummarizeE2E(runs), runs, nil
}

// launchE2E runs one mpirun and reads its report.
func launchE2E(
	ctx context.Context,
	cfg E2EConfig,
	np int,
	every int64,
	repeat int,
) (E2ERun, error) {
	name := fmt.Sprintf("e2e-np%d-assert%d-r%d", np, every, repeat)
	run := E2ERun{
		NP:          np,
		AssertEvery: every,
		Repeat:      repeat,
		ReportPath:  filepath.Join(cfg.OutDir, name+".json"),
	}
	args := append([]string{"-np", fmt.Sprint(np)}, cfg.Launcher[1:]...)
	args = append(
		args,
		cfg.Binary,
		"run",
		"--quiet",
		"--report",
		run.ReportPath,
		"--placement-assert-every",
		fmt.Sprint(every),
	)
	args = append(args, cfg.RunArgs...)
	report, err := launchRun(
		ctx,
		"bench e2e",
		cfg.Launcher,
		args,
		cfg.TimeoutSeconds,
		filepath.Join(cfg.OutDir, name+".log"),
		run.ReportPath,
	)
	if err != nil {
		return run, err
	}
	run.report = report
	run.StepsPerSec = float64(report.Steps) / report.WallSeconds
	run.PromptTokensPerSec = float64(promptTokens(report)) / report.WallSeconds
	return run, nil
}

// promptTokens is every prompt token a run replayed, however it was served.
func promptTokens(r *report.Report) int64 {
	return r.Hits.L1Tokens + r.Hits.L2Tokens + r.Hits.MissTokens
}

// ReadReport reads a `cphicache run --report` file.
func ReadReport(path string) (*report.Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r report.Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if r.WallSeconds <= 0 {
		return nil, fmt.Errorf("%s: wall_seconds %g is not a run's", path, r.WallSeconds)
	}
	return &r, nil
}

// SummarizeE2E groups the runs by (ranks, interval), in first-seen order, and takes medians.
func SummarizeE2E(runs []E2ERun) []E2ERow {
	type key struct {
		np    int
		every int64
	}
	var order []key
	groups := map[key][]E2ERun{}
	for _, r := range runs {
		k := key{r.NP, r.AssertEvery}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	rows := make([]E2ERow, 0, len(order))
	endOnly := map[int]float64{} // steps/s with the assert at the end only, per rank count
	for _, k := range order {
		row := summarizeGroup(groups[k])
		if k.every == 0 {
			endOnly[k.np] = row.StepsPerSecond
		}
		rows = append(rows, row)
	}
	for i := range rows {
		if base, ok := endOnly[rows[i].NP]; ok && rows[i].AssertEvery != 0 {
			rows[i].AssertOverheadPct = 100 * (1 - rows[i].StepsPerSecond/base)
		}
	}
	return rows
}

func summarizeGroup(runs []E2ERun) E2ERow {
	first := runs[0].report
	row := E2ERow{
		NP:              runs[0].NP,
		CP:              first.CP,
		DP:              first.DP,
		AssertEvery:     runs[0].AssertEvery,
		Runs:            len(runs),
		Steps:           first.Steps,
		Requests:        first.Requests,
		PlacementChecks: first.Placement.Checks,
		PromptTokens:    promptTokens(first),
	}
	var wall, sps, tps, p50, p99, assertShare []float64
	for _, r := range runs {
		wall = append(wall, r.report.WallSeconds)
		sps = append(sps, r.StepsPerSec)
		tps = append(tps, r.PromptTokensPerSec)
		p50 = append(p50, r.report.WritingCheckUs.P50)
		p99 = append(p99, r.report.WritingCheckUs.P99)
		assertShare = append(assertShare, r.report.PlacementAssertUs.SharePct)
		row.Wrong += r.report.Placement.Divergences + r.report.Verify.Mismatches
	}
	row.WallSeconds, row.StepsPerSecond, row.PromptTokensPerSecond = median(
		wall,
	), median(
		sps,
	), median(
		tps,
	)
	row.WritingCheckP50Us, row.WritingCheckP99Us = median(p50), median(p99)
	row.AssertTimePct = median(assertShare)
	return row
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// E2ERanks is the rank -> host map of the largest launch, from its report's CP groups.
func E2ERanks(runs []E2ERun) []spmd.RankInfo {
	var largest *report.Report
	for _, r := range runs {
		if largest == nil || r.report.Ranks > largest.Ranks {
			largest = r.report
		}
	}
	return reportRanks(largest)
}

// reportRanks is a report's rank -> host map, from its CP groups (none without a report).
func reportRanks(r *report.Report) []spmd.RankInfo {
	var ranks []spmd.RankInfo
	if r == nil {
		return nil
	}
	for _, g := range r.Groups {
		for cpRank, host := range g.Hosts {
			ranks = append(
				ranks,
				spmd.RankInfo{
					WorldRank: len(ranks),
					NodeRank:  -1,
					CPGroup:   g.Group,
					CPRank:    cpRank,
					Host:      host,
				},
			)
		}
	}
	return ranks
}

var e2eTable = table{
	{"np", "", "%d", 4}, {"cp", "", "%d", 4}, {"dp", "", "%d", 4}, {"assert", "(steps)", "%s", 9},
	{
		"runs",
		"",
		"%d",
		4,
	}, {"steps", "", "%d", 6}, {"checks", "", "%d", 6}, {"wall", "(s)", "%.2f", 7},
	{
		"rate",
		"(steps/s)",
		"%.1f",
		9,
	}, {"prompt", "(tok/s)", "%.0f", 9}, {"wc-p50", "(us)", "%.1f", 9}, {"wc-p99", "(us)", "%.1f", 9},
	{"overhead", "(%)", "%s", 8}, {"assert-time", "(%)", "%.2f", 11}, {"#wrong", "", "%d", 6},
}

// WriteE2ETable prints the rows; medians over the runs of each configuration.
func WriteE2ETable(w io.Writer, rows []E2ERow) {
	fmt.Fprintln(
		w,
		"# medians over runs; assert = --placement-assert-every (end = 0: one assert after the last step); prompt = prompt tokens replayed (L1 + L2 hits + computed) per wall second; wc = writing_check latency, slowest rank; overhead = steps/s lost against assert=end at the same np (noisy across launches); assert-time = share of the wall time the slowest rank spent inside placement asserts, same run",
	)
	e2eTable.writeHeader(w)
	for _, r := range rows {
		every, overhead := fmt.Sprint(r.AssertEvery), fmt.Sprintf("%.1f", r.AssertOverheadPct)
		if r.AssertEvery == 0 {
			every, overhead = "end", "-"
		}
		e2eTable.writeRow(
			w,
			r.NP,
			r.CP,
			r.DP,
			every,
			r.Runs,
			r.Steps,
			r.PlacementChecks,
			r.WallSeconds,
			r.StepsPerSecond,
			r.PromptTokensPerSecond,
			r.WritingCheckP50Us,
			r.WritingCheckP99Us,
			overhead,
			r.AssertTimePct,
			r.Wrong,
		)
	}
}

// E2EWrong sums the #wrong column.
func E2EWrong(rows []E2ERow) int64 {
	var n int64
	for _, r := range rows {
		n += r.Wrong
	}
	return n
}
