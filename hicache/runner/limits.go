package runner

import (
	"fmt"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/shm"
	"github.com/cphicache/cphicache/hicache/sizing"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/hicache/transport"
	"github.com/cphicache/cphicache/internal/errscope"
	"github.com/cphicache/cphicache/mpi"
	"github.com/cphicache/cphicache/pool"
)

// The start-up checks that need the job's size: they run in setUp, after the workload is read and
// before any shared memory exists, and fail naming the flag at fault.

// checkJobLimits checks the options against the launched job: fault injections name a rank of the
// world, the geometry is valid, and the allocator tables of every rank of a node fit in its memory.
// Every rank reaches the same verdict on the first two; the memory check reads each node's own
// memory and is agreed over the World.
func (rs *runState) checkJobLimits(g pool.Geometry) error {
	t := rs.job.Topo
	if err := rs.opts.CheckInjectionRanks(t.World.Size(), t.CPSize); err != nil {
		return err
	}
	if err := g.Validate(); err != nil {
		return err
	}
	return spmd.AgreeOnFailure(
		t.World,
		checkMemoryFits(
			rs.opts,
			g,
			t.NodeSize,
			t.NodeSize/t.NodeParts,
			sizing.ReadNodeMemory(shm.FreeBytes),
		),
	)
}

// checkMemoryFits refuses, naming the flag the user sized it with, a cache whose memory one node
// cannot give: the allocator tables and (in the CPU build) L1 of each of its ranks against
// MemAvailable, its CP groups' L2 slabs against /dev/shm, and all of it against the job's cgroup
// limit. Without it the Go runtime dies with "out of memory" while building the tables or L1, or
// the OOM killer ends the job. The tables and L1 are fresh zero memory touched as the cache fills,
// so a full cache needs all of it.
func checkMemoryFits(
	o *config.Options,
	g pool.Geometry,
	ranksOnNode, groupsOnNode int,
	mem sizing.NodeMemory,
) error {
	n := newNodeMemoryNeed(o, g, ranksOnNode, groupsOnNode)
	if free := mem.AvailableBytes; free >= 0 {
		if err := n.checkRanksFit(free); err != nil {
			return err
		}
	}
	if free := mem.ShmFreeBytes; free >= 0 && n.slabBytes > free {
		return n.slabTooBig(free)
	}
	// /dev/shm is memory too (tmpfs), so its free space can exceed what the node has left beside
	// L1.
	if free := mem.AvailableBytes; free >= 0 {
		if need := n.totalBytes(); need > free {
			return n.totalTooBig(need, free)
		}
	}
	if need := n.totalBytes(); mem.CgroupLimited && need > mem.Cgroup.RoomBytes() {
		return n.overCgroup(need, mem.Cgroup)
	}
	return nil
}

// nodeMemoryNeed is the memory the cache asks of one node, by kind, with the flags the user sized
// each with: checkMemoryFits weighs it against what the node has.
type nodeMemoryNeed struct {
	l2Flag, l1Flag            string // "l2-slots" or "l2-bytes"; "device-pages" or "device-bytes"
	ranksOnNode, groupsOnNode int
	ranks                     int64 // ranksOnNode, for the byte products
	slots, devicePages        int
	tableBytes                int64 // one rank's allocator tables
	l1Bytes                   int64 // one rank's L1 in host memory (the CPU build); 0 in the GPU build
	slabBytes                 int64 // the L2 slabs of the node's CP groups together
}

// newNodeMemoryNeed sizes the node's share of the cache of geometry g: ranksOnNode ranks, each with
// its tables and L1, and groupsOnNode CP groups, each with its slab.
func newNodeMemoryNeed(
	o *config.Options,
	g pool.Geometry,
	ranksOnNode, groupsOnNode int,
) nodeMemoryNeed {
	n := nodeMemoryNeed{
		l2Flag:       "l2-slots",
		l1Flag:       "device-pages",
		ranksOnNode:  ranksOnNode,
		groupsOnNode: groupsOnNode,
		slots:        g.Slots,
		devicePages:  o.DevicePages,
	}
	if o.L2Bytes > 0 {
		n.l2Flag = "l2-bytes"
	}
	if o.DeviceBytes > 0 {
		n.l1Flag = "device-bytes"
	}
	n.ranks = int64(ranksOnNode)
	n.tableBytes = g.TableBytes()
	if transport.DeviceInHostMemory {
		n.l1Bytes = cache.DeviceBytes(g, o.DevicePages)
	}
	n.slabBytes = shm.SegmentBytes(g) * int64(groupsOnNode)
	return n
}

// totalBytes is all the memory of the node's share: its slabs, and every rank's tables and L1.
func (n *nodeMemoryNeed) totalBytes() int64 {
	return n.slabBytes + (n.tableBytes+n.l1Bytes)*n.ranks
}

// checkRanksFit refuses the node's ranks' allocator tables, then those with L1, that need more
// than the free bytes of memory available, naming the flag of the first that does not fit.
func (n *nodeMemoryNeed) checkRanksFit(free int64) error {
	if need := n.tableBytes * n.ranks; need > free {
		return &errscope.ConfigError{
			Flag: n.l2Flag,
			Reason: fmt.Sprintf(
				"%d slots need %d MiB of allocator tables per rank, %d MiB for the %d rank(s) of this node, but it has %d MiB of memory available; lower --%s",
				n.slots,
				n.tableBytes>>20,
				need>>20,
				n.ranksOnNode,
				free>>20,
				n.l2Flag,
			),
		}
	}
	if need := (n.tableBytes + n.l1Bytes) * n.ranks; need > free {
		return &errscope.ConfigError{
			Flag: n.l1Flag,
			Reason: fmt.Sprintf(
				"L1 of %d pages needs %d MiB of memory per rank (host memory in the CPU build), %d MiB with the allocator tables for the %d rank(s) of this node, but it has %d MiB of memory available; lower --%s",
				n.devicePages,
				n.l1Bytes>>20,
				need>>20,
				n.ranksOnNode,
				free>>20,
				n.l1Flag,
			),
		}
	}
	return nil
}

// slabTooBig is the refusal of slabs that need more than the free bytes of /dev/shm.
func (n *nodeMemoryNeed) slabTooBig(free int64) error {
	return &errscope.ConfigError{
		Flag: n.l2Flag,
		Reason: fmt.Sprintf(
			"the L2 slab needs %d MiB of shared memory per node (%d CP group(s) x %d MiB) but %s has %d MiB free; lower --%s or the page size",
			n.slabBytes>>20,
			n.groupsOnNode,
			n.slabBytes/int64(n.groupsOnNode)>>20,
			shm.Dir,
			free>>20,
			n.l2Flag,
		),
	}
}

// totalTooBig is the refusal of a share whose need bytes (totalBytes) exceed the free bytes of
// memory available, naming the flag of the larger of L2 and L1.
func (n *nodeMemoryNeed) totalTooBig(need, free int64) error {
	flag := biggerFlag(n.l2Flag, n.slabBytes, n.l1Flag, n.l1Bytes*n.ranks)
	return &errscope.ConfigError{
		Flag: flag,
		Reason: fmt.Sprintf(
			"this node's L2 slabs (%d MiB, in %s, which is memory), allocator tables (%d MiB) and L1 (%d MiB) for %d rank(s) need %d MiB together, but it has %d MiB of memory available; lower --%s",
			n.slabBytes>>20,
			shm.Dir,
			n.tableBytes*n.ranks>>20,
			n.l1Bytes*n.ranks>>20,
			n.ranksOnNode,
			need>>20,
			free>>20,
			flag,
		),
	}
}

// overCgroup is the refusal of a share whose need bytes (totalBytes) exceed the room the job's
// cgroup leaves, for which the kernel would kill the job, naming the flag of the larger of L2 and
// L1.
func (n *nodeMemoryNeed) overCgroup(need int64, cgroup sizing.CgroupMemory) error {
	flag := biggerFlag(n.l2Flag, n.slabBytes, n.l1Flag, n.l1Bytes*n.ranks)
	return &errscope.ConfigError{
		Flag: flag,
		Reason: fmt.Sprintf(
			"this node's L2 slabs (%d MiB), allocator tables (%d MiB) and L1 (%d MiB) for %d rank(s) need %d MiB, but %s leaves %d MiB: the job would be killed for memory; lower --%s, or give the job more memory (Slurm: --mem)",
			n.slabBytes>>20,
			n.tableBytes*n.ranks>>20,
			n.l1Bytes*n.ranks>>20,
			n.ranksOnNode,
			need>>20,
			cgroup,
			cgroup.RoomBytes()>>20,
			flag,
		),
	}
}

// biggerFlag is the flag of the larger of the L2's bytes and L1's, the one worth lowering.
func biggerFlag(l2Flag string, l2Bytes int64, l1Flag string, l1Bytes int64) string {
	if l1Bytes > l2Bytes {
		return l1Flag
	}
	return l2Flag
}

// CheckOptions checks o before MPI starts (config.Options.Validate, whose files world rank 0 alone
// checks, known from the launcher's environment), then that this build has the --collective asked
// for.
func CheckOptions(o *config.Options) error {
	if err := o.Validate(mpi.LauncherRank() == 0); err != nil {
		return err
	}
	return transport.CheckCollectiveBuild(o.Collective)
}
