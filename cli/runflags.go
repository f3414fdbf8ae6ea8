package cli

// run's flags, bound into runOptions (validate takes them all but the metrics', sweep those of the
// workload, the model and the cache), and the one conversion into config.Options, which their
// Before runs with every check before MPI starts; replayCommand, the command run and validate
// share; and --trace -'s hand-over to the job.

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/runner"
	"github.com/cphicache/cphicache/hicache/sizing"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/hicache/timeline"
	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/cphicache/cphicache/internal/errscope"
	"github.com/cphicache/cphicache/kernels"
	"github.com/cphicache/cphicache/pool"
)

// runOptions holds every flag of run and validate. Flags that need parsing (layout, write policy,
// injections) stay strings here; options turns them into their types.
type runOptions struct {
	global    globalOptions
	synthetic syntheticOptions

	trace, report, collective, jobID            string
	traceFormat                                 string
	traceBlockTokens, traceLimit                int
	batchRequests, layers, payloads, pageTokens int
	tokenBytes, devicePages                     int
	sizing                                      sizingOptions
	l3                                          runL3Options
	serving                                     servingOptions
	placementAssertEvery, flushEvery            int64
	layout, writePolicy, slabBytesMax           string
	l2Policy                                    string
	watchdogTimeout                             time.Duration
	metricsFile, cpuProfile                     string
	metricsInterval                             time.Duration
	timeline                                    string
	timelineSteps, timelineEvery                int64
	quiet, strict                               bool
	// --token-bytes given: per rank; else derived (config.DefaultGroupTokenBytes)
	tokenBytesSet                                      bool
	injectDivergence, injectHang, injectExit           string
	injectCopyError, injectStuckCopy, injectSetupError string

	opts *config.Options // from the flags, checked, by Before
}

func (o *runOptions) flags() []cli.Flag {
	flags := append(globalFlags(&o.global), syntheticFlags(&o.synthetic)...)
	flags = append(flags, o.traceFlags()...)
	flags = append(flags, seedFlags(&o.synthetic)...)
	flags = append(flags, batchRequestsFlag(&o.batchRequests))
	flags = append(flags, o.modelFlags()...)
	flags = append(flags, o.cacheFlags()...)
	flags = append(flags, o.checkFlags()...)
	flags = append(flags, o.l3.flags()...)
	flags = append(flags, o.outputFlags()...)
	return append(flags, o.injectFlags()...)
}

// before is run's and validate's Before: every flag checked, and the options built, before MPI
// starts.
func (o *runOptions) before(c *cli.Context) (err error) {
	if err := o.global.check(c); err != nil {
		return err
	}
	if err := o.sizing.exclusive(c); err != nil {
		return err
	}
	if err := checkWorkloadFlags(c, o.trace); err != nil {
		return err
	}
	if o.timeline == "" {
		if err := refuseGiven(c, []string{"timeline-steps", "timeline-every"}, "needs --timeline"); err != nil {
			return err
		}
	}
	o.tokenBytesSet = c.IsSet("token-bytes")
	if o.opts, err = o.options(); err != nil {
		return err
	}
	if o.opts.L3, err = o.l3.options(c, o.opts.Model); err != nil {
		return err
	}
	if o.opts.Serving, err = o.serving.options(c, o.opts.Model, o.trace == ""); err != nil {
		return err
	}
	o.opts.L1FromGPU, o.opts.L2FromL1 = geometryFromGPU(c, o.opts)
	return runner.CheckOptions(o.opts)
}

// geometryFromGPU says which tiers the serving clock's deployment sizes (config.Options.L1FromGPU,
// L2FromL1): with the clock on and a model whose bytes the sizes count, L1 when no --device-pages
// or --device-bytes is given, L2 when no --l2-slots or --l2-bytes is; never without the clock,
// whose runs keep the flags' defaults.
func geometryFromGPU(c *cli.Context, opts *config.Options) (l1, l2 bool) {
	if opts.Serving == nil || opts.SizingModel() == "" {
		return false, false
	}
	return !c.IsSet("device-pages") && !c.IsSet("device-bytes"),
		!c.IsSet("l2-slots") && !c.IsSet("l2-bytes")
}

// options is the one conversion from the flags to config.Options, with every check that needs no
// MPI.
func (o *runOptions) options() (*config.Options, error) {
	opts, err := o.baseOptions()
	if err != nil {
		return nil, err
	}
	if err := o.sizing.single(opts); err != nil {
		return nil, err
	}
	return opts, runner.CheckOptions(opts)
}

// baseOptions converts every flag but the sizing ones, which run and sweep read differently, and
// does not validate: the caller does, once it has the sizes.
func (o *runOptions) baseOptions() (*config.Options, error) {
	layout, err := pool.ParseLayout(o.layout)
	if err != nil {
		return nil, &errscope.ConfigError{Flag: "layout", Reason: err.Error()}
	}
	policy, err := cache.ParseWritePolicy(o.writePolicy)
	if err != nil {
		return nil, err
	}
	l2Policy, err := pool.ParsePolicy(o.l2Policy)
	if err != nil {
		return nil, &errscope.ConfigError{Flag: "l2-policy", Reason: err.Error()}
	}
	synthetic, err := o.synthetic.config()
	if err != nil {
		return nil, err
	}
	traceFormat, err := workload.ParseTraceFormat(o.traceFormat)
	if err != nil {
		return nil, &errscope.ConfigError{Flag: "trace-format", Reason: err.Error()}
	}
	slabBytesMax, err := sizing.ParseByteSize("slab-bytes-max", o.slabBytesMax)
	if err != nil {
		return nil, err
	}
	opts := &config.Options{
		Layers: o.layers, PayloadsPerLayer: o.payloads, PageTokens: o.pageTokens, TokenBytes: o.tokenBytes,
		DevicePages: o.devicePages, SlabBytesMax: slabBytesMax, Layout: layout, Policy: policy,
		L2Policy:      l2Policy,
		BatchRequests: o.batchRequests, PlacementAssertEvery: o.placementAssertEvery, FlushEvery: o.flushEvery,
		Seed: o.synthetic.seed, TracePath: o.trace, TraceFormat: traceFormat, TraceBlockTokens: o.traceBlockTokens,
		TraceLimit: o.traceLimit, VocabSize: o.synthetic.vocabSize, Synthetic: synthetic,
		ReportPath: o.report, MetricsPath: o.metricsFile, TimelinePath: o.timeline,
		TimelineWindow:  timeline.Window{Steps: o.timelineSteps, Every: o.timelineEvery},
		MetricsInterval: o.metricsInterval, Collective: o.collective,
		WatchdogTimeout: o.watchdogTimeout, JobID: jobID(o.jobID), Quiet: o.quiet, Strict: o.strict,
	}
	if !o.tokenBytesSet && o.sizing.model == "" {
		opts.GroupTokenBytes = config.DefaultGroupTokenBytes // the same default model at every cp
	}
	return opts, o.injections(opts)
}

// injections parses the fault injections into opts; each error names its flag.
func (o *runOptions) injections(opts *config.Options) (err error) {
	for _, in := range []struct {
		flag  string
		value string
		dest  *config.Injection
	}{
		{"inject-divergence", o.injectDivergence, &opts.InjectDivergence},
		{"inject-hang", o.injectHang, &opts.InjectHang},
		{"inject-exit", o.injectExit, &opts.InjectExit},
		{"inject-copy-error", o.injectCopyError, &opts.InjectCopyError},
		{"inject-stuck-copy", o.injectStuckCopy, &opts.InjectStuckCopy},
	} {
		if *in.dest, err = config.ParseInjection(in.flag, in.value); err != nil {
			return err
		}
	}
	opts.InjectSetupError, err = config.ParseRankInjection("inject-setup-error", o.injectSetupError)
	return err
}

// replayCommand is run or validate: the same flags (run's also the metrics' and the serving
// clock's), checked the same way, then fn on every rank.
func replayCommand(
	name, usage, description string,
	withMetrics bool,
	fn func(*spmd.Job, *config.Options) error,
) *cli.Command {
	o := &runOptions{}
	flags := o.flags()
	if withMetrics {
		flags = append(flags, o.metricsFlags()...)
		flags = append(flags, servingFlags(&o.serving, false)...)
	}
	return &cli.Command{
		Name: name, Usage: usage, Description: description,
		Flags:        flags,
		OnUsageError: onUsageError,
		Before:       o.before,
		Action: func(c *cli.Context) error {
			if err := needsGPU(name); err != nil {
				return err
			}
			o.opts.Provenance = newProvenance(c)
			o.opts.Provenance.Config["job-id"] = o.opts.JobID // its default is this launch's
			return withJob(o.global, func(job *spmd.Job) error {
				stop, err := startCPUProfile(o.cpuProfile, job.Topo.WorldRank)
				if err != nil {
					return err
				}
				defer stop()
				remove, err := traceFromStream(job, o.opts)
				if err != nil {
					return err
				}
				defer remove()
				if err := startProvenance(job, o.opts.Provenance, o.opts.TracePath); err != nil {
					return err
				}
				sizeProvenance(job, o.opts.Provenance, o.opts)
				return fn(job, o.opts)
			})
		},
	}
}

// needsGPU refuses, in one line and with a usage error's status, a command that makes the GPU copy
// engine when the cuda build finds no usable GPU here (kernels.GPUMissing: no driver, or cuInit's
// error): before MPI's job and any shared memory, rather than as a failure inside the engine's
// set-up. The CPU build needs none.
func needsGPU(command string) error {
	if err := kernels.GPUMissing(); err != nil {
		return usageError{
			fmt.Errorf("%s needs a GPU in this build (bin/cphicache-gpu), and none can be used "+
				"here: %v; the CPU build (make build: bin/cphicache) runs without one", command, err),
		}
	}
	return nil
}
