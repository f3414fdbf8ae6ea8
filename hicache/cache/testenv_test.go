package cache

import (
	"errors"
	"testing"

	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/cphicache/cphicache/pool"
)

// soloEnv is a one-rank CP group for driving a Core step by step in a test (the simulator's memory
// of real bytes is the simulator's, hicache/sim): collectives return the rank's own words, there is
// no L3, and memory is a model of what each device page and L2 slot holds, one identity a page (its
// tokens and position), which copies move and the content checks compare: a load-back or an audit
// of the wrong page shows as a mismatch. Copies are done at once and complete at the next Poll or
// Wait; with holdBackups a backup's completion waits for release (or for a Wait, during which every
// copy finishes), so that a scenario chooses when the write frontier moves.
type soloEnv struct {
	core        *Core
	pageTokens  int
	device      map[int32]uint64    // device page -> the identity of the KV it holds
	slab        map[SlabSlot]uint64 // L2 slot -> the identity of the KV it holds
	holdBackups bool
	// backups finished in memory whose completion the scenario has not released
	held    []Completion
	pending []Completion
	steps   [][]workload.Event
}

// pageIdentity names the KV of one page: its tokens at its position.
func pageIdentity(tokens []int32, startPos int) uint64 {
	h := pool.Mix64(uint64(startPos) + 1)
	for _, tok := range tokens {
		h = pool.Mix64(h ^ uint64(uint32(tok)))
	}
	return h
}

func (e *soloEnv) NextStep(int64) ([]workload.Event, error) {
	if len(e.steps) == 0 {
		return nil, nil
	}
	batch := e.steps[0]
	e.steps = e.steps[1:]
	return batch, nil
}

func (e *soloEnv) Collective(*Collective) error { return nil }

func (e *soloEnv) Start(w Work) {
	c, ok := w.(*Copy)
	if !ok {
		panic("soloEnv: no L3")
	}
	for i, page := range c.DevicePages {
		if c.Gather {
			e.slab[c.Slots[i]] = e.device[page]
		} else {
			e.device[page] = e.slab[c.Slots[i]]
		}
	}
	done := Completion{Kind: CopyDone, Seq: c.Seq}
	if c.Gather && e.holdBackups {
		e.held = append(e.held, done)
		return
	}
	e.pending = append(e.pending, done)
}

// release completes the held backup seq (all of them for seq 0); false when none is held under that
// number.
func (e *soloEnv) release(seq uint64) bool {
	kept := e.held[:0]
	found := false
	for _, x := range e.held {
		if seq == 0 || x.Seq == seq {
			e.pending, found = append(e.pending, x), true
		} else {
			kept = append(kept, x)
		}
	}
	e.held = kept
	return found
}

// Wait delivers what has finished and, when that is not enough, lets every copy finish (the held
// ones too: a real wait lasts until they do).
func (e *soloEnv) Wait(_ WaitReason, done func() bool) error {
	if e.Poll(); done() {
		return nil
	}
	e.release(0)
	if e.Poll(); !done() {
		return errors.New("soloEnv: a wait that cannot end")
	}
	return nil
}

func (e *soloEnv) Poll() {
	pending := e.pending
	e.pending = nil
	for _, x := range pending {
		e.core.Complete(x)
	}
}

func (e *soloEnv) StepDone(int64)        {}
func (e *soloEnv) BeginStep(int64)       {}
func (e *soloEnv) Served(*ServedStep)    {}
func (e *soloEnv) Prefetch(uint64, bool) {}
func (e *soloEnv) Fill(f *Fill) error {
	pt := e.pageTokens
	for i, page := range f.DevicePages {
		e.device[page] = pageIdentity(f.Tokens[i*pt:(i+1)*pt], f.StartPos+i*pt)
	}
	return nil
}
func (e *soloEnv) VerifyLoad(v *Verify) (checked, mismatches int64, err error) {
	pt := e.pageTokens
	for i, page := range v.DevicePages {
		checked++
		if e.device[page] != pageIdentity(v.Tokens[i*pt:(i+1)*pt], v.StartPos+i*pt) {
			mismatches++
		}
	}
	return checked, mismatches, nil
}
func (e *soloEnv) Audit(a *Audit) bool {
	pt := e.pageTokens
	for i, s := range a.Slots {
		if e.slab[s] != pageIdentity(a.Tokens[i*pt:(i+1)*pt], a.StartPos+i*pt) {
			return false
		}
	}
	return true
}
func (e *soloEnv) Adopt(uint64) {}

// newSolo builds a one-rank core over its own memory model.
func newSolo(t testing.TB, cfg Config) *Core {
	t.Helper()
	c, _ := newSoloEnv(t, cfg)
	return c
}

func newSoloEnv(t testing.TB, cfg Config) (*Core, *soloEnv) {
	t.Helper()
	env := &soloEnv{
		pageTokens: cfg.Geometry.PageTokens,
		device:     map[int32]uint64{},
		slab:       map[SlabSlot]uint64{},
	}
	c, err := New(cfg, env)
	if err != nil {
		t.Fatal(err)
	}
	env.core = c
	return c, env
}
