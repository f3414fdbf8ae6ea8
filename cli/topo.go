package cli

// `cphicache topo`: the rank map and the check of the CP layout.

import (
	"errors"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/hicache/transport"
)

func topoCommand() *cli.Command {
	o := &globalOptions{}
	return &cli.Command{
		Name:  "topo",
		Usage: "print the rank map (world rank, host, node-local rank, DP replica, CP rank) and check the CP layout",
		Description: "Every rank joins; world rank 0 prints the table. Fails, naming the flag, when --cp does not divide " +
			"the number of ranks, when dp x cp differs from it, or when a CP group spans nodes that hold different numbers of its ranks " +
			"(a group may span nodes: each node then holds one slab with its ranks' parts).",
		Flags:        globalFlags(o),
		OnUsageError: onUsageError,
		Before:       o.check,
		Action: func(c *cli.Context) error {
			provenance := newProvenance(c)
			job, err := spmd.StartJob(o.cp, o.dp, o.logLevel, jobSettings())
			if err != nil {
				return err
			}
			if err := startProvenance(job, provenance, ""); err != nil {
				return errors.Join(err, job.Close())
			}
			if job.Topo.WorldRank == 0 {
				provenance.WriteHeader(os.Stdout)
			}
			return errors.Join(
				job.PrintTopology(os.Stdout, transport.DescribeGPU(job.Topo)),
				job.Close(),
			)
		},
	}
}
