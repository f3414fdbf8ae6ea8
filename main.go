// Command cphicache implements and validates a CP-shared physical L2 KV-cache pool for context-parallel LLM
// serving. It is an SPMD program: launch it with mpirun (under Slurm on a cluster), one process per rank.
//
// This file holds the command-line interface only: commands, flags, their validation, and one call per command
// into the packages that do the work.
package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/hicache"
	"github.com/cphicache/cphicache/mpi"
)

// version is set at link time by the Makefile (-X main.version=...).
var version = "dev"

// usageError is a command line that does not parse. Every rank sees the same command line, so it is printed once.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() + " (see --help)" }

func onUsageError(_ *cli.Context, err error, _ bool) error { return usageError{err} }

// globalOptions are the flags every multi-rank command shares.
type globalOptions struct {
	cp       int
	dp       int
	logLevel slog.Level
}

func globalFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "cp", EnvVars: []string{"CPHICACHE_CP"}, DefaultText: "the ranks of one node",
			Usage: "ranks per context-parallel (CP) group, 1 or more; CP groups are consecutive world ranks and must lie inside one node"},
		&cli.IntFlag{Name: "dp", EnvVars: []string{"CPHICACHE_DP"}, DefaultText: "ranks / cp",
			Usage: "data-parallel replicas, i.e. CP groups, 1 or more; dp x cp must equal the number of ranks"},
		&cli.StringFlag{Name: "log-level", Value: "warn", EnvVars: []string{"CPHICACHE_LOG_LEVEL"},
			Usage: "log verbosity on stderr: debug, info, warn or error"},
	}
}

func readGlobal(c *cli.Context) (globalOptions, error) {
	level, err := hicache.ParseLogLevel(c.String("log-level"))
	if err != nil {
		return globalOptions{}, err
	}
	// Left unset, --cp and --dp are derived from the launch; given explicitly, they must be real group sizes.
	for _, name := range []string{"cp", "dp"} {
		if c.IsSet(name) && c.Int(name) < 1 {
			return globalOptions{}, &hicache.ConfigError{Flag: name, Reason: fmt.Sprintf("%d is not a group size; give 1 or more, or leave it unset to derive it from the launch", c.Int(name))}
		}
	}
	return globalOptions{cp: c.Int("cp"), dp: c.Int("dp"), logLevel: level}, nil
}

func newApp() *cli.App {
	return &cli.App{
		Name:    "cphicache",
		Usage:   "a CP-shared physical L2 KV-cache pool for context-parallel LLM serving (run it under mpirun)",
		Version: version,
		Description: "Every rank of a CP group runs the same deterministic page allocator over the same event stream, " +
			"so all ranks place every KV page identically in one shared-memory slab per node without a broadcast.\n" +
			"Launch with e.g.: mpirun -np 8 cphicache run --cp 8",
		EnableBashCompletion: true,
		OnUsageError:         onUsageError,
		Commands: []*cli.Command{
			versionCommand(),
			topoCommand(),
		},
	}
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print cphicache's version and the MPI library it is linked with (needs no mpirun)",
		Action: func(c *cli.Context) error {
			fmt.Printf("cphicache %s\n", version)
			if lib, err := mpi.LibraryVersion(); err == nil {
				fmt.Printf("MPI library: %s\n", lib)
			}
			return nil
		},
	}
}

func topoCommand() *cli.Command {
	return &cli.Command{
		Name:  "topo",
		Usage: "print the rank map (world rank, host, node-local rank, DP replica, CP rank) and check the CP layout",
		Description: "Every rank joins; world rank 0 prints the table. Fails, naming the flag, when --cp does not divide " +
			"the number of ranks, when dp x cp differs from it, or when a CP group would span two nodes.",
		Flags:        globalFlags(),
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			opts, err := readGlobal(c)
			if err != nil {
				return err
			}
			job, err := hicache.StartJob(opts.cp, opts.dp, opts.logLevel)
			if err != nil {
				return err
			}
			return errors.Join(job.PrintTopology(os.Stdout), job.Close())
		},
	}
}

func main() {
	if err := newApp().Run(os.Args); err != nil {
		reportError(err)
		os.Exit(1)
	}
}

// uniformErrorGrace is how long ranks other than 0 wait before exiting on an error every rank shares.
const uniformErrorGrace = 2 * time.Second

// reportError prints a fatal error once for errors every rank shares (a bad flag) and with the rank otherwise.
func reportError(err error) {
	rank := mpi.LauncherRank()
	var usage usageError
	if hicache.IsUniform(err) || errors.As(err, &usage) {
		if rank == 0 {
			fmt.Fprintf(os.Stderr, "cphicache: %v\n", err)
			return
		}
		// mpirun tears the job down at the first non-zero exit; the other ranks wait so that rank 0's
		// reason reaches the user before that happens.
		time.Sleep(uniformErrorGrace)
		return
	}
	fmt.Fprintf(os.Stderr, "cphicache: rank %d: %v\n", rank, err)
}
