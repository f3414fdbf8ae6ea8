// Package timeline owns `run --timeline`: each rank records where its time goes, as spans on a
// clock the job's ranks share, into a bounded buffer of its own; the buffers travel to world rank 0
// (Encode, Decode), which writes them as one Chrome trace (WriteChrome), the JSON Object Format
// that Perfetto and chrome://tracing open.
//
// The recorder is the step goroutine's, so its buffer takes no lock; the copy worker and the L3
// goroutines read its clock (Now reads nothing that changes) and hand their finished spans to an
// inbox under one mutex, which the step goroutine empties into the buffer at each step's end. A
// rank without --timeline holds a nil *Recorder, whose On is false, so the runner's hooks cost one
// nil check.
//
// It imports nothing of this module and no MPI: the runner gathers the encoded buffers over the
// world communicator and hands them here.
package timeline

import (
	"fmt"
	"sync"
	"time"
)

// Kind is what a span is: where it is drawn (the rank's step track, or one of its asynchronous
// tracks) and how it is named.
type Kind uint8

const (
	KindNone Kind = iota // the zero Span: nothing recorded
	// a step: from the end of the one before (or the start) to its own end
	KindStep
	// the wait for the step's events, CP rank 0's broadcast (Env.NextStep)
	KindBroadcast
	// a collective of the CP group (Env.Collective), named by its consensus kind
	KindConsensus
	// a local wait for this rank's own work (Env.Wait, a full queue), named by its reason
	KindWait
	KindFill   // computed KV written into device pages (Env.Fill)
	KindVerify // a finished load-back checked byte for byte (Env.VerifyLoad)
	KindAudit  // a committed object checked in the shared slab (Env.Audit)
	// the end of the run after the last step: the final consensus and drains
	KindFinish
	// asynchronous: a copy from its Start to its completion, its run on the copy worker
	KindCopy
	// asynchronous: an L3 existence check (cache.ExistenceCheck) from its Start to answered
	KindExists
	KindL3Read  // asynchronous: an L3 block read from its Start to landed in the slab
	KindL3Write // asynchronous: an L3 block write from its Start to published
	kinds
)

var kindNames = [kinds]string{
	"none",
	"step",
	"broadcast",
	"consensus",
	"wait",
	"fill",
	"verify_load",
	"audit",
	"finish",
	"copy",
	"l3_exists",
	"l3_read",
	"l3_write",
}

func (k Kind) String() string {
	if k >= kinds {
		return fmt.Sprintf("kind %d", int(k))
	}
	return kindNames[k]
}

// Async says the kind's spans overlap each other (work in flight on another goroutine), so they are
// drawn on tracks of their own beside the rank's step track.
func (k Kind) Async() bool { return k >= KindCopy && k < kinds }

// Span is one recorded interval, in nanoseconds since the job's common origin. An asynchronous span
// also has its run: when its worker began it and how long the work itself took (the rest of the
// span is its time queued, and for a read its wait to be landed). Count is the kind's measure: a
// step's requests, pages of a fill, verify, audit or copy, bytes of an L3 read or write, keys of an
// existence check.
type Span struct {
	Kind Kind
	// an index into the rank's names (Recorder.Name): the consensus kind, the wait's reason
	Name       uint16
	Step       int64 // the step it began in
	StartNs    int64
	DurNs      int64
	RunStartNs int64
	RunDurNs   int64
	Count      int64
}

// Window says which steps are recorded: every Every-th step from step 1, at most Steps of them (0:
// every such step, up to the span cap), and then whatever runs after the workload's last step (the
// steps of requests that still waited for a prefetch, and the end of the run).
type Window struct {
	Steps int64
	Every int64
}

// MaxSpansPerRank caps one rank's buffer, whatever the window: a span takes about 50 bytes in
// memory and 150 to 300 in the file (an asynchronous one is two events), so 50,000 spans are at
// most about 15 MB of JSON per rank, about 120 MB for a job of 8 ranks, which Perfetto still opens.
// Spans past the cap are counted, not kept.
const MaxSpansPerRank = 50_000

// Recorder is one rank's timeline. Its methods but Now are the step goroutine's alone.
type Recorder struct {
	origin   time.Time
	window   Window
	maxSpans int

	step        int64 // the step in progress: the last one done, plus 1
	stepStartNs int64
	recording   bool // the step in progress is recorded
	// the step the workload had no events for (0: not yet): it and every later one are recorded
	streamEndAt int64
	// The events of the step in progress, and of the next when they are known (the core reads the
	// stream a step ahead).
	requests, nextRequests int64
	flush, nextFlush       bool
	nextKnown              bool

	stepsKept           int64
	firstStep, lastStep int64
	spans               []Span
	dropped             int64
	names               []string
	nameIndex           map[string]uint16

	inboxMu sync.Mutex
	inbox   []Span // the workers' finished spans, not yet in spans
}

// NewRecorder starts a rank's timeline at origin, the instant every rank agreed on (the runner
// takes it as it leaves a barrier of the world), with at most maxSpans spans (0: MaxSpansPerRank).
func NewRecorder(origin time.Time, w Window, maxSpans int) *Recorder {
	if maxSpans <= 0 {
		maxSpans = MaxSpansPerRank
	}
	w.Every = max(w.Every, 1)
	r := &Recorder{
		origin:    origin,
		window:    w,
		maxSpans:  maxSpans,
		nameIndex: map[string]uint16{},
		names:     []string{""},
	}
	r.beginStep(1, 0)
	return r
}

// Now is the time since the common origin, in nanoseconds. It reads only the origin, which never
// changes, so the copy worker and the L3 goroutines call it too.
func (r *Recorder) Now() int64 { return int64(time.Since(r.origin)) }

// On says the step in progress is recorded: the runner's hooks take their times only then. A nil
// Recorder (no --timeline) is never on.
func (r *Recorder) On() bool { return r != nil && r.recording }

// Step is the step in progress.
func (r *Recorder) Step() int64 { return r.step }

// Name interns a span's name (a consensus kind, a wait's reason): spans carry its index.
func (r *Recorder) Name(s string) uint16 {
	if i, ok := r.nameIndex[s]; ok {
		return i
	}
	if len(r.names) > 0xffff {
		return 0
	}
	i := uint16(len(r.names))
	r.names = append(r.names, s)
	r.nameIndex[s] = i
	return i
}

// End records a span of the step track from startNs to now.
func (r *Recorder) End(k Kind, name uint16, startNs, count int64) {
	r.Add(
		Span{
			Kind:    k,
			Name:    name,
			Step:    r.step,
			StartNs: startNs,
			DurNs:   r.Now() - startNs,
			Count:   count,
		},
	)
}

// Add keeps s, or counts it dropped once the buffer holds its cap. The caller decided it is in the
// window (On when it began: an asynchronous span is added when it completes, maybe in a later
// step).
func (r *Recorder) Add(s Span) {
	if len(r.spans) >= r.maxSpans {
		r.dropped++
		return
	}
	if r.spans == nil {
		r.spans = make([]Span, 0, min(r.maxSpans, 4096))
	}
	r.spans = append(r.spans, s)
}

// AddFromWorker is Add for another goroutine (the copy worker, the L3 I/O): the span waits in the
// inbox until the step goroutine's next step end. The runner decided it is in the window when the
// work was started.
func (r *Recorder) AddFromWorker(s Span) {
	r.inboxMu.Lock()
	r.inbox = append(r.inbox, s)
	r.inboxMu.Unlock()
}

// takeInbox moves the workers' spans into the buffer (the cap applies to them there).
func (r *Recorder) takeInbox() {
	r.inboxMu.Lock()
	in := r.inbox
	r.inbox = nil
	r.inboxMu.Unlock()
	for _, s := range in {
		r.Add(s)
	}
}

// StepEvents tells the recorder what step serves, the step in progress or the next: its requests,
// or a flush (its span is then named "flush").
func (r *Recorder) StepEvents(step int64, requests int, flush bool) {
	switch step {
	case r.step:
		r.requests, r.flush = int64(requests), flush
	case r.step + 1:
		r.nextRequests, r.nextFlush, r.nextKnown = int64(requests), flush, true
	}
}

// StreamEnded is told that the workload has no events for step: it and every later step (those of
// requests that still wait for a prefetch) and the run's end are recorded, whatever the window.
func (r *Recorder) StreamEnded(step int64) {
	r.streamEndAt = step
	if step <= r.step {
		r.recording = true
	}
}

// StepDone records the step span of step (the step in progress) and begins the next.
func (r *Recorder) StepDone(step int64) {
	r.takeInbox()
	now := r.Now()
	if r.recording {
		var name uint16
		if r.flush {
			name = r.Name("flush")
		}
		r.Add(
			Span{
				Kind:    KindStep,
				Name:    name,
				Step:    step,
				StartNs: r.stepStartNs,
				DurNs:   now - r.stepStartNs,
				Count:   r.requests,
			},
		)
		r.stepsKept++
		r.firstStep = cmpOr(r.firstStep, step)
		r.lastStep = step
	}
	r.beginStep(step+1, now)
}

// Finish records the end of the run, from the last step's end to now, and takes what the workers
// finished; the runner calls it once their work is over.
func (r *Recorder) Finish() {
	r.takeInbox()
	r.Add(
		Span{
			Kind:    KindFinish,
			Step:    r.step,
			StartNs: r.stepStartNs,
			DurNs:   r.Now() - r.stepStartNs,
		},
	)
}

func (r *Recorder) beginStep(step, nowNs int64) {
	r.step, r.stepStartNs, r.requests, r.flush = step, nowNs, 0, false
	if r.nextKnown {
		r.requests, r.flush, r.nextKnown = r.nextRequests, r.nextFlush, false
	}
	w := r.window
	inWindow := (step-1)%w.Every == 0 && (w.Steps == 0 || r.stepsKept < w.Steps)
	r.recording = (r.streamEndAt > 0 && step >= r.streamEndAt) || inWindow
}

func cmpOr(a, b int64) int64 {
	if a != 0 {
		return a
	}
	return b
}
