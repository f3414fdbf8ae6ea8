# slurm/: job scripts for real clusters, and their test on a local two-node Slurm cluster.
#
#   make test-slurm   start slurm/local-cluster, sbatch slurm/cp8.sbatch, slurm/cp8dp2.sbatch (block and spread
#                     placements) and slurm/cp16.sbatch, check the jobs and their reports, stop the cluster (bounded: about 80 s here, at most ~6 minutes)
#   make test-slurm-mpich   the same jobs (20 conversations each, as in test-slurm) with bin/cphicache-mpich under
#                     MPIRUN=mpiexec.mpich (mpi/mpi.mk), on a cluster of its own (state directory and ports),
#                     so that it never meets test-slurm's
#
# slurm/local-cluster installs slurmd, slurmctld, slurm-client and munge itself when missing, so they are not in
# DEB_PACKAGES: `make build` on a machine that never runs this test does not need them.

# The test checks the jobs' JSON reports with slurm/check-report.py.
DEB_PACKAGES += python3

.PHONY: test-slurm test-slurm-mpich test-slurm-scripts
EXTRA_TESTS += test-slurm-scripts test-slurm test-slurm-mpich

# The scripts' own logic (layout from the allocation, refusals, binary order, arguments, PMI, signal), without
# Slurm: a few seconds.
test-slurm-scripts:
	slurm/test-scripts.sh

test-slurm: build
	timeout -k 60 $(call LOADED,420) slurm/test-slurm.sh

test-slurm-mpich: mpich
	CPHICACHE_SLURM_TEST_MPI=mpich CPHICACHE_SLURM_DIR=/tmp/cphicache-slurm-mpich CPHICACHE_SLURM_CTLD_PORT=16917 \
		CPHICACHE_SLURM_NODE_PORT=17101 timeout -k 60 $(call LOADED,420) slurm/test-slurm.sh
