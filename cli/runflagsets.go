package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/hicache/timeline"
	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/urfave/cli/v2"
)

// run's flags by category (runOptions.flags puts them together): the trace, the model, the cache, the checks,
// the outputs and the metrics, and the fault injections.

// injectFlag is one of the fault injections, each RANK@STEP but --inject-setup-error (RANK); its
// environment variable is CPHICACHE_ and its name in capitals, as every flag's of run.
func injectFlag(name string, dest *string, usage string) cli.Flag {
	env := "CPHICACHE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
	return &cli.StringFlag{
		Name:        name,
		EnvVars:     []string{env},
		Category:    "fault injection (validation only)",
		Destination: dest,
		Usage:       usage,
	}
}

func (o *runOptions) traceFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{
			Name:        "trace",
			EnvVars:     []string{"CPHICACHE_TRACE"},
			Category:    "workload",
			Destination: &o.trace,
			Usage:       "replay a JSON Lines trace ({\"rid\": ..., \"input_ids\": [...], \"output_len\": N} or {\"op\": \"flush\"} per line), or a Mooncake FAST'25 trace ({\"timestamp\": ms, \"input_length\": N, \"output_length\": N, \"hash_ids\": [...]} per line); empty = the embedded synthetic multi-turn chat workload. Requests of one conversation (rid before the first '.') go to the same DP replica; a Mooncake request's rid is its line number",
		},
		&cli.StringFlag{
			Name:        "trace-format",
			Value:       "auto",
			EnvVars:     []string{"CPHICACHE_TRACE_FORMAT"},
			Category:    "workload",
			Destination: &o.traceFormat,
			Usage:       "the --trace format: tokens, mooncake, or auto (decided by the first request line)",
		},
		traceBlockTokensFlag(&o.traceBlockTokens),
		&cli.IntFlag{
			Name:        "trace-limit",
			Value:       0,
			EnvVars:     []string{"CPHICACHE_TRACE_LIMIT"},
			Category:    "workload",
			Destination: &o.traceLimit,
			Usage:       "replay only the trace's first N requests (lines after the Nth are not read); 0 = all",
		},
	}
}

func batchRequestsFlag(dest *int) cli.Flag {
	return &cli.IntFlag{
		Name:        "batch-requests",
		Value:       4,
		EnvVars:     []string{"CPHICACHE_BATCH_REQUESTS"},
		Category:    "workload",
		Destination: dest,
		Usage:       "requests per step; each step ends with one consensus all-reduce over the CP group (commit, load-backs, placement digest, errors)",
	}
}

// traceBlockTokensFlag is --trace-block-tokens, run's and gen-trace's.
func traceBlockTokensFlag(dest *int) cli.Flag {
	return &cli.IntFlag{
		Name:        "trace-block-tokens",
		Value:       workload.DefaultBlockTokens,
		EnvVars:     []string{"CPHICACHE_TRACE_BLOCK_TOKENS"},
		Category:    "workload",
		Destination: dest,
		Usage:       "tokens per hash_ids block of a Mooncake trace: a request has ceil(input_length / this) ids",
	}
}

func (o *runOptions) modelFlags() []cli.Flag {
	return append(o.sizing.modelFlags(), []cli.Flag{
		&cli.IntFlag{
			Name:        "layers",
			Value:       4,
			EnvVars:     []string{"CPHICACHE_LAYERS"},
			Category:    "model",
			Destination: &o.layers,
			Usage:       "transformer layers whose KV each rank holds",
		},
		&cli.IntFlag{
			Name:        "payloads",
			Value:       2,
			EnvVars:     []string{"CPHICACHE_PAYLOADS"},
			Category:    "model",
			Destination: &o.payloads,
			Usage:       "payloads per layer: 2 = K and V, 1 = an MLA latent",
		},
		&cli.IntFlag{
			Name:        "page-tokens",
			Value:       16,
			EnvVars:     []string{"CPHICACHE_PAGE_TOKENS"},
			Category:    "model",
			Destination: &o.pageTokens,
			Usage:       "tokens per KV page",
		},
		&cli.IntFlag{
			Name:        "token-bytes",
			Value:       32,
			EnvVars:     []string{"CPHICACHE_TOKEN_BYTES"},
			Category:    "model",
			Destination: &o.tokenBytes,
			DefaultText: "2 KiB of KV a token over the CP group: 2048 / (cp x layers x payloads), rounded up to 8, so 32 at cp 8 and 16 at cp 16 with the default layers and payloads",
			Usage:       "bytes of KV per token per rank per layer per payload (a multiple of 8); given, it is per rank, so the same value at another cp is another model",
		},
	}...)
}

func (o *runOptions) cacheFlags() []cli.Flag {
	return append(o.sizing.capacityFlags(), []cli.Flag{
		&cli.IntFlag{
			Name:        "device-pages",
			Value:       512,
			EnvVars:     []string{"CPHICACHE_DEVICE_PAGES"},
			Category:    "cache",
			Destination: &o.devicePages,
			Usage:       "L1 capacity: device KV pages per rank",
		},
		&cli.StringFlag{
			Name:        "slab-bytes-max",
			Value:       "64MiB",
			EnvVars:     []string{"CPHICACHE_SLAB_BYTES_MAX"},
			Category:    "cache",
			Destination: &o.slabBytesMax,
			Usage:       "the bound on one slab of the shared L2, a size (e.g. 64MiB, 1GiB, 1048576)",
		},
		&cli.StringFlag{
			Name:        "layout",
			Value:       "layer_first",
			EnvVars:     []string{"CPHICACHE_LAYOUT"},
			Category:    "cache",
			Destination: &o.layout,
			Usage:       "L2 layout: layer_first (a region per rank and layer, slot-major) or page_first (per slot: rank x layer x payload)",
		},
		&cli.StringFlag{
			Name:        "write-policy",
			Value:       "write_through",
			EnvVars:     []string{"CPHICACHE_WRITE_POLICY"},
			Category:    "cache",
			Destination: &o.writePolicy,
			Usage:       "when KV is backed up to L2: write_through (on insert), write_through_selective (on the second hit) or write_back (on L1 eviction)",
		},
		&cli.StringFlag{
			Name:        "l2-policy",
			Value:       "lru",
			EnvVars:     []string{"CPHICACHE_L2_POLICY"},
			Category:    "cache",
			Destination: &o.l2Policy,
			Usage: "the shared L2's eviction and admission policy, identical on every rank: lru (least recently used), " +
				"slru (segmented: a probation and a protected segment of 80% of the slots) or admit_seen (an object " +
				"that would evict others comes in only when its content was seen before); sweep takes the policies " +
				"to compare, a comma-separated list or all, each run at every size on the shared pool beside the " +
				"OFFLINE bound (the most L1 + L2 hits any policy could have, read from the trace's future; " +
				"docs/POLICIES.md), in its lines, JSON and plot, with a recommended size per policy under the " +
				"serving clock; there the per-rank copies (--l2-design) and the point of no L2 run the first " +
				"listed, --l2-design per-rank takes one policy and no bound, and without --l2-policy a sweep " +
				"runs lru alone, without the bound",
		},
	}...)
}

func (o *runOptions) checkFlags() []cli.Flag {
	return []cli.Flag{
		&cli.Int64Flag{
			Name:        "placement-assert-every",
			Value:       8,
			EnvVars:     []string{"CPHICACHE_PLACEMENT_ASSERT_EVERY"},
			Category:    "checks",
			Destination: &o.placementAssertEvery,
			Usage:       "steps between object-by-object placement comparisons over the CP group (the allocator digest is compared in every step's consensus, and objects at every flush); 0 = at flushes and the end only",
		},
		o.flushEveryFlag(),
		&cli.StringFlag{
			Name:        "collective",
			Value:       "mpi",
			EnvVars:     []string{"CPHICACHE_COLLECTIVE"},
			Category:    "checks",
			Destination: &o.collective,
			Usage: "transport of the step consensus's MIN all-reduce: mpi, or nccl (GPU build only; loads " +
				"libnccl.so.2, or the library in CPHICACHE_NCCL_LIB; each CP rank needs a GPU of its own unless " +
				"NCCL_MULTI_RANK_GPU_ENABLE=1 with NCCL 2.30 or later)",
		},
		&cli.DurationFlag{
			Name:        "watchdog-timeout",
			Value:       120 * time.Second,
			EnvVars:     []string{"CPHICACHE_WATCHDOG_TIMEOUT"},
			Category:    "checks",
			Destination: &o.watchdogTimeout,
			Usage: fmt.Sprintf(
				"end the job when a rank's own wait for its copies (a drain) lasts longer than this, or a collective longer than this plus %v "+
					"(the grace lets the rank whose copy is stuck, not its peers waiting for it, say so first); checked every %v, so the job ends up to that much later "+
					"(e.g. 120s, 2m); 0 = off (no watchdog; a hung rank hangs the job); negative values are refused",
				spmd.CollectiveGrace,
				spmd.WatchdogPollInterval,
			),
		},
		o.sizing.syncCopiesFlag(),
	}
}

// flushEveryFlag is --flush-every, the one check flag sweep takes too (its others do nothing in one
// process).
func (o *runOptions) flushEveryFlag() cli.Flag {
	return &cli.Int64Flag{
		Name:        "flush-every",
		Value:       0,
		EnvVars:     []string{"CPHICACHE_FLUSH_EVERY"},
		Category:    "checks",
		Destination: &o.flushEvery,
		Usage:       "steps between cache flushes (drain, barrier, reset); 0 = only the workload's own flush ops",
	}
}

func (o *runOptions) outputFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{
			Name:        "report",
			EnvVars:     []string{"CPHICACHE_REPORT"},
			Category:    "output",
			Destination: &o.report,
			Usage:       "write the run's report, aggregated over all ranks, as JSON to this file (world rank 0 writes it)",
		},
		&cli.BoolFlag{
			Name:        "quiet",
			EnvVars:     []string{"CPHICACHE_QUIET"},
			Category:    "output",
			Destination: &o.quiet,
			Usage:       "no progress lines",
		},
		&cli.BoolFlag{
			Name:        "strict",
			EnvVars:     []string{"CPHICACHE_STRICT"},
			Category:    "checks",
			Destination: &o.strict,
			Usage:       "end with exit status 5 when the result is \"OK, but ...\" (a check that could not run, pages L1 could not hold, L3 trouble; in validate, a skipped check), for CI; default: exit 0 with the caveat said",
		},
		jobIDFlag(&o.jobID),
		&cli.StringFlag{
			Name:        "cpu-profile",
			EnvVars:     []string{"CPHICACHE_CPU_PROFILE"},
			Category:    "output",
			Destination: &o.cpuProfile,
			Usage:       "write each rank's Go CPU profile to PREFIX.rank<world rank>.pprof (open with go tool pprof); the directory must exist on every node",
		},
	}
}

// metricsFlags are run's alone: validate replays three passes and reports a table, not a run's
// counters.
func (o *runOptions) metricsFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{
			Name:        "metrics-file",
			EnvVars:     []string{"CPHICACHE_METRICS_FILE"},
			Category:    "output",
			Destination: &o.metricsFile,
			Usage: "write Prometheus metrics (text format, for node_exporter's textfile collector; e.g. DIR/cphicache.prom) to this file, " +
				"replaced atomically, by world rank 0. Series are labelled job_id and cp_group (a rank's own counters also world_rank), " +
				"the same from the first periodic file to the last file (docs/METRICS.md). At the end: every CP group's and rank's counters " +
				"(their sums are --report's), consensus latency histograms per CP group, cphicache_metrics_final 1. Periodic files " +
				"(--metrics-interval) hold world rank 0's own view without any collective: its CP group's counters and its own, " +
				"cphicache_metrics_final 0. Every file has cphicache_metrics_written_timestamp_seconds and cphicache_run_info; the last " +
				"file stays until removed. The directory must exist on every node",
		},
		&cli.DurationFlag{
			Name:        "metrics-interval",
			Value:       0,
			EnvVars:     []string{"CPHICACHE_METRICS_INTERVAL"},
			Category:    "output",
			Destination: &o.metricsInterval,
			Usage:       "also write --metrics-file during the run, at the first step end after each interval (e.g. 15s); 0 = only at the end",
		},
		&cli.StringFlag{
			Name:        "timeline",
			EnvVars:     []string{"CPHICACHE_TIMELINE"},
			Category:    "output",
			Destination: &o.timeline,
			Usage: "write every rank's steps as a Chrome trace (open it in Perfetto, ui.perfetto.dev, or chrome://tracing) to this file, " +
				"merged and written by world rank 0: a process per CP group, a track per rank, spans for each step, its broadcast, " +
				"consensus and local waits, fills, load-back checks and audits, and tracks of the rank's copies and " +
				"L3 existence checks, reads and writes from start to completion. Bounded by --timeline-steps and --timeline-every, and at most " +
				strconv.Itoa(
					timeline.MaxSpansPerRank,
				) + " spans a rank; the file's otherData says what was kept and each rank's time by span",
		},
		&cli.Int64Flag{
			Name:        "timeline-steps",
			Value:       200,
			EnvVars:     []string{"CPHICACHE_TIMELINE_STEPS"},
			Category:    "output",
			Destination: &o.timelineSteps,
			Usage:       "--timeline records at most this many steps (the first ones, or every --timeline-every-th), and all that runs after the workload's last step; 0 = every step, up to the cap of spans",
		},
		&cli.Int64Flag{
			Name:        "timeline-every",
			Value:       1,
			EnvVars:     []string{"CPHICACHE_TIMELINE_EVERY"},
			Category:    "output",
			Destination: &o.timelineEvery,
			Usage:       "--timeline records steps 1, 1+N, 1+2N, ...: a sample of a long job instead of its start",
		},
	}
}

func (o *runOptions) injectFlags() []cli.Flag {
	return []cli.Flag{
		injectFlag(
			"inject-divergence",
			&o.injectDivergence,
			"RANK@STEP: world rank RANK perturbs its allocator after step STEP; the placement assert must catch it",
		),
		injectFlag(
			"inject-hang",
			&o.injectHang,
			"RANK@STEP: world rank RANK stops before step STEP's consensus; the watchdog must end the job",
		),
		injectFlag(
			"inject-exit",
			&o.injectExit,
			"RANK@STEP: world rank RANK exits (status 4) before step STEP's consensus; the launcher must end the job",
		),
		injectFlag(
			"inject-copy-error",
			&o.injectCopyError,
			"RANK@STEP: world rank RANK's next page copy from step STEP on fails; its CP group learns it in the step's consensus and the job ends with that rank's message",
		),
		injectFlag(
			"inject-stuck-copy",
			&o.injectStuckCopy,
			"RANK@STEP: world rank RANK's next page copy from step STEP on never completes; the watchdog must end the job, naming the drain",
		),
		injectFlag(
			"inject-setup-error",
			&o.injectSetupError,
			"RANK: world rank RANK fails its copy-engine set-up, as a GPU out of memory would; every rank must exit with that rank's message",
		),
	}
}
