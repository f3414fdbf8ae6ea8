package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/spmd"
)

// The four configurations of a replay, in the order each repeat runs them: L1 alone (an L2 of one
// slot), L2, and L2 + L3 over a fresh directory, then over the directory the one before it filled.
const (
	ReplayL1Only   = "L1-only"
	ReplayL2Only   = "L2-only"
	ReplayL3Empty  = "L3-empty"
	ReplayL3Filled = "L3-filled"
)

var replayConfigs = []string{ReplayL1Only, ReplayL2Only, ReplayL3Empty, ReplayL3Filled}

// The targets on the serving clock (SERVING.md): a filled L3 brings the first token at most 0.6
// times as late as the L2 alone, writing an empty one slows serving by at most 5%, and the cache
// machinery hides under the modelled compute (its cost on the modelled clock, TTFT p50 over the
// ideal's, at most 1.10 in every configuration). Without the clock (--serving-args ""), the walls'
// targets: an L3 may cost half again the L2-only wall while it fills, nothing once filled, and a
// prefetch may wait twice a plain read of its bytes.
const (
	ReplayTargetTTFTFilled = 0.6
	ReplayTargetTTFTEmpty  = 1.05
	ReplayTargetOverIdeal  = 1.10
	ReplayTargetEmpty      = 1.5
	ReplayTargetFilled     = 1.0
	ReplayTargetPrefetch   = 2.0
)

// DefaultReplayServingArgs are bench replay's serving clock: DeepSeek-V3 (an MLA model, the kind
// served with context parallelism) on H200s, one per CP rank, its modelled time spent 50 times
// faster: the shared trace asks one group of 8 for more prefill than it has (L1 alone computes 37
// minutes of it), about 45 s of wall.
const DefaultReplayServingArgs = "--gpu h200 --prefill-model deepseek-v3 --time-scale 50"

// DefaultReplayRunArgs are bench replay's geometry, the one `make bench-replay` gives (with its
// --cp): pages of 64 tokens, copies of 8 bytes a token a rank in one layer, an L1 of 4096 pages
// (262,144 tokens, 2.1 GiB of DeepSeek-V3's KV a GPU at cp 8), which holds the repository's
// excerpt's longest request (82,831 tokens), and an L2 of 32768 slots (2.1M tokens, 137 GiB of it
// a node), over ten times its median prompt. The toy defaults of run (512 pages of 16 tokens) hold
// no long request, and run with the serving clock refuses them.
const DefaultReplayRunArgs = "--page-tokens 64 --token-bytes 8 --layers 1 --device-pages 4096 --l2-slots 32768"

// DefaultReplayL3RunArgs are bench replay's L3 flags: an L3 that holds every block of the shared
// Mooncake trace (61.2M prompt tokens, 4.0 TiB of DeepSeek-V3's KV: --l3-bytes counts the model's
// KV, DefaultReplayServingArgs' --prefill-model), so that the filled row reads what the empty one
// wrote. run's default, 64 GiB of it, holds under a million tokens.
const DefaultReplayL3RunArgs = "--l3-bytes 4TiB"

// ReplayConfig is bench replay: one trace and one set of run flags, launched Repeats times in each
// configuration (L2 only; L2 + L3 over a fresh directory; L2 + L3 over the directory the run before
// filled), each launch its own mpirun of NP ranks.
type ReplayConfig struct {
	Trace    string
	NP       int
	Repeats  int
	Launcher []string // the mpirun command and its flags; "-np N" goes right after the command
	Binary   string   // the cphicache binary to launch
	RunArgs  []string // flags of `cphicache run` for every configuration
	// ServingArgs are the serving clock's flags of `cphicache run` for every configuration (none:
	// no clock).
	ServingArgs []string
	// flags of `cphicache run` for the L3 configurations only (--l3-bytes, ...)
	L3RunArgs []string
	// each repeat's L3 directory is made here, fresh, and removed after its runs
	L3Parent   string
	OutDir     string  // each launch's report (JSON) and output (log) are kept here
	TimeoutSec float64 // per launch
	// PlainRounds is how many times the plain read of one prefetch's bytes is timed (the median is
	// reported).
	PlainRounds int
}

// replayOwnFlags are the run flags the benchmark sets itself, per launch.
var replayOwnFlags = []string{"--trace", "--l3-dir", "--report", "--quiet"}

// Validate returns a *errscope.ConfigError naming the first unusable field as its flag of
// `cphicache bench replay`, or, for the binary, which no flag sets, a plain error.
func (c ReplayConfig) Validate() error {
	switch {
	case c.Trace == "":
		return configErrorf(
			"trace",
			"no trace given: give the JSON Lines trace every launch replays (e.g. hicache/workload/testdata/mooncake/synthetic_first200.jsonl, 200 requests of Mooncake's synthetic trace)",
		)
	case c.NP < 1:
		return configErrorf("np", "%d ranks", c.NP)
	case c.Repeats < 1:
		return configErrorf("repeats", "%d must be 1 or more", c.Repeats)
	case c.PlainRounds < 1:
		return configErrorf("plain-rounds", "%d must be 1 or more", c.PlainRounds)
	case c.TimeoutSec <= 0:
		return configErrorf("timeout", "%g s must be positive", c.TimeoutSec)
	case len(c.Launcher) == 0:
		return configErrorf("mpirun", "no launcher")
	case c.OutDir == "":
		return configErrorf("out-dir", "no output folder")
	case c.Binary == "":
		return fmt.Errorf("replay: no cphicache binary to launch")
	}
	if info, err := os.Stat(c.Trace); err != nil || !info.Mode().IsRegular() {
		return configErrorf("trace", "%s is not a readable file (%v)", c.Trace, err)
	}
	if info, err := os.Stat(c.L3Parent); err != nil || !info.IsDir() {
		return configErrorf("l3-parent", "%s is not a directory (%v)", c.L3Parent, err)
	}
	for flag, args := range map[string][]string{"run-args": c.RunArgs, "l3-run-args": c.L3RunArgs} {
		for _, a := range args {
			for _, own := range replayOwnFlags {
				if a == own || strings.HasPrefix(a, own+"=") {
					return configErrorf(flag, "%s is set by the benchmark for each launch", own)
				}
			}
			if flag == "run-args" && strings.HasPrefix(a, "--l3-") {
				return configErrorf(
					flag,
					"%s: an L3 flag would be refused by the L2-only runs; give it in --l3-run-args",
					a,
				)
			}
			if flag == "run-args" && (a == "--l2-bytes" || strings.HasPrefix(a, "--l2-bytes=")) {
				return configErrorf(
					flag,
					"%s: give the L2's size in --l2-slots, which the L1-only runs set to one slot",
					a,
				)
			}
		}
	}
	return nil
}

// ReplayRun is one launch, as its report tells it.
type ReplayRun struct {
	Config      string  `json:"config"`
	Repeat      int     `json:"repeat"`
	ReportPath  string  `json:"report"`
	L3Dir       string  `json:"l3_dir,omitempty"`
	WallSeconds float64 `json:"wall_seconds"`
	// prompt tokens computed (missed every tier) / prompt tokens
	ComputedPct float64          `json:"computed_pct"`
	HitPct      float64          `json:"hit_pct"` // L1 + L2 + L3 hits / prompt tokens
	L3          *report.L3Report `json:"l3,omitempty"`
	// placement divergences, load-back and audit mismatches, corrupt or refused L3 blocks
	Wrong int64 `json:"wrong"`
	// Serving is the run's serving clock (MODELLED), when it had one.
	Serving *report.ServingReport `json:"serving,omitempty"`
	report  *report.Report
}

// ReplayRanks is the rank -> host map of the first run.
func ReplayRanks(runs []ReplayRun) []spmd.RankInfo {
	if len(runs) == 0 {
		return nil
	}
	return reportRanks(runs[0].report)
}

// ReplayRow is one configuration: medians over its runs.
type ReplayRow struct {
	Config            string  `json:"config"`
	Runs              int     `json:"runs"`
	WallSeconds       float64 `json:"wall_seconds"`
	WallOverL2Only    float64 `json:"wall_over_l2_only"`
	ComputedPct       float64 `json:"computed_pct"`
	HitPct            float64 `json:"hit_pct"`
	L3WriteBytes      float64 `json:"l3_write_bytes"`
	L3ReadBytes       float64 `json:"l3_read_bytes"`
	PrefetchWaitP50Ms float64 `json:"prefetch_wait_p50_ms"`
	PrefetchWaitP99Ms float64 `json:"prefetch_wait_p99_ms"`
	// The serving clock's medians (MODELLED), in seconds of the trace's time; 0 without it.
	TTFTP50Seconds        float64 `json:"ttft_p50_s"`
	TTFTP99Seconds        float64 `json:"ttft_p99_s"`
	TTFTOverL2Only        float64 `json:"ttft_p50_over_l2_only"`
	PromptTokensPerSecond float64 `json:"prompt_tokens_per_s"`
	MeasuredOverIdeal     float64 `json:"measured_over_ideal_p50"`
	Wrong                 int64   `json:"wrong"` // over all runs
	hasL3                 bool
}

// ReplayPrefetchRef is the plain read of one prefetch's bytes, measured in the same run: the mean
// blocks a prefetch of the filled runs read, each a file of a block file's size, read one after the
// other (open, fstat, read whole, close) from the page cache, as bench l3's reference reads.
type ReplayPrefetchRef struct {
	Blocks         int     `json:"blocks"`
	BlockFileBytes int64   `json:"block_file_bytes"`
	Rounds         int     `json:"rounds"`
	PlainReadMs    float64 `json:"plain_read_ms"` // median round
}

// ReplayRatios are the targets, as measured; 0 is a ratio that could not be measured (a run
// with no L3 read, say).
type ReplayRatios struct {
	TTFTEmptyOverL2Only    float64 `json:"ttft_l3_empty_over_l2_only"`
	TTFTFilledOverL2Only   float64 `json:"ttft_l3_filled_over_l2_only"`
	EmptyOverL2Only        float64 `json:"l3_empty_over_l2_only"`
	FilledOverL2Only       float64 `json:"l3_filled_over_l2_only"`
	EmptyP99OverPlainRead  float64 `json:"l3_empty_prefetch_p99_over_plain_read"`
	FilledP99OverPlainRead float64 `json:"l3_filled_prefetch_p99_over_plain_read"`
}

// ReplayResult is everything a replay measured.
type ReplayResult struct {
	Rows     []ReplayRow       `json:"rows"`
	Ratios   ReplayRatios      `json:"ratios"`
	Prefetch ReplayPrefetchRef `json:"prefetch_plain_read"`
	Runs     []ReplayRun       `json:"runs"`
}

// RunReplay launches every configuration, repeat after repeat (so that a change of the machine's
// load hits each alike), then times the plain read of one prefetch's bytes and derives the rows and
// ratios. Every L3 directory it makes is removed again, on errors too, and when ctx is cancelled (a
// signal): the launch in flight is ended first, then its directory removed, and the error wraps
// context.Canceled.
func RunReplay(ctx context.Context, cfg ReplayConfig, progress io.Writer) (*ReplayResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, err
	}
	var runs []ReplayRun
	for repeat := range cfg.Repeats {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		dir, err := os.MkdirTemp(cfg.L3Parent, "cphicache-bench-replay-*")
		if err != nil {
			return nil, err
		}
		for _, config := range replayConfigs {
			run, err := launchReplay(ctx, cfg, config, repeat, dir)
			if err != nil {
				return nil, errors.Join(err, os.RemoveAll(dir))
			}
			fmt.Fprintf(
				progress,
				"# replay: %s, repeat %d: %.2f s, computed %.1f%% (%s)\n",
				config,
				repeat,
				run.WallSeconds,
				run.ComputedPct,
				run.ReportPath,
			)
			runs = append(runs, run)
		}
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
	}
	res := SummarizeReplay(runs)
	ref, err := measurePrefetchPlainRead(cfg, runs)
	if err != nil {
		return nil, err
	}
	res.Prefetch = ref
	res.Ratios.EmptyP99OverPlainRead = ratio(
		res.row(ReplayL3Empty).PrefetchWaitP99Ms,
		ref.PlainReadMs,
	)
	res.Ratios.FilledP99OverPlainRead = ratio(
		res.row(ReplayL3Filled).PrefetchWaitP99Ms,
		ref.PlainReadMs,
	)
	return res, nil
}

// launchReplay runs one mpirun and reads its report.
func launchReplay(
	ctx context.Context,
	cfg ReplayConfig,
	config string,
	repeat int,
	l3Dir string,
) (ReplayRun, error) {
	name := fmt.Sprintf("replay-%s-r%d", strings.ToLower(config), repeat)
	run := ReplayRun{
		Config:     config,
		Repeat:     repeat,
		ReportPath: filepath.Join(cfg.OutDir, name+".json"),
	}
	args := append([]string{"-np", fmt.Sprint(cfg.NP)}, cfg.Launcher[1:]...)
	args = append(
		args,
		cfg.Binary,
		"run",
		"--quiet",
		"--report",
		run.ReportPath,
		"--trace",
		cfg.Trace,
	)
	args = append(append(args, cfg.RunArgs...), cfg.ServingArgs...)
	if config == ReplayL1Only {
		args = append(args, "--l2-slots", "1")
	}
	if config == ReplayL3Empty || config == ReplayL3Filled {
		run.L3Dir = l3Dir
		args = append(append(args, "--l3-dir", l3Dir), cfg.L3RunArgs...)
	}
	report, err := launchRun(
		ctx,
		"bench replay",
		cfg.Launcher,
		args,
		cfg.TimeoutSec,
		filepath.Join(cfg.OutDir, name+".log"),
		run.ReportPath,
	)
	if err != nil {
		return run, err
	}
	if run.L3Dir != "" && report.L3 == nil {
		return run, fmt.Errorf(
			"bench replay: %s: a run with --l3-dir reported no L3",
			run.ReportPath,
		)
	}
	fillReplayRun(&run, report)
	return run, nil
}

// fillReplayRun takes a run's figures from its report.
func fillReplayRun(run *ReplayRun, r *report.Report) {
	tokens := r.Hits.L1Tokens + r.Hits.L2Tokens + r.Hits.L3Tokens + r.Hits.MissTokens
	run.WallSeconds = r.WallSeconds
	run.ComputedPct = 100 * float64(r.Hits.MissTokens) / float64(max(tokens, 1))
	run.HitPct = 100 * float64(tokens-r.Hits.MissTokens) / float64(max(tokens, 1))
	run.L3, run.Serving, run.report = r.L3, r.Serving, r
	run.Wrong = r.Placement.Divergences + r.Verify.Mismatches + r.Verify.AuditMismatches
	if r.L3 != nil {
		run.Wrong += r.L3.Corrupt + r.L3.WriteMismatches
	}
}
