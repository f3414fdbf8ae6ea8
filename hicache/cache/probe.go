package cache

// Probe makes step consensus calls outside a run, for `cphicache bench step`: the very vector a
// run's step consensus carries (tag, error word, frontiers, digest, the L3's words), built and read
// by the same code, with vote values the caller chooses. Its Env needs only Collective.
type Probe struct{ core Core }

// ProbeVote is what one rank brings to a probed call.
type ProbeVote struct {
	WriteFrontier, LoadFrontier uint64
	WriteIdle, LoadDone         bool
	Digest                      uint64
	Failure                     error // this rank's own failure, or nil
}

// ProbeAgreement is what the group agreed.
type ProbeAgreement struct {
	WriteFrontier, LoadFrontier uint64
	WriteIdle, LoadDone         bool
	DigestMin, DigestMax        uint64
}

// NewProbe makes a probe for CP rank cpRank of CP group group, of cpSize ranks, of a core without
// an L3 (a vector of VectorWords); WithL3 gives it the vector of a core with one.
func NewProbe(cpRank, cpSize, group int, env Env) *Probe {
	p := &Probe{}
	p.core.cfg.CPRank, p.core.cfg.Geometry.CPSize, p.core.cfg.Group, p.core.env = cpRank, cpSize, group, env
	return p
}

// Step makes one step consensus call with v.
func (p *Probe) Step(v ProbeVote) (ProbeAgreement, error) { return p.Call(StepConsensus, v) }

// Call makes one consensus call of kind k (step, flush or final) with v.
func (p *Probe) Call(k ConsensusKind, v ProbeVote) (ProbeAgreement, error) {
	p.core.step++
	a, err := p.core.consensus(
		k,
		vote{writeFrontier: v.WriteFrontier, writeIdle: v.WriteIdle, loadFrontier: v.LoadFrontier,
			loadDone: v.LoadDone, digest: v.Digest, failure: v.Failure, prefetchFailed: noFailure},
	)
	return ProbeAgreement{
		WriteFrontier: a.writeFrontier,
		LoadFrontier:  a.loadFrontier,
		WriteIdle:     a.writeIdle,
		LoadDone:      a.loadDone,
		DigestMin:     a.digestMin,
		DigestMax:     a.digestMax,
	}, err
}

// WithL3 makes the probe's calls those of a core with an L3 and batches of batchRequests requests:
// the step vector then carries a prefetch count a request (StepVectorWords), and PrefetchCount can
// be called.
func (p *Probe) WithL3(batchRequests int) *Probe {
	p.core.cfg.L3 = L3Config{Enabled: true, BatchRequests: batchRequests}
	return p
}

// PrefetchCount makes one l3_prefetch call, as a step whose counts no step consensus carried makes
// it, with this rank's counts (one a request of the batch) and digest; counts receive the MIN.
func (p *Probe) PrefetchCount(counts []uint64, digest uint64) error {
	p.core.step++
	return p.core.prefetchConsensus(counts, digest)
}
