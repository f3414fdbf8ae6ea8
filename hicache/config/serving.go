package config

import (
	"fmt"
	"math"

	"github.com/cphicache/cphicache/hicache/prefill"
	"github.com/cphicache/cphicache/hicache/serving"
	"github.com/cphicache/cphicache/hicache/sizing"
	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/cphicache/cphicache/internal/errscope"
)

// ServingOptions turn the serving clock on; nil in Options replays as fast as the machine allows,
// as before.
type ServingOptions struct {
	// Prefill chooses the modelled prefill (the roofline of --prefill-model, else --model, on
	// --gpu, or --prefill-profile); Size builds it for the CP size, whose GPUs share each step.
	// Prefill.GPU also gives the host link's rate, and Prefill.Model the KV bytes a token loads.
	Prefill prefill.Options
	// HostLinkBytesPerSecond is one GPU's host link each way from --host-link-rate, HostLinkRate
	// the flag as given; "" (and 0) for the --gpu row's datasheet rate. It times the L2's
	// load-backs and the break-even lines alike.
	HostLinkBytesPerSecond float64
	HostLinkRate           string
	// L3ReadBytesPerSecond is one node's L3 read rate (--l3-read-rate).
	L3ReadBytesPerSecond float64
	Batching             serving.Batching
	// TimeScale is the trace seconds that pass in one wall second: 60 replays an hour of trace in a
	// minute, its arrivals and its modelled compute alike. The figures are reported in trace time.
	TimeScale float64
	// RequestRate, when above 0, replaces the workload's arrival times with Poisson arrivals at
	// this many requests per trace second, seeded by --seed (the synthetic workload and token
	// traces have none).
	RequestRate float64
	// Clients, when above 0, are closed-loop clients instead of arrival times (--clients): each
	// sends its next request when its last got its first token and ThinkSeconds (--think-time) have
	// passed (serving.Clients).
	Clients      int
	ThinkSeconds float64
	// GroupGPUs, when above 0, is the modelled CP group's GPUs instead of the run's CP size: sweep
	// runs the cache at cp 1 and models the group the user sizes for (--group-gpus).
	GroupGPUs int
	// PerRankCopies models the design the shared L2 replaces (sweep's --l2-design per-rank): each
	// GPU loads a hit's whole KV over its own link (serving.Links.WholeCopies); the sweep gives its
	// run 1/cp of the L1 pages and of the slots, whole copies on each GPU and in each rank's pool.
	PerRankCopies bool
	// TTFTTargetSeconds, above 0, is the TTFT p50 a virtual replay (a sweep's point) finds the DP
	// replicas for (--ttft-target; the runner's servingload.go).
	TTFTTargetSeconds float64
	// Virtual runs the clock without the wall: CP rank 0 forms the steps as the serving clock does
	// (Batching.Take over the arrivals), each step lasting exactly its modelled time, and nothing
	// waits for the trace's pace or the modelled time, so the replay goes as fast as the machine
	// allows. Its hits are those of the clock's steps, and the virtual replay of them at the end is
	// the sweep's modelled TTFT, the same from run to run when the hits are (--sync-copies). Its
	// report has the ideal and no measured figures.
	Virtual bool

	// Built by Size for the CP size: the model (nil when the options name none: a caller that
	// brings its own step costs), what it is (with the host link), the host link, and the links'
	// rates and bytes.
	PrefillModel prefill.Model
	ModelName    string
	HostLink     prefill.HostLink
	Links        serving.Links
}

// Check builds the model once for one GPU, so that a bad --gpu, --model, --prefill-dtype,
// --prefill-efficiency, --prefill-profile or --host-link-rate fails before MPI starts, naming its
// flag.
func (o *ServingOptions) Check() error {
	p := o.Prefill
	p.GroupGPUs = 1
	if _, err := prefill.New(p); err != nil {
		return err
	}
	if _, err := prefill.LookupGPU(o.Prefill.GPU); err != nil {
		return err
	}
	if o.Prefill.DType != "" { // a profile does not use it, but a bad name is still refused
		if _, err := sizing.ParseDType("prefill-dtype", o.Prefill.DType); err != nil {
			return err
		}
	}
	if o.HostLinkRate != "" {
		if err := prefill.CheckHostLinkRate(o.HostLinkBytesPerSecond); err != nil {
			return err
		}
	}
	if err := prefill.CheckL3ReadRate(o.L3ReadBytesPerSecond); err != nil {
		return err
	}
	switch {
	case !(o.TimeScale > 0) || math.IsInf(o.TimeScale, 0):
		return &errscope.ConfigError{
			Flag:   "time-scale",
			Reason: fmt.Sprintf("%v is not a positive factor", o.TimeScale),
		}
	case o.RequestRate < 0 || math.IsInf(o.RequestRate, 0) || math.IsNaN(o.RequestRate):
		return &errscope.ConfigError{
			Flag: "request-rate",
			Reason: fmt.Sprintf(
				"%v requests/s: give a rate above 0, or 0 for the trace's timestamps",
				o.RequestRate,
			),
		}
	case o.Batching.StepTokens < 1:
		return &errscope.ConfigError{
			Flag:   "step-tokens",
			Reason: fmt.Sprintf("%d must be 1 or more", o.Batching.StepTokens),
		}
	case o.Clients < 0:
		return &errscope.ConfigError{
			Flag:   "clients",
			Reason: fmt.Sprintf("%d must be 0 (arrival times) or more", o.Clients),
		}
	case o.Clients > 0 && o.RequestRate > 0:
		return &errscope.ConfigError{
			Flag:   "clients",
			Reason: "closed-loop clients send their own requests: give --clients or --request-rate, not both",
		}
	case o.ThinkSeconds < 0 || math.IsInf(o.ThinkSeconds, 0) || math.IsNaN(o.ThinkSeconds):
		return &errscope.ConfigError{
			Flag:   "think-time",
			Reason: fmt.Sprintf("%v s is not a time of 0 or more", o.ThinkSeconds),
		}
	case o.GroupGPUs < 0:
		return &errscope.ConfigError{
			Flag:   "group-gpus",
			Reason: fmt.Sprintf("%d must be 1 or more", o.GroupGPUs),
		}
	case o.Batching.MaxRequests < 1:
		return &errscope.ConfigError{
			Flag:   "step-requests",
			Reason: fmt.Sprintf("%d must be 1 or more", o.Batching.MaxRequests),
		}
	}
	return nil
}

// CheckArrivals refuses, on CP rank 0, a workload the serving clock cannot time: one with no
// arrival times (a token trace, the synthetic workload) and no --request-rate. A Mooncake trace's
// requests carry theirs.
func (o *ServingOptions) CheckArrivals(events []workload.Event) error {
	if o == nil || o.RequestRate > 0 || o.Clients > 0 {
		return nil
	}
	for i := range events {
		if events[i].Request.Blocks.Compact() {
			return nil
		}
	}
	return &errscope.ConfigError{
		Flag:   "request-rate",
		Reason: "the serving clock needs arrival times and this workload has none (only a Mooncake trace's requests carry them): give a rate in requests per second",
	}
}

// ClosedLoop is the closed-loop clients, none (N 0) without --clients.
func (o *ServingOptions) ClosedLoop() serving.Clients {
	return serving.Clients{N: o.Clients, ThinkNs: serving.Nanoseconds(o.ThinkSeconds)}
}

// sized builds the options for a CP group of cp ranks over the nodes of s: the prefill model over
// its GPUs, the links' rates, and the KV bytes a token moves, the model's whole (every layer,
// payload and rank), not what scaled-down copies copy.
func (o *ServingOptions) sized(s *Options, cp int) (*ServingOptions, error) {
	sized := *o
	// The KV of a token is the sizing model's (the geometry's every rank's share without one),
	// whatever group is modelled.
	kv := s.ModelTokenBytes
	if o.GroupGPUs > 0 {
		cp = o.GroupGPUs
	}
	sized.Prefill.GroupGPUs = cp
	gpu, err := prefill.LookupGPU(o.Prefill.GPU)
	if err != nil {
		return nil, err
	}
	// A command's options always name a model or a profile (Check refuses them otherwise); without
	// either the caller brings its own step costs (a test's), and the runner refuses to start
	// without them.
	if o.Prefill.Model != "" || o.Prefill.ProfilePath != "" {
		if sized.PrefillModel, err = prefill.New(sized.Prefill); err != nil {
			return nil, err
		}
	}
	sized.HostLink = prefill.NewHostLink(gpu, o.HostLinkBytesPerSecond, o.HostLinkRate)
	if sized.PrefillModel != nil {
		sized.ModelName = sized.PrefillModel.Describe() + "; " + sized.HostLink.Describe()
	}
	if m, err := sizing.LookupModel(o.Prefill.Model); err == nil {
		kv = m.TokenBytes()
	}
	sized.Links = serving.Links{
		HostBytesPerSecond: sized.HostLink.BytesPerSecond,
		L3BytesPerSecond:   o.L3ReadBytesPerSecond,
		KVBytesPerToken:    kv,
		GPUs:               cp,
		Nodes:              s.GroupNodes,
		WholeCopies:        o.PerRankCopies,
	}
	return &sized, nil
}

// ResolvedFlags are --prefill-dtype and --host-link-rate as the job runs them, for the provenance:
// the roofline's precision (the model's served one when the flag is not given; left out for a
// profile, which has none), and the host link's rate each way with its origin.
func (o *ServingOptions) ResolvedFlags() map[string]string {
	flags := map[string]string{}
	if m, err := sizing.LookupModel(o.Prefill.Model); err == nil && o.Prefill.ProfilePath == "" {
		if d, err := prefill.DTypeFor(m, o.Prefill.DType); err == nil {
			flags["prefill-dtype"] = d.String()
		}
	}
	if g, err := prefill.LookupGPU(o.Prefill.GPU); err == nil {
		flags["host-link-rate"] = o.HostLinkRate + " (the user's)"
		if o.HostLinkRate == "" {
			flags["host-link-rate"] = fmt.Sprintf(
				"%gGB/s (%s's datasheet, %s)", g.HostBytesPerSecond/1e9, g.Name, g.HostLink,
			)
		}
	}
	return flags
}

// BreakEven is the summary's lines on where each tier pays (prefill.SummaryLines), for prefixes of
// a few lengths; none without a model.
func (o *ServingOptions) BreakEven() []string {
	if o.PrefillModel == nil {
		return nil
	}
	l := o.Links
	return prefill.SummaryLines(
		o.PrefillModel,
		l.KVBytesPerToken,
		[]int64{4096, 32768},
		prefill.TierRates{
			L2HostBytesPerSecond: l.HostBytesPerSecond * float64(l.GPUs),
			L3ReadBytesPerSecond: l.L3BytesPerSecond * float64(l.Nodes),
			HostLink:             o.HostLink.Describe(),
		},
	)
}
