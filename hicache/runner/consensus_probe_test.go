package runner

import (
	"errors"
	"testing"

	"github.com/cphicache/cphicache/hicache/cache"
)

// The probe behind `cphicache bench step` (SPMD, like the consensus tests).

func TestStepProbeAgreesAndCountsItsCalls(t *testing.T) {
	p := NewStepProbe(testWorld, 0)
	defer p.Close()
	const steps = 100
	for f := range uint64(steps) {
		if err := p.Step(1000 + f); err != nil {
			t.Fatalf("step %d: %v", f, err)
		}
	}
	s := p.Stats()
	if size := testWorld.Size(); size == 1 {
		if s.Skipped != steps || s.Count != 0 {
			t.Errorf("one rank: stats %+v, want %d skipped", s, steps)
		}
	} else if s.Count != steps || s.Skipped != 0 || s.CommSizeMin != size || s.CommSizeMax != size {
		t.Errorf("stats %+v, want %d calls on %d ranks", s, steps, size)
	}
}

// A transport that returned one rank's own vector must be caught: the probe's check compares every
// word it agrees on with what the votes imply.
func TestStepProbeCatchesAWrongAgreement(t *testing.T) {
	p := NewStepProbe(testWorld, 0)
	defer p.Close()
	const f = 77
	good := cache.ProbeAgreement{
		WriteFrontier: f,
		LoadFrontier:  f,
		LoadDone:      true,
		DigestMin:     probeDigest(f),
		DigestMax:     probeDigest(f),
	}
	if err := p.check(f, good); err != nil {
		t.Fatalf("the right agreement: %v", err)
	}
	for name, bad := range map[string]func(*cache.ProbeAgreement){
		"write frontier": func(a *cache.ProbeAgreement) { a.WriteFrontier++ },
		"write idle":     func(a *cache.ProbeAgreement) { a.WriteIdle = true },
		"load frontier":  func(a *cache.ProbeAgreement) { a.LoadFrontier += 3 },
		"load done":      func(a *cache.ProbeAgreement) { a.LoadDone = false },
		"digest max":     func(a *cache.ProbeAgreement) { a.DigestMax++ },
	} {
		a := good
		bad(&a)
		var mismatch *ProbeMismatchError
		if err := p.check(f, a); !errors.As(err, &mismatch) || mismatch.Field != name {
			t.Errorf("%s wrong: got %v", name, err)
		}
	}
	// Rank 0's own vote is what a transport that skipped the others would leave on rank 0: at more
	// than one rank its idle word (and on the last rank its load frontier) differs from the
	// agreement.
	v := p.vote(f)
	own := cache.ProbeAgreement{
		WriteFrontier: v.WriteFrontier,
		WriteIdle:     v.WriteIdle,
		LoadFrontier:  v.LoadFrontier,
		LoadDone:      v.LoadDone,
		DigestMin:     v.Digest,
		DigestMax:     v.Digest,
	}
	if err := p.check(f, own); (err == nil) != (testWorld.Size() == 1) {
		t.Errorf("this rank's own vote as the agreement at %d ranks: %v", testWorld.Size(), err)
	}
}
