#!/usr/bin/env bash
# gpu-check.sh: the one prepared check of the cuda build, for a GPU machine (an H100/H200 with a driver; no Go
# toolchain needed). Build its inputs here with `make gpu-check`, carry bin/cphicache-gpu, build/*-cuda.test and
# build/gpu-check-libs there, and run
#
#     kernels/gpu-check.sh
#
# from the repository root. Each step is bounded in time (under 10 minutes in all; typically 2-3):
#   1. kernels: every kernels test, the CUDA ones included (Gather/Scatter round trips on the GPU verified byte
#      for byte against the model, bounds errors, empty spans, registration-chunk crossings, concurrent callers);
#   2. kernels benchmarks: copy_items, Gather (D2H) and Scatter (H2D) of 256 MiB objects in both layouts and
#      parts of 4 KiB .. 1 MiB, beside cuMemcpyDtoH / cuMemcpyHtoD of the same bytes;
#   3. nccl: a one-rank NCCL all-reduce on GPU memory through package nccl, with NVIDIA's libnccl.so.2 (from
#      $CPHICACHE_NCCL_LIB, Python's nvidia-nccl package, or the loader's cache), and the GPU build's
#      writing_check round trip timed; no MPI needed;
#   4. end to end, only where MPI is installed (mpirun, or a system libmpi for a singleton run): the hicache
#      SPMD tests of the cuda build at one rank (the CUDA engine under the whole data path, and the device NCCL
#      reducer), then `bin/cphicache-gpu run --collective nccl` at one rank. Without MPI this step is SKIPPED:
#      the carried libmpi lets binaries load, but MPI_Init needs an MPI installation (orted, its plugins);
#      the end-to-end GPU run then needs a cluster node with MPI.
# Logs go to $OUT (or build/gpu-check), with summary.txt. Exit status 0 only when no step failed.
set -uo pipefail

out=${OUT:-build/gpu-check}
mkdir -p "$out"
kernels_test=${1:-build/kernels-cuda.test}
hicache_test=build/hicache-cuda.test
nccl_test=build/ncclcheck-cuda.test
gpu_bin=bin/cphicache-gpu
carried_libs=$PWD/build/gpu-check-libs
declare -a results
failed=0

result() { # step status detail
	results+=("$(printf '%-10s %-5s %s' "$1" "$2" "$3")")
	echo "== $1: $2 $3"
	[ "$2" = FAIL ] && failed=1
	return 0
}

for f in "$kernels_test" "$hicache_test" "$nccl_test" "$gpu_bin"; do
	[ -x "$f" ] || { echo "gpu-check: $f not found; run make gpu-check on the build machine and carry its outputs" >&2; exit 2; }
done

{ nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current --format=csv || true; } \
	> "$out/gpu.txt" 2>&1
cat "$out/gpu.txt"

# The binaries link the build machine's libmpi (through package mpi). Where the loader cannot find it, use the
# carried copies; glibc too old for the build machine's binaries is reported, not worked around.
ldd "$gpu_bin" > "$out/ldd.txt" 2>&1
if grep -q "GLIBC_.*not found" "$out/ldd.txt"; then
	cat "$out/ldd.txt"; echo "gpu-check: FAIL: this machine's glibc is older than the build machine's (Debian 12, 2.36)"; exit 1
fi
system_mpi=1
if grep -q "libmpi.so.40 => not found" "$out/ldd.txt"; then
	system_mpi=0
	export LD_LIBRARY_PATH=$carried_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	echo "gpu-check: no libmpi here: using the carried copies in $carried_libs"
fi

# 1. kernels tests
if timeout 150 "$kernels_test" -test.count=1 -test.v -test.timeout 140s > "$out/tests.log" 2>&1; then
	result kernels PASS "$(grep -c '^--- PASS' "$out/tests.log") tests, $(grep -c '^--- PASS: TestCUDA' "$out/tests.log") of them CUDA"
else
	tail -50 "$out/tests.log"; result kernels FAIL "log in $out/tests.log"
fi

# 2. kernels benchmarks, summarised beside the DMA copy of the same bytes in the same direction
if timeout 180 "$kernels_test" -test.run '^$' -test.bench 'CUDA' -test.benchtime 10x -test.count 1 -test.timeout 170s \
	> "$out/bench.log" 2>&1; then
	awk '
		/^BenchmarkCUDA/ { for (i = 1; i <= NF; i++) if ($(i+1) == "MB/s") mbs[$1] = $i; names[++n] = $1 }
		END {
			for (k in mbs) { if (k ~ /MemcpyReference\/DtoH/) d2h = mbs[k]; if (k ~ /MemcpyReference\/HtoD/) h2d = mbs[k] }
			printf "# %-58s %10s %8s\n", "benchmark", "GB/s", "vs_DMA"
			for (i = 1; i <= n; i++) {
				k = names[i]; ref = (k ~ /Gather/) ? d2h : (k ~ /Scatter/) ? h2d : mbs[k]
				printf "  %-58s %10.2f %8.2f\n", k, mbs[k] / 1000, (ref > 0) ? mbs[k] / ref : 0
			}
		}' "$out/bench.log" | tee "$out/bench-summary.txt"
	result bench PASS "see $out/bench-summary.txt"
else
	tail -30 "$out/bench.log"; result bench FAIL "log in $out/bench.log"
fi

# 3. NCCL on GPU memory, one rank
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
	export CPHICACHE_NCCL_LIB=$nccl_lib
	if timeout 60 "$nccl_test" -test.count=1 -test.v -test.bench . -test.benchtime 2000x -test.timeout 50s > "$out/nccl.log" 2>&1; then
		result nccl PASS "$(grep -m1 -o 'NCCL [0-9.]* from .*' "$out/nccl.log"); $(awk '/^BenchmarkWritingCheck/ { print "writing_check round trip " $3 " ns" }' "$out/nccl.log")"
	else
		tail -30 "$out/nccl.log"; result nccl FAIL "log in $out/nccl.log"
	fi
fi

# 4. End to end, where MPI is installed: mpirun -np 1, or an MPI singleton with the system's libmpi.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
launch=()
if command -v mpirun > /dev/null 2>&1; then
	launch=(mpirun -np 1)
elif [ "$system_mpi" = 1 ]; then
	launch=()
else
	result e2e SKIP "no MPI installation here (no mpirun, no libmpi): the end-to-end GPU run needs a cluster node with MPI"
	launch=(none)
fi
if [ "${launch[*]-}" != none ]; then
	collective=mpi
	[ -n "$nccl_lib" ] && collective=nccl
	if ( cd hicache && timeout 90 "${launch[@]}" "../$hicache_test" -test.count=1 -test.v -test.timeout 80s ) > "$out/hicache.log" 2>&1 \
		&& grep -q '^PASS$' "$out/hicache.log"; then
		result hicache PASS "$(grep -c '^--- PASS' "$out/hicache.log") SPMD tests at np 1 on the CUDA engine, $(grep -c '^--- SKIP' "$out/hicache.log") skipped"
	else
		tail -40 "$out/hicache.log"; result hicache FAIL "log in $out/hicache.log"
	fi
	if timeout 90 "${launch[@]}" "$gpu_bin" run --quiet --collective "$collective" --report "$out/report.json" > "$out/run.log" 2>&1 \
		&& grep -q '"collective": *"'"$collective"'"' "$out/report.json" && grep -q 'result: OK' "$out/run.log"; then
		result e2e PASS "cphicache-gpu run --collective $collective at np 1: $(grep -m1 -o 'verify: .*' "$out/run.log")"
	else
		tail -30 "$out/run.log"; result e2e FAIL "log in $out/run.log"
	fi
fi

printf '%s\n' "${results[@]}" | tee "$out/summary.txt"
if [ "$failed" = 0 ]; then echo "gpu-check: PASS"; else echo "gpu-check: FAIL"; exit 1; fi
