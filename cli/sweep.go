package cli

// `cphicache sweep`: the hit rate against the L2's capacity for one workload and model, one run per
// size in one process, as JSON and a PNG. The flags are run's (the workload, the model, the cache),
// but for the CP layout: the sweep runs the cache at cp 1, as an MPI singleton without mpirun
// (hicache/sweep says why that loses nothing), with the geometry of the CP group of --group-gpus
// that it models, and --l2-bytes or --l2-slots take a list.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/outfile"
	"github.com/cphicache/cphicache/hicache/runner"
	"github.com/cphicache/cphicache/hicache/sizing"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/hicache/sweep"
	"github.com/cphicache/cphicache/internal/errscope"
	"github.com/cphicache/cphicache/pool"
)

type sweepOptions struct {
	run        runOptions
	json, plot string
	answer     sweepAnswerOptions
	// no size was given: sweep.DefaultSizes
	defaultSizes bool
	// the L2 policies to compare (--l2-policy given; sweeppolicy.go), nil: the options' alone
	policies []pool.Policy
	// --l2-policy was given: the answer names the policy it is for
	policyGiven bool

	opts  *config.Options // checked, by Before
	sizes []sweep.Size
}

func (o *sweepOptions) flags() []cli.Flag {
	r := &o.run
	flags := append(syntheticFlags(&r.synthetic), r.traceFlags()...)
	flags = append(flags, seedFlags(&r.synthetic)...)
	flags = append(
		flags,
		batchRequestsFlag(&r.batchRequests),
		logLevelFlag(&r.global.logLevelName, "CPHICACHE_LOG_LEVEL"),
	)
	flags = append(flags, r.modelFlags()...)
	flags = append(flags, r.cacheFlags()...)
	// Of the checks, only --flush-every changes a sweep: at cp 1 in one process there is no
	// collective to choose or to watch, and every step's copies are drained anyway.
	flags = append(flags, r.flushEveryFlag())
	flags = append(flags, groupGPUsFlag(&r.serving), o.answer.designFlag())
	flags = append(flags, servingFlags(&r.serving, true)...)
	flags = append(flags, o.answer.clockFlags()...)
	return append(
		flags,
		&cli.StringFlag{
			Name:        "json",
			EnvVars:     []string{"CPHICACHE_SWEEP_JSON"},
			Category:    "output",
			Destination: &o.json,
			Usage:       "write the sweep (its configuration and one point per size: capacity in slots, tokens and bytes; hits; rates; with --l2-policy each policy's points and the OFFLINE bound at each size) as JSON to this file",
		},
		&cli.StringFlag{
			Name:        "plot",
			EnvVars:     []string{"CPHICACHE_SWEEP_PLOT"},
			Category:    "output",
			Destination: &o.plot,
			Usage:       "draw the hit rate (L1 + L2) against the L2 capacity, with the ideal rate (with --l2-policy: a curve per policy and the OFFLINE bound's), into this PNG file",
		},
	)
}

// before checks every flag and reads the list of sizes, before MPI starts.
func (o *sweepOptions) before(c *cli.Context) (err error) {
	if o.run.global.logLevel, err = spmd.ParseLogLevel(o.run.global.logLevelName); err != nil {
		return err
	}
	if err := o.run.sizing.exclusive(c); err != nil {
		return err
	}
	if err := checkWorkloadFlags(c, o.run.trace); err != nil {
		return err
	}
	if o.run.serving.groupGPUs < 1 {
		return &errscope.ConfigError{
			Flag:   "group-gpus",
			Reason: fmt.Sprintf("%d must be 1 or more", o.run.serving.groupGPUs),
		}
	}
	o.run.collective = "mpi" // sweep has no --collective: one process has no collective to choose
	o.run.tokenBytesSet = c.IsSet("token-bytes")
	shared := strings.TrimSpace(o.answer.design) != sweep.DesignPerRank
	policies, first, err := sweepPolicies(c, o.run.l2Policy, shared)
	if err != nil {
		return err
	}
	o.policies, o.policyGiven = policies, c.IsSet("l2-policy")
	run := o.run // --l2-policy as given stays in o.run, the options take its first policy
	run.l2Policy = first
	if o.opts, err = run.baseOptions(); err != nil {
		return err
	}
	// The sweep sizes its own L2s where a model and the clock give it a deployment's L1.
	defaults := o.run.serving.on() && (o.run.sizing.model != "" || o.run.serving.prefillModel != "")
	if o.sizes, err = o.run.sizing.sweepSizes(c, o.opts, defaults); err != nil {
		return err
	}
	if o.opts.Serving, err = o.run.serving.options(c, o.opts.Model, o.run.trace == ""); err != nil {
		return err
	}
	o.opts.L1FromGPU, _ = geometryFromGPU(c, o.opts) // the L2's sizes are the sweep's own
	if err := o.answer.check(c, o.opts.Serving); err != nil {
		return err
	}
	if len(o.sizes) == 0 {
		group := sweep.Group{GPUs: o.run.serving.groupGPUs}
		if o.sizes, err = sweep.DefaultSizes(o.opts, group); err != nil {
			return err
		}
		o.defaultSizes = true
	}
	distinct := outfile.CheckDistinct(
		[]outfile.File{{Flag: "json", Path: o.json}, {Flag: "plot", Path: o.plot}},
		o.opts.InputFiles(),
	)
	if err := errors.Join(
		outfile.Check("json", o.json),
		outfile.Check("plot", o.plot),
		sweep.CheckPlotFormat(o.plot),
		distinct,
	); err != nil {
		return err
	}
	return runner.CheckOptions(o.opts)
}

func sweepCommand() *cli.Command {
	o := &sweepOptions{}
	return &cli.Command{
		Name:  "sweep",
		Usage: "the hit rate against the L2's capacity: one run per size (--l2-bytes 64GiB,128GiB,... or --l2-slots a,b,...), in one process without mpirun; JSON and a PNG",
		Description: "Runs the workload once per size at cp 1 as an MPI singleton (placement does not depend on the CP size), " +
			"with the L1 pages and L2 slots that a CP group of --group-gpus GPUs has at that size (each GPU's --device-bytes, the node's --l2-bytes), " +
			"draining every step's copies (as run --sync-copies) so that each point's hit counts are those of run at that size. " +
			"With --model and --l2-bytes the sizes are a real model's; --copy-token-bytes keeps them while copying fewer bytes.",
		Flags:        o.flags(),
		OnUsageError: onUsageError,
		Before:       o.before,
		Action: func(c *cli.Context) error {
			if err := needsGPU("sweep"); err != nil {
				return err
			}
			o.opts.Provenance = newProvenance(c)
			return withJob(globalOptions{cp: 1, logLevel: o.run.global.logLevel}, o.sweep)
		},
	}
}

func (o *sweepOptions) sweep(job *spmd.Job) error {
	if err := sweep.CheckJob(job); err != nil {
		return err
	}
	remove, err := traceFromStream(job, o.opts)
	if err != nil {
		return err
	}
	defer remove()
	if err := startProvenance(job, o.opts.Provenance, o.opts.TracePath); err != nil {
		return err
	}
	group := sweep.Group{
		GPUs:        o.run.serving.groupGPUs,
		Designs:     o.answer.designs,
		MarginPct:   o.answer.marginPct,
		Policies:    o.policies,
		PolicyGiven: o.policyGiven,
	}
	sizeSweepProvenance(o.opts.Provenance, o.opts, group, o.sizes)
	header := func() {
		o.opts.Provenance.WriteHeader(os.Stdout)
		fmt.Printf(
			"# cphicache sweep: %s of a CP group of %s (--group-gpus), the cache run at cp 1 "+
				"(one process), every step's copies drained\n",
			errscope.Plural(len(o.sizes), "size"),
			errscope.Plural(o.run.serving.groupGPUs, "GPU"),
		)
		sayModelBytes(o.opts)
		sayL1(os.Stdout, o.opts, group)
		sayPolicies(o.policies)
		if o.defaultSizes {
			fmt.Printf("# no --l2-bytes or --l2-slots given: %s\n", sweep.DefaultSizesRule())
		}
	}
	// The header comes with the first point: a sweep refused before it runs (an L1 shorter than the
	// longest request) prints only its error.
	res, err := sweep.Run(job, o.opts, o.sizes, group, func(p sweep.Point, b *sweep.BoundPoint) {
		if header != nil {
			header()
			header = nil
		}
		writeSweepPoint(os.Stdout, o.opts.SizingModel(), p)
		writeBoundPoint(os.Stdout, b)
	})
	if err != nil {
		return err
	}
	writeAnswer(os.Stdout, res, o.answer)
	writePolicyAnswers(os.Stdout, res)
	if o.json != "" {
		res.Provenance = o.opts.Provenance
		if o.defaultSizes {
			res.L2SizedBy = sweep.DefaultSizesRule()
		}
		if err := res.WriteJSON(o.json); err != nil {
			return err
		}
	}
	if o.plot != "" {
		return res.WritePlot(o.plot)
	}
	return nil
}

// writeSweepPoint prints a point's line: its L2 in bytes (the model's, a node's, when a model is
// given), tokens and slots, its hits, and its modelled serving figures.
func writeSweepPoint(w io.Writer, model string, p sweep.Point) {
	uncached := ""
	if p.UncachedPages > 0 {
		why := "L1 had no page to spare: its pages were in use or being copied"
		if p.UncachedOversizePages > 0 {
			why = "a request needs more L1 than --device-pages gives"
			if p.Design == sweep.DesignPerRank {
				why = "a request needs more L1 than a GPU's whole copies hold"
			}
		}
		uncached = fmt.Sprintf(
			"; %d pages (%.1f%%) not cached: %s",
			p.UncachedPages,
			p.UncachedPct,
			why,
		)
	}
	serving := ""
	if s := p.Serving; s != nil {
		serving = fmt.Sprintf(
			"; MODELLED TTFT p50 %.3g s, p99 %.3g s, %.0f prompt tokens/s",
			s.TTFTP50,
			s.TTFTP99,
			s.PromptTokensPerSecond,
		)
		if l := s.WithL3; l != nil {
			serving += fmt.Sprintf(
				" (with an unbounded L3 at %s/s: p50 %.3g s, p99 %.3g s, %.0f tokens/s)",
				sizing.FormatBytes(
					int64(l.ReadBytesPerSecond),
				),
				l.TTFT.P50,
				l.TTFT.P99,
				l.PromptTokensPerSecond,
			)
		}
	}
	size := sizing.FormatBytes(p.L2Bytes)
	if model != "" {
		size += " of " + model + "'s KV a node"
	}
	label := fmt.Sprintf("L2 %s = %d tokens (%d slots)", size, p.L2Tokens, p.L2Slots)
	switch p.Design {
	case sweep.DesignNoL2:
		label = "no L2 (an L2 of one slot)"
	case sweep.DesignPerRank:
		label = fmt.Sprintf("per-rank copies, L2 %s: a rank's pool of %d tokens (%d slots), "+
			"a GPU's L1 of %d tokens, whole copies%s", size, p.L2Tokens, p.L2Slots,
			p.L1CapacityTokens, perRankL1Short(p))
	}
	if p.Policy != "" && p.Design != sweep.DesignNoL2 { // the sweep compares policies
		label += ", " + p.Policy
	}
	fmt.Fprintf(
		w,
		"  %s: hit %.1f%% (L1 %d, L2 %d tokens), ideal %.1f%%, %.2f s%s%s\n",
		label,
		100*p.HitRate,
		p.L1Tokens,
		p.L2HitTokens,
		100*p.IdealRate,
		p.WallSeconds,
		serving,
		uncached,
	)
}

// perRankL1Short says, on a per-rank point, when its L1 of whole copies cannot hold the
// workload's longest request: the point runs, the pages of such a request past L1 computed and
// never cached, where the sweep refuses a shared L1 that short.
func perRankL1Short(p sweep.Point) string {
	if p.L1HoldsLongestRequest {
		return ""
	}
	return " (SHORTER than the longest request: its pages past L1 are computed and never cached)"
}

// sayModelBytes says, for a sweep given a model, whose bytes its sizes are and what they mean: the
// sizing model's KV, --l2-bytes a node's and --device-bytes a GPU's, while the copies may replay
// fewer bytes.
func sayModelBytes(opts *config.Options) {
	m, err := sizing.LookupModel(opts.SizingModel())
	if err != nil {
		return // no model: the geometry's own bytes
	}
	fmt.Printf(
		"# sizes are %s's KV (%s a token): --l2-bytes a node's, --device-bytes a GPU's; "+
			"the copies may replay fewer bytes, the hit counts are the model's\n",
		m.Name,
		sizing.FormatBytes(m.TokenBytes()),
	)
}

// sayL1 states the L1 of the group the sweep models, which every shared point runs: each GPU's
// pages and bytes and the group's, the rule that sized it from the model and the GPU when no L1
// size was given (MODELLED, as run's capacity line says it), and with --l2-design's per-rank copies
// their L1 of whole copies, 1/cp of the tokens.
func sayL1(w io.Writer, opts *config.Options, group sweep.Group) {
	c, err := sweep.GroupL1(opts, group)
	if err != nil {
		return // the sweep refuses it with its own error
	}
	kv := ""
	if c.Model != "" {
		kv = " of " + c.Model + "'s KV"
	}
	fmt.Fprintf(w, "# L1: %s = %s, each GPU holding a part of each: %s%s a GPU, %s a CP group of %d\n",
		errscope.Count(c.DevicePages, "page", "pages"),
		errscope.Count(c.DeviceTokens, "token", "tokens"),
		sizing.FormatBytes(c.DeviceBytes), kv, sizing.FormatBytes(c.DeviceBytesPerGroup),
		max(1, group.GPUs))
	if c.SizedBy != "" {
		fmt.Fprintf(w, "# L1 sized from the model and the GPU (no --device-pages or --device-bytes "+
			"given), MODELLED: %s\n", c.SizedBy)
	}
	if group.Designs.PerRank && group.GPUs > 1 {
		pages := max(1, c.DevicePages/group.GPUs)
		fmt.Fprintf(w, "# per-rank copies: each GPU's L1 and each rank's L2 pool hold whole copies, "+
			"1/%d of the tokens of the same bytes: L1 %s = %s a GPU "+
			"(docs/SIZING.md, \"What sharing buys\")\n",
			group.GPUs, errscope.Count(pages, "page", "pages"),
			errscope.Count(int64(pages)*int64(opts.PageTokens), "token", "tokens"))
	}
}
