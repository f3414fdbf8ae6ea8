#!/usr/bin/env bash
# test-slurm.sh: the job scripts on a real (local, two-node) Slurm cluster. Starts slurm/local-cluster, submits
# slurm/cp8.sbatch, slurm/cp8dp2.sbatch, slurm/cp16.sbatch, and cp8dp2.sbatch again with
# CPHICACHE_SBATCH_PLACEMENT=spread, unchanged with sbatch, waits (bounded) for them, checks each ended with exit
# status 0 and checks their JSON reports with slurm/check-report.py (cp16: one CP group over both nodes, a slab on
# each with half the group's bytes; spread cp8dp2: two CP groups, each 4 + 4 over both nodes, each node's slab
# half of the block-placed cp8dp2 job's one-node slab); always stops the cluster at the end.
# In full mode under OpenMPI (the MPICH run leaves these out: they test files and a trap, not the MPI) it then
# runs the L3 pair over one directory both nodes share: cp8.sbatch on the first node fills
# it, and cp8dp2.sbatch on both nodes must serve L3 hits in each CP group, the second node's included, which
# never wrote a block (the shared filesystem of a real cluster; here both nodes are this machine); beside it, the
# spread pair: a spread cp8dp2 job stores its blocks as two part-files a block (one a node of each group), and a
# second must serve L3 hits from them.
#
# Mode (CPHICACHE_SLURM_TEST_MODE):
#   full  the real commands: run + validate in cp8, run in cp8dp2, cp16 and spread cp8dp2, and every report checked
#         (CP8DP2: two CP groups of 8 on two nodes, 0 divergences, 0 mismatches, collectives on 8-rank
#         communicators), and the spanning check must refuse the block-placed cp8dp2 report
#   topo  `cphicache topo` in both jobs, for a binary without `run`: checks the jobs and the printed rank map only
#   auto  (default) full when the binary has a `run` command, else topo, saying so loudly
#
# MPI (CPHICACHE_SLURM_TEST_MPI):
#   openmpi  (default) bin/cphicache under OpenMPI's mpirun
#   mpich    bin/cphicache-mpich under MPICH's mpiexec.mpich (MPIRUN), as a cluster with an MPICH-family MPI runs
#            the scripts: Hydra needs no root, oversubscription or transport flags here
#
# Other knobs: CPHICACHE_SLURM_TEST_BINARY (default bin/cphicache, or bin/cphicache-mpich), CPHICACHE_SLURM_TEST_SECONDS
# (default 300: the bound on waiting for the jobs), CPHICACHE_SLURM_DIR and the ports (the cluster's state
# directory, see slurm/local-cluster).
set -euo pipefail

slurmDir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repoDir=$(dirname "$slurmDir")
mpi=${CPHICACHE_SLURM_TEST_MPI:-openmpi}
case $mpi in
openmpi) binary=${CPHICACHE_SLURM_TEST_BINARY:-$repoDir/bin/cphicache} ;;
mpich) binary=${CPHICACHE_SLURM_TEST_BINARY:-$repoDir/bin/cphicache-mpich} ;;
*) echo "test-slurm: CPHICACHE_SLURM_TEST_MPI must be openmpi or mpich, not $mpi" >&2; exit 1 ;;
esac
waitSeconds=${CPHICACHE_SLURM_TEST_SECONDS:-300}
mode=${CPHICACHE_SLURM_TEST_MODE:-auto}

say() { echo "test-slurm: $*"; }
fail() {
	say "FAIL: $*"
	exit 1
}

[ -x "$binary" ] || fail "$binary is missing: run make build first"
"$slurmDir/check-report.py" --self-test >/dev/null || fail "check-report.py --self-test failed"
if [ "$mode" = auto ]; then
	if "$binary" run --help >/dev/null 2>&1; then mode=full; else mode=topo; fi
	[ "$mode" = full ] || say "NOTE: $binary has no run command yet: topo jobs only, the report checks are SKIPPED"
fi
case $mode in full | topo) ;; *) fail "CPHICACHE_SLURM_TEST_MODE must be full, topo or auto, not $mode" ;; esac

workDir=$(mktemp -d /tmp/cphicache-slurm-test.XXXXXX)
cleanup() {
	local rc=$?
	"$slurmDir/local-cluster" stop || rc=1
	if [ $rc -eq 0 ]; then rm -rf "$workDir"; else say "logs and reports kept in $workDir"; fi
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$slurmDir/local-cluster" start
eval "$("$slurmDir/local-cluster" env)"
export SLURM_CONF
# This machine's overrides, not the scripts': root, 8 ranks on 2 cores (oversubscribe, yield), and, for two
# "nodes" sharing one kernel, TCP over loopback instead of the shared-memory transport (slurm/README.md, "The local cluster and its test").
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export CPHICACHE_SBATCH_BINARY=$binary
oneNodeFlags="--oversubscribe --mca mpi_yield_when_idle 1"
twoNodeFlags="$oneNodeFlags --mca btl tcp,self --mca btl_tcp_if_include lo"
if [ "$mpi" = mpich ]; then
	export MPIRUN=mpiexec.mpich
	oneNodeFlags= twoNodeFlags=
fi
# The jobs check the launch (the PMI, the placement, CP groups within and over nodes, the ranks' reports, exit
# codes and the L3 shared between nodes), which 20 of the default workload's 180 conversations show as well:
# every report still audits 70 to 180 objects, and the L3 pair still serves hits. The whole default workload
# runs at 1, 2, 8 and 16 ranks in the CLI's tests (TestRunDefaultWorkloadAtEveryScale). The ranks of a Slurm job
# are slurmd's children, not make's, so their CPU is missing from the stage's own time, not from the machine's:
# this test alone kept the two cores busy for 184 CPU-seconds with 60 conversations a job, 107 with 20 (78 s
# wall). (Not in topo mode: topo has no workload flags.)
workloadArgs=
[ "$mode" = topo ] || workloadArgs="--conversations 20"
export CPHICACHE_SBATCH_ARGS=$workloadArgs
if [ "$mode" = topo ]; then
	# topo has no --report; empty report variables make the scripts pass none.
	export CPHICACHE_SBATCH_COMMAND=topo CPHICACHE_SBATCH_VALIDATE_COMMAND= CPHICACHE_SBATCH_REPORT= CPHICACHE_SBATCH_VALIDATE_REPORT=
fi

# submit prints the job id; the job's log and default reports land in $workDir, its submit directory.
submit() {
	local flags=$1 script=$2
	(cd "$workDir" && MPIRUN_FLAGS=$flags sbatch --parsable "$slurmDir/$script") | cut -d';' -f1
}
cp8Job=$(submit "$oneNodeFlags" cp8.sbatch)
cp8dp2Job=$(submit "$twoNodeFlags" cp8dp2.sbatch)
cp16Job=$(submit "$twoNodeFlags" cp16.sbatch)
# CP8DP2 with ranks round robin over the nodes: each CP group of 8 spans node1 and node2, 4 + 4.
spreadJob=$(CPHICACHE_SBATCH_PLACEMENT=spread submit "$twoNodeFlags" cp8dp2.sbatch)
say "submitted cp8 as job $cp8Job, cp8dp2 as job $cp8dp2Job, cp16 as job $cp16Job and spread cp8dp2 as job $spreadJob ($mode mode); waiting up to ${waitSeconds}s"

jobField() { scontrol show job -o "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
finished() {
	case $(jobField "$1" JobState) in PENDING | CONFIGURING | RUNNING | COMPLETING | SUSPENDED) return 1 ;; esac
}
waitJobs() {
	local deadline=$((SECONDS + waitSeconds)) job
	for job in "$@"; do
		until finished "$job"; do
			if [ $SECONDS -ge $deadline ]; then
				scancel "$@" || true
				fail "job $job still $(jobField "$job" JobState) after ${waitSeconds}s; cancelled"
			fi
			sleep 1
		done
	done
}
waitJobs "$cp8Job" "$cp8dp2Job" "$cp16Job" "$spreadJob"

# checkJob: the job completed, Slurm recorded exit 0, and the script's own exit marker says 0.
checkJob() {
	local job=$1 name=$2 log=$workDir/cphicache-$1.out state exitCode
	state=$(jobField "$job" JobState)
	exitCode=$(jobField "$job" ExitCode)
	if [ "$state" != COMPLETED ] || [ "$exitCode" != 0:0 ] || ! grep -qx 'cphicache-job: exit status 0' "$log"; then
		cat "$log" 2>/dev/null || say "no job log $log"
		fail "$name (job $job): state $state, exit code $exitCode"
	fi
	say "ok   $name (job $job): $state, exit code $exitCode, $(grep -c . "$log") log lines"
}
checkJob "$cp8Job" cp8
checkJob "$cp8dp2Job" cp8dp2
checkJob "$cp16Job" cp16
checkJob "$spreadJob" "spread cp8dp2"

# checkTopo: the rank map of a dp x cp job has one row per rank, consecutive ranks in each CP group, and node-local
# ranks that restart at 0 on the second node (MPI_Comm_split_type saw two nodes). Its columns: rank, node,
# node-rank, dp, cp-rank, node-part, group-node (then the GPU in the GPU build). With a fifth argument, the
# number of nodes of a spread placement, rank r is on node r % nodes: its node rank is r / nodes, its node-local
# part (cp rank) / nodes and its group node r % nodes.
checkTopo() {
	local job=$1 cp=$2 dp=$3 perNode=$4 spreadNodes=${5:-0}
	awk -v cp="$cp" -v dp="$dp" -v perNode="$perNode" -v spread="$spreadNodes" '
		/^ *[0-9]+ / { rank = $1; rows++
			if (spread > 0) {
				if ($3 != int(rank / spread) || $4 != int(rank / cp) || $5 != rank % cp || $6 != int(rank % cp / spread) || $7 != rank % spread) bad = bad " rank " rank
			} else if ($3 != rank % perNode || $4 != int(rank / cp) || $5 != rank % cp || $6 != rank % cp % perNode) bad = bad " rank " rank }
		END { if (rows != cp * dp || bad != "") { print "rows " rows ", wrong:" bad; exit 1 } }
	' "$workDir/cphicache-$job.out" || fail "job $job: the rank map is not cp $cp x dp $dp${5:+, spread over $5 nodes}"
	say "ok   job $job: rank map of $((cp * dp)) ranks, cp $cp, dp $dp${5:+, spread over $5 nodes}"
}

checkReport() {
	"$slurmDir/check-report.py" "$@" || fail "report check failed: $*"
}

if [ "$mode" = topo ]; then
	checkTopo "$cp8Job" 8 1 8
	checkTopo "$cp8dp2Job" 8 2 8
	checkTopo "$cp16Job" 16 1 8
	checkTopo "$spreadJob" 8 2 8 2
else
	checkReport run "$workDir/cphicache-$cp8Job.report.json" --ranks 8 --cp 8 --dp 1 --nodes 1
	checkReport validate "$workDir/cphicache-$cp8Job.validate.json" --ranks 8 --cp 8 --dp 1 --nodes 1
	checkReport run "$workDir/cphicache-$cp8dp2Job.report.json" --ranks 16 --cp 8 --dp 2 --nodes 2
	checkReport run "$workDir/cphicache-$cp16Job.report.json" --ranks 16 --cp 16 --dp 1 --nodes 2 --group-nodes 2
	# Spread CP8DP2: each group 4 + 4 over both nodes, each node's slab half of the block-placed job's one-node slab.
	blockReport=$workDir/cphicache-$cp8dp2Job.report.json
	checkReport run "$workDir/cphicache-$spreadJob.report.json" --ranks 16 --cp 8 --dp 2 --nodes 2 --group-nodes 2 \
		--slab-reference "$blockReport"
	# The spanning check must tell the layouts apart: the block-placed report, whose groups are each inside one
	# node, must fail it.
	if "$slurmDir/check-report.py" run "$blockReport" --ranks 16 --cp 8 --dp 2 --nodes 2 --group-nodes 2 \
		--slab-reference "$blockReport" >"$workDir/block-as-spread.txt"; then
		fail "the spanning check passed the block-placed cp8dp2 report $blockReport"
	fi
	say "ok   the spanning check refuses the block-placed cp8dp2 report: $(grep -c . "$workDir/block-as-spread.txt") problems, first: $(head -1 "$workDir/block-as-spread.txt")"

	# The L3 pairs: the CP8 job stores blocks, then the CP8DP2 job reads them on both nodes; beside them, a spread
	# CP8DP2 job (each group 4 + 4) stores its blocks as one part-file a node, and a second one must serve them, each
	# node reading its own parts. Files, not the MPI: the MPICH run of this test leaves them out (a minute less).
fi
if [ "$mode" = full ] && [ "$mpi" = openmpi ]; then
	l3Dir=$workDir/l3 spreadL3Dir=$workDir/l3-spread
	mkdir -p "$l3Dir" "$spreadL3Dir"
	l3Flags="$workloadArgs --l3-block-tokens 64 --l3-prefetch-threshold 64 --l3-prefetch-policy wait_complete"
	spread() { CPHICACHE_SBATCH_PLACEMENT=spread CPHICACHE_SBATCH_ARGS="--l3-dir $spreadL3Dir $l3Flags" submit "$twoNodeFlags" cp8dp2.sbatch; }
	export CPHICACHE_SBATCH_ARGS="--l3-dir $l3Dir $l3Flags"
	l3FillJob=$(CPHICACHE_SBATCH_VALIDATE_COMMAND= submit "$oneNodeFlags" cp8.sbatch)
	spreadFillJob=$(spread)
	waitJobs "$l3FillJob" "$spreadFillJob"
	checkJob "$l3FillJob" "cp8 filling the L3"
	checkJob "$spreadFillJob" "spread cp8dp2 filling the L3 with part-files"
	l3ReadJob=$(submit "$twoNodeFlags" cp8dp2.sbatch)
	spreadReadJob=$(spread)
	waitJobs "$l3ReadJob" "$spreadReadJob"
	checkJob "$l3ReadJob" "cp8dp2 reading the L3"
	checkJob "$spreadReadJob" "spread cp8dp2 reading its part-files"
	checkReport run "$workDir/cphicache-$l3ReadJob.report.json" --ranks 16 --cp 8 --dp 2 --nodes 2 --l3-hits
	checkReport run "$workDir/cphicache-$spreadReadJob.report.json" --ranks 16 --cp 8 --dp 2 --nodes 2 --group-nodes 2 --l3-hits
	parts=$(find "$spreadL3Dir" -name '*.blk' | wc -l) halves=$(find "$spreadL3Dir" -name '*.p1of2.blk' | wc -l)
	[ "$parts" -gt 0 ] && [ "$parts" -eq $((2 * halves)) ] || fail "the spread jobs' L3 holds $parts block files, $halves of them node 1's: want two part-files a block"
	say "ok   the spread jobs' L3: $parts part-files, two a block"
	export CPHICACHE_SBATCH_ARGS=$workloadArgs

	# scancel of a running job: the script's trap still ends the log with its exit status line (128 + SIGTERM).
	# The script's trap does not depend on the MPI, so the MPICH run of this test leaves it out too.
	"$binary" gen-trace --conversations 4000 --output "$workDir/long.jsonl"
	cancelJob=$(CPHICACHE_SBATCH_VALIDATE_COMMAND= CPHICACHE_SBATCH_ARGS="--trace $workDir/long.jsonl" submit "$oneNodeFlags" cp8.sbatch)
	# Running means the run's own header is out (every rank started): cancelled while mpirun still launched its
	# daemons, on a loaded node, mpirun exited 1 on its own ("An ORTE daemon has unexpectedly failed") first.
	for _ in $(seq 360); do grep -q '^# command line: ' "$workDir/cphicache-$cancelJob.out" 2>/dev/null && break; sleep 0.5; done
	sleep 1
	scancel "$cancelJob"
	waitJobs "$cancelJob"
	last=$(tail -n 1 "$workDir/cphicache-$cancelJob.out")
	[ "$last" = "cphicache-job: exit status 143" ] || { cat "$workDir/cphicache-$cancelJob.out"; fail "scancel: the log ends with '$last'"; }
	say "ok   scancel of job $cancelJob: the log ends with '$last'"
fi
say "PASS ($mode mode, $mpi)"
