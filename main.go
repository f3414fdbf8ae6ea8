// Command cphicache implements and validates a CP-shared physical L2 KV-cache pool for context-parallel LLM
// serving. It is an SPMD program: launch it with mpirun (under Slurm on a cluster), one process per rank.
//
// This file holds the command-line interface only: commands, flags, their validation, and one call per command
// into the packages that do the work.
package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/hicache"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/hicache/transport"
	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/cphicache/cphicache/mpi"
	"github.com/cphicache/cphicache/pool"
)

// version is set at link time by the Makefile (-X main.version=...).
var version = "dev"

// usageError is a command line that does not parse. Every rank sees the same command line, so it is printed once.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() + " (see --help)" }

// Scope: every rank parses the same command line.
func (e usageError) Scope() spmd.Scope { return spmd.JobScope }

func onUsageError(_ *cli.Context, err error, _ bool) error { return usageError{err} }

// globalOptions are the flags every multi-rank command shares.
type globalOptions struct {
	cp       int
	dp       int
	logLevel slog.Level
}

func globalFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "cp", EnvVars: []string{"CPHICACHE_CP"}, DefaultText: "the ranks of one node",
			Usage: "ranks per context-parallel (CP) group, 1 or more; CP groups are consecutive world ranks and must lie inside one node"},
		&cli.IntFlag{Name: "dp", EnvVars: []string{"CPHICACHE_DP"}, DefaultText: "ranks / cp",
			Usage: "data-parallel replicas, i.e. CP groups, 1 or more; dp x cp must equal the number of ranks"},
		&cli.StringFlag{Name: "log-level", Value: "warn", EnvVars: []string{"CPHICACHE_LOG_LEVEL"},
			Usage: "log verbosity on stderr: debug, info, warn or error"},
	}
}

func readGlobal(c *cli.Context) (globalOptions, error) {
	level, err := spmd.ParseLogLevel(c.String("log-level"))
	if err != nil {
		return globalOptions{}, err
	}
	// Left unset, --cp and --dp are derived from the launch; given explicitly, they must be real group sizes.
	for _, name := range []string{"cp", "dp"} {
		if c.IsSet(name) && c.Int(name) < 1 {
			return globalOptions{}, &spmd.ConfigError{Flag: name, Reason: fmt.Sprintf("%d is not a group size; give 1 or more, or leave it unset to derive it from the launch", c.Int(name))}
		}
	}
	return globalOptions{cp: c.Int("cp"), dp: c.Int("dp"), logLevel: level}, nil
}

func newApp() *cli.App {
	return &cli.App{
		Name:    "cphicache",
		Usage:   "a CP-shared physical L2 KV-cache pool for context-parallel LLM serving (run it under mpirun)",
		Version: version,
		Description: "Every rank of a CP group runs the same deterministic page allocator over the same event stream, " +
			"so all ranks place every KV page identically in one shared-memory slab per node without a broadcast.\n" +
			"Launch with e.g.: mpirun -np 8 cphicache run --cp 8",
		EnableBashCompletion: true,
		OnUsageError:         onUsageError,
		Commands: []*cli.Command{
			runCommand(),
			validateCommand(),
			genTraceCommand(),
			topoCommand(),
			versionCommand(),
			benchCommand(),
			completionCommand(),
			manCommand(),
		},
	}
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print cphicache's version, the MPI library it runs on and the MPI standard that implements (needs no mpirun)",
		Action: func(c *cli.Context) error {
			fmt.Printf("cphicache %s\n", version)
			// Both calls are among the few MPI allows before MPI_Init.
			lib, err := mpi.LibraryVersion()
			if err != nil {
				return err
			}
			major, minor, err := mpi.Version()
			if err != nil {
				return err
			}
			fmt.Printf("MPI library: %s (MPI %d.%d)\n", lib, major, minor)
			return nil
		},
	}
}

// The completion scripts ask the program itself for the words that may come next: urfave/cli answers
// --generate-bash-completion (EnableBashCompletion) with the commands, or with the flags after a word that starts
// with a dash, without running anything. They complete the GPU and MPICH builds' binaries too.
const bashCompletion = `# bash completion for cphicache (cphicache completion bash)
_cphicache_complete() {
	local cur=${COMP_WORDS[COMP_CWORD]} opts
	local words=("${COMP_WORDS[@]:0:COMP_CWORD}")
	if [[ $cur == -* ]]; then
		opts=$("${words[@]}" "$cur" --generate-bash-completion 2>/dev/null)
	else
		opts=$("${words[@]}" --generate-bash-completion 2>/dev/null)
	fi
	COMPREPLY=($(compgen -W "$opts" -- "$cur"))
}
complete -o bashdefault -o default -F _cphicache_complete cphicache cphicache-gpu cphicache-mpich
`

const zshCompletion = `#compdef cphicache cphicache-gpu cphicache-mpich
# zsh completion for cphicache (cphicache completion zsh): install as _cphicache in a directory of $fpath, or
# source it.
_cphicache() {
	local -a opts
	local cur=${words[CURRENT]}
	if [[ $cur == -* ]]; then
		opts=("${(@f)$(${words[@]:0:CURRENT-1} $cur --generate-bash-completion 2>/dev/null)}")
	else
		opts=("${(@f)$(${words[@]:0:CURRENT-1} --generate-bash-completion 2>/dev/null)}")
	fi
	if [[ -n ${opts[1]} ]]; then
		_describe 'values' opts
	else
		_files
	fi
}
if [[ ${zsh_eval_context[-1]} == loadautofunc ]]; then
	_cphicache "$@"
else
	compdef _cphicache cphicache cphicache-gpu cphicache-mpich
fi
`

func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print the shell completion script for bash or zsh (make install installs both)",
		ArgsUsage: "bash|zsh",
		Description: "bash: source <(cphicache completion bash), or install it as cphicache in " +
			"/usr/share/bash-completion/completions; zsh: install it as _cphicache in a directory of $fpath.",
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			scripts := map[string]string{"bash": bashCompletion, "zsh": zshCompletion}
			script, ok := scripts[c.Args().First()]
			if !ok || c.NArg() != 1 {
				return usageError{fmt.Errorf("completion: give one shell, bash or zsh, not %q", strings.Join(c.Args().Slice(), " "))}
			}
			fmt.Print(script)
			return nil
		},
	}
}

// manCommand prints the man page, section 1, rendered by urfave/cli from the same command and flag definitions
// as --help. Hidden: make install runs it.
func manCommand() *cli.Command {
	return &cli.Command{
		Name:   "man",
		Usage:  "print the man page (roff) generated from the command definitions",
		Hidden: true,
		Action: func(c *cli.Context) error {
			page, err := c.App.ToManWithSection(1)
			if err != nil {
				return fmt.Errorf("man page: %w", err)
			}
			fmt.Print(page)
			return nil
		},
	}
}

func topoCommand() *cli.Command {
	return &cli.Command{
		Name:  "topo",
		Usage: "print the rank map (world rank, host, node-local rank, DP replica, CP rank) and check the CP layout",
		Description: "Every rank joins; world rank 0 prints the table. Fails, naming the flag, when --cp does not divide " +
			"the number of ranks, when dp x cp differs from it, or when a CP group would span two nodes.",
		Flags:        globalFlags(),
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			opts, err := readGlobal(c)
			if err != nil {
				return err
			}
			job, err := spmd.StartJob(opts.cp, opts.dp, opts.logLevel)
			if err != nil {
				return err
			}
			return errors.Join(job.PrintTopology(os.Stdout, transport.DescribeGPU(job.Topo)), job.Close())
		},
	}
}

// syntheticFlags size the embedded synthetic workload (run, validate and gen-trace).
func syntheticFlags() []cli.Flag {
	d := workload.DefaultSyntheticConfig()
	const cat = "synthetic workload (when no --trace)"
	return []cli.Flag{
		&cli.IntFlag{Name: "conversations", Value: d.Conversations, EnvVars: []string{"CPHICACHE_CONVERSATIONS"}, Category: cat,
			Usage: "multi-turn conversations (users), interleaved"},
		&cli.IntFlag{Name: "turns-max", Value: d.TurnsMax, EnvVars: []string{"CPHICACHE_TURNS_MAX"}, Category: cat,
			Usage: "turns per conversation at most; each turn's prompt extends the previous prompt and its reply"},
		&cli.IntFlag{Name: "system-prompts", Value: d.SystemPrompts, EnvVars: []string{"CPHICACHE_SYSTEM_PROMPTS"}, Category: cat,
			Usage: "shared system prompts, with Zipf popularity"},
		&cli.IntFlag{Name: "system-prompt-tokens", Value: d.SystemPromptTokens, EnvVars: []string{"CPHICACHE_SYSTEM_PROMPT_TOKENS"}, Category: cat,
			Usage: "tokens per system prompt"},
		&cli.IntFlag{Name: "turn-tokens", Value: d.TurnTokens, EnvVars: []string{"CPHICACHE_TURN_TOKENS"}, Category: cat,
			Usage: "new user tokens per turn (varied by a seeded amount)"},
		&cli.IntFlag{Name: "output-tokens", Value: d.OutputTokens, EnvVars: []string{"CPHICACHE_OUTPUT_TOKENS"}, Category: cat,
			Usage: "reply tokens per turn (varied by a seeded amount)"},
		&cli.IntFlag{Name: "flush-every-requests", Value: d.FlushEvery, EnvVars: []string{"CPHICACHE_FLUSH_EVERY_REQUESTS"}, Category: cat,
			Usage: "insert a flush op after every N requests; 0 = none"},
	}
}

func readSynthetic(c *cli.Context) (workload.SyntheticConfig, error) {
	cfg := workload.SyntheticConfig{
		Seed: c.Uint64("seed"), Conversations: c.Int("conversations"), TurnsMax: c.Int("turns-max"),
		SystemPrompts: c.Int("system-prompts"), SystemPromptTokens: c.Int("system-prompt-tokens"),
		TurnTokens: c.Int("turn-tokens"), OutputTokens: c.Int("output-tokens"), VocabSize: c.Int("vocab-size"),
		FlushEvery: c.Int("flush-every-requests"),
	}
	if err := cfg.Validate(); err != nil {
		// SyntheticConfig names its fields as their flags.
		var fe *workload.FieldError
		if errors.As(err, &fe) {
			return cfg, &spmd.ConfigError{Flag: fe.Field, Reason: fe.Reason}
		}
		return cfg, err
	}
	return cfg, nil
}

func runFlags() []cli.Flag {
	return append(syntheticFlags(), []cli.Flag{
		&cli.StringFlag{Name: "trace", EnvVars: []string{"CPHICACHE_TRACE"}, Category: "workload",
			Usage: "replay a JSON Lines trace ({\"rid\": ..., \"input_ids\": [...], \"output_len\": N} or {\"op\": \"flush\"} per line), or a Mooncake FAST'25 trace ({\"timestamp\": ms, \"input_length\": N, \"output_length\": N, \"hash_ids\": [...]} per line); empty = the embedded synthetic multi-turn chat workload. Requests of one conversation (rid before the first '.') go to the same DP replica; a Mooncake request's rid is its line number"},
		&cli.StringFlag{Name: "trace-format", Value: "auto", EnvVars: []string{"CPHICACHE_TRACE_FORMAT"}, Category: "workload",
			Usage: "the --trace format: tokens, mooncake, or auto (decided by the first request line)"},
		&cli.IntFlag{Name: "trace-block-tokens", Value: workload.DefaultBlockTokens, EnvVars: []string{"CPHICACHE_TRACE_BLOCK_TOKENS"}, Category: "workload",
			Usage: "tokens per hash_ids block of a Mooncake trace: a request has ceil(input_length / this) ids"},
		&cli.IntFlag{Name: "trace-limit", Value: 0, EnvVars: []string{"CPHICACHE_TRACE_LIMIT"}, Category: "workload",
			Usage: "replay only the trace's first N requests (lines after the Nth are not read); 0 = all"},
		&cli.Uint64Flag{Name: "seed", Value: 1, EnvVars: []string{"CPHICACHE_SEED"}, Category: "workload",
			Usage: "seed of the synthetic workload and of the KV content"},
		&cli.IntFlag{Name: "vocab-size", Value: 32000, EnvVars: []string{"CPHICACHE_VOCAB_SIZE"}, Category: "workload",
			Usage: "token ids must lie in [0, vocab-size)"},
		&cli.IntFlag{Name: "batch-requests", Value: 4, EnvVars: []string{"CPHICACHE_BATCH_REQUESTS"}, Category: "workload",
			Usage: "requests per step; each step ends with one consensus all-reduce over the CP group (commit, load-backs, placement digest, errors)"},
		&cli.IntFlag{Name: "layers", Value: 4, EnvVars: []string{"CPHICACHE_LAYERS"}, Category: "model",
			Usage: "transformer layers whose KV each rank holds"},
		&cli.IntFlag{Name: "payloads", Value: 2, EnvVars: []string{"CPHICACHE_PAYLOADS"}, Category: "model",
			Usage: "payloads per layer: 2 = K and V, 1 = an MLA latent"},
		&cli.IntFlag{Name: "page-tokens", Value: 16, EnvVars: []string{"CPHICACHE_PAGE_TOKENS"}, Category: "model",
			Usage: "tokens per KV page"},
		&cli.IntFlag{Name: "token-bytes", Value: 32, EnvVars: []string{"CPHICACHE_TOKEN_BYTES"}, Category: "model",
			Usage: "bytes of KV per token per rank per layer per payload (a multiple of 8)"},
		&cli.IntFlag{Name: "device-pages", Value: 512, EnvVars: []string{"CPHICACHE_DEVICE_PAGES"}, Category: "cache",
			Usage: "L1 capacity: device KV pages per rank"},
		&cli.IntFlag{Name: "l2-slots", Value: 2048, EnvVars: []string{"CPHICACHE_L2_SLOTS"}, Category: "cache",
			Usage: "L2 capacity: pages in the CP group's shared slab (one slot holds a page for every rank, layer and payload)"},
		&cli.Int64Flag{Name: "slab-bytes-max", Value: 64 << 20, EnvVars: []string{"CPHICACHE_SLAB_BYTES_MAX"}, Category: "cache",
			Usage: "bytes: the bound on one slab of the shared L2"},
		&cli.StringFlag{Name: "layout", Value: "layer_first", EnvVars: []string{"CPHICACHE_LAYOUT"}, Category: "cache",
			Usage: "L2 layout: layer_first (a region per rank and layer, slot-major) or page_first (per slot: rank x layer x payload)"},
		&cli.StringFlag{Name: "write-policy", Value: "write_through", EnvVars: []string{"CPHICACHE_WRITE_POLICY"}, Category: "cache",
			Usage: "when KV is backed up to L2: write_through (on insert), write_through_selective (on the second hit) or write_back (on L1 eviction)"},
		&cli.Int64Flag{Name: "placement-assert-every", Value: 8, EnvVars: []string{"CPHICACHE_PLACEMENT_ASSERT_EVERY"}, Category: "checks",
			Usage: "steps between object-by-object placement comparisons over the CP group (the allocator digest is compared in every step's consensus, and objects at every flush); 0 = at flushes and the end only"},
		&cli.Int64Flag{Name: "flush-every", Value: 0, EnvVars: []string{"CPHICACHE_FLUSH_EVERY"}, Category: "checks",
			Usage: "steps between cache flushes (drain, barrier, reset); 0 = only the workload's own flush ops"},
		&cli.StringFlag{Name: "collective", Value: "mpi", EnvVars: []string{"CPHICACHE_COLLECTIVE"}, Category: "checks",
			Usage: "transport of the step consensus's MIN all-reduce: mpi, or nccl (GPU build only; loads libnccl.so.2, or the library in CPHICACHE_NCCL_LIB)"},
		&cli.DurationFlag{Name: "watchdog-timeout", Value: 120 * time.Second, EnvVars: []string{"CPHICACHE_WATCHDOG_TIMEOUT"}, Category: "checks",
			Usage: "end the job when a collective waits longer than this (e.g. 120s, 2m); 0 = off (no watchdog; a hung rank hangs the job); negative values are refused"},
		&cli.StringFlag{Name: "report", EnvVars: []string{"CPHICACHE_REPORT"}, Category: "output",
			Usage: "write the run's report, aggregated over all ranks, as JSON to this file (world rank 0 writes it)"},
		&cli.BoolFlag{Name: "quiet", EnvVars: []string{"CPHICACHE_QUIET"}, Category: "output",
			Usage: "no progress lines"},
		&cli.StringFlag{Name: "inject-divergence", EnvVars: []string{"CPHICACHE_INJECT_DIVERGENCE"}, Category: "fault injection (validation only)",
			Usage: "RANK@STEP: world rank RANK perturbs its allocator after step STEP; the placement assert must catch it"},
		&cli.StringFlag{Name: "inject-hang", EnvVars: []string{"CPHICACHE_INJECT_HANG"}, Category: "fault injection (validation only)",
			Usage: "RANK@STEP: world rank RANK stops before step STEP's consensus; the watchdog must end the job"},
		&cli.StringFlag{Name: "inject-exit", EnvVars: []string{"CPHICACHE_INJECT_EXIT"}, Category: "fault injection (validation only)",
			Usage: "RANK@STEP: world rank RANK exits (status 4) before step STEP's consensus; the launcher must end the job"},
		&cli.StringFlag{Name: "inject-copy-error", EnvVars: []string{"CPHICACHE_INJECT_COPY_ERROR"}, Category: "fault injection (validation only)",
			Usage: "RANK@STEP: world rank RANK's next page copy from step STEP on fails; its CP group learns it in the step's consensus and the job ends with that rank's message"},
		&cli.StringFlag{Name: "inject-stuck-copy", EnvVars: []string{"CPHICACHE_INJECT_STUCK_COPY"}, Category: "fault injection (validation only)",
			Usage: "RANK@STEP: world rank RANK's next page copy from step STEP on never completes; the watchdog must end the job, naming the drain"},
		&cli.StringFlag{Name: "inject-setup-error", EnvVars: []string{"CPHICACHE_INJECT_SETUP_ERROR"}, Category: "fault injection (validation only)",
			Usage: "RANK: world rank RANK fails its copy-engine set-up, as a GPU out of memory would; every rank must exit with that rank's message"},
	}...)
}

func readRunOptions(c *cli.Context) (*hicache.Options, error) {
	layout, err := pool.ParseLayout(c.String("layout"))
	if err != nil {
		return nil, &spmd.ConfigError{Flag: "layout", Reason: err.Error()}
	}
	policy, err := hicache.ParseWritePolicy(c.String("write-policy"))
	if err != nil {
		return nil, err
	}
	var injections [5]hicache.Injection
	for i, name := range []string{"inject-divergence", "inject-hang", "inject-exit", "inject-copy-error", "inject-stuck-copy"} {
		if injections[i], err = hicache.ParseInjection(name, c.String(name)); err != nil {
			return nil, err
		}
	}
	setupError, err := hicache.ParseRankInjection("inject-setup-error", c.String("inject-setup-error"))
	if err != nil {
		return nil, err
	}
	synthetic, err := readSynthetic(c)
	if err != nil {
		return nil, err
	}
	traceFormat, err := workload.ParseTraceFormat(c.String("trace-format"))
	if err != nil {
		return nil, &spmd.ConfigError{Flag: "trace-format", Reason: err.Error()}
	}
	opts := &hicache.Options{
		Layers: c.Int("layers"), PayloadsPerLayer: c.Int("payloads"), PageTokens: c.Int("page-tokens"),
		TokenBytes: c.Int("token-bytes"), DevicePages: c.Int("device-pages"), L2Slots: c.Int("l2-slots"),
		SlabBytesMax: c.Int64("slab-bytes-max"), Layout: layout, Policy: policy, BatchRequests: c.Int("batch-requests"),
		PlacementAssertEvery: c.Int64("placement-assert-every"), FlushEvery: c.Int64("flush-every"), Seed: c.Uint64("seed"),
		TracePath: c.String("trace"), TraceFormat: traceFormat, TraceBlockTokens: c.Int("trace-block-tokens"), TraceLimit: c.Int("trace-limit"),
		VocabSize: c.Int("vocab-size"), Synthetic: synthetic, ReportPath: c.String("report"),
		Collective: c.String("collective"), WatchdogTimeout: c.Duration("watchdog-timeout"), InjectDivergence: injections[0], InjectHang: injections[1], InjectExit: injections[2],
		InjectCopyError: injections[3], InjectStuckCopy: injections[4], InjectSetupError: setupError,
		JobID: jobID(), Quiet: c.Bool("quiet"),
	}
	return opts, opts.Validate()
}

// jobID names the job in shared-memory segment names: Slurm's job id, else this process's id.
func jobID() string {
	if id := os.Getenv("SLURM_JOB_ID"); id != "" {
		return id
	}
	return fmt.Sprintf("p%d", os.Getpid())
}

func runCommand() *cli.Command {
	return &cli.Command{
		Name:  "run",
		Usage: "the main job: replay a workload through the CP-shared L2 cache on every rank, verify every load-back, report",
		Description: "Launch under mpirun, e.g. mpirun -np 8 cphicache run. CP-rank 0 of each CP group reads the workload and " +
			"broadcasts each step to its group; every rank runs the same cache logic; backups commit by a MIN all-reduce " +
			"of the write frontiers over the CP group; a placement digest is compared over the group every " +
			"--placement-assert-every steps. Exits non-zero on any divergence or load-back mismatch.",
		Flags:        append(globalFlags(), runFlags()...),
		OnUsageError: onUsageError,
		Action:       replayAction(runMain),
	}
}

// replayAction is the Action of the commands that replay a workload (run, validate): read and check every
// flag before MPI starts, then run fn on every rank.
func replayAction(fn func(*spmd.Job, *hicache.Options) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		g, err := readGlobal(c)
		if err != nil {
			return err
		}
		opts, err := readRunOptions(c)
		if err != nil {
			return err
		}
		return withJob(g, func(job *spmd.Job) error { return fn(job, opts) })
	}
}

// withJob starts MPI and the topology, runs fn, and ends the process the way the job's error requires.
func withJob(g globalOptions, fn func(*spmd.Job) error) error {
	job, err := spmd.StartJob(g.cp, g.dp, g.logLevel)
	if err != nil {
		return err
	}
	if err := fn(job); err != nil {
		os.Exit(job.Fail(err))
	}
	return job.Close()
}

func validateCommand() *cli.Command {
	return &cli.Command{
		Name:  "validate",
		Usage: "run the validation matrix in one job and print a table (check, ranks, steps, result, #wrong); exit non-zero on any failure",
		Description: "Replays the workload three times: as configured (placement compared object by object across each CP group, " +
			"flush reset, data integrity, CP scoping), with an L2 far smaller than the working set (the capacity miss path must " +
			"decide identically on every rank), and with one perturbed rank per CP group (the placement assert must catch it " +
			"at the next check, after which the group restarts from a fresh state). Takes every flag of run.",
		Flags:        append(globalFlags(), runFlags()...),
		OnUsageError: onUsageError,
		Action:       replayAction(validateMain),
	}
}

func genTraceCommand() *cli.Command {
	return &cli.Command{
		Name:  "gen-trace",
		Usage: "write the synthetic workload as a JSON Lines trace (either format --trace replays); needs no mpirun",
		Flags: append(syntheticFlags(),
			&cli.Uint64Flag{Name: "seed", Value: 1, EnvVars: []string{"CPHICACHE_SEED"}, Usage: "seed of the synthetic workload"},
			&cli.IntFlag{Name: "vocab-size", Value: 32000, EnvVars: []string{"CPHICACHE_VOCAB_SIZE"}, Usage: "token ids lie in [0, vocab-size)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "-", Usage: "file to write; - = standard output"},
			&cli.StringFlag{Name: "format", Value: "tokens", EnvVars: []string{"CPHICACHE_FORMAT"},
				Usage: "tokens (rid, input_ids, output_len) or mooncake (block ids: each block's tokens hashed with the previous block's id, numbered in order of first appearance)"},
			&cli.IntFlag{Name: "trace-block-tokens", Value: workload.DefaultBlockTokens, EnvVars: []string{"CPHICACHE_TRACE_BLOCK_TOKENS"},
				Usage: "tokens per block of a mooncake trace"},
		),
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			cfg, err := readSynthetic(c)
			if err != nil {
				return err
			}
			events, err := workload.GenerateSynthetic(cfg)
			if err != nil {
				return err
			}
			write, err := traceWriter(c.String("format"), c.Int("trace-block-tokens"))
			if err != nil {
				return err
			}
			if path := c.String("output"); path != "-" {
				f, err := os.Create(path)
				if err != nil {
					return err
				}
				return errors.Join(write(f, events), f.Close())
			}
			return write(os.Stdout, events)
		},
	}
}

func validateMain(job *spmd.Job, opts *hicache.Options) error {
	opts.Quiet = true
	v, err := hicache.Validate(job, opts)
	if err != nil {
		return err
	}
	if job.Topo.WorldRank == 0 {
		v.WriteTable(os.Stdout)
		if opts.ReportPath != "" {
			if err := v.WriteJSON(opts.ReportPath); err != nil {
				return err
			}
		}
	}
	if n := v.Failed(); n != 0 {
		return &hicache.ValidationFailed{Failed: n}
	}
	return nil
}

func runMain(job *spmd.Job, opts *hicache.Options) error {
	report, err := hicache.Run(job, opts)
	if err != nil {
		return err
	}
	if job.Topo.WorldRank == 0 {
		report.WriteSummary(os.Stdout)
		if opts.ReportPath != "" {
			if err := report.WriteJSON(opts.ReportPath); err != nil {
				return err
			}
		}
	}
	if report.Failed() {
		return &hicache.RunFailed{Divergences: report.Placement.Divergences, Mismatches: report.Verify.Mismatches,
			AuditMismatches: report.Verify.AuditMismatches, CopyErrors: report.Verify.CopyErrors}
	}
	return nil
}

func main() {
	if err := newApp().Run(os.Args); err != nil {
		reportError(err)
		os.Exit(1)
	}
}

// reportError prints a fatal error that ended the command before or outside a job (a bad flag, a usage error)
// the one way every error is printed (spmd.Report): once for an error every rank shares, with the rank
// otherwise. A rank that stays silent waits, so that mpirun does not end the speaker before its message is out.
func reportError(err error) {
	if !spmd.Report(os.Stderr, err, spmd.Where{WorldRank: mpi.LauncherRank()}) {
		time.Sleep(spmd.SilentRankGrace)
	}
}

// traceWriter is gen-trace's writer for --format.
func traceWriter(format string, blockTokens int) (func(io.Writer, []workload.Event) error, error) {
	switch format {
	case "tokens":
		return workload.WriteTrace, nil
	case "mooncake":
		if blockTokens < 1 || blockTokens > workload.BlockTokensMax {
			return nil, &spmd.ConfigError{Flag: "trace-block-tokens", Reason: fmt.Sprintf("%d outside [1, %d]", blockTokens, workload.BlockTokensMax)}
		}
		return func(w io.Writer, events []workload.Event) error {
			return workload.WriteMooncakeTrace(w, events, blockTokens)
		}, nil
	}
	return nil, &spmd.ConfigError{Flag: "format", Reason: fmt.Sprintf("%q is not one of tokens, mooncake", format)}
}
