package config

import (
	"fmt"
	"time"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/outfile"
	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/sizing"
	"github.com/cphicache/cphicache/hicache/timeline"
	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/cphicache/cphicache/internal/errscope"
	"github.com/cphicache/cphicache/pool"
)

// DefaultGroupTokenBytes is the default model's KV bytes a token over a CP group: 2 KiB,
// --token-bytes 32 at cp 8 with 4 layers of K and V, as it was per rank before the default followed
// the CP size.
const DefaultGroupTokenBytes = 2048

// Options is everything `cphicache run` takes.
type Options struct {
	Layers, PayloadsPerLayer, PageTokens, TokenBytes int
	DevicePages                                      int
	L2Slots                                          int
	SlabBytesMax                                     int64
	Layout                                           pool.Layout
	Policy                                           cache.WritePolicy
	L2Policy                                         pool.Policy // --l2-policy, LRU by default
	BatchRequests                                    int
	PlacementAssertEvery                             int64
	FlushEvery                                       int64
	Seed                                             uint64
	TracePath                                        string
	// --trace-format: auto detects it
	TraceFormat workload.TraceFormat
	// tokens per Mooncake block (checked with a trace)
	TraceBlockTokens int
	// replay the trace's first N requests; 0 = all
	TraceLimit int
	VocabSize  int
	Synthetic  workload.SyntheticConfig
	ReportPath string
	// --metrics-file: Prometheus text format, world rank 0 writes it
	MetricsPath string
	// --timeline: the Chrome trace of every rank's steps, world rank 0 writes it
	TimelinePath   string
	TimelineWindow timeline.Window
	// between periodic metrics writes; 0 = only at the end
	MetricsInterval  time.Duration
	Collective       string
	WatchdogTimeout  time.Duration
	InjectDivergence Injection
	InjectHang       Injection
	InjectExit       Injection
	InjectCopyError  Injection
	InjectStuckCopy  Injection
	// a world rank whose copy-engine set-up fails
	InjectSetupError Injection
	JobID            string
	Quiet            bool
	// --strict: an "OK, but ..." ends the command with spmd.ExitNotCovered
	Strict bool
	// what the command and its flags were, for the header, report and metrics
	Provenance *report.Provenance

	// Sizing (size.go, and the model table in hicache/sizing), turned into the fields above by Size
	// once the CP size is known.
	// --model: Layers, PayloadsPerLayer and TokenBytes from the table; empty = the flags'
	Model string
	// bytes actually copied per token per rank per layer per payload; 0 = TokenBytes
	CopyTokenBytes int
	// GroupTokenBytes, without a --model or a --token-bytes given: the KV bytes of a token over the
	// whole CP group (its ranks, layers and payloads), which Size divides among them into
	// TokenBytes, so that the default model is the same at every CP size (DefaultGroupTokenBytes);
	// 0 = TokenBytes as given.
	GroupTokenBytes int
	L2Bytes         int64 // per node, instead of L2Slots; 0 = L2Slots
	DeviceBytes     int64 // per rank, instead of DevicePages; 0 = DevicePages
	// With the serving clock and a sizing model, when the user gave no L1 (--device-pages,
	// --device-bytes) or no L2 (--l2-slots, --l2-bytes): Size sizes L1 from the model and the GPU
	// (ServingOptions.DeviceBudget) and L2 HiCacheRatio times it, as the deployment would have
	// them, instead of the flags' defaults; SizedBy (set by Size) says how, for the summary.
	L1FromGPU, L2FromL1 bool
	SizedBy             string
	// SyncCopies drains every step: each step commits everything it backed up, so hit counts no
	// longer depend on how fast the copy worker ran, and two runs of one configuration count the
	// same (sweep uses it).
	SyncCopies bool
	// OfflineBound has the run also compute the OFFLINE bound on its hits (hicache/bound: the
	// most L1 + L2 hit tokens any policy could have over its events, at DevicePages + L2Slots
	// pages), and with the serving clock the MODELLED TTFT at the bound's hits (report.OfflineBound).
	// Sweep sets it, once per size; a job of one rank only (the runner refuses more).
	OfflineBound bool
	// L3 is the persistent tier under the L2 (--l3-*); off without a directory.
	L3 L3Options
	// Serving turns the serving clock on (arrivals, a modelled prefill, time to first token); nil:
	// off.
	Serving *ServingOptions

	// Set by Size, for the runner: AccountTokenBytes is the real TokenBytes when CopyTokenBytes
	// copies fewer (0 before Size: TokenBytes); ModelTokenBytes the KV bytes of one token over the
	// CP group that every byte capacity counts (the sizing model's: SizingModel; 0 before Size);
	// and GroupNodes the nodes each CP group spans, each node's slab holding its share of the
	// group's parts (0 before Size: one).
	AccountTokenBytes int
	ModelTokenBytes   int64
	GroupNodes        int
}

// StepRequestsMax is the most requests a step holds: --batch-requests, or the serving clock's
// --step-requests when it forms the steps. The L3's prefetch counts take one word of the step's
// vector each.
func (o *Options) StepRequestsMax() int {
	if o.Serving != nil {
		return o.Serving.Batching.MaxRequests
	}
	return o.BatchRequests
}

// Validate checks the options that need no MPI, so that bad input fails before any shared state
// exists. writesOutputs says this process is world rank 0, the one that writes the job's files
// (known from the launcher's environment before MPI starts), so that only it checks their
// directories: the other ranks' nodes need not have them (a node-local /tmp). The build's own check
// of --collective comes after these (the runner's CheckOptions).
func (o *Options) Validate(writesOutputs bool) error {
	if err := o.checkGeometryCounts(); err != nil {
		return err
	}
	if err := o.checkTrace(); err != nil {
		return err
	}
	if o.TokenBytes%8 != 0 {
		return &errscope.ConfigError{
			Flag:   "token-bytes",
			Reason: fmt.Sprintf("%d must be a multiple of 8", o.TokenBytes),
		}
	}
	if err := o.validateSizing(); err != nil {
		return err
	}
	if err := o.checkIntervals(); err != nil {
		return err
	}
	if err := o.L3.Validate(o.PageTokens); err != nil {
		return err
	}
	if err := o.checkMetrics(); err != nil {
		return err
	}
	if err := o.checkTimeline(writesOutputs); err != nil {
		return err
	}
	if writesOutputs {
		if err := o.checkOutputs(); err != nil {
			return err
		}
	}
	if o.Collective != "mpi" && o.Collective != "nccl" {
		return &errscope.ConfigError{
			Flag:   "collective",
			Reason: fmt.Sprintf("%q is not one of mpi, nccl", o.Collective),
		}
	}
	return nil
}

// checkGeometryCounts checks the counts of the geometry, the batch and the vocabulary (every one 1
// or more, and at most 2 payloads a layer) first of all, since the sizes checked after them are
// products of them.
func (o *Options) checkGeometryCounts() error {
	positive := []struct {
		flag  string
		value int
	}{
		{"layers", o.Layers}, {"payloads", o.PayloadsPerLayer}, {"page-tokens", o.PageTokens},
		{"token-bytes", o.TokenBytes}, {"device-pages", o.DevicePages}, {"l2-slots", o.L2Slots},
		{"batch-requests", o.BatchRequests}, {"vocab-size", o.VocabSize},
	}
	for _, p := range positive {
		if p.value < 1 {
			return &errscope.ConfigError{
				Flag:   p.flag,
				Reason: fmt.Sprintf("%d must be 1 or more", p.value),
			}
		}
	}
	if o.PayloadsPerLayer > 2 {
		return &errscope.ConfigError{
			Flag: "payloads",
			Reason: fmt.Sprintf(
				"%d: use 2 for K and V, or 1 for an MLA latent",
				o.PayloadsPerLayer,
			),
		}
	}
	return nil
}

// checkTrace checks the trace's flags: --trace-block-tokens only with a trace, since only a trace's
// reader uses it, and --trace-limit's count of requests.
func (o *Options) checkTrace() error {
	if o.TracePath != "" &&
		(o.TraceBlockTokens < 1 || o.TraceBlockTokens > workload.BlockTokensMax) {
		return &errscope.ConfigError{
			Flag:   "trace-block-tokens",
			Reason: fmt.Sprintf("%d outside [1, %d]", o.TraceBlockTokens, workload.BlockTokensMax),
		}
	}
	if o.TraceLimit < 0 {
		return &errscope.ConfigError{
			Flag:   "trace-limit",
			Reason: fmt.Sprintf("%d: give 0 (every request) or more requests", o.TraceLimit),
		}
	}
	return nil
}

// checkIntervals checks the flags that take a number of steps or a duration, where 0 turns their
// work off or puts it at the end: --placement-assert-every, --flush-every, --watchdog-timeout.
func (o *Options) checkIntervals() error {
	if o.PlacementAssertEvery < 0 {
		return &errscope.ConfigError{
			Flag: "placement-assert-every",
			Reason: fmt.Sprintf(
				"%d: give 0 (only at the end) or more steps",
				o.PlacementAssertEvery,
			),
		}
	}
	if o.FlushEvery < 0 {
		return &errscope.ConfigError{
			Flag:   "flush-every",
			Reason: fmt.Sprintf("%d: give 0 (off) or more steps", o.FlushEvery),
		}
	}
	if o.WatchdogTimeout < 0 {
		return &errscope.ConfigError{
			Flag: "watchdog-timeout",
			Reason: fmt.Sprintf(
				"%v is negative: give a duration such as 120s, or 0 for no watchdog",
				o.WatchdogTimeout,
			),
		}
	}
	return nil
}

// checkOutputs checks, on world rank 0 alone, which writes the report, that the report's directory
// is there (the others' nodes need not have it: a node-local /tmp), and that no two outputs and no
// output and input name one file.
func (o *Options) checkOutputs() error {
	if err := outfile.Check("report", o.ReportPath); err != nil {
		return err
	}
	outputs := []outfile.File{
		{Flag: "report", Path: o.ReportPath},
		{Flag: "metrics-file", Path: o.MetricsPath},
		{Flag: "timeline", Path: o.TimelinePath},
	}
	return outfile.CheckDistinct(outputs, o.InputFiles())
}

// InputFiles are the files a run or a sweep reads, which no output may name
// (outfile.CheckDistinct).
func (o *Options) InputFiles() []outfile.File {
	in := []outfile.File{{Flag: "trace", Path: o.TracePath}}
	if o.Serving != nil {
		in = append(in, outfile.File{Flag: "prefill-profile", Path: o.Serving.Prefill.ProfilePath})
	}
	return in
}

func (o *Options) checkMetrics() error {
	if o.MetricsInterval < 0 {
		return &errscope.ConfigError{
			Flag: "metrics-interval",
			Reason: fmt.Sprintf(
				"%v is negative: give a duration such as 30s, or 0 for only at the end",
				o.MetricsInterval,
			),
		}
	}
	if o.MetricsInterval > 0 && o.MetricsPath == "" {
		return &errscope.ConfigError{Flag: "metrics-interval", Reason: "needs --metrics-file"}
	}
	return outfile.Check("metrics-file", o.MetricsPath)
}

// checkTimeline checks --timeline's file (on world rank 0, which writes it) and its window.
func (o *Options) checkTimeline(writesOutputs bool) error {
	if o.TimelinePath == "" {
		return nil
	}
	if o.TimelineWindow.Steps < 0 {
		return &errscope.ConfigError{
			Flag: "timeline-steps",
			Reason: fmt.Sprintf(
				"%d is negative: give a number of steps, or 0 for every step (up to the cap of %d spans a rank)",
				o.TimelineWindow.Steps,
				timeline.MaxSpansPerRank,
			),
		}
	}
	if o.TimelineWindow.Every < 1 {
		return &errscope.ConfigError{
			Flag:   "timeline-every",
			Reason: fmt.Sprintf("%d: give 1 (every step) or more", o.TimelineWindow.Every),
		}
	}
	if writesOutputs {
		return outfile.Check("timeline", o.TimelinePath)
	}
	return nil
}

// validateSizing checks --model, --copy-token-bytes and the byte capacities before the job starts.
func (o *Options) validateSizing() error {
	if o.Model != "" {
		if _, err := sizing.LookupModel(o.Model); err != nil {
			return err
		}
	}
	if o.CopyTokenBytes < 0 || o.CopyTokenBytes%8 != 0 {
		return &errscope.ConfigError{
			Flag: "copy-token-bytes",
			Reason: fmt.Sprintf(
				"%d must be 0 (copy the real size) or a positive multiple of 8",
				o.CopyTokenBytes,
			),
		}
	}
	for _, size := range []struct {
		flag  string
		bytes int64
	}{{"l2-bytes", o.L2Bytes}, {"device-bytes", o.DeviceBytes}} {
		if size.bytes < 0 {
			return &errscope.ConfigError{
				Flag: size.flag,
				Reason: fmt.Sprintf(
					"%d: give a positive size, or 0 for the size in pages",
					size.bytes,
				),
			}
		}
	}
	return nil
}

// Geometry is the CP group's, over the nodes Size was told (GroupNodes; 0 before Size means one).
func (o *Options) Geometry(cp int) pool.Geometry {
	nodes := 0
	if o.GroupNodes > 1 {
		nodes = o.GroupNodes
	}
	return pool.Geometry{
		CPSize: cp, Nodes: nodes, Layers: o.Layers, PayloadsPerLayer: o.PayloadsPerLayer, PageTokens: o.PageTokens,
		TokenBytes: o.TokenBytes, Slots: o.L2Slots, SlabBytesMax: o.SlabBytesMax, Layout: o.Layout,
		Policy: o.L2Policy,
	}
}
