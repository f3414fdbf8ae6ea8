package cli

// The serving clock's flags (SERVING.md), which run and sweep share: the modelled prefill (--gpu
// with --model's roofline, or --prefill-profile), the link rates, the step budget, the arrivals and
// the clock's scale. Giving --gpu or --prefill-profile turns the clock on; without either, run
// replays as fast as the machine allows.

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/prefill"
	"github.com/cphicache/cphicache/hicache/serving"
	"github.com/cphicache/cphicache/hicache/sizing"
	"github.com/cphicache/cphicache/internal/errscope"
)

// servingOptions are the serving clock's flags.
type servingOptions struct {
	gpu, prefillProfile, l3ReadRate string
	prefillModel, prefillDType      string
	efficiency                      string // as given: "0.5", "1/0.116"
	hostLinkRate                    string
	stepTokens, stepRequests        int
	requestRate, timeScale          float64
	clients                         int
	thinkTime                       time.Duration
	groupGPUs                       int // sweep's: the modelled CP group's GPUs
}

const servingCategory = "serving clock (MODELLED: turned on by --gpu or --prefill-profile)"

// Defaults of the step's budget: SGLang's chunked prefill size on a large GPU, and a request cap
// that the step broadcast carries in one or two messages.
const (
	defaultStepTokens   = 8192
	defaultStepRequests = 64
)

// servingFlags are run's; sweep, whose points replay on a virtual clock at the machine's pace,
// takes them but --time-scale (its --group-gpus, the group it models, is its own: it sizes L1 with
// the clock off too).
func servingFlags(o *servingOptions, virtual bool) []cli.Flag {
	flags := append(servingPrefillFlags(o), servingBudgetFlags(o)...)
	flags = append(flags, servingArrivalFlags(o)...)
	if virtual {
		o.timeScale = 1
		return flags
	}
	return append(flags, timeScaleFlag(o))
}

// servingEnv is the environment variable of a serving flag: every one is CPHICACHE_ and its name,
// as a job script's environment sets it.
func servingEnv(name string) []string { return []string{"CPHICACHE_" + name} }

// servingPrefillFlags are the flags that choose the modelled prefill (a roofline of a model on a
// GPU, or a measured profile); --gpu and --prefill-profile come first, since they turn the clock
// on, and options, which refuses the other serving flags while it is off, skips a list's first two.
func servingPrefillFlags(o *servingOptions) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{
			Name:        "gpu",
			EnvVars:     servingEnv("GPU"),
			Category:    servingCategory,
			Destination: &o.gpu,
			DefaultText: prefill.DefaultGPU + " when --prefill-profile is given; else the clock is off",
			Usage: fmt.Sprintf(
				"turn the serving clock on with a roofline prefill of --model on this GPU, one per CP rank (%s); with --prefill-profile it only sets the host link's rate",
				joinNames(prefill.GPUNames()),
			),
		},
		&cli.StringFlag{
			Name:        "prefill-profile",
			EnvVars:     servingEnv("PREFILL_PROFILE"),
			Category:    servingCategory,
			Destination: &o.prefillProfile,
			TakesFile:   true,
			Usage:       "turn the serving clock on with a prefill profile measured on your own engine: rows of new tokens, cached tokens and milliseconds for a whole CP group (docs/PREFILL.md), interpolated; replaces the roofline",
		},
		&cli.StringFlag{
			Name:        "prefill-model",
			EnvVars:     servingEnv("PREFILL_MODEL"),
			Category:    servingCategory,
			Destination: &o.prefillModel,
			DefaultText: "--model",
			Usage: fmt.Sprintf(
				"the model whose prefill and KV bytes the clock models (%s): give it to model a real model's serving over a scaled-down geometry (--layers, --token-bytes, --l2-slots) that this machine replays faster; the hit counts are then the geometry's",
				joinNames(sizing.ModelNames()),
			),
		},
		&cli.StringFlag{
			Name:        "prefill-dtype",
			EnvVars:     servingEnv("PREFILL_DTYPE"),
			Category:    servingCategory,
			Destination: &o.prefillDType,
			DefaultText: "the model's served precision (" + servedPrecisions() + ")",
			Usage: fmt.Sprintf(
				"the precision the roofline's model is deployed in (%s): its linear layers run at --gpu's dense rate for it and its weights take its bytes (2, 1 or 0.5 a parameter); attention runs at the bf16 rate; refused where --gpu has no such rate (fp4 before Blackwell) (docs/PREFILL.md, \"Precision\")",
				joinNames(sizing.DTypeNames()),
			),
		},
		&cli.StringFlag{
			Name:        "prefill-efficiency",
			Value:       strconv.FormatFloat(prefill.DefaultEfficiency, 'g', -1, 64),
			EnvVars:     servingEnv("PREFILL_EFFICIENCY"),
			Category:    servingCategory,
			Destination: &o.efficiency,
			Usage: fmt.Sprintf(
				"the roofline's model FLOPs utilisation: the share of each dense peak its FLOPs reach, the linear layers' at --prefill-dtype's rate and attention's at bf16's, in (0, 1] (0.5: half of each; a plain value above 1, such as 50 for 50%%, is refused); or 1/B for a fitted factor B that multiplies compute time at the dense peak, B at least %g (an efficiency up to %d: inference-sim's trained beta_1a 0.116 is 1/0.116, 8.6; its roofline's mfuPrefill 0.45 is 0.45); printed as given (docs/PREFILL.md, \"The efficiency\")",
				prefill.MinFittedFactor,
				prefill.MaxEfficiency,
			),
		},
	}
}

// servingBudgetFlags are the flags of the modelled hardware's rates and of a step's budget (the
// L3's read rate in bytes per second, a step's prompt tokens and requests), which bound how long a
// step's reads and prefill take and what it holds.
func servingBudgetFlags(o *servingOptions) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{
			Name:        "host-link-rate",
			EnvVars:     servingEnv("HOST_LINK_RATE"),
			Category:    servingCategory,
			Destination: &o.hostLinkRate,
			DefaultText: "--gpu's datasheet rate: PCIe Gen5 x16's 64GB/s, b300's Gen6 128GB/s, gb200's NVLink-C2C 450GB/s",
			Usage:       "one GPU's host link each way (a load-back host to device, a backup device to host), from your own measurement (e.g. 35GB/s, what nvbandwidth measures host to device on an H100 SXM): the serving clock times the L2's load-backs at it (backups run beside the compute, untimed) and the break-even lines set it beside recomputing; at least 1MB/s, since a slower rate is a unit left off (35 is 35 bytes/s, not 35GB/s): a 1 Gb/s network or one hard disk moves over 100 MB/s (docs/PREFILL.md, \"The GPUs\")",
		},
		&cli.StringFlag{
			Name:        "l3-read-rate",
			Value:       "40GiB/s",
			EnvVars:     servingEnv("L3_READ_RATE"),
			Category:    servingCategory,
			Destination: &o.l3ReadRate,
			Usage:       "one node's read rate from the L3 (e.g. 40GiB/s, 7GB/s): an L3 read takes at least its bytes at it; at least 1MB/s, since a slower rate is a unit left off (7 is 7 bytes/s, not 7GB/s): a 1 Gb/s network or one hard disk moves over 100 MB/s",
		},
		&cli.IntFlag{
			Name:        "step-tokens",
			Value:       defaultStepTokens,
			EnvVars:     servingEnv("STEP_TOKENS"),
			Category:    servingCategory,
			Destination: &o.stepTokens,
			Usage:       "tokens: a step's budget of prompt tokens and chunked prefill's chunk: CP rank 0 forms each step from the requests that have arrived, up to it (a longer request goes alone), and the modelled GPUs compute a step in forward passes of at most this many new tokens, so a longer prompt runs in chunks, each attending over those before it, its first token at its last chunk's end",
		},
		&cli.IntFlag{
			Name:        "step-requests",
			Value:       defaultStepRequests,
			EnvVars:     servingEnv("STEP_REQUESTS"),
			Category:    servingCategory,
			Destination: &o.stepRequests,
			Usage:       "requests in a step at most",
		},
	}
}

// servingArrivalFlags are the flags of when requests arrive: open-loop Poisson arrivals at a rate
// in requests per second, or closed-loop clients with their think time, instead of the trace's
// timestamps.
func servingArrivalFlags(o *servingOptions) []cli.Flag {
	return []cli.Flag{
		&cli.Float64Flag{
			Name:        "request-rate",
			EnvVars:     servingEnv("REQUEST_RATE"),
			Category:    servingCategory,
			Destination: &o.requestRate,
			DefaultText: "a Mooncake trace's timestamps",
			Usage:       "Poisson arrivals at this many requests per second, seeded by --seed, instead of the trace's timestamps (the synthetic workload and token traces have none: give it)",
		},
		&cli.IntFlag{
			Name:        "clients",
			EnvVars:     servingEnv("CLIENTS"),
			Category:    servingCategory,
			Destination: &o.clients,
			DefaultText: "none: the arrivals of the trace or of --request-rate",
			Usage:       "closed-loop clients instead of arrival times: N clients, each sends its next request (in the workload's order) when its last one got its first token, so the load follows the service (docs/SERVING.md)",
		},
		&cli.DurationFlag{
			Name:        "think-time",
			EnvVars:     servingEnv("THINK_TIME"),
			Category:    servingCategory,
			Destination: &o.thinkTime,
			Usage:       "with --clients, how long a client waits after a first token before it sends its next request (trace time, e.g. 500ms)",
		},
	}
}

// timeScaleFlag is run's --time-scale, the last of its serving flags: how much faster than the
// modelled time the wall clock runs. Sweep has none, since its points run on a virtual clock.
func timeScaleFlag(o *servingOptions) cli.Flag {
	return &cli.Float64Flag{
		Name:        "time-scale",
		Value:       1,
		EnvVars:     servingEnv("TIME_SCALE"),
		Category:    servingCategory,
		Destination: &o.timeScale,
		Usage:       "spend the modelled time at 1/N of its length on the wall (60: an hour of trace in about a minute, arrivals at the trace's load); a step lasts its modelled time or its real work's wall time, whichever is longer, so the cache's own time counts as itself and the figures are a replay's at the trace's pace (docs/SERVING.md); a replay of a trace lasts at least its last arrival / N, and a run warns at start-up when that is past its job's end ($SLURM_JOB_END_TIME)",
	}
}

// groupGPUsFlag is sweep's --group-gpus: the modelled CP group's GPUs, since the sweep itself runs
// the cache at cp 1. It sizes the group's L1 (each GPU's --device-bytes) and, with the serving
// clock, the GPUs that share each step's prefill.
func groupGPUsFlag(o *servingOptions) cli.Flag {
	return &cli.IntFlag{
		Name:        "group-gpus",
		Value:       8,
		EnvVars:     servingEnv("GROUP_GPUS"),
		Category:    "sweep",
		Destination: &o.groupGPUs,
		Usage:       "the GPUs (ranks) of the CP group the points model, as run's --cp: each holds --device-bytes of L1 (one GPU's), so the group's L1 is theirs together, and with the serving clock they share each step's prefill; the group's node holds its --l2-bytes (the sweep runs the cache at cp 1: its hits do not depend on the CP size)",
	}
}

// on says whether the serving clock is on: --gpu or --prefill-profile given.
func (o *servingOptions) on() bool { return o.gpu != "" || o.prefillProfile != "" }

// options are the runner's serving options for --model, checked before MPI starts; nil when the
// clock is off, which refuses every other serving flag given, since it would do nothing. The
// synthetic workload has no arrival times, so it needs --request-rate (a token trace's lack of them
// is found when it is read); that is asked after the flags' own checks, so that a bad --gpu is
// named as itself.
func (o *servingOptions) options(
	c *cli.Context,
	model string,
	synthetic bool,
) (*config.ServingOptions, error) {
	if !o.on() {
		return nil, refuseServingFlagsWithoutClock(c)
	}
	if o.clients == 0 {
		if err := refuseGiven(c, []string{"think-time"}, "needs --clients"); err != nil {
			return nil, err
		}
	}
	gpu, model, err := o.prefillGPUAndModel(model)
	if err != nil {
		return nil, err
	}
	l3Rate, err := prefill.ParseRate("l3-read-rate", o.l3ReadRate)
	if err != nil {
		return nil, err
	}
	efficiency, err := prefill.ParseEfficiency(o.efficiency)
	if err != nil {
		return nil, err
	}
	var hostLinkRate float64
	if o.hostLinkRate != "" {
		if hostLinkRate, err = prefill.ParseRate("host-link-rate", o.hostLinkRate); err != nil {
			return nil, err
		}
	}
	s := o.servingConfig(gpu, model, l3Rate)
	s.Prefill.Efficiency, s.Prefill.EfficiencyText = efficiency, strings.TrimSpace(o.efficiency)
	s.HostLinkBytesPerSecond, s.HostLinkRate = hostLinkRate, strings.TrimSpace(o.hostLinkRate)
	if err := s.Check(); err != nil {
		return nil, err
	}
	if synthetic && o.requestRate == 0 && o.clients == 0 {
		return nil, &errscope.ConfigError{
			Flag:   "request-rate",
			Reason: "the serving clock needs arrival times, and the synthetic workload has none: give a rate (requests per second), closed-loop --clients, or a Mooncake --trace",
		}
	}
	return s, nil
}

// refuseServingFlagsWithoutClock refuses every serving flag given while the clock is off (neither
// --gpu nor --prefill-profile), since without the clock it would do nothing; nil when none is.
func refuseServingFlagsWithoutClock(c *cli.Context) error {
	// The first two of each list are --gpu and --prefill-profile; sweep's list adds
	// --group-gpus.
	names := append(
		flagNames(servingFlags(&servingOptions{}, false), 2),
		flagNames(servingFlags(&servingOptions{}, true), 2)...)
	return refuseGiven(
		c,
		names,
		"needs --gpu or --prefill-profile, which turn the serving clock on",
	)
}

// prefillGPUAndModel are the GPU and the model the prefill is modelled with: --gpu or its default,
// checked by name, and --prefill-model or else the run's model. The roofline needs a model; a
// profile (--prefill-profile) does not, since it measured one.
func (o *servingOptions) prefillGPUAndModel(model string) (gpu, prefillModel string, err error) {
	gpu = o.gpu
	if gpu == "" {
		gpu = prefill.DefaultGPU
	}
	if _, err := prefill.LookupGPU(gpu); err != nil {
		return "", "", err
	}
	if o.prefillModel != "" {
		model = o.prefillModel
	}
	if o.prefillProfile == "" && model == "" {
		return "", "", &errscope.ConfigError{
			Flag: "gpu",
			Reason: "the roofline prefill needs a model: give --model or --prefill-model (" + joinNames(
				sizing.ModelNames(),
			) + "), or --prefill-profile",
		}
	}
	return gpu, model, nil
}

// servingConfig gathers the flags into the runner's serving options, for the prefill of model on
// gpu and an L3 read rate of l3BytesPerSecond a node. It checks nothing: options runs their Check
// after the flags' own checks, keeping the order in which a user meets the errors.
func (o *servingOptions) servingConfig(
	gpu, model string,
	l3BytesPerSecond float64,
) *config.ServingOptions {
	return &config.ServingOptions{
		Prefill: prefill.Options{
			Model:       model,
			GPU:         gpu,
			DType:       strings.TrimSpace(o.prefillDType),
			ProfilePath: o.prefillProfile,
			Open:        func(path string) (io.ReadCloser, error) { return os.Open(path) },
		},
		L3ReadBytesPerSecond: l3BytesPerSecond,
		Batching: serving.Batching{
			StepTokens:  int64(o.stepTokens),
			MaxRequests: o.stepRequests,
		},
		TimeScale:    o.timeScale,
		RequestRate:  o.requestRate,
		GroupGPUs:    o.groupGPUs,
		Clients:      o.clients,
		ThinkSeconds: o.thinkTime.Seconds(),
	}
}

// servedPrecisions lists each precision the model table serves in, with its models, for
// --prefill-dtype's default: "fp8: deepseek-v3, glm-5.2; bf16: the others".
func servedPrecisions() string {
	byDType := map[sizing.DType][]string{}
	for _, name := range sizing.ModelNames() {
		m, _ := sizing.LookupModel(name)
		byDType[m.Served] = append(byDType[m.Served], name)
	}
	var parts []string
	for _, d := range sizing.DTypes() {
		if names := byDType[d]; len(names) > 0 {
			parts = append(parts, d.String()+" for "+strings.Join(names, ", "))
		}
	}
	return strings.Join(parts, "; ")
}

// joinNames lists choices for a flag's help: "a, b or c".
func joinNames(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
