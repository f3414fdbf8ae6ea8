package spmd

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/cphicache/cphicache/internal/errscope"
	"github.com/cphicache/cphicache/mpi"
)

// Topology is this rank's place in a dp x cp job. CP groups are consecutive world ranks: group g
// holds world ranks [g*cp, (g+1)*cp). Each CP group is one data-parallel replica.
//
// The scoping rule (DESIGN.md, "Invariants", 4. Scoping) lives here: consensus collectives are
// handed CP, the CP group's own communicator, and never World.
type Topology struct {
	World *mpi.Comm // every rank of the job: start-up agreement and reports only
	CP    *mpi.Comm // this rank's CP group: every consensus collective
	Node  *mpi.Comm // the ranks that share this node's memory

	CPSize    int
	DPSize    int
	WorldRank int
	CPRank    int
	CPGroup   int // the DP replica this rank serves, 0..DPSize-1
	NodeRank  int
	NodeSize  int
	NodeID    int // lowest world rank on this node: the same number on every rank of a node
	// this rank's node name (CPHICACHE_NODE_NAME, else Slurm's, else MPI's processor name)
	Host string

	// The CP group over its nodes (DESIGN.md, "The shared slab"): a group may span GroupNodes
	// nodes, each of which holds NodeParts of its ranks and one slab with only their parts. CPNode
	// is the group's ranks on this node (ordered by CP rank): the slab's name travels over it.
	// NodePart is this rank's index in it, the node-local part index of the layouts; GroupNode is
	// this node's index among the group's nodes, ordered by their lowest CP rank; NodePartRanks are
	// the CP ranks of this node's parts, by part.
	CPNode        *mpi.Comm
	GroupNodes    int
	GroupNode     int
	NodePart      int
	NodeParts     int
	NodePartRanks []int

	nodeSizesEqual bool // every node runs the same number of ranks of this job
}

// NewTopology splits world into CP groups and checks the layout. cp == 0 means "the ranks of one
// node"; dp == 0 means "world size / cp". Every rank returns the same error, so a bad layout ends
// every rank the same way instead of leaving some of them waiting in a collective.
func NewTopology(world *mpi.Comm, cp, dp int) (*Topology, error) {
	t := &Topology{World: world, WorldRank: world.Rank()}
	host, err := mpi.ProcessorName()
	if err != nil {
		return nil, err
	}
	t.Host = nodeName(host)
	if t.Node, err = splitNodes(world); err != nil {
		return nil, err
	}
	t.NodeRank, t.NodeSize = t.Node.Rank(), t.Node.Size()
	if err := t.agreeNodes(); err != nil {
		return nil, err
	}
	if t.CPSize, t.DPSize, err = resolveGroups(world.Size(), t.NodeSize, t.nodeSizesEqual, cp, dp); err != nil {
		return nil, err
	}
	t.CPGroup = t.WorldRank / t.CPSize
	if t.CP, err = world.Split(t.CPGroup, t.WorldRank, "cp"); err != nil {
		return nil, err
	}
	t.CPRank = t.CP.Rank()
	if err := t.splitGroupOverNodes(); err != nil {
		return nil, err
	}
	return t, nil
}

// agreeNodes finds each node's id and checks that all nodes hold the same number of ranks, which
// the automatic --cp needs and which every CP8DP2 layout has.
func (t *Topology) agreeNodes() error {
	id := []int64{int64(t.WorldRank)}
	if err := t.Node.AllreduceInt64(id, id, mpi.Min); err != nil {
		return err
	}
	t.NodeID = int(id[0])
	// MIN of (size, -size) gives the smallest and the largest node in one collective.
	sizes := []int64{int64(t.NodeSize), -int64(t.NodeSize)}
	if err := t.World.AllreduceInt64(sizes, sizes, mpi.Min); err != nil {
		return err
	}
	t.nodeSizesEqual = sizes[0] == -sizes[1]
	return nil
}

// resolveGroups applies the defaults and checks cp and dp against the world size. It is a pure
// function of its arguments, so every rank reaches the same verdict.
func resolveGroups(worldSize, nodeSize int, nodeSizesEqual bool, cp, dp int) (int, int, error) {
	if err := checkGroupsNotNegative(cp, dp); err != nil {
		return 0, 0, err
	}
	if cp == 0 && dp > 0 {
		var err error
		if cp, err = cpOfReplicas(worldSize, dp); err != nil {
			return 0, 0, err
		}
	}
	if cp == 0 {
		if !nodeSizesEqual {
			return 0, 0, &errscope.ConfigError{
				Flag:   "cp",
				Reason: "left unset, which makes a CP group of each node's ranks, but the job's nodes hold different numbers of ranks; give --cp explicitly",
			}
		}
		cp = nodeSize
	}
	if cp > worldSize {
		return 0, 0, &errscope.ConfigError{
			Flag: "cp",
			Reason: fmt.Sprintf(
				"%d is larger than the %d ranks of the job (launch more ranks with mpirun -np)",
				cp,
				worldSize,
			),
		}
	}
	if worldSize%cp != 0 {
		return 0, 0, &errscope.ConfigError{
			Flag:   "cp",
			Reason: fmt.Sprintf("%d does not divide the world size %d", cp, worldSize),
		}
	}
	if dp == 0 {
		dp = worldSize / cp
	}
	if dp*cp != worldSize {
		return 0, 0, &errscope.ConfigError{
			Flag: "dp",
			Reason: fmt.Sprintf(
				"dp %d x cp %d = %d ranks, but the job has %d",
				dp,
				cp,
				dp*cp,
				worldSize,
			),
		}
	}
	return cp, dp, nil
}

// checkGroupsNotNegative refuses a negative --cp, then a negative --dp: 0 is each one's default.
func checkGroupsNotNegative(cp, dp int) error {
	if cp < 0 {
		return &errscope.ConfigError{
			Flag: "cp",
			Reason: fmt.Sprintf(
				"%d is negative; give the ranks per CP group, or 0 for the ranks of one node",
				cp,
			),
		}
	}
	if dp < 0 {
		return &errscope.ConfigError{
			Flag: "dp",
			Reason: fmt.Sprintf(
				"%d is negative; give the number of DP replicas, or 0 to derive it",
				dp,
			),
		}
	}
	return nil
}

// cpOfReplicas is the CP size when only --dp was given: the job's worldSize ranks in dp equal
// groups. Its refusal speaks of --dp alone, not of a cp the user never gave.
func cpOfReplicas(worldSize, dp int) (int, error) {
	if dp > worldSize || worldSize%dp != 0 {
		return 0, &errscope.ConfigError{
			Flag: "dp",
			Reason: fmt.Sprintf(
				"%d replicas do not divide the job's %d ranks into equal CP groups; give a --dp that divides %d (%s), or launch a multiple of %d ranks",
				dp,
				worldSize,
				worldSize,
				divisors(worldSize),
				dp,
			),
		}
	}
	return worldSize / dp, nil
}

// divisors lists n's divisors, "1, 2, 4, 8", for messages.
func divisors(n int) string {
	var ds []string
	for d := 1; d <= n; d++ {
		if n%d == 0 {
			ds = append(ds, strconv.Itoa(d))
		}
	}
	return strings.Join(ds, ", ")
}

// nodeName is the name shown for this rank's node: CPHICACHE_NODE_NAME when set, else Slurm's node
// name (on a test cluster several Slurm nodes can share one host name), else MPI's processor name.
func nodeName(processorName string) string {
	for _, env := range []string{"CPHICACHE_NODE_NAME", "SLURMD_NODENAME"} {
		if v := os.Getenv(env); v != "" {
			return v
		}
	}
	return processorName
}

// Close frees the communicators this topology made.
func (t *Topology) Close() {
	if t == nil {
		return
	}
	if t.CPNode != nil {
		_ = t.CPNode.Free()
	}
	_ = t.CP.Free()
	_ = t.Node.Free()
}

// RankInfo is one row of the topology table.
type RankInfo struct {
	WorldRank, NodeRank, CPGroup, CPRank int
	// the node-local part index of the layouts (its place in CPNode)
	NodePart  int
	GroupNode int // its node's index among its CP group's nodes
	Host      string
	// GPU build: ordinal and PCI bus id
	GPU string `json:",omitempty"`
}

const hostNameBytes = 64

// Gather collects every rank's RankInfo on every rank (a World collective: every rank must call
// it).
func (t *Topology) Gather(gpu string) ([]RankInfo, error) {
	n := t.World.Size()
	const fields = 5
	ints := []int64{
		int64(t.NodeRank),
		int64(t.CPGroup),
		int64(t.CPRank),
		int64(t.NodePart),
		int64(t.GroupNode),
	}
	allInts := make([]int64, fields*n)
	if err := t.World.AllgatherInt64(ints, allInts); err != nil {
		return nil, err
	}
	host := make([]byte, hostNameBytes)
	copy(host, t.Host)
	allHosts := make([]byte, hostNameBytes*n)
	if err := t.World.AllgatherBytes(host, allHosts); err != nil {
		return nil, err
	}
	gpuBytes := make([]byte, hostNameBytes)
	copy(gpuBytes, gpu)
	allGPUs := make([]byte, hostNameBytes*n)
	if err := t.World.AllgatherBytes(gpuBytes, allGPUs); err != nil {
		return nil, err
	}
	rows := make([]RankInfo, n)
	for r := range rows {
		field := func(all []byte) string {
			return strings.TrimRight(string(all[r*hostNameBytes:(r+1)*hostNameBytes]), "\x00")
		}
		rows[r] = RankInfo{
			WorldRank: r, NodeRank: int(allInts[fields*r]), CPGroup: int(allInts[fields*r+1]),
			CPRank:   int(allInts[fields*r+2]),
			NodePart: int(allInts[fields*r+3]), GroupNode: int(allInts[fields*r+4]),
			Host: field(allHosts), GPU: field(allGPUs),
		}
	}
	return rows, nil
}

// WriteTable prints the rank map in the style of nccl-tests: a '#' header, then one fixed-width row
// per rank.
func WriteTable(w io.Writer, rows []RankInfo, cp, dp int) {
	nodes := map[string]bool{}
	for _, r := range rows {
		nodes[r.Host] = true
	}
	fmt.Fprintf(
		w,
		"# cphicache topology: %s, cp %d, dp %d, %s\n",
		errscope.Plural(len(rows), "rank"),
		cp,
		dp,
		errscope.Plural(len(nodes), "node"),
	)
	// The GPU column appears in the GPU build only, where every rank fills it.
	gpus := slices.ContainsFunc(rows, func(r RankInfo) bool { return r.GPU != "" })
	gpuHeader := ""
	if gpus {
		gpuHeader = "  gpu (ordinal, PCI bus id)"
	}
	// node-part is the rank's part index in its node's slab; group-node its node's index among its
	// group's.
	fmt.Fprintf(
		w,
		"# %6s  %-24s %9s %6s %7s %9s %10s%s\n",
		"rank",
		"node",
		"node-rank",
		"dp",
		"cp-rank",
		"node-part",
		"group-node",
		gpuHeader,
	)
	for _, r := range rows {
		gpu := ""
		if gpus {
			gpu = "  " + r.GPU
		}
		fmt.Fprintf(
			w,
			"  %6d  %-24s %9d %6d %7d %9d %10d%s\n",
			r.WorldRank,
			r.Host,
			r.NodeRank,
			r.CPGroup,
			r.CPRank,
			r.NodePart,
			r.GroupNode,
			gpu,
		)
	}
}
