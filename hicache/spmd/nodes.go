package spmd

import (
	"fmt"
	"math"
	"os"

	"github.com/cphicache/cphicache/internal/errscope"

	"github.com/cphicache/cphicache/mpi"
)

// What a node is, and how a CP group lies over its nodes (DESIGN.md, "The shared slab").

// NodeNameEnv names a rank's node when set: ranks of one name share a slab. It lets a test run
// multi-node layouts with a plain mpirun on one machine; ranks of one name must share a machine's
// memory.
const NodeNameEnv = "CPHICACHE_NODE_NAME"

// nodeNameBytesMax bounds a node name, so that the names travel in one fixed-width all-gather.
const nodeNameBytesMax = hostNameBytes - 1

// NodeNameError is a job whose ranks disagree on how nodes are named: CPHICACHE_NODE_NAME set on
// some ranks and not on others (nodes would then be half names and half MPI's view), or a name too
// long. Every rank finds the same one, from one World all-reduce.
type NodeNameError struct {
	SetRank, UnsetRank int // the lowest rank with the name set and the lowest without; -1 when none
	// the lowest rank whose name is longer than nodeNameBytesMax; -1 when none
	LongRank int
}

func (e *NodeNameError) Error() string {
	if e.LongRank >= 0 {
		return fmt.Sprintf(
			"invalid %s: world rank %d's name is longer than %d bytes",
			NodeNameEnv,
			e.LongRank,
			nodeNameBytesMax,
		)
	}
	return fmt.Sprintf(
		"invalid %s: it is set on world rank %d but not on world rank %d; set it on every rank (mpirun -x %s=NAME on each part of the command line) or on none",
		NodeNameEnv,
		e.SetRank,
		e.UnsetRank,
		NodeNameEnv,
	)
}

// Scope: every rank reaches the same verdict from the same all-reduce.
func (e *NodeNameError) Scope() Scope { return JobScope }

// splitNodes returns the communicator of this rank's node: the ranks of its CPHICACHE_NODE_NAME
// when every rank sets one, else MPI's shared-memory split, as before names existed.
func splitNodes(world *mpi.Comm) (*mpi.Comm, error) {
	name := os.Getenv(NodeNameEnv)
	rank := int64(world.Rank())
	// One MIN gives the lowest rank that set a name, the lowest that did not, and the lowest with a
	// name too long.
	lowest := []int64{math.MaxInt64, math.MaxInt64, math.MaxInt64}
	if name != "" {
		lowest[0] = rank
	} else {
		lowest[1] = rank
	}
	if len(name) > nodeNameBytesMax {
		lowest[2] = rank
	}
	if err := world.AllreduceInt64(lowest, lowest, mpi.Min); err != nil {
		return nil, err
	}
	orNone := func(r int64) int {
		if r == math.MaxInt64 {
			return -1
		}
		return int(r)
	}
	if lowest[2] != math.MaxInt64 || (lowest[0] != math.MaxInt64 && lowest[1] != math.MaxInt64) {
		return nil, &NodeNameError{
			SetRank:   orNone(lowest[0]),
			UnsetRank: orNone(lowest[1]),
			LongRank:  orNone(lowest[2]),
		}
	}
	if name == "" {
		return world.SplitShared(world.Rank(), "node")
	}
	names := make([]byte, hostNameBytes*world.Size())
	own := make([]byte, hostNameBytes)
	copy(own, name)
	if err := world.AllgatherBytes(own, names); err != nil {
		return nil, err
	}
	// The node's color is its lowest world rank: the same on every rank of a name, different
	// between names.
	color := world.Rank()
	for r := range world.Size() {
		if string(names[r*hostNameBytes:(r+1)*hostNameBytes]) == string(own) {
			color = r
			break
		}
	}
	return world.Split(color, world.Rank(), "node")
}

// splitGroupOverNodes finds how this rank's CP group lies over nodes: its ranks on this node
// (CPNode), this rank's node-local part, and the group's nodes. Every node of a group must hold the
// same number of its ranks, since every node's slab has one layout; a group that does not is
// refused on every rank of the job, naming the lowest such group and its smallest and largest
// share.
func (t *Topology) splitGroupOverNodes() error {
	var err error
	if t.CPNode, err = t.CP.Split(t.NodeID, t.CPRank, "cp-node"); err != nil {
		return err
	}
	t.NodePart, t.NodeParts = t.CPNode.Rank(), t.CPNode.Size()
	ids := make([]int64, t.CPSize)
	if err := t.CP.AllgatherInt64([]int64{int64(t.NodeID)}, ids); err != nil {
		return err
	}
	// Nodes in the order of their lowest CP rank, so that every rank of the group numbers them
	// alike.
	var order []int64
	t.NodePartRanks = t.NodePartRanks[:0]
	for r, id := range ids {
		if !containsInt64(order, id) {
			order = append(order, id)
		}
		if id == int64(t.NodeID) {
			t.NodePartRanks = append(t.NodePartRanks, r)
		}
	}
	t.GroupNodes = len(order)
	for i, id := range order {
		if id == int64(t.NodeID) {
			t.GroupNode = i
		}
	}
	return t.agreeEqualShares()
}

// agreeEqualShares refuses, on every rank, a job with a CP group whose nodes hold different numbers
// of its ranks.
func (t *Topology) agreeEqualShares() error {
	share := []int64{int64(t.NodeParts), -int64(t.NodeParts)}
	if err := t.CP.AllreduceInt64(share, share, mpi.Min); err != nil {
		return err
	}
	// The lowest unequal group travels with its two numbers in one word: group << 40 | smallest <<
	// 20 | largest.
	const countBits, groupBits = 20, 40
	smallest, largest := share[0], -share[1]
	bad := []int64{math.MaxInt64}
	if smallest != largest {
		bad[0] = int64(t.CPGroup)<<groupBits | smallest<<countBits | largest
	}
	if err := t.World.AllreduceInt64(bad, bad, mpi.Min); err != nil {
		return err
	}
	if bad[0] == math.MaxInt64 {
		return nil
	}
	mask := int64(1)<<countBits - 1
	return &errscope.ConfigError{
		Flag: "cp",
		Reason: fmt.Sprintf(
			"%d puts CP group %d on nodes that hold %d and %d of its ranks; every node of a CP group must hold the same number of its ranks (each node's slab holds that many ranks' parts): launch the same number of ranks on each node",
			t.CPSize,
			bad[0]>>groupBits,
			bad[0]>>countBits&mask,
			bad[0]&mask,
		),
	}
}

func containsInt64(s []int64, v int64) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
