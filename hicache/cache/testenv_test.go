package cache

import (
	"errors"
	"testing"

	"github.com/cphicache/cphicache/hicache/workload"
)

// soloEnv is a one-rank CP group in memory, for driving a Core step by step in a test: copies are done at once
// and complete at the next Poll or Wait, collectives return the rank's own words, and there is no L3.
type soloEnv struct {
	core    *Core
	mem     *Memory
	pending []Completion
	steps   [][]workload.Event
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
	e.mem.Copy(0, c)
	e.pending = append(e.pending, Completion{Kind: CopyDone, Seq: c.Seq})
}

func (e *soloEnv) Wait(_ WaitReason, done func() bool) error {
	e.Poll()
	if !done() {
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
	e.mem.Fill(0, f)
	return nil
}
func (e *soloEnv) VerifyLoad(v *Verify) (int64, int64, error) {
	checked, bad := e.mem.Verify(0, v)
	return checked, bad, nil
}
func (e *soloEnv) Audit(a *Audit) bool {
	return e.mem.NodeSlotsMatch(0, a.Slots, a.Tokens, a.StartPos, a.Parts)
}
func (e *soloEnv) Adopt(uint64) {}

// newSolo builds a one-rank core over its own memory.
func newSolo(t testing.TB, cfg Config) *Core {
	t.Helper()
	env := &soloEnv{mem: NewMemory(cfg.Geometry, cfg.DevicePages, cfg.Seed)}
	c, err := New(cfg, env)
	if err != nil {
		t.Fatal(err)
	}
	env.core = c
	return c
}
