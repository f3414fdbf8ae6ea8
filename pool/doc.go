// Package pool is the deterministic slot allocator of a CP group's shared host-memory L2, with its
// placement digest and its byte layouts.
//
// # What it owns
//
// A CP group of CPSize ranks shares one physical L2, split into slabs of at most SlabBytesMax
// bytes. The unit of allocation is a slot: one page of every (rank, layer, payload). A cached
// object (the pages of one radix-tree node) gets one placement, a list of extents, that is valid
// for every rank; each rank then copies only its own parts. Geometry turns (slab, slot, rank,
// layer, payload) into a byte offset for both layouts; Allocator decides which slots hold which
// object.
//
// # Why it is deterministic, and what it must not import
//
// No rank tells another where an object went. Every rank runs this allocator over the identical
// event stream, so every rank computes the identical placement: the allocator is a pure function of
// (Geometry, sequence of calls). Therefore nothing here depends on the rank, wall time, map
// iteration order, goroutine scheduling, pointer values or randomness. Logical time (the event
// index) comes in as the clock argument. Replicated state is fixed-width integers. pool imports no
// MPI, no NCCL, no clock (no time, no math/rand), no os, and nothing under hicache/: only
// internal/errscope, a package below both, whose ConfigError names the flag behind a bad Geometry
// field. The caller (hicache) does the copies and the collectives and reports back, as etcd's raft
// state machine leaves IO to its caller.
//
// A 64-bit digest, chained with an order-sensitive mix over every mutation (reserve with its
// extents, abort, commit, release, evict, touch, protect, unprotect, a miss, and the fault
// injection's perturb) and seeded from the Geometry, summarises the history. Ranks compare digests
// with an all-reduce MIN and MAX; any difference is a divergence. New and Reset give the same
// digest. A misuse error changes nothing and chains nothing. A Miss places nothing but empties the
// eviction list, so it chains too: every change of the state moves the digest, and equal digests
// mean equal states (digest_test.go checks both over random sequences).
//
// # Placement
//
// Global slot s lies in slab s/SlotsPerSlab at slot s%SlotsPerSlab; all ranges are half-open [base,
// limit). Reserve(pages) takes the `pages` lowest free global slots: lowest address first, slab 0
// first. An object may therefore span several extents (fragmentation) and several slabs; an extent
// is cut at a slab end because a slab is one mapping. Free slots are a bitmap with a summary tree
// of 64-bit words (as in the Go runtime's page allocator), so finding the next free run costs
// O(log64 Slots) and the cost of one reservation does not grow with the pool.
//
// On a capacity miss (too few free slots, or a full object table) Reserve evicts committed,
// unreferenced objects in LRU order, the total order (clock, id) ascending, kept in a binary heap,
// until the request fits. If even evicting all of them could not make room, it evicts nothing and
// returns Miss: a hopeless request must not empty the cache, and the decision is still a pure
// function of the state. Uncommitted objects (their backup is in flight) and protected ones (refs >
// 0: being loaded) are never evicted.
//
// # Policies
//
// Geometry.Policy chooses how the pool evicts and what it admits (policy.go, --l2-policy): LRU (the
// default and the allocator's only order before there were policies), SLRU (a probation and a
// protected segment: an object enters probation, a touch promotes it, eviction takes probation
// first, and a promotion that takes protected over 80% of the slots demotes its least recently
// used evictable objects into probation), and admit_seen (an object that would have to evict is admitted only
// when the caller's key for its content was seen before, TinyLFU's doorkeeper). Each is a pure
// function of the replicated state: SLRU's segment is one byte of the record and its second heap
// orders by the same (clock, id) as the first; admit_seen's memory is a direct-mapped table of
// keys, the last key seen per bucket, filled only by ReserveAdmitted's calls. No policy keeps a
// counter of its own clock, reads a rank, or hears of an event that one rank alone sees (a
// copy's completion, say). Their state is in StateHash (the segment in the record's flags, the
// second heap, the table of keys), and what they decide reaches the digest as Reserve's
// evictions always did and as admit_seen's sighting and verdict, so a rank whose policy diverged
// shows in the state the simulator compares after every step and at the first decision that
// differs in the digest the ranks compare at every consensus (digest_fields_test.go). LRU chains
// and hashes nothing new: its digests and state hashes are the ones it had before.
//
// # Invariants, in index terms (CheckInvariants checks all of them; mutations assert the cheap
// ones)
//
//   - bitmap level 0 bit s is set <=> slot s is free, for s in [0, Slots); upper levels summarise
//     words.
//   - no two live objects' extents overlap; every extent lies inside one slab and is used in the
//     bitmap.
//   - per slab: free + reserved (+ slots leaked by Perturb, fault injection only) ==
//     SlabSlots(slab).
//   - a committed object is reserved (only live records carry a committed mark).
//   - the LRU heap (under SLRU, the heap of the record's segment) holds exactly the live objects
//     with committed && refs == 0; refs never goes below 0; SLRU's count of protected pages is
//     the pages of the live records in that segment; no record is in it under another policy.
//   - digest(Reset()) == digest(New()) == FreshDigest(), and StateHash(Reset()) == StateHash(New())
//     == FreshStateHash(geometry): StateHash walks every table, so a Reset that forgets one is
//     seen.
//
// Each mutation asserts its cheap pre- and post-conditions, always on, in O(1) or O(words it
// writes): take (give) finds every slot of its range free (used) and leaves level 1 agreeing with
// each word it wrote; the object table's insert finds its record free and no entry of the id on the
// probe path, remove finds its record live and its bucket on the probe chain from the id's home;
// the LRU heap's push finds the record outside the heap and remove finds it at its recorded
// position, and both leave the order between the touched node, its parent and its children intact.
// Tests set expensiveChecks, which ends every mutation with CheckInvariants.
//
// A broken internal invariant panics, naming the invariant, with a dump of the state it checked;
// caller misuse returns an error and changes nothing.
//
// # Memory
//
// Everything is allocated by New: per slot, the free bitmap (1/8 byte plus about 1/63 of that for
// the summaries) and the extent links (8 bytes); per possible object (MaxObjects, default Slots,
// the worst case of one page each) a 48-byte record, a 4-byte LRU slot and two 8-byte hash buckets
// (load <= 1/2). TableBytes reports the total. At 2^24 slots that is about 1.2 GiB of address space
// by default, or about 200 MiB with MaxObjects = 2^20 (objects of 16 pages on average fill the
// pool); the tables are fresh zero memory that the OS backs only where touched, so New stays fast
// and the resident size follows use. A full object table is a capacity miss like a full pool. A
// policy adds its own table per possible object: SLRU a second 4-byte heap slot, admit_seen an
// 8-byte key bucket (rounded up to a power of two); LRU none.
package pool
