package pool

// Mix64 is the splitmix64 finaliser (Steele, Lea and Flood 2014): a bijection on uint64 whose every
// output bit depends on every input bit. pool chains it into the placement digest and the state
// hash (h = Mix64(h ^ word) is order-sensitive because Mix64 is not linear) and spreads ids over
// the object table with it; hicache derives its synthetic workload's PRNG streams and the KV
// content of every part from it. It is exported so that the whole program has one copy: its outputs
// are pinned by the digest goldens here and by hicache's pinned synthetic workload, so it must
// never change.
func Mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Operation tags open every digest record, so two different mutations with the same operands never
// chain the same words.
const (
	tagReserve uint64 = iota + 1
	tagExtent
	tagAbort
	tagCommit
	tagRelease
	tagEvict
	tagTouch
	tagProtect
	tagUnprotect
	tagReset
	tagPerturb
	tagMiss
	tagAdmit // admit_seen's sighting and verdict (ReserveAdmitted)
)

// digestAdd chains words into the running digest.
func digestAdd(h uint64, words ...uint64) uint64 {
	for _, w := range words {
		h = Mix64(h ^ w)
	}
	return h
}

// geometrySeed is the digest of a fresh allocator: a chain over every geometry field, so allocators
// built from different configurations never agree by accident.
func geometrySeed(g Geometry) uint64 {
	h := digestAdd(
		0x6370686963616368, // "cphicach"
		uint64(g.CPSize),
		uint64(g.Layers),
		uint64(g.PayloadsPerLayer),
		uint64(g.PageTokens),
		uint64(
			g.TokenBytes,
		),
		uint64(g.Slots),
		uint64(g.SlabBytesMax),
		uint64(g.Layout),
		uint64(g.maxObjects()),
	)
	// A group over several nodes chains its node count too; a group of one node chains nothing
	// more, so that its digests are the ones it had before groups could span nodes.
	if g.nodes() > 1 {
		h = digestAdd(h, uint64(g.nodes()))
	}
	// Likewise the policy: LRU, the default, chains nothing, so that its digests are the ones the
	// allocator had before it had policies.
	if g.Policy != PolicyLRU {
		h = digestAdd(h, 0x706f6c696379, uint64(g.Policy)) // "policy"
	}
	return h
}
