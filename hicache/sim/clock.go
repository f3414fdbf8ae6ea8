package sim

import (
	"fmt"
	"strings"

	"github.com/cphicache/cphicache/hicache/prefill"
	"github.com/cphicache/cphicache/hicache/serving"
	"github.com/cphicache/cphicache/hicache/sizing"
	"github.com/cphicache/cphicache/hicache/workload"
)

// Serving-clock jobs (ModeServing; SIMSERVING.md): CP rank 0
// of each group forms every step from its queue on a modelled clock (serving.Batching.Take, as the
// runner's servingClock.form does), the step travels to every rank with its earliest start, and
// each rank keeps a clock of its own from the hits its core served (serving.PlanStep, as the
// runner's Served and stepEnded do, clockrank.go). The machinery's cost on that clock is the
// simulated scheduler's: a step lasts its modelled time, or its scheduler ticks times TickNs when
// that is longer, and a load-back that finished at a later tick than the model's holds back the
// prefill. At the end CP rank 0's record is replayed on serving.VirtualReplay, the ideal, and
// checked against the run (clockcheck.go). Every choice of such a job comes from a stream of its
// own (Draw's choices are what they were), and only ModeServing draws them, so no job of the other
// modes changes.

// ArrivalKind is how a serving-clock job's requests arrive.
type ArrivalKind int

const (
	ArrivePoisson ArrivalKind = iota // a Poisson stream at a rate (--request-rate)
	// trace-like timestamps: bursts at one instant, lulls, and lines earlier than the line before,
	// which queue behind it (a Mooncake trace's, --trace)
	ArriveTrace
	ArriveClients // closed-loop clients (--clients, --think-time; serving.ClosedLoop)
	arrivalKinds
)

var arrivalNames = [arrivalKinds]string{"poisson", "trace", "clients"}

func (a ArrivalKind) String() string { return arrivalNames[a] }

// ClockConfig is a serving-clock job's clock: how its requests arrive, the prefill model that
// prices its steps, the rates its loads move at, and what the machinery costs. Times given as a
// Load are in units of one mean request's modelled prefill alone (clockModel.unitNs), so that
// every model and scale sees queues and idle groups alike.
type ClockConfig struct {
	Arrivals ArrivalKind
	// Load is the mean gap between arrivals (Poisson, trace), or the clients' think time, in
	// units: 0.2 queues five requests for every one computed; 5 leaves the group mostly idle.
	Load    float64
	Clients int // closed-loop clients (ArriveClients)
	// The roofline of Model on GPU in DType ("" its served precision) at Efficiency over the
	// group's GPUs (its CP ranks); Model "" for a profile (ProfileUs).
	Model, GPU, DType string
	Efficiency        float64
	// ProfileUs is a drawn profile's microseconds a step, a new token and a cached token, and a
	// convex term in new tokens: rows of base + new*perNew + new^2*convex/1e6 + cached*perCached,
	// perCached below perNew, so that every new token costs more than a cached one (clockmodel.go).
	ProfileUs [4]float64
	// TokenScale is the model tokens one simulated token stands for: the simulator's prompts of a
	// few to a hundred tokens are then up to about 100K tokens long, in steps of every shape.
	TokenScale int64
	// HostBytesPerSecond is one GPU's host link, L3BytesPerSecond one node's L3 read rate;
	// KVBytesPerToken the profile's KV of a token (a roofline's is its model's).
	HostBytesPerSecond, L3BytesPerSecond float64
	KVBytesPerToken                      int64
	// StepTokens is the step budget and chunked prefill's (--step-tokens), in simulated tokens;
	// MaxRequests the step's request cap.
	StepTokens  int64
	MaxRequests int
	// TickLoad is what a scheduler tick of the machinery costs, in units (TickNs, clockModel):
	// 0 is a machinery that costs nothing, whose run must equal the ideal.
	TickLoad float64
}

// drawClock makes j a serving-clock job, from a stream of its own.
func drawClock(r *rng, j *JobConfig) {
	c := &ClockConfig{
		Arrivals:    ArrivalKind(r.intn(int(arrivalKinds))),
		Load:        pick(r, 0.1, 0.5, 1, 2, 8),
		Clients:     r.between(1, 6),
		TokenScale:  pick[int64](r, 1, 16, 256, 1024),
		StepTokens:  int64(j.Geometry.PageTokens * r.between(2, 40)),
		MaxRequests: r.between(1, 8),
		TickLoad:    pick(r, 0, 0, 0.001, 0.01, 0.1, 0.5),
		HostBytesPerSecond: pick(
			r,
			1e9,
			16e9,
			64e9,
		),
		L3BytesPerSecond: pick(r, 1e8, 2e9, 40e9),
		KVBytesPerToken:  pick[int64](r, 16<<10, 128<<10, 1<<20),
	}
	if r.chance(700) {
		models, gpus := sizing.ModelNames(), prefill.GPUNames()
		c.Model, c.GPU = models[r.intn(len(models))], gpus[r.intn(len(gpus))]
		c.DType = pick(r, "", "", "bf16", "fp8", "fp4")
		c.Efficiency = pick(r, 0.3, 0.5, 1)
		if _, err := c.prefillModel(j.CP); err != nil {
			c.DType = "" // a precision the GPU has no rate for: the model's served one
		}
	} else {
		perNew := pick(r, 0.5, 5, 50)
		c.ProfileUs = [4]float64{
			pick(r, 0.0, 100, 5000),
			perNew,
			pick(r, 0.0, 0.001, 0.01),
			perNew * pick(r, 0, 0.1, 0.5),
		}
	}
	j.Clock = c
	// the core's batch cap and the L3's follow the step's request cap; the clock forms the steps
	j.StepTokens, j.Batch, j.L3.BatchRequests = 0, c.MaxRequests, c.MaxRequests
}

// prefillModel is the clock's prefill model over a group of cp GPUs: the roofline, or the drawn
// profile read by prefill.ParseProfile as a user's file is.
func (c *ClockConfig) prefillModel(cp int) (prefill.Model, error) {
	if c.Model != "" {
		return prefill.New(prefill.Options{
			Model:      c.Model,
			GPU:        c.GPU,
			GroupGPUs:  cp,
			DType:      c.DType,
			Efficiency: c.Efficiency,
		})
	}
	var rows strings.Builder
	us := c.ProfileUs
	base, perNew, convex, perCached := us[0], us[1], us[2], us[3]
	for _, cached := range []float64{0, 65536} {
		for _, n := range []float64{1, 64, 1024, 16384} {
			t := base + n*perNew + n*n*convex/1e6 + cached*perCached
			fmt.Fprintf(&rows, "%g %g %g\n", n, cached, t/1e3)
		}
	}
	return prefill.ParseProfile("drawn", strings.NewReader(rows.String()))
}

func (c *ClockConfig) String() string {
	model := fmt.Sprintf("profile %v us", c.ProfileUs)
	if c.Model != "" {
		model = fmt.Sprintf(
			"roofline %s on %s %q efficiency %g",
			c.Model,
			c.GPU,
			c.DType,
			c.Efficiency,
		)
	}
	arrivals := fmt.Sprintf("%s, gap %g units", c.Arrivals, c.Load)
	if c.Arrivals == ArriveClients {
		arrivals = fmt.Sprintf("%d clients, think %g units", c.Clients, c.Load)
	}
	return fmt.Sprintf(
		"serving clock: %s; %s; x%d tokens, steps of %d tokens and %d requests; host %g B/s, L3 %g B/s; a tick %g units",
		arrivals,
		model,
		c.TokenScale,
		c.StepTokens,
		c.MaxRequests,
		c.HostBytesPerSecond,
		c.L3BytesPerSecond,
		c.TickLoad,
	)
}

// clockModel is what a serving-clock job's ranks price their steps with, built once a job.
type clockModel struct {
	cfg      *ClockConfig
	prefill  serving.Prefill
	links    serving.Links
	batching serving.Batching
	clients  serving.Clients
	// unitNs is one mean request's modelled prefill alone; gapNs the mean gap between arrivals,
	// tickNs what a scheduler tick of the machinery costs
	unitNs, gapNs, tickNs int64
	// strict: the model charges every new token more than a cached one, in every batch (the drawn
	// profiles): a longer cached prefix must then be charged strictly less
	strict bool
}

// modelAdapter prices a step's batch with a prefill.Model, as the runner's prefillModel does.
type modelAdapter struct{ m prefill.Model }

func (a modelAdapter) BatchSeconds(batch []serving.Tokens) float64 {
	reqs := make([]prefill.Request, len(batch))
	for i, t := range batch {
		reqs[i] = prefill.Request{NewTokens: t.New, CachedTokens: t.Cached}
	}
	return a.m.BatchSeconds(reqs)
}

// newClockModel builds the job's clock model; events are group 0's, whose mean prompt sets the
// unit.
func newClockModel(j *JobConfig, events []workload.Event) (*clockModel, error) {
	c := j.Clock
	pm, err := c.prefillModel(j.CP)
	if err != nil {
		return nil, err
	}
	m := &clockModel{
		cfg:     c,
		prefill: modelAdapter{pm},
		links: serving.Links{
			HostBytesPerSecond: c.HostBytesPerSecond,
			L3BytesPerSecond:   c.L3BytesPerSecond,
			KVBytesPerToken:    c.KVBytesPerToken,
			GPUs:               j.CP,
			Nodes:              max(1, j.Geometry.Nodes),
		},
		batching: serving.Batching{
			StepTokens:  c.StepTokens * c.TokenScale,
			MaxRequests: c.MaxRequests,
		},
		strict: c.Model == "",
	}
	if r, ok := pm.(*prefill.Roofline); ok {
		m.links.KVBytesPerToken = r.Model.TokenBytes()
	}
	var prompts, n int64
	for i := range events {
		if !events[i].Flush {
			prompts, n = prompts+events[i].Request.PromptTokens(), n+1
		}
	}
	mean := max(1, prompts/max(1, n)) * c.TokenScale
	m.unitNs = max(1, serving.Nanoseconds(m.prefill.BatchSeconds([]serving.Tokens{{New: mean}})))
	m.gapNs = max(1, int64(c.Load*float64(m.unitNs)))
	m.tickNs = int64(c.TickLoad * float64(m.unitNs))
	if c.Arrivals == ArriveClients {
		m.clients = serving.Clients{N: c.Clients, ThinkNs: m.gapNs}
	}
	return m, nil
}

// arrivals are a group's arrival times (none with clients, whose loop sends them): a Poisson
// stream, or trace-like timestamps whose times may go back (the queue keeps them in order: a
// request queues behind the line before it, as the runner's arrive does).
func (m *clockModel) arrivals(r *rng, n int) []int64 {
	switch m.cfg.Arrivals {
	case ArrivePoisson:
		return serving.PoissonArrivalsNs(n, 1e9/float64(m.gapNs), r.next())
	case ArriveTrace:
		out := make([]int64, n)
		var at int64
		for i := range out {
			switch r.intn(10) {
			case 0, 1, 2: // a burst: the same instant
			case 3, 4: // a line earlier than the one before it
				at -= int64(r.intn(int(m.gapNs)))
			case 5:
				at += 10 * m.gapNs // a lull
			default:
				at += int64(r.intn(2 * int(m.gapNs)))
			}
			out[i] = max(0, at)
		}
		return out
	}
	return nil
}

// startClock builds a serving-clock job's model (once, over group 0's events) and draws group
// gi's arrivals, from a stream of their own; nothing in the other jobs.
func (j *job) startClock(gi int, events []workload.Event) ([]int64, error) {
	if j.cfg.Clock == nil {
		return nil, nil
	}
	if j.clock == nil {
		m, err := newClockModel(&j.cfg, events)
		if err != nil {
			return nil, err
		}
		j.clock = m
	}
	return j.clock.arrivals(newRNG(j.cfg.Seed^uint64(gi+1)*0x636c6f63), len(events)), nil
}
