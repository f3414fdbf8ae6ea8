#!/usr/bin/env bash
# test-scripts.sh: the job scripts' own logic, without Slurm (make test runs it; a few seconds): each script runs
# under bash with the SLURM_* variables a job would have, a fake launcher that records its command line, and a
# fake binary, and must derive the layout from the allocation or refuse it naming both numbers, place the ranks
# as CPHICACHE_SBATCH_PLACEMENT says (block or spread, for mpirun, Hydra and srun) or refuse it, refuse the old
# setting names, prefer the build in the submit directory and say which binary ran, give every command
# CPHICACHE_SBATCH_ARGS and the main command CPHICACHE_SBATCH_TIME_SCALE, take the job's end from scontrol where
# Slurm does not export it, pass the chosen PMI type to srun, and print `cphicache-job: exit status N` last, also
# after a signal. The bodies of the three scripts below their marker line must be the same.
set -euo pipefail

slurmDir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d /tmp/cphicache-script-test.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
failures=0
fail() {
	echo "test-scripts: FAIL: $*"
	failures=$((failures + 1))
}

# The fakes: a binary that says its name, and launchers that log their arguments, write the --report they are
# given, and sleep for FAKE_LAUNCH_SLEEP seconds (so that a signal finds the script waiting).
mkdir -p "$work/submit/bin" "$work/path"
for b in "$work/submit/bin/cphicache" "$work/path/cphicache"; do
	printf '#!/bin/sh\necho "cphicache fake at %s"\n' "$b" >"$b"
	chmod +x "$b"
done
cat >"$work/path/fake-launcher" <<'EOF'
#!/usr/bin/env bash
# A launcher named like Hydra's says HYDRA in its --version, as MPICH's mpiexec does.
if [ "${1:-}" = --version ]; then
	case $(basename "$0") in *hydra*) echo "HYDRA build details: fake" ;; *) echo "fake launcher" ;; esac
	exit 0
fi
echo "$(basename "$0") $*" >>"$FAKE_LAUNCH_LOG"
while [ $# -gt 0 ]; do
	[ "$1" = --report ] && echo '{}' >"$2"
	shift
done
exec sleep "${FAKE_LAUNCH_SLEEP:-0}"
EOF
chmod +x "$work/path/fake-launcher"
ln -s fake-launcher "$work/path/mpirun"
ln -s fake-launcher "$work/path/srun"
ln -s fake-launcher "$work/path/mpiexec-hydra"
# A Slurm without a controller: the scripts ask scontrol for the job's end, and a real scontrol here (installed
# for the local cluster) would wait for one.
printf '#!/bin/sh\nexit 1\n' >"$work/path/scontrol-none"
chmod +x "$work/path/scontrol-none"
ln -s scontrol-none "$work/path/scontrol"

# jobEnv is the environment of a job of NTASKS tasks, TASKS_PER_NODE as Slurm writes it, on NODES nodes.
jobEnv() {
	echo PATH="$work/path:/usr/bin:/bin" HOME="$work" FAKE_LAUNCH_LOG="$work/launch.log" SLURM_JOB_ID=42 \
		SLURM_SUBMIT_DIR="$work/submit" SLURM_NTASKS="$1" SLURM_TASKS_PER_NODE="$2" SLURM_NNODES="$3"
}
# job runs a script as a job of that allocation would, in a clean environment; its output is in $work/out.
job() {
	local script=$1 ntasks=$2 perNode=$3 nodes=$4
	shift 4
	: >"$work/launch.log"
	# shellcheck disable=SC2046 # jobEnv's words are the assignments
	(cd "$work/submit" && env -i $(jobEnv "$ntasks" "$perNode" "$nodes") "$@" bash "$slurmDir/$script") >"$work/out" 2>&1
}
lastLine() { tail -n 1 "$work/out"; }
expect() { # expect DESCRIPTION STATUS TEXT...: the job's last line says STATUS and its output has each TEXT
	local what=$1 status=$2
	shift 2
	[ "$(lastLine)" = "cphicache-job: exit status $status" ] || fail "$what: last line '$(lastLine)', want exit status $status"
	for text in "$@"; do grep -qF -- "$text" "$work/out" "$work/launch.log" || fail "$what: no '$text' in:$(printf '\n%s' "$(cat "$work/out" "$work/launch.log")")"; done
}

# The layout follows the allocation: 16 tasks on 2 nodes of 8 are cp 8 dp 2, without any setting.
job cp8dp2.sbatch 16 '8(x2)' 2 || true
expect "layout derived" 0 "cp 8 dp 2" "mpirun -np 16 --map-by slot $work/submit/bin/cphicache run --cp 8 --dp 2 --report $work/submit/cphicache-42.report.json"
# ... and cp8.sbatch at 4 tasks on one node is one group of 4.
job cp8.sbatch 4 4 1 || true
expect "cp8 on 4 tasks" 0 "cp 4 dp 1"
# A layout the allocation cannot hold is refused before anything runs, naming both numbers.
job cp8dp2.sbatch 16 '8(x2)' 2 CPHICACHE_SBATCH_CP=4 CPHICACHE_SBATCH_DP=2 || true
expect "cp x dp != tasks" 2 "cp 4 x dp 2 = 8 ranks, but the job has 16 tasks"
[ ! -s "$work/launch.log" ] || fail "a refused layout still launched: $(cat "$work/launch.log")"
job cp8dp2.sbatch 12 '6(x2)' 2 CPHICACHE_SBATCH_CP=4 || true
expect "group neither inside a node nor over whole nodes" 2 "a CP group of 4 ranks must lie inside one node or over whole nodes of equal tasks, but node 0 of the job has 6 tasks"
job cp8dp2.sbatch 12 '4(x2),2(x2)' 4 CPHICACHE_SBATCH_CP=4 || true
expect "group over nodes of unequal tasks" 2 "a CP group of 4 ranks must lie inside one node or over whole nodes of equal tasks, but node 2 of the job has 2 tasks"
# A CP group over whole nodes: 16 tasks on 4 nodes of 4 hold two groups of 8, each over two nodes ...
job cp8dp2.sbatch 16 '4(x4)' 4 CPHICACHE_SBATCH_CP=8 || true
expect "group over two nodes" 0 "cp 8 dp 2" "run --cp 8 --dp 2"
# ... and cp16.sbatch is one group of the job's tasks over its nodes, without any setting.
job cp16.sbatch 16 '8(x2)' 2 || true
expect "cp16 over two nodes" 0 "cp 16 dp 1" "mpirun -np 16 --map-by slot $work/submit/bin/cphicache run --cp 16 --dp 1 --report $work/submit/cphicache-42.report.json"
# The spread placement deals the ranks round robin over the nodes, so each CP group spans both nodes, 4 + 4:
# OpenMPI's --map-by node, Hydra's -ppn 1 and srun's cyclic distribution; block keeps --map-by slot and -ppn 8.
job cp8dp2.sbatch 16 '8(x2)' 2 CPHICACHE_SBATCH_PLACEMENT=spread || true
expect "spread, mpirun" 0 "cp 8 dp 2, placement spread" "mpirun -np 16 --map-by node $work/submit/bin/cphicache run --cp 8 --dp 2"
job cp8dp2.sbatch 16 '8(x2)' 2 CPHICACHE_SBATCH_PLACEMENT=spread MPIRUN=mpiexec-hydra || true
expect "spread, Hydra" 0 "+ env -u SLURMD_NODENAME mpiexec-hydra -n 16 -ppn 1 $work/submit/bin/cphicache run --cp 8 --dp 2"
job cp8dp2.sbatch 16 '8(x2)' 2 MPIRUN=mpiexec-hydra || true
expect "block, Hydra" 0 "+ env -u SLURMD_NODENAME mpiexec-hydra -n 16 -ppn 8 $work/submit/bin/cphicache run --cp 8 --dp 2"
job cp8dp2.sbatch 16 '8(x2)' 2 CPHICACHE_SBATCH_PLACEMENT=spread CPHICACHE_SBATCH_LAUNCHER=srun || true
expect "spread, srun" 0 "srun --mpi=pmix --ntasks=16 --ntasks-per-node=8 --distribution=cyclic $work/submit/bin/cphicache run"
job cp8dp2.sbatch 16 '8(x2)' 2 CPHICACHE_SBATCH_LAUNCHER=srun || true
expect "block, srun" 0 "srun --mpi=pmix --ntasks=16 --ntasks-per-node=8 $work/submit/bin/cphicache run"
# A spread layout that would give one node of a group more of its ranks than another is refused before anything
# runs: cp not a multiple of the node count, or nodes of unequal tasks; so is an unknown placement.
job cp8dp2.sbatch 12 '4(x3)' 3 CPHICACHE_SBATCH_PLACEMENT=spread CPHICACHE_SBATCH_CP=4 || true
expect "spread, cp not a multiple of the nodes" 2 "CPHICACHE_SBATCH_PLACEMENT=spread deals each CP group over all 3 nodes of the job, so cp must be a multiple of 3, but it is 4"
[ ! -s "$work/launch.log" ] || fail "a refused spread layout still launched: $(cat "$work/launch.log")"
job cp8dp2.sbatch 12 '4(x2),2(x2)' 4 CPHICACHE_SBATCH_PLACEMENT=spread CPHICACHE_SBATCH_CP=4 || true
expect "spread, nodes of unequal tasks" 2 "CPHICACHE_SBATCH_PLACEMENT=spread needs the same tasks on every node, but node 2 of the job has 2 tasks and node 0 4"
[ ! -s "$work/launch.log" ] || fail "a refused spread layout still launched: $(cat "$work/launch.log")"
job cp8dp2.sbatch 16 '8(x2)' 2 CPHICACHE_SBATCH_PLACEMENT=cyclic || true
expect "unknown placement" 2 'CPHICACHE_SBATCH_PLACEMENT is "cyclic": block (each node'"'"'s ranks consecutive) or spread'
[ ! -s "$work/launch.log" ] || fail "an unknown placement still launched: $(cat "$work/launch.log")"
# The old setting names are refused: CPHICACHE_REPORT is also the binary's --report, in every step.
job cp8.sbatch 8 8 1 CPHICACHE_REPORT=/tmp/r.json || true
expect "old name" 2 "CPHICACHE_REPORT is set: the script's setting is now CPHICACHE_SBATCH_REPORT"
# The fresh build in the submit directory wins over the one on PATH, and the log says which ran.
job cp8.sbatch 8 8 1 || true
expect "binary order" 0 "# binary: $work/submit/bin/cphicache (cphicache fake at $work/submit/bin/cphicache)"
# Every command gets CPHICACHE_SBATCH_ARGS, validate too.
job cp8.sbatch 8 8 1 CPHICACHE_SBATCH_ARGS="--collective nccl" || true
expect "args" 0 "run --cp 8 --dp 1 --report $work/submit/cphicache-42.report.json --collective nccl" \
	"validate --cp 8 --dp 1 --report $work/submit/cphicache-42.validate.json --collective nccl"
# CPHICACHE_SBATCH_STRICT=1 gives every command --strict.
job cp8.sbatch 8 8 1 CPHICACHE_SBATCH_STRICT=1 || true
expect "strict" 0 "run --cp 8 --dp 1 --report $work/submit/cphicache-42.report.json --strict" \
	"validate --cp 8 --dp 1 --report $work/submit/cphicache-42.validate.json --strict"
# CPHICACHE_SBATCH_TIME_SCALE is the main command's --time-scale, not validate's (it has no serving clock), and the
# log says it; a value that is not a positive factor is refused before anything runs.
job cp8.sbatch 8 8 1 CPHICACHE_SBATCH_TIME_SCALE=20 || true
expect "time scale" 0 "run --cp 8 --dp 1 --time-scale 20 --report $work/submit/cphicache-42.report.json" "# time scale: 20 (CPHICACHE_SBATCH_TIME_SCALE, run only)"
! grep -q "validate .*--time-scale" "$work/launch.log" || fail "validate was given --time-scale: $(cat "$work/launch.log")"
job cp8.sbatch 8 8 1 CPHICACHE_SBATCH_TIME_SCALE=fast || true
expect "bad time scale" 2 'CPHICACHE_SBATCH_TIME_SCALE is "fast", not a positive factor'
[ ! -s "$work/launch.log" ] || fail "a bad time scale still launched: $(cat "$work/launch.log")"
# Slurm 22.05 exports no SLURM_JOB_END_TIME: the script takes scontrol's EndTime and hands it to the ranks (run
# warns at start-up when its trace will not fit); one that Slurm set is kept.
rm "$work/path/scontrol"
printf '#!/bin/sh\necho "JobId=42 TimeLimit=00:15:00 StartTime=2026-12-04T03:00:00 EndTime=2026-12-04T03:15:00 Deadline=N/A"\n' >"$work/path/scontrol"
chmod +x "$work/path/scontrol"
job cp8.sbatch 8 8 1 TZ=UTC || true
expect "job end from scontrol" 0 "job end: 2026-12-04T03:15:00Z (SLURM_JOB_END_TIME)"
job cp8.sbatch 8 8 1 SLURM_JOB_END_TIME=1790000000 || true
expect "job end from Slurm" 0 "job end: 2026-09-21T"
rm "$work/path/scontrol"
ln -s scontrol-none "$work/path/scontrol"
# srun with the chosen PMI type.
job cp8dp2.sbatch 16 '8(x2)' 2 CPHICACHE_SBATCH_LAUNCHER=srun CPHICACHE_SBATCH_PMI=pmi2 || true
expect "pmi" 0 "srun --mpi=pmi2 --ntasks=16 --ntasks-per-node=8"
# A signal (scancel) while a command runs: the script still ends with its exit status line, 128 + SIGTERM.
: >"$work/launch.log"
# shellcheck disable=SC2046
(cd "$work/submit" && exec env -i $(jobEnv 8 8 1) FAKE_LAUNCH_SLEEP=30 bash "$slurmDir/cp8.sbatch") >"$work/out" 2>&1 &
pid=$! # the script's bash: the subshell execs env, which execs bash
for _ in $(seq 100); do [ -s "$work/launch.log" ] && break; sleep 0.1; done
kill -TERM "$pid" 2>/dev/null || true
for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then
	fail "the script outlived SIGTERM by 5 s"
	kill -KILL "$pid"
fi
wait "$pid" 2>/dev/null || true
expect "signal" 143 "received SIGTERM"
# One body for the three scripts.
for other in cp8dp2.sbatch cp16.sbatch; do
	if ! diff <(sed -n '/^# --- From here on/,$p' "$slurmDir/cp8.sbatch") <(sed -n '/^# --- From here on/,$p' "$slurmDir/$other") >"$work/diff"; then
		fail "the bodies of cp8.sbatch and $other differ:$(printf '\n%s' "$(cat "$work/diff")")"
	fi
done

[ "$failures" -eq 0 ] || exit 1
echo "ok   slurm job scripts: layout from the allocation or refused, placement (block, spread) or refused, setting names, binary order, args, time scale, job end, PMI, signal"
