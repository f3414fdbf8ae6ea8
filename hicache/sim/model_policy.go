package sim

import (
	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/pool"
)

// The L2's eviction and admission policies (--l2-policy, pool's policy.go), drawn per job and
// stated plainly for the sequential model.

// drawL2Policy gives half the jobs of every mode a policy other than LRU, from a stream of its own
// seeded by the job's seed, so that a job that draws LRU is the job its seed drew before there
// were policies, to its state hash (policy_test.go).
func drawL2Policy(seed uint64, j *JobConfig) {
	r := newRNG(seed ^ 0x6c32706f6c) // "l2pol"
	j.Geometry.Policy = pick(r, pool.PolicyLRU, pool.PolicyLRU, pool.PolicySLRU, pool.PolicyAdmitSeen)
}

// admitted is admit_seen's doorkeeper in the model: every backup of a node is a sighting of its
// content (cache.AdmissionKey of its path through its first page), and one that cannot fit in the
// free slots comes in only when its bucket (the key's Mix64 modulo the least power of two of at
// least Slots buckets) held its key. Under the other policies every backup is admitted.
func (m *cacheModel) admitted(n *mNode, need, free int) bool {
	if m.cfg.Geometry.Policy != pool.PolicyAdmitSeen {
		return true
	}
	var path []int32
	for a := n.parent; a != m.root; a = a.parent {
		path = append(append([]int32(nil), a.tokens...), path...)
	}
	key := cache.AdmissionKey(append(path, n.tokens[:m.pt()]...))
	buckets := uint64(1)
	for buckets < uint64(m.cfg.Geometry.Slots) {
		buckets *= 2
	}
	bucket, entry := pool.Mix64(key)%buckets, max(key, 1)
	seen := m.seen[bucket] == entry
	m.seen[bucket] = entry
	return seen || free >= need
}

// promote is SLRU's touch in the model: an object in probation is promoted, and while the objects
// of the protected segment hold more than 80% of the slots, the least recently used of those not
// in use (committed, unprotected), by clock then id, go back to probation.
func (m *cacheModel) promote(id uint64) {
	o := m.objs[id]
	if m.cfg.Geometry.Policy != pool.PolicySLRU || o.protected {
		return
	}
	o.protected = true
	for {
		pages, oldest := 0, uint64(0)
		for id, o := range m.objs {
			if !o.protected {
				continue
			}
			pages += o.pages
			if o.committed && o.refs == 0 && (oldest == 0 || m.older(id, oldest)) {
				oldest = id
			}
		}
		if pages <= m.cfg.Geometry.Slots*80/100 || oldest == 0 {
			return
		}
		m.objs[oldest].protected = false
	}
}

// older orders two objects as the L2 evicts them: SLRU's probation first, then by clock, then id.
func (m *cacheModel) older(a, b uint64) bool {
	oa, ob := m.objs[a], m.objs[b]
	if oa.protected != ob.protected {
		return ob.protected
	}
	return oa.clock < ob.clock || oa.clock == ob.clock && a < b
}
