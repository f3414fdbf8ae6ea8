#!/usr/bin/env bash
# gpu-check.sh: the one prepared check of the cuda build, for a GPU machine (an H100/H200 with a driver and
# NVIDIA's NCCL; no Go toolchain and no MPI needed). On the build machine `make gpu-check` assembles
# build/gpu-check-kit, which holds this script beside the binaries, and prints the command to run here:
#
#     bash build/gpu-check-kit/gpu-check.sh     (carry build/gpu-check-kit; give it 540 s)
#
# It writes exactly two files into $OUT (or results/ beside this script): summary.txt, one line per step with
# what each one-rank test proves, and gpu-check-logs.tar.gz, every log of the run. Both are written on every
# exit, an interrupted one included. Steps, in this order, each bounded by `timeout -k` (the sum of the bounds
# is printed first and kept under 8 minutes; a healthy run should take 2-3):
#   env         facts first: nvidia-smi, the driver and CUDA version, glibc (against the kit's needs), the
#               libraries the loader and Python find (libcuda, libnccl, libmpi), /dev/shm's size;
#   kernels     the CUDA driver tests: the kernels package's tests, the CUDA engine's byte-verified round trips,
#               its registration chunks and item planning included;
#   nccl        NVIDIA's NCCL on GPU memory through package nccl, with NCCL_DEBUG=INFO: a one-rank
#               communicator, its all-reduce into a separate buffer, and a pre-multiplied sum (x3) that only a
#               reduction run on the device gives; then the writing_check round trip timed (nccl-bench);
#   transport   the production start-up at one rank (built with mpiself, a one-process MPI): transport.Start
#               over a /dev/shm slab, the CUDA engine copying through it, DeviceCount and GPUBusID, the NCCL
#               reducer's communicator made over the CP communicator and its device buffer carrying NCCL's x3;
#   hicache     the hicache SPMD tests of the cuda build at one rank (mpiself), whole runs on the CUDA engine;
#   bench       the kernels' bandwidth beside cuMemcpy, only when the kernels step passed;
#   e2e-np1/2   `cphicache-gpu run`, which links the system's MPI, only where MPI is installed (np 2 needs two
#               GPUs).
# NCCL is expected: a libnccl.so.2 that is not found ($CPHICACHE_NCCL_LIB, Python's nvidia/nccl/lib as the
# nvidia-nccl-cu13 wheel installs it, the loader's cache) fails the nccl step and the run; GPU_CHECK_EXPECT_NCCL=0
# makes it a SKIP. Before each step ldd must resolve every library of the step's binary. Exit status 0 only when
# no step failed.
set -uo pipefail

kit=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${OUT:-$kit/results}
mkdir -p "$out" || exit 2
logs=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX") || exit 2
kernels_test=$kit/kernels-cuda.test
nccl_test=$kit/ncclcheck-cuda.test
transport_test=$kit/transport-cuda.test
hicache_test=$kit/hicache-cuda.test
gpu_bin=$kit/bin/cphicache-gpu
expect_nccl=${GPU_CHECK_EXPECT_NCCL:-1}
kill_after_s=5
# The whole run must end inside the 10-minute command limit of the machine it is lent on, with room to spare.
limit_s=480
archive_s=10
steps=(env kernels nccl nccl-bench transport hicache bench e2e-np1 e2e-np2)
declare -A bound=([env]=30 [kernels]=75 [nccl]=30 [nccl-bench]=15 [transport]=45 [hicache]=70 [bench]=85 [e2e-np1]=35 [e2e-np2]=30)
worst_s=$archive_s
for s in "${steps[@]}"; do worst_s=$((worst_s + ${bound[$s]} + kill_after_s)); done
if [ "$worst_s" -ge "$limit_s" ]; then
	echo "gpu-check: the step bounds add up to $worst_s s, not under $limit_s s: shorten them" >&2
	exit 2
fi

declare -A status
declare -a lines
failed=0

result() { # step status detail
	status[$1]=$2
	lines+=("$(printf '%-10s %-4s %s' "$1" "$2" "$3")")
	echo "== $1: $2 $3"
	[ "$2" = FAIL ] && failed=1
	return 0
}

# proves adds a step's "proves: ..." lines (each one-rank test logs what it shows) to the summary.
proves() { # log
	local p
	while IFS= read -r p; do lines+=("           ${p#"${p%%proves:*}"}"); done < <(grep -o '[A-Za-z_0-9]*\.go:[0-9]*: proves: .*' "$1" 2>/dev/null | cut -c1-400)
}

# finish writes summary.txt and the archive of every log: on every exit, so an interrupted run reports too.
finish() {
	local verdict=PASS
	[ "$failed" = 0 ] || verdict=FAIL
	for s in "${steps[@]}"; do
		[ -n "${status[$s]:-}" ] || { lines+=("$(printf '%-10s %-4s %s' "$s" FAIL "not run: the check ended before it")"); verdict=FAIL; }
	done
	{
		echo "gpu-check: $verdict ($(sed -n 's/^version: //p' "$kit/build-info.txt" 2>/dev/null), $(date -u +%Y-%m-%dT%H:%M:%SZ), worst case $worst_s s)"
		printf '%s\n' "${lines[@]}"
	} > "$out/summary.txt"
	cp "$out/summary.txt" "$logs/summary.txt"
	# A log is clipped to its first and last MiBs so that the archive stays far below 16 MiB.
	find "$logs" -type f -size +8M | while read -r f; do
		{ head -c 1M "$f"; printf '\n[... clipped by gpu-check.sh ...]\n'; tail -c 6M "$f"; } > "$f.clip" && mv "$f.clip" "$f"
	done
	timeout -k 2 "$archive_s" tar -C "$logs" -czf "$out/gpu-check-logs.tar.gz" . || echo "gpu-check: archiving the logs failed" >&2
	rm -rf "$logs"
	cat "$out/summary.txt"
	[ "$verdict" = PASS ]
}
# A signal ends the step in flight (timeout passes SIGTERM on to it) and the run, which still reports: bash
# runs a trap only between commands, so each step runs in the background and is waited for.
child=""
trap 'finish; exit $?' EXIT
trap '[ -n "$child" ] && kill -TERM "$child" 2> /dev/null; exit 143' TERM INT

bounded() { # step command...: the command, ended by SIGTERM after the step's bound and by SIGKILL 5 s later
	local s=${bound[$1]} rc
	shift
	timeout -k "$kill_after_s" "$s" "$@" &
	child=$!
	wait "$child"
	rc=$?
	child=""
	return "$rc"
}

# why is a failed step's first failing test, or else the last line of its log (a crash, a timeout).
# gorgonia.org/cu's cuInit failure, a long line with a URL, is cut to its cause.
why() {
	grep -m1 -E -- '^--- FAIL|^panic:|Error in initialization|^cphicache: |^FAIL: ' "$1" \
		| sed -E 's/^Error in initialization.* on: (.*)$/cuInit failed: \1/' | cut -c1-160 && return
	grep -v '^[[:space:]-]*$' "$1" | tail -1 | cut -c1-160
}

yes_no() { [ -n "$1" ] && echo yes || echo no; }

# unresolved prints the libraries the loader cannot resolve for a binary here (missing, or too old a glibc), as
# the env step found them (ldd runs there, inside that step's bound).
declare -A ldd_missing
unresolved() {
	echo "${ldd_missing[$(basename "$1")]:-}"
}

# loadable reports a step that cannot even load as FAIL (or SKIP, with the reason given) and returns 1.
loadable() { # step binary [skip-reason-when-only-libmpi-is-missing]
	local missing
	missing=$(unresolved "$2")
	[ -z "$missing" ] && return 0
	if [ -n "${3:-}" ] && ! grep -qv 'libmpi\|libopen-\|^;*$' <<< "${missing//;/$'\n'}"; then
		result "$1" SKIP "$3"
	else
		result "$1" FAIL "$(basename "$2") cannot load here: $missing"
	fi
	return 1
}

# gotest runs one test binary for a step into its log and reports it: PASS needs exit 0, "PASS" printed, and
# at least min tests passed whose names start with prefix (a binary that skips everything proves nothing).
gotest() { # step log min prefix binary args...
	local step=$1 log=$2 min=$3 prefix=$4
	shift 4
	bounded "$step" "$@" -test.count=1 -test.v -test.timeout "$((${bound[$step]} - 3))s" > "$log" 2>&1
	local rc=$? passed required skipped
	passed=$(grep -c '^--- PASS' "$log")
	required=$(grep -c "^--- PASS: $prefix" "$log")
	skipped=$(grep -c '^--- SKIP' "$log")
	if [ "$rc" = 0 ] && grep -q '^PASS$' "$log" && [ "$required" -ge "$min" ]; then
		result "$step" PASS "$passed tests passed, $skipped skipped"
		proves "$log"
	else
		tail -30 "$log"
		{ [ "$rc" = 124 ] || [ "$rc" = 137 ]; } && rc="$rc (timed out after ${bound[$step]} s)"
		[ "$rc" = 0 ] && rc="0 but only $required of the $min ${prefix:-}* tests needed passed"
		result "$step" FAIL "exit $rc, $passed passed: $(why "$log"); log $(basename "$log") in the archive"
	fi
}

for f in "$kernels_test" "$nccl_test" "$transport_test" "$hicache_test" "$gpu_bin"; do
	# A carried copy may have lost its mode bits: the kit's own binaries are made executable again.
	[ -f "$f" ] && [ ! -x "$f" ] && chmod u+x "$f" 2> /dev/null
	[ -x "$f" ] || { echo "gpu-check: $f not found: run make gpu-check on the build machine and carry build/gpu-check-kit" >&2; result env FAIL "kit incomplete: $(basename "$f") missing"; exit 1; }
done
echo "gpu-check: kit $kit, results in $out, worst case ${worst_s} s"

# --- env: facts first. env_facts writes them to env.txt and prints what the summary and the later steps need,
# as shell assignments; it runs as one bounded command (a bash -c of these functions), so that a wedged
# nvidia-smi cannot hold the run beyond the step's bound.
fact() { # title command...
	{ echo "### $1"; timeout -k 2 10 "${@:2}" 2>&1 || echo "(exit $?)"; echo; } >> "$logs/env.txt"
}
# find_nccl prints NVIDIA's libnccl.so.2 as this machine has it; what it could not use goes to stderr.
find_nccl() {
	if [ -n "${CPHICACHE_NCCL_LIB:-}" ]; then
		[ -e "$CPHICACHE_NCCL_LIB" ] && { echo "$CPHICACHE_NCCL_LIB"; return; }
		echo "CPHICACHE_NCCL_LIB=$CPHICACHE_NCCL_LIB does not exist" >&2
	fi
	local dir
	# The nvidia-nccl-cu13 (and -cu12) wheels install nvidia/nccl/lib/libnccl.so.2; nvidia is a namespace package.
	dir=$(timeout -k 2 10 python3 -c 'import nvidia.nccl as m, os; print((list(getattr(m, "__path__", [])) or [os.path.dirname(m.__file__)])[0])' 2>/dev/null) \
		&& [ -e "$dir/lib/libnccl.so.2" ] && { echo "$dir/lib/libnccl.so.2"; return; }
	for dir in $(timeout -k 2 10 python3 -c 'import site, sys; print("\n".join(site.getsitepackages() + [site.getusersitepackages()] + sys.path))' 2>/dev/null); do
		[ -e "$dir/nvidia/nccl/lib/libnccl.so.2" ] && { echo "$dir/nvidia/nccl/lib/libnccl.so.2"; return; }
	done
	ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 / { print $NF; exit }'
}
env_facts() { # kit logs
	kit=$1 logs=$2
	fact "nvidia-smi" nvidia-smi
	fact "GPUs" nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap,pcie.link.gen.current,pcie.link.width.current --format=csv
	fact "driver" cat /proc/driver/nvidia/version
	fact "kernel, OS" sh -c 'uname -a; cat /etc/os-release'
	fact "glibc" getconf GNU_LIBC_VERSION
	fact "kit" cat "$kit/build-info.txt"
	fact "libraries in the loader's cache" sh -c "ldconfig -p | grep -E 'libcuda\.so|libnccl|libmpi\.so|libcudart' || echo none"
	fact "python, nvidia packages" sh -c 'python3 --version; python3 -m pip list 2>/dev/null | grep -i -E "^nvidia|nccl" || echo "no nvidia wheels"'
	fact "/dev/shm" df -h /dev/shm
	fact "CPUs, memory, limits" sh -c 'nproc; free -g; echo "locked memory: $(ulimit -l), open files: $(ulimit -n)"'
	fact "MPI, tools" sh -c 'command -v mpirun compute-sanitizer nvcc || true; env | grep -E "^(CUDA_|NCCL_|CPHICACHE_|LD_LIBRARY_PATH)" || true'
	fact "the kit's libraries, as the loader resolves them" ldd "$kit/kernels-cuda.test"
	local nccl_lib gpu gpus cuda
	nccl_lib=$(find_nccl 2>> "$logs/env.txt")
	echo "### NCCL found: ${nccl_lib:-none}" >> "$logs/env.txt"
	gpu=$(timeout -k 2 10 nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
	gpus=$(timeout -k 2 10 nvidia-smi -L 2>/dev/null | grep -c '^GPU')
	cuda=$(timeout -k 2 10 nvidia-smi 2>/dev/null | grep -o 'CUDA Version: [0-9.]*' | head -1)
	local b missing
	for b in kernels-cuda.test ncclcheck-cuda.test transport-cuda.test hicache-cuda.test bin/cphicache-gpu; do
		missing=$(timeout -k 1 5 ldd "$kit/$b" 2>&1 | grep 'not found' | sed 's/^[[:space:]]*//' | tr '\n' ';')
		printf 'ldd_missing[%q]=%q\n' "$(basename "$b")" "$missing"
	done
	printf 'nccl_lib=%q\ngpu=%q\ngpus=%q\ncuda=%q\nfacts_done=1\n' "$nccl_lib" "$gpu" "${gpus:-0}" "$cuda"
}
nccl_lib="" gpu="" gpus=0 cuda="" facts_done=""
bounded env bash -c "$(declare -f fact find_nccl env_facts); env_facts \"\$@\"" gpu-check-env "$kit" "$logs" > "$logs/env.vars" 2>> "$logs/env.txt"
# shellcheck disable=SC1091
. "$logs/env.vars"
rm -f "$logs/env.vars"
glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{ print $2 }')
needs=$(sed -n 's/^needs: GLIBC_//p' "$kit/build-info.txt" 2>/dev/null)
shm=$(df -h /dev/shm 2>/dev/null | awk 'NR == 2 { print $2 " (" $4 " free)" }')
env_detail="${gpu:-no GPU seen by nvidia-smi} x$gpus, ${cuda:-CUDA version unknown}, glibc ${glibc:-unknown} (kit needs ${needs:-?}), /dev/shm ${shm:-unknown}, NCCL ${nccl_lib:-not found}, mpirun $(yes_no "$(command -v mpirun)")"
if [ -z "$facts_done" ]; then
	result env FAIL "the facts did not come within ${bound[env]} s (a wedged nvidia-smi?): $env_detail"
elif [ "$gpus" -lt 1 ]; then
	result env FAIL "$env_detail"
elif [ -n "$needs" ] && [ -n "$glibc" ] && [ "$(printf '%s\n%s\n' "$needs" "$glibc" | sort -V | head -1)" != "$needs" ]; then
	result env FAIL "glibc $glibc is older than the kit's $needs: $env_detail"
else
	result env PASS "$env_detail"
fi

# --- kernels: the CUDA driver tests (at least one TestCUDA must pass: else the binary is not the cuda build)
if loadable kernels "$kernels_test"; then
	gotest kernels "$logs/kernels.log" 1 TestCUDA "$kernels_test"
fi

# --- nccl: NVIDIA's NCCL on GPU memory, one rank, NCCL_DEBUG=INFO; then the writing_check round trip timed
export NCCL_DEBUG=${NCCL_DEBUG:-INFO}
# NCCL writes its debug lines to stdout unless told otherwise, where they could break the test output's lines;
# each process writes its own file instead (%p: its pid), archived with the logs.
export NCCL_DEBUG_FILE=${NCCL_DEBUG_FILE:-$logs/nccl-debug.%p.log}
if [ -z "$nccl_lib" ]; then
	looked="CPHICACHE_NCCL_LIB, python3's nvidia/nccl/lib (pip install nvidia-nccl-cu13), ldconfig -p"
	if [ "$expect_nccl" = 0 ]; then
		result nccl SKIP "no libnccl.so.2 found ($looked); GPU_CHECK_EXPECT_NCCL=0"
	else
		result nccl FAIL "no libnccl.so.2 found, and NCCL is expected (looked in $looked; GPU_CHECK_EXPECT_NCCL=0 to skip)"
	fi
	result nccl-bench SKIP "no NCCL"
else
	export CPHICACHE_NCCL_LIB=$nccl_lib # for the later steps too
	if loadable nccl "$nccl_test"; then
		gotest nccl "$logs/nccl.log" 2 Test "$nccl_test"
		version=$(grep -m1 -o 'NCCL [0-9.]* from [^ ]*' "$logs/nccl.log")
		[ -n "$version" ] && lines+=("           $version")
	fi
	if [ "${status[nccl]:-}" != PASS ]; then
		result nccl-bench SKIP "the nccl step did not pass"
	elif bounded nccl-bench env NCCL_DEBUG=WARN "$nccl_test" -test.run '^$' -test.bench . -test.benchtime 2000x \
		-test.timeout "$((${bound[nccl-bench]} - 3))s" > "$logs/nccl-bench.log" 2>&1; then
		round_trip=$(awk '/^BenchmarkWritingCheckRoundTrip/ { for (i = 1; i < NF; i++) if ($(i+1) == "ns/op") printf "%.1f us", $i / 1000 }' "$logs/nccl-bench.log")
		result nccl-bench PASS "one-rank writing_check round trip (upload, in-place MIN, download, sync): ${round_trip:-not measured}"
	else
		result nccl-bench FAIL "$(why "$logs/nccl-bench.log"); log nccl-bench.log in the archive"
	fi
fi

# --- transport: the production start-up at one rank, without MPI
transport_args=() transport_min=2
[ -z "$nccl_lib" ] && [ "$expect_nccl" = 0 ] && transport_args=(-test.skip 'NCCL') transport_min=1
if loadable transport "$transport_test"; then
	gotest transport "$logs/transport.log" "$transport_min" TestStart "$transport_test" "${transport_args[@]}"
fi

# --- hicache: the SPMD tests at one rank on the CUDA engine, without MPI. Its NCCL tests need the library;
# the one that steers ncclshim's hang switch skips itself with NVIDIA's NCCL.
if loadable hicache "$hicache_test"; then
	# From hicache's folder, as go test runs it, so that its testdata paths resolve.
	gotest hicache "$logs/hicache.log" 10 Test env -C "$kit/hicache" "$hicache_test"
	[ "${status[hicache]:-}" = PASS ] \
		&& lines+=("           proves: whole runs at one rank on the CUDA engine over /dev/shm (placement assert, byte-verified load-backs, audit); their one-rank NCCL calls prove the plumbing, not a reduction")
	[ "${status[hicache]:-}" = PASS ] && grep -q '^--- SKIP: TestNCCLInitThatNeverCompletes' "$logs/hicache.log" \
		&& lines+=("           TestNCCLInitThatNeverCompletesIsAbortedOnEveryRank skipped: it needs ncclshim's NCCLSHIM_INIT_HANG")
fi

# --- bench: only over kernels that passed, each shape's bytes verified once before it is timed
if [ "${status[kernels]:-}" != PASS ]; then
	result bench SKIP "the kernels step did not pass: no benchmark of kernels that are wrong"
elif loadable bench "$kernels_test"; then
	if bounded bench "$kernels_test" -test.run '^$' -test.bench 'CUDA' -test.benchtime 10x -test.count 1 \
		-test.timeout "$((${bound[bench]} - 3))s" > "$logs/bench.log" 2>&1; then
		awk '
			/^BenchmarkCUDA/ { for (i = 1; i <= NF; i++) if ($(i+1) == "MB/s") { mbs[$1] = $i; names[++n] = $1 } }
			END {
				for (k in mbs) { if (k ~ /MemcpyReference\/DtoH/) d2h = mbs[k]; if (k ~ /MemcpyReference\/HtoD/) h2d = mbs[k] }
				printf "# %-58s %10s %8s\n", "benchmark", "GB/s", "vs_DMA"
				for (i = 1; i <= n; i++) {
					k = names[i]; ref = (k ~ /Gather/) ? d2h : (k ~ /Scatter/) ? h2d : mbs[k]
					printf "  %-58s %10.2f %8.2f\n", k, mbs[k] / 1000, (ref > 0) ? mbs[k] / ref : 0
				}
			}' "$logs/bench.log" > "$logs/bench-summary.txt"
		cat "$logs/bench-summary.txt"
		result bench PASS "$(awk '
			$1 ~ /Gather|Scatter/ { dir = ($1 ~ /Gather/) ? "Gather" : "Scatter"; n[dir]++
				if (!(dir in lo) || $3 < lo[dir]) lo[dir] = $3; if ($3 > hi[dir]) hi[dir] = $3 }
			END { printf "%d shapes verified; Gather %.2f-%.2fx DMA, Scatter %.2f-%.2fx DMA (table: bench-summary.txt)",
				n["Gather"] + n["Scatter"], lo["Gather"], hi["Gather"], lo["Scatter"], hi["Scatter"] }' "$logs/bench-summary.txt")"
	else
		tail -30 "$logs/bench.log"
		result bench FAIL "$(why "$logs/bench.log"); log bench.log in the archive"
	fi
fi

# --- e2e: the GPU binary links the system's MPI, so it runs only where one is installed.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
no_mpi="no MPI installation here (no libmpi.so.40): the transport and hicache steps ran the start-up without it"
launch=()
command -v mpirun > /dev/null 2>&1 && launch=(mpirun -np 1)
collective=mpi
[ -n "$nccl_lib" ] && collective=nccl
if loadable e2e-np1 "$gpu_bin" "$no_mpi"; then
	proof="the CUDA engine under the whole data path"
	[ "$collective" = nccl ] && proof="$proof; NCCL communicator made, writing_check not exercised (a one-rank CP group skips it)"
	if bounded e2e-np1 "${launch[@]}" "$gpu_bin" run --quiet --collective "$collective" --report "$logs/report-np1.json" > "$logs/run-np1.log" 2>&1 \
		&& grep -q '"collective": *"'"$collective"'"' "$logs/report-np1.json" && grep -q 'result: OK' "$logs/run-np1.log"; then
		result e2e-np1 PASS "run --collective $collective at np 1: $proof; $(grep -m1 -o 'verify: .*' "$logs/run-np1.log" | cut -c1-120)"
	else
		tail -30 "$logs/run-np1.log"
		result e2e-np1 FAIL "$(why "$logs/run-np1.log"); log run-np1.log in the archive"
	fi
fi
if [ "$collective" != nccl ] || [ "${#launch[@]}" = 0 ] || [ "$gpus" -lt 2 ]; then
	result e2e-np2 SKIP "needs NCCL, mpirun and two GPUs (here: NCCL $(yes_no "$nccl_lib"), mpirun $(yes_no "${launch[*]}"), $gpus GPUs)"
elif loadable e2e-np2 "$gpu_bin" "$no_mpi"; then
	if bounded e2e-np2 mpirun -np 2 "$gpu_bin" run --quiet --collective nccl --report "$logs/report-np2.json" > "$logs/run-np2.log" 2>&1 \
		&& grep -q '"collective": *"nccl"' "$logs/report-np2.json" && grep -q 'result: OK' "$logs/run-np2.log"; then
		result e2e-np2 PASS "run --collective nccl at np 2 on two GPUs: writing_check over NCCL; $(grep -m1 -o 'verify: .*' "$logs/run-np2.log" | cut -c1-120)"
	else
		tail -30 "$logs/run-np2.log"
		result e2e-np2 FAIL "$(why "$logs/run-np2.log"); log run-np2.log in the archive"
	fi
fi
# finish (the EXIT trap) writes the summary and the archive, and sets the exit status.
