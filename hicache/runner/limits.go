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
	l2Flag, l1Flag := "l2-slots", "device-pages"
	if o.L2Bytes > 0 {
		l2Flag = "l2-bytes"
	}
	if o.DeviceBytes > 0 {
		l1Flag = "device-bytes"
	}
	ranks := int64(ranksOnNode)
	tableBytes, l1Bytes := g.TableBytes(), int64(0)
	if transport.DeviceInHostMemory {
		l1Bytes = cache.DeviceBytes(g, o.DevicePages)
	}
	slabBytes := shm.SegmentBytes(g) * int64(groupsOnNode)
	if free := mem.AvailableBytes; free >= 0 {
		if need := tableBytes * ranks; need > free {
			return &errscope.ConfigError{
				Flag: l2Flag,
				Reason: fmt.Sprintf(
					"%d slots need %d MiB of allocator tables per rank, %d MiB for the %d rank(s) of this node, but it has %d MiB of memory available; lower --%s",
					g.Slots,
					tableBytes>>20,
					need>>20,
					ranksOnNode,
					free>>20,
					l2Flag,
				),
			}
		}
		if need := (tableBytes + l1Bytes) * ranks; need > free {
			return &errscope.ConfigError{
				Flag: l1Flag,
				Reason: fmt.Sprintf(
					"L1 of %d pages needs %d MiB of memory per rank (host memory in the CPU build), %d MiB with the allocator tables for the %d rank(s) of this node, but it has %d MiB of memory available; lower --%s",
					o.DevicePages,
					l1Bytes>>20,
					need>>20,
					ranksOnNode,
					free>>20,
					l1Flag,
				),
			}
		}
	}
	if free := mem.ShmFreeBytes; free >= 0 && slabBytes > free {
		return &errscope.ConfigError{
			Flag: l2Flag,
			Reason: fmt.Sprintf(
				"the L2 slab needs %d MiB of shared memory per node (%d CP group(s) x %d MiB) but %s has %d MiB free; lower --%s or the page size",
				slabBytes>>20,
				groupsOnNode,
				slabBytes/int64(groupsOnNode)>>20,
				shm.Dir,
				free>>20,
				l2Flag,
			),
		}
	}
	// /dev/shm is memory too (tmpfs), so its free space can exceed what the node has left beside
	// L1.
	if free := mem.AvailableBytes; free >= 0 {
		if need := slabBytes + (tableBytes+l1Bytes)*ranks; need > free {
			flag := biggerFlag(l2Flag, slabBytes, l1Flag, l1Bytes*ranks)
			return &errscope.ConfigError{
				Flag: flag,
				Reason: fmt.Sprintf(
					"this node's L2 slabs (%d MiB, in %s, which is memory), allocator tables (%d MiB) and L1 (%d MiB) for %d rank(s) need %d MiB together, but it has %d MiB of memory available; lower --%s",
					slabBytes>>20,
					shm.Dir,
					tableBytes*ranks>>20,
					l1Bytes*ranks>>20,
					ranksOnNode,
					need>>20,
					free>>20,
					flag,
				),
			}
		}
	}
	if need := slabBytes + (tableBytes+l1Bytes)*ranks; mem.CgroupLimited &&
		need > mem.Cgroup.RoomBytes() {
		flag := biggerFlag(l2Flag, slabBytes, l1Flag, l1Bytes*ranks)
		return &errscope.ConfigError{
			Flag: flag,
			Reason: fmt.Sprintf(
				"this node's L2 slabs (%d MiB), allocator tables (%d MiB) and L1 (%d MiB) for %d rank(s) need %d MiB, but %s leaves %d MiB: the job would be killed for memory; lower --%s, or give the job more memory (Slurm: --mem)",
				slabBytes>>20,
				tableBytes*ranks>>20,
				l1Bytes*ranks>>20,
				ranksOnNode,
				need>>20,
				mem.Cgroup,
				mem.Cgroup.RoomBytes()>>20,
				flag,
			),
		}
	}
	return nil
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
