package mpi

import (
	"os"
	"strconv"
)

// LauncherRank is this process's world rank as the launcher (mpirun, mpiexec, srun) announced it in
// the environment, or 0 when no launcher did (a singleton run). It works before Init, which is what
// error reporting needs: a bad flag is found on every rank before MPI starts, and only one rank
// should print it.
func LauncherRank() int {
	for _, name := range []string{"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"} {
		if v, ok := os.LookupEnv(name); ok {
			if r, err := strconv.Atoi(v); err == nil {
				return r
			}
		}
	}
	return 0
}
