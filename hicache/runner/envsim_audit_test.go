package runner

import (
	"slices"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/shm"
)

// The audit's coverage, from the harness's own record (envsim_env_test.go): each audit must be of
// a backup the group started, over every slot its copies wrote and every part its node holds, once
// on each node; it must read every part it claims (a probe: the same audit over a copy of the
// object with one byte of one part wrong must fail, part by part); and every backup the group
// started must be audited on each of its nodes by the end of a group that ran to it. A counter
// says only how many audits ran: an audit that skips a part counts the object audited all the same
// (bugAuditSkipsPart, and the core's audit_skips_rank).

// audited checks one audit against the group's record of its backup and probes what it read.
func (v *simEnv) audited(a *cache.Audit, ok bool) {
	v.audits++
	parts := v.geometry.NodeParts()
	if a.Parts != parts {
		v.e.violate(
			"audit coverage: world rank %d's audit of L2 object %d (backup %d) names %d of the %d parts on its node",
			v.world, a.Object, a.Seq, a.Parts, parts,
		)
	}
	v.m.mu.Lock()
	b, started := v.m.backups[a.Seq]
	twice := slices.Contains(v.m.audited[a.Seq], v.node)
	v.m.audited[a.Seq] = append(v.m.audited[a.Seq], v.node)
	v.m.auditedBlocks(v.opts.L3, a)
	v.m.mu.Unlock()
	switch {
	case !started || b.object != a.Object || !slices.Equal(b.slots, a.Slots):
		v.e.violate(
			"audit coverage: world rank %d audited L2 object %d (backup %d) over %d slots, not the %d its backup's copies wrote (started %v, object %d)",
			v.world, a.Object, a.Seq, len(a.Slots), len(b.slots), started, b.object,
		)
	case twice:
		v.e.violate(
			"audit coverage: backup %d was audited twice on node %d", a.Seq, v.node,
		)
	}
	if ok && a.Parts == parts && len(a.Slots) > 0 {
		v.probeAudit(a)
	}
}

// probeAudit runs the runner's audit again over a shadow of the object (its bytes copied into a
// slab of the harness's, at the same offsets), once for each part of the node with one bit of one
// page, layer and payload of that part flipped: each run must fail. Only the step goroutine reads
// rs.slab (Audit), so pointing it at the shadow for the call races with nothing; the shared slab
// is never touched, so the other ranks' load-backs and block writes from it go on.
func (v *simEnv) probeAudit(a *cache.Audit) {
	g, rs := v.geometry, v.runState
	real := rs.slab
	if v.shadow == nil {
		v.shadow = make([][]byte, len(real.Slabs))
	}
	for _, s := range a.Slots {
		if v.shadow[s.Slab] == nil {
			v.shadow[s.Slab] = make([]byte, len(real.Slabs[s.Slab]))
		}
	}
	cell := func(s cache.SlabSlot, part, layer, payload int) (int64, int64) {
		off := rs.parts.Offset(int(s.Slab), int(s.Slot), part, layer, payload)
		return off, off + int64(rs.partBytes)
	}
	parts := a.Parts
	for _, s := range a.Slots {
		for part := range parts {
			for layer := range g.Layers {
				for payload := range g.PayloadsPerLayer {
					from, to := cell(s, part, layer, payload)
					copy(v.shadow[s.Slab][from:to], real.Slabs[s.Slab][from:to])
				}
			}
		}
	}
	rs.slab = &shm.SharedSlab{Slabs: v.shadow}
	defer func() { rs.slab = real }()
	v.probes++
	for part := range parts {
		page, layer, payload := v.rng.IntN(len(a.Slots)), v.rng.IntN(g.Layers),
			v.rng.IntN(g.PayloadsPerLayer)
		s := a.Slots[page]
		from, _ := cell(s, part, layer, payload)
		at, bit := from+v.rng.Int64N(int64(rs.partBytes)), byte(1)<<v.rng.IntN(8)
		v.shadow[s.Slab][at] ^= bit
		passed := rs.Audit(a)
		v.shadow[s.Slab][at] ^= bit
		if passed {
			v.e.violate(
				"audit coverage: world rank %d's audit of L2 object %d (backup %d) passed with a wrong byte in part %d of %d (CP rank %d's), page %d of %d, layer %d, payload %d: it does not read every part it counts audited",
				v.world, a.Object, a.Seq, part, parts, rs.job.Topo.NodePartRanks[part], page,
				len(a.Slots), layer, payload,
			)
			return
		}
	}
}

// checkAudits, at the end of a group that ran to it: the core made as many Audit calls on each rank
// as it counted, and every backup the group started was audited on each of its nodes.
func (e *envSim) checkAudits(group int, ranks []*envRank, violate func(string, ...any)) {
	for _, r := range ranks {
		if c := r.rs.core.Counters(); r.env.audits != c.AuditObjects {
			violate(
				"audit coverage: world rank %d counted %d objects audited and was asked to audit %d",
				r.env.world, c.AuditObjects, r.env.audits,
			)
		}
	}
	m, nodes := e.models[group], max(1, e.job.opts.GroupNodes)
	m.mu.Lock()
	defer m.mu.Unlock()
	seqs := make([]uint64, 0, len(m.backups))
	for seq := range m.backups {
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	for _, seq := range seqs {
		if got := len(m.audited[seq]); got != nodes {
			violate(
				"audit coverage: group %d backed up L2 object %d (backup %d) and audited it on %d of its %d node(s) (%v)",
				group, m.backups[seq].object, seq, got, nodes, m.audited[seq],
			)
			return
		}
	}
}
