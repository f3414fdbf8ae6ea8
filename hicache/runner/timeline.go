package runner

import (
	"fmt"
	"io"
	"time"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/outfile"
	"github.com/cphicache/cphicache/hicache/timeline"
	"github.com/cphicache/cphicache/hicache/workload"
)

// run --timeline on one rank: the recorder (package timeline) started on the job's common origin;
// the Env the core is given with it (timedEnv), which times the step goroutine's calls; the hooks
// of the asynchronous work (each one nil check when --timeline is off); and the gather of every
// rank's record to world rank 0, which writes the file.

// timelineClock says, in the file, how the ranks' times were put on one origin.
const timelineClock = "each rank's monotonic clock, zero at the instant it left a barrier of the world communicator " +
	"just before the replay: the ranks' times agree to within that barrier's exit skew (microseconds on one node, up to a " +
	"scheduler time slice when the ranks oversubscribe its cores; across nodes, the barrier's latency)"

// timelineNames are the names the hooks give their spans, interned once.
type timelineNames struct {
	consensus        [cache.ConsensusKinds]uint16
	backup, loadBack uint16
}

// startTimeline starts this rank's recorder when --timeline is given. Every rank has the same
// options, so every rank or none enters the barrier.
func (rs *runState) startTimeline() error {
	if rs.opts.TimelinePath == "" {
		return nil
	}
	if err := rs.job.Topo.World.Barrier(); err != nil {
		return err
	}
	rs.tl = timeline.NewRecorder(time.Now(), rs.opts.TimelineWindow, 0)
	for k := range rs.tlNames.consensus {
		rs.tlNames.consensus[k] = rs.tl.Name(cache.ConsensusKind(k).String())
	}
	rs.tlNames.backup, rs.tlNames.loadBack = rs.tl.Name("backup"), rs.tl.Name("load-back")
	return nil
}

// timedEnv is the runner as the core's Env with every call that waits or works on the step
// goroutine recorded as a span of its step track (the recorder exists once the replay starts; until
// then the calls go through). Start is the runner's own: its L3 jobs and copies time themselves
// (timedJob, timeCopy), as does a wait for a full queue (enqueue).
type timedEnv struct{ *runState }

var _ cache.Env = timedEnv{}

// NextStep records its wait for the broadcast, and tells the recorder step's events (the core asks
// for them a step ahead), or the end of the stream, after which it records every step.
func (e timedEnv) NextStep(step int64) ([]workload.Event, error) {
	tl := e.tl
	if tl == nil {
		return e.runState.NextStep(step)
	}
	startNs := tl.Now()
	batch, err := e.runState.NextStep(step)
	if tl.On() {
		tl.End(timeline.KindBroadcast, 0, startNs, 0)
	}
	if batch == nil && err == nil {
		tl.StreamEnded(step)
	}
	requests, flush := 0, false
	for _, e := range batch {
		if e.Flush {
			flush = true
		} else {
			requests++
		}
	}
	tl.StepEvents(step, requests, flush)
	return batch, err
}

func (e timedEnv) Collective(c *cache.Collective) error {
	e.paceConsensus(c) // its own span: the consensus's starts after it
	if e.tl.On() {
		defer e.tl.End(timeline.KindConsensus, e.tlNames.consensus[c.Kind], e.tl.Now(), 0)
	}
	return e.runState.Collective(c)
}

// Wait records a wait that was not over when asked (one that is over at once is no span).
func (e timedEnv) Wait(r cache.WaitReason, done func() bool) error {
	if e.tl.On() && !done() {
		defer e.tl.End(timeline.KindWait, e.tl.Name(r.Name), e.tl.Now(), 0)
	}
	return e.runState.Wait(r, done)
}

func (e timedEnv) StepDone(step int64) {
	e.runState.StepDone(step)
	if e.tl != nil {
		e.tl.StepDone(step)
	}
}

func (e timedEnv) Fill(f *cache.Fill) error {
	if e.tl.On() {
		defer e.tl.End(timeline.KindFill, 0, e.tl.Now(), int64(len(f.DevicePages)))
	}
	return e.runState.Fill(f)
}

func (e timedEnv) VerifyLoad(v *cache.Verify) (checked, mismatches int64, err error) {
	if e.tl.On() {
		defer e.tl.End(timeline.KindVerify, 0, e.tl.Now(), int64(len(v.DevicePages)))
	}
	return e.runState.VerifyLoad(v)
}

func (e timedEnv) Audit(a *cache.Audit) bool {
	if e.tl.On() {
		defer e.tl.End(timeline.KindAudit, 0, e.tl.Now(), int64(len(a.Slots)))
	}
	return e.runState.Audit(a)
}

// timedJob wraps an L3 I/O job started now (count: its bytes, or an existence check's keys): when
// the step is recorded, the job, on its goroutine, records its span from now to its end, and its
// run. Off, it is the job itself.
func (rs *runState) timedJob(k timeline.Kind, count int64, job func()) func() {
	if !rs.tl.On() {
		return job
	}
	tl := rs.tl
	s := timeline.Span{Kind: k, Step: tl.Step(), StartNs: tl.Now(), Count: count}
	return func() {
		s.RunStartNs = tl.Now()
		job()
		endNs := tl.Now()
		s.RunDurNs, s.DurNs = endNs-s.RunStartNs, endNs-s.StartNs
		tl.AddFromWorker(s)
	}
}

// pageBytesAllRanks is one page of a block in the L3: every rank's, layer's and payload's part.
func (rs *runState) pageBytesAllRanks() int64 {
	g := rs.geometry
	return rs.partBytes * int64(g.Layers*g.PayloadsPerLayer*g.CPSize)
}

// copyTiming is a copy's span on its way through the copy worker; nil when the copy is not
// recorded.
type copyTiming struct {
	tl   *timeline.Recorder
	span timeline.Span
}

func (rs *runState) timeCopy(w *cache.Copy) *copyTiming {
	if !rs.tl.On() {
		return nil
	}
	name := rs.tlNames.loadBack
	if w.Gather {
		name = rs.tlNames.backup
	}
	return &copyTiming{
		tl: rs.tl,
		span: timeline.Span{Kind: timeline.KindCopy, Name: name, Step: rs.tl.Step(),
			StartNs: rs.tl.Now(), Count: int64(len(w.DevicePages))},
	}
}

// began is told, on the copy worker, that the copy's first layer begins.
func (c *copyTiming) began() {
	if c != nil {
		c.span.RunStartNs = c.tl.Now()
	}
}

// done is told, on the copy worker, that the copy's last layer is done.
func (c *copyTiming) done() {
	if c == nil {
		return
	}
	endNs := c.tl.Now()
	c.span.RunDurNs, c.span.DurNs = endNs-c.span.RunStartNs, endNs-c.span.StartNs
	c.tl.AddFromWorker(c.span)
}

// writeTimeline, after the replay (whatever its outcome, which every rank has agreed), gathers
// every rank's record to world rank 0, which writes the file. A record is at most
// timeline.MaxSpansPerRank spans of 51 bytes, so world rank 0 receives at most about 2.5 MB a rank.
func (rs *runState) writeTimeline() error {
	if rs.tl == nil {
		return nil
	}
	t := rs.job.Topo
	rec := rs.tl.Record(t.WorldRank, t.CPGroup, t.CPRank)
	parts, err := t.World.GathervBytes(rec.Encode(), 0)
	if err != nil || t.WorldRank != 0 {
		return err
	}
	records := make([]timeline.RankRecord, len(parts))
	for r, part := range parts {
		if records[r], err = timeline.Decode(part); err != nil {
			return fmt.Errorf("--timeline: world rank %d's record: %w", r, err)
		}
	}
	return outfile.WriteFrom("timeline", rs.opts.TimelinePath, func(w io.Writer) error {
		return timeline.WriteChrome(w, records, timeline.Info{Clock: timelineClock})
	})
}
