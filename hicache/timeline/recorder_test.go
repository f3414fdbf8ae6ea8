package timeline

import (
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"
)

// runSteps drives a recorder as the runner does: the first step's events, then in every step the
// next step's events (the core reads the stream a step ahead), a consensus span when the step is
// on, and its end.
func runSteps(r *Recorder, steps int64) {
	name := r.Name("step")
	r.StepEvents(1, 1, false)
	for step := int64(1); step <= steps; step++ {
		r.StepEvents(step+1, int((step+1)%4), (step+1)%5 == 0)
		if r.On() {
			r.End(KindConsensus, name, r.Now(), 0)
		}
		r.StepDone(step)
	}
}

func stepsOf(spans []Span, k Kind) []int64 {
	var steps []int64
	for _, s := range spans {
		if s.Kind == k {
			steps = append(steps, s.Step)
		}
	}
	return steps
}

// TestWindowKeepsEveryKthStepUpToItsBound: steps 1, 3, 5 of ten with every 2 and at most 3, their
// spans and no other step's; after the workload's last step every step is kept again, and the
// finish.
func TestWindowKeepsEveryKthStepUpToItsBound(t *testing.T) {
	r := NewRecorder(time.Now(), Window{Steps: 3, Every: 2}, 0)
	runSteps(r, 9)
	if got := stepsOf(r.spans, KindStep); !slices.Equal(got, []int64{1, 3, 5}) {
		t.Errorf("steps kept %v, want [1 3 5]", got)
	}
	if got := stepsOf(r.spans, KindConsensus); !slices.Equal(got, []int64{1, 3, 5}) {
		t.Errorf("consensus spans of steps %v, want [1 3 5]", got)
	}
	// Step 10 was the workload's last: the stream had nothing for step 11, which serves the
	// requests still waiting for a prefetch.
	r.StreamEnded(11)
	if r.On() {
		t.Fatal("step 10, outside the window, is recorded once the stream has ended")
	}
	r.StepDone(10)
	if !r.On() {
		t.Fatal("the step after the workload's last is not recorded")
	}
	r.End(KindWait, r.Name("L3 drain"), r.Now(), 0)
	r.StepDone(11)
	if !r.On() {
		t.Error("a step after the workload's end (a deferred request's) is not recorded")
	}
	r.Finish()
	rec := r.Record(3, 1, 0)
	if rec.StepsKept != 4 || rec.FirstStep != 1 || rec.LastStep != 11 || rec.StreamEndStep != 11 {
		t.Errorf(
			"kept %d steps, %d to %d, the workload ended in step %d; want 4, 1 to 11, 11",
			rec.StepsKept,
			rec.FirstStep,
			rec.LastStep,
			rec.StreamEndStep,
		)
	}
	if got := stepsOf(r.spans, KindFinish); !slices.Equal(got, []int64{12}) {
		t.Errorf("finish spans %v, want one, at step 12", got)
	}
}

// TestWindowOfZeroStepsKeepsEveryStep: --timeline-steps 0 bounds nothing but the cap.
func TestWindowOfZeroStepsKeepsEveryStep(t *testing.T) {
	r := NewRecorder(time.Now(), Window{Steps: 0, Every: 1}, 0)
	runSteps(r, 50)
	if got := len(stepsOf(r.spans, KindStep)); got != 50 {
		t.Errorf("%d step spans, want 50", got)
	}
}

// TestCapDropsAndCounts: past its cap a rank keeps nothing more and counts what it dropped.
func TestCapDropsAndCounts(t *testing.T) {
	r := NewRecorder(time.Now(), Window{Every: 1}, 7)
	runSteps(r, 10) // 20 spans
	rec := r.Record(0, 0, 0)
	if len(rec.Spans) != 7 || rec.Dropped != 13 || rec.SpanCap != 7 {
		t.Errorf(
			"kept %d, dropped %d, cap %d; want 7, 13, 7",
			len(rec.Spans),
			rec.Dropped,
			rec.SpanCap,
		)
	}
}

// TestStepSpanHasRequestsAndFlush: a step's span counts its requests, and a flush step is named so.
func TestStepSpanHasRequestsAndFlush(t *testing.T) {
	r := NewRecorder(time.Now(), Window{Every: 1}, 0)
	runSteps(r, 5)
	rec := r.Record(0, 0, 0)
	for _, s := range rec.Spans {
		if s.Kind != KindStep {
			continue
		}
		if s.Count != s.Step%4 || (rec.Names[s.Name] == "flush") != (s.Step == 5) {
			t.Errorf("step %d: %d requests, name %q", s.Step, s.Count, rec.Names[s.Name])
		}
		if s.DurNs < 0 || s.StartNs < 0 {
			t.Errorf("step %d: start %d, duration %d", s.Step, s.StartNs, s.DurNs)
		}
	}
}

func TestNilRecorderIsOff(t *testing.T) {
	var r *Recorder
	if r.On() {
		t.Error("a nil recorder is on")
	}
}

// TestEncodeDecodeRoundTrip: a record comes back whole from its bytes, and a cut or damaged one is
// refused.
func TestEncodeDecodeRoundTrip(t *testing.T) {
	r := NewRecorder(time.Now(), Window{Steps: 9, Every: 1}, 0)
	runSteps(r, 4)
	r.Add(
		Span{
			Kind:       KindL3Read,
			Step:       2,
			StartNs:    10,
			DurNs:      90,
			RunStartNs: 30,
			RunDurNs:   40,
			Count:      32768,
		},
	)
	r.StreamEnded(5)
	r.StepDone(5)
	want := r.Record(5, 2, 1)
	b := want.Encode()
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded\n%+v\nwant\n%+v", got, want)
	}
	if _, err := Decode(b[:len(b)-1]); !errors.Is(err, errShort) {
		t.Errorf("a record one byte short: %v", err)
	}
	if _, err := Decode(append(b, 0)); err == nil {
		t.Error("a record with a byte after its spans was accepted")
	}
	bad := slices.Clone(b)
	bad[len(bad)-spanBytes] = byte(kinds)
	if _, err := Decode(bad); err == nil {
		t.Error("a span of an unknown kind was accepted")
	}
}

// TestWorkersSpansArriveAtTheStepEnd: spans the workers add from their goroutines (under -race:
// without a data race) are in the buffer after the step goroutine's next step end, under the cap
// like the others.
func TestWorkersSpansArriveAtTheStepEnd(t *testing.T) {
	r := NewRecorder(time.Now(), Window{Every: 1}, 5)
	var done sync.WaitGroup
	for i := range 8 {
		done.Add(1)
		go func() {
			defer done.Done()
			start := r.Now()
			r.AddFromWorker(
				Span{
					Kind:    KindCopy,
					Step:    1,
					StartNs: start,
					DurNs:   r.Now() - start,
					Count:   int64(i),
				},
			)
		}()
	}
	done.Wait()
	if len(r.spans) != 0 {
		t.Fatalf("%d spans in the buffer before the step's end", len(r.spans))
	}
	r.StepDone(1)
	rec := r.Record(0, 0, 0)
	if got := len(stepsOf(rec.Spans, KindCopy)); got != 5 || rec.Dropped != 4 {
		t.Errorf(
			"%d copies kept, %d spans dropped; want 5 and 4 (8 copies and a step over a cap of 5)",
			got,
			rec.Dropped,
		)
	}
}
