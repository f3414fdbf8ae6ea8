package cli

// The flag groups several commands share, and the option structs they fill. Every flag is defined
// once, by a function that takes the struct its value goes to (Destination), so that a flag two
// commands share (--seed, --vocab-size, the synthetic workload's, --log-level) has one name,
// default and help text. A command's Before turns its struct into the packages' options and checks
// them; its Action reads only the struct. TestEveryFlagIsDefinedOnce holds this.

import (
	"fmt"
	"log/slog"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/cphicache/cphicache/internal/errscope"
)

// globalOptions are the flags every multi-rank command shares.
type globalOptions struct {
	cp, dp       int
	logLevelName string

	logLevel slog.Level // from logLevelName, by check
}

func globalFlags(o *globalOptions) []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{
			Name:        "cp",
			EnvVars:     []string{"CPHICACHE_CP"},
			DefaultText: "the ranks of one node",
			Destination: &o.cp,
			Usage:       "ranks per context-parallel (CP) group, 1 or more; CP groups are consecutive world ranks, inside one node or over nodes that each hold the same number of its ranks (a node: the ranks of one CPHICACHE_NODE_NAME when every rank sets it, else those MPI finds sharing memory)",
		},
		&cli.IntFlag{
			Name:        "dp",
			EnvVars:     []string{"CPHICACHE_DP"},
			DefaultText: "ranks / cp",
			Destination: &o.dp,
			Usage:       "data-parallel replicas, i.e. CP groups, 1 or more; dp x cp must equal the number of ranks",
		},
		logLevelFlag(&o.logLevelName, "CPHICACHE_LOG_LEVEL"),
	}
}

// logLevelFlag is --log-level; bench allreduce has its own environment variable for it (see
// bench_allreduce.go).
func logLevelFlag(dest *string, env string) cli.Flag {
	return &cli.StringFlag{
		Name:        "log-level",
		Value:       "warn",
		EnvVars:     []string{env},
		Destination: dest,
		Usage:       "log verbosity on stderr: debug, info, warn or error",
	}
}

// check parses the log level and refuses explicit group sizes below 1. Left unset, --cp and --dp
// are derived from the launch (0 here), so whether they were given is the context's to say.
func (o *globalOptions) check(c *cli.Context) (err error) {
	if o.logLevel, err = spmd.ParseLogLevel(o.logLevelName); err != nil {
		return err
	}
	for _, g := range []struct {
		name string
		size int
	}{{"cp", o.cp}, {"dp", o.dp}} {
		if c.IsSet(g.name) && g.size < 1 {
			return &errscope.ConfigError{
				Flag: g.name,
				Reason: fmt.Sprintf(
					"%d is not a group size; give 1 or more, or leave it unset to derive it from the launch",
					g.size,
				),
			}
		}
	}
	return nil
}

// syntheticOptions size the embedded synthetic workload (run, validate and gen-trace); seed and
// vocabSize also seed the KV content and bound a trace's token ids in run and validate.
type syntheticOptions struct {
	seed                                                 uint64
	vocabSize                                            int
	conversations, turnsMax, systemPrompts               int
	systemPromptTokens, turnTokens, outputTokens, flushN int
}

func syntheticFlags(o *syntheticOptions) []cli.Flag {
	d := workload.DefaultSyntheticConfig()
	// The title names no flag: gen-trace, which shares these, has no --trace.
	const cat = "synthetic workload (the default; a trace replaces it)"
	return []cli.Flag{
		&cli.IntFlag{
			Name:        "conversations",
			Value:       d.Conversations,
			EnvVars:     []string{"CPHICACHE_CONVERSATIONS"},
			Category:    cat,
			Destination: &o.conversations,
			Usage:       "multi-turn conversations (users), interleaved",
		},
		&cli.IntFlag{
			Name:        "turns-max",
			Value:       d.TurnsMax,
			EnvVars:     []string{"CPHICACHE_TURNS_MAX"},
			Category:    cat,
			Destination: &o.turnsMax,
			Usage:       "turns per conversation at most; each turn's prompt extends the previous prompt and its reply",
		},
		&cli.IntFlag{
			Name:        "system-prompts",
			Value:       d.SystemPrompts,
			EnvVars:     []string{"CPHICACHE_SYSTEM_PROMPTS"},
			Category:    cat,
			Destination: &o.systemPrompts,
			Usage:       "shared system prompts, with Zipf popularity",
		},
		&cli.IntFlag{
			Name:        "system-prompt-tokens",
			Value:       d.SystemPromptTokens,
			EnvVars:     []string{"CPHICACHE_SYSTEM_PROMPT_TOKENS"},
			Category:    cat,
			Destination: &o.systemPromptTokens,
			Usage:       "tokens per system prompt",
		},
		&cli.IntFlag{
			Name:        "turn-tokens",
			Value:       d.TurnTokens,
			EnvVars:     []string{"CPHICACHE_TURN_TOKENS"},
			Category:    cat,
			Destination: &o.turnTokens,
			Usage:       "new user tokens per turn (varied by a seeded amount)",
		},
		&cli.IntFlag{
			Name:        "output-tokens",
			Value:       d.OutputTokens,
			EnvVars:     []string{"CPHICACHE_OUTPUT_TOKENS"},
			Category:    cat,
			Destination: &o.outputTokens,
			Usage:       "reply tokens per turn (varied by a seeded amount)",
		},
		&cli.IntFlag{
			Name:        "flush-every-requests",
			Value:       d.FlushEvery,
			EnvVars:     []string{"CPHICACHE_FLUSH_EVERY_REQUESTS"},
			Category:    cat,
			Destination: &o.flushN,
			Usage:       "insert a flush op after every N requests; 0 = none",
		},
	}
}

// seedFlags are --seed and --vocab-size: the synthetic workload's, and in run and validate the KV
// content's seed and the bound on a trace's token ids.
func seedFlags(o *syntheticOptions) []cli.Flag {
	d := workload.DefaultSyntheticConfig()
	return []cli.Flag{
		&cli.Uint64Flag{
			Name:        "seed",
			Value:       d.Seed,
			EnvVars:     []string{"CPHICACHE_SEED"},
			Category:    "workload",
			Destination: &o.seed,
			Usage:       "seed of the synthetic workload and, in run and validate, of the KV content",
		},
		&cli.IntFlag{
			Name:        "vocab-size",
			Value:       d.VocabSize,
			EnvVars:     []string{"CPHICACHE_VOCAB_SIZE"},
			Category:    "workload",
			Destination: &o.vocabSize,
			Usage:       "token ids lie in [0, vocab-size): the synthetic workload draws them there, and a --trace must keep them there",
		},
	}
}

// config is the synthetic workload's configuration, checked.
func (o *syntheticOptions) config() (workload.SyntheticConfig, error) {
	cfg := workload.SyntheticConfig{
		Seed: o.seed, Conversations: o.conversations, TurnsMax: o.turnsMax, SystemPrompts: o.systemPrompts,
		SystemPromptTokens: o.systemPromptTokens, TurnTokens: o.turnTokens, OutputTokens: o.outputTokens,
		VocabSize: o.vocabSize, FlushEvery: o.flushN,
	}
	return cfg, cfg.Validate()
}

// refuseGiven refuses the first of names that c holds as given (on the command line or by its
// environment variable) with reason: a flag that would do nothing in this run is refused, as --l3-*
// without --l3-dir is.
func refuseGiven(c *cli.Context, names []string, reason string) error {
	for _, name := range names {
		if c.IsSet(name) {
			return &errscope.ConfigError{Flag: name, Reason: reason}
		}
	}
	return nil
}

// flagNames are the flags' first names, skipping the first skip.
func flagNames(flags []cli.Flag, skip int) []string {
	var names []string
	for _, f := range flags[skip:] {
		names = append(names, f.Names()[0])
	}
	return names
}

// checkWorkloadFlags refuses the workload flags that trace leaves unused: the synthetic workload's
// with a trace, which replaces it, and the trace's (--trace-limit, --trace-format,
// --trace-block-tokens) without one.
func checkWorkloadFlags(c *cli.Context, trace string) error {
	if trace != "" {
		return refuseGiven(
			c,
			flagNames(syntheticFlags(&syntheticOptions{}), 0),
			"the synthetic workload's, and --trace replaces that workload: give one or the other",
		)
	}
	return refuseGiven(c, flagNames((&runOptions{}).traceFlags(), 1), "needs --trace")
}
