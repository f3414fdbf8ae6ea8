package cli

// `cphicache version`: the build's version and the MPI library it runs on, without mpirun.

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/mpi"
)

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print cphicache's version, the MPI library it runs on and the MPI standard it implements (needs no mpirun)",
		Action: func(c *cli.Context) error {
			fmt.Printf("cphicache %s\n", version)
			// Both calls are among the few MPI allows before MPI_Init.
			lib, err := mpi.LibraryVersion()
			if err != nil {
				return err
			}
			major, minor, err := mpi.Version()
			if err != nil {
				return err
			}
			fmt.Printf("MPI library: %s (MPI %d.%d)\n", lib, major, minor)
			return nil
		},
	}
}
