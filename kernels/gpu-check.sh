#!/usr/bin/env bash
# gpu-check.sh: the one prepared check of the cuda build, for a GPU machine (an H100/H200 with a driver; no Go
# toolchain, no MPI needed). On the build machine `make gpu-check` assembles build/gpu-check-kit, which holds
# this script beside the binaries; carry that folder to the GPU machine and run
#
#     build/gpu-check-kit/gpu-check.sh
#
# Steps, each bounded by `timeout -k` (the sum of the bounds, printed at the start, is under 7 minutes; a
# typical run takes 1-2), each reported on one line of summary.txt:
#   1. kernels: every kernels test, the CUDA ones included (round trips on the GPU verified byte for byte
#      against the model, bounds errors, empty spans, registration-chunk crossings, consecutive and concurrent
#      callers);
#   2. bench: copy_items Gather (D2H) and Scatter (H2D) of 256 MiB objects in both layouts and parts of
#      4 KiB .. 1 MiB, each shape's bytes verified once, beside cuMemcpyDtoH / cuMemcpyHtoD of the same bytes;
#   3. nccl: a one-rank NCCL all-reduce on GPU memory through package nccl, with NVIDIA's libnccl.so.2 (from
#      $CPHICACHE_NCCL_LIB, Python's nvidia-nccl package, or the loader's cache), and the GPU build's
#      writing_check round trip timed. No MPI: the binary links only glibc and libcuda;
#   4. only where MPI is installed (mpirun, or a system libmpi.so.40 for a singleton): the hicache SPMD tests of
#      the cuda build at one rank, then `cphicache-gpu run` at one rank ("e2e-np1": the CUDA engine under the
#      whole data path; with NCCL, it proves the communicator is made, not writing_check, which a one-rank CP
#      group skips by design), and, with two GPUs or more and mpirun, at two ranks over NCCL ("e2e-np2": a real
#      writing_check on GPUs).
# Before each step, ldd must resolve every library of the step's binary on this machine (a glibc older than the
# build machine's shows up here as "version `GLIBC_...' not found"). Logs and summary.txt go to $OUT (or
# results/ beside this script). Exit status 0 only when no step failed.
set -uo pipefail

kit=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${OUT:-$kit/results}
mkdir -p "$out"
kernels_test=$kit/kernels-cuda.test
hicache_test=$kit/hicache-cuda.test
nccl_test=$kit/ncclcheck-cuda.test
gpu_bin=$kit/bin/cphicache-gpu
kill_after_s=5
declare -a results
failed=0
# Step bounds, in seconds: kernels, bench, nccl tests, nccl benchmark, hicache, e2e-np1, e2e-np2.
bounds=(90 100 25 20 60 45 45)
worst_s=10
for b in "${bounds[@]}"; do worst_s=$((worst_s + b + kill_after_s)); done

result() { # step status detail
	results+=("$(printf '%-9s %-4s %s' "$1" "$2" "$3")")
	echo "== $1: $2 $3"
	[ "$2" = FAIL ] && failed=1
	return 0
}

bounded() { # seconds command...: the command, ended by SIGTERM after seconds and by SIGKILL 5 s later
	local s=$1
	shift
	timeout -k "$kill_after_s" "$s" "$@"
}

# why is a failed step's first failing test, or else the last line of its log (a crash, a timeout).
why() {
	grep -m1 -E -- '^--- FAIL|^panic:|Error in initialization|^cphicache: ' "$1" | cut -c1-160 && return
	grep -v '^[[:space:]-]*$' "$1" | tail -1 | cut -c1-160
}

yes_no() { [ -n "$1" ] && echo yes || echo no; }

# unresolved prints the libraries the loader cannot resolve for a binary here (missing, or too old a glibc).
unresolved() {
	ldd "$1" 2>&1 | grep 'not found' | sed 's/^[[:space:]]*//' | tr '\n' ';'
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

for f in "$kernels_test" "$hicache_test" "$nccl_test" "$gpu_bin"; do
	[ -x "$f" ] || { echo "gpu-check: $f not found: run make gpu-check on the build machine and carry build/gpu-check-kit" >&2; exit 2; }
done
echo "gpu-check: kit $kit, results in $out, worst case ${worst_s} s"
{ timeout -k 2 10 nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current --format=csv || true; } \
	> "$out/gpu.txt" 2>&1
cat "$out/gpu.txt"
gpus=$(timeout -k 2 10 nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)

# 1. kernels tests
if loadable kernels "$kernels_test"; then
	if bounded "${bounds[0]}" "$kernels_test" -test.count=1 -test.v -test.timeout "$((bounds[0] - 5))s" > "$out/tests.log" 2>&1; then
		result kernels PASS "$(grep -c '^--- PASS' "$out/tests.log") tests passed ($(grep -c '^--- PASS: TestCUDA' "$out/tests.log") on the GPU), $(grep -c '^--- SKIP' "$out/tests.log") skipped"
	else
		tail -50 "$out/tests.log"; result kernels FAIL "$(why "$out/tests.log"); log in $out/tests.log"
	fi
fi

# 2. kernels benchmarks, summarised beside the DMA copy of the same bytes in the same direction
if loadable bench "$kernels_test"; then
	if bounded "${bounds[1]}" "$kernels_test" -test.run '^$' -test.bench 'CUDA' -test.benchtime 10x -test.count 1 \
		-test.timeout "$((bounds[1] - 5))s" > "$out/bench.log" 2>&1; then
		awk '
			/^BenchmarkCUDA/ { for (i = 1; i <= NF; i++) if ($(i+1) == "MB/s") { mbs[$1] = $i; names[++n] = $1 } }
			END {
				for (k in mbs) { if (k ~ /MemcpyReference\/DtoH/) d2h = mbs[k]; if (k ~ /MemcpyReference\/HtoD/) h2d = mbs[k] }
				printf "# %-58s %10s %8s\n", "benchmark", "GB/s", "vs_DMA"
				for (i = 1; i <= n; i++) {
					k = names[i]; ref = (k ~ /Gather/) ? d2h : (k ~ /Scatter/) ? h2d : mbs[k]
					printf "  %-58s %10.2f %8.2f\n", k, mbs[k] / 1000, (ref > 0) ? mbs[k] / ref : 0
				}
			}' "$out/bench.log" > "$out/bench-summary.txt"
		cat "$out/bench-summary.txt"
		result bench PASS "$(awk '
			$1 ~ /Gather|Scatter/ { dir = ($1 ~ /Gather/) ? "Gather" : "Scatter"; n[dir]++
				if (!(dir in lo) || $3 < lo[dir]) lo[dir] = $3; if ($3 > hi[dir]) hi[dir] = $3 }
			END { printf "%d shapes verified; Gather %.2f-%.2fx DMA, Scatter %.2f-%.2fx DMA (table: bench-summary.txt)",
				n["Gather"] + n["Scatter"], lo["Gather"], hi["Gather"], lo["Scatter"], hi["Scatter"] }' "$out/bench-summary.txt")"
	else
		tail -30 "$out/bench.log"; result bench FAIL "$(why "$out/bench.log"); log in $out/bench.log"
	fi
fi

# 3. NCCL on GPU memory, one rank: the tests (verbose, for their log), then the benchmark alone, whose result
# line stays whole without -test.v.
find_nccl() {
	if [ -n "${CPHICACHE_NCCL_LIB:-}" ] && [ -e "$CPHICACHE_NCCL_LIB" ]; then echo "$CPHICACHE_NCCL_LIB"; return; fi
	local dir
	dir=$(python3 -c 'import nvidia.nccl as m, os; print((list(getattr(m, "__path__", [])) or [os.path.dirname(m.__file__)])[0])' 2>/dev/null) \
		&& [ -e "$dir/lib/libnccl.so.2" ] && { echo "$dir/lib/libnccl.so.2"; return; }
	ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 / { print $NF; exit }'
}
nccl_lib=$(find_nccl)
if [ -z "$nccl_lib" ]; then
	result nccl SKIP "no libnccl.so.2 found (set CPHICACHE_NCCL_LIB, or pip install nvidia-nccl-cu12)"
else
	export CPHICACHE_NCCL_LIB=$nccl_lib # for the later steps too
fi
if [ -n "$nccl_lib" ] && loadable nccl "$nccl_test"; then
	if bounded "${bounds[2]}" "$nccl_test" -test.count=1 -test.v -test.timeout "$((bounds[2] - 5))s" > "$out/nccl.log" 2>&1 \
		&& bounded "${bounds[3]}" "$nccl_test" -test.run '^$' -test.bench . -test.benchtime 2000x -test.timeout "$((bounds[3] - 5))s" > "$out/nccl-bench.log" 2>&1; then
		version=$(grep -m1 -o 'NCCL [0-9.]* from [^ ]*' "$out/nccl.log")
		round_trip=$(awk '/ns\/op/ { for (i = 1; i < NF; i++) if ($(i+1) == "ns/op") printf "%.1f us", $i / 1000 }' "$out/nccl-bench.log")
		result nccl PASS "${version:-NCCL}: $(grep -c '^--- PASS' "$out/nccl.log") one-rank tests on GPU memory; writing_check round trip ${round_trip:-not measured}"
	else
		tail -30 "$out/nccl.log" "$out/nccl-bench.log" 2>/dev/null
		result nccl FAIL "$(why "$out/nccl.log"); logs in $out/nccl.log and nccl-bench.log"
	fi
fi

# 4. With MPI only: mpirun -np 1, or an MPI singleton with the system's libmpi.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
no_mpi="no MPI installation here (no libmpi.so.40): the end-to-end GPU run needs a node with MPI"
launch=()
command -v mpirun > /dev/null 2>&1 && launch=(mpirun -np 1)
collective=mpi
[ -n "$nccl_lib" ] && collective=nccl
if loadable hicache "$hicache_test" "$no_mpi"; then
	if ( cd "$kit/hicache" && bounded "${bounds[4]}" "${launch[@]}" "$hicache_test" -test.count=1 -test.v -test.timeout "$((bounds[4] - 5))s" ) > "$out/hicache.log" 2>&1 \
		&& grep -q '^PASS$' "$out/hicache.log"; then
		result hicache PASS "$(grep -c '^--- PASS' "$out/hicache.log") SPMD tests at np 1 on the CUDA engine, $(grep -c '^--- SKIP' "$out/hicache.log") skipped"
	else
		tail -40 "$out/hicache.log"; result hicache FAIL "$(why "$out/hicache.log"); log in $out/hicache.log"
	fi
fi
if loadable e2e-np1 "$gpu_bin" "$no_mpi"; then
	proves="the CUDA engine under the whole data path"
	[ "$collective" = nccl ] && proves="$proves; NCCL communicator made, writing_check not exercised (a one-rank CP group skips it)"
	if bounded "${bounds[5]}" "${launch[@]}" "$gpu_bin" run --quiet --collective "$collective" --report "$out/report-np1.json" > "$out/run-np1.log" 2>&1 \
		&& grep -q '"collective": *"'"$collective"'"' "$out/report-np1.json" && grep -q 'result: OK' "$out/run-np1.log"; then
		result e2e-np1 PASS "run --collective $collective at np 1: $proves; $(grep -m1 -o 'verify: .*' "$out/run-np1.log")"
	else
		tail -30 "$out/run-np1.log"; result e2e-np1 FAIL "$(why "$out/run-np1.log"); log in $out/run-np1.log"
	fi
fi
if [ "$collective" != nccl ] || [ "${#launch[@]}" = 0 ] || [ "$gpus" -lt 2 ]; then
	result e2e-np2 SKIP "needs NCCL, mpirun and two GPUs (here: NCCL $(yes_no "$nccl_lib"), mpirun $(yes_no "${launch[*]}"), $gpus GPUs)"
elif loadable e2e-np2 "$gpu_bin" "$no_mpi"; then
	if bounded "${bounds[6]}" mpirun -np 2 "$gpu_bin" run --quiet --collective nccl --report "$out/report-np2.json" > "$out/run-np2.log" 2>&1 \
		&& grep -q '"collective": *"nccl"' "$out/report-np2.json" && grep -q 'result: OK' "$out/run-np2.log"; then
		result e2e-np2 PASS "run --collective nccl at np 2 on two GPUs: writing_check over NCCL; $(grep -m1 -o 'verify: .*' "$out/run-np2.log")"
	else
		tail -30 "$out/run-np2.log"; result e2e-np2 FAIL "$(why "$out/run-np2.log"); log in $out/run-np2.log"
	fi
fi

printf '%s\n' "${results[@]}" | tee "$out/summary.txt"
if [ "$failed" = 0 ]; then echo "gpu-check: PASS"; else echo "gpu-check: FAIL"; exit 1; fi
