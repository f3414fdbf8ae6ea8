#!/usr/bin/env bash
# gpu-check.sh: the one prepared check of the cuda build, for a GPU machine (an H100/H200 with a driver; no Go
# toolchain needed). Build its input here with `make gpu-check`, carry build/kernels-cuda.test there, and run
#
#     kernels/gpu-check.sh [path/to/kernels-cuda.test]
#
# from the repository root. It runs, each step bounded in time (under 10 minutes in all):
#   1. every kernels test, the CUDA ones included: Gather/Scatter round trips on the GPU verified byte for byte
#      against the model, bounds errors, empty spans, registration-chunk crossings, concurrent callers;
#   2. the bandwidth benchmarks: our copy_items kernel, Gather (D2H) and Scatter (H2D) of 256 MiB objects in both
#      layouts and parts of 4 KiB .. 1 MiB, beside cuMemcpyDtoH / cuMemcpyHtoD of the same bytes.
# Logs go to $OUT (or build/gpu-check), with a summary table: GB/s and the ratio to the DMA copy.
set -euo pipefail

bin=${1:-build/kernels-cuda.test}
out=${OUT:-build/gpu-check}
mkdir -p "$out"
[ -x "$bin" ] || { echo "gpu-check: $bin not found; run make gpu-check on the build machine first" >&2; exit 2; }

{ nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current --format=csv || true; } \
	> "$out/gpu.txt" 2>&1
cat "$out/gpu.txt"

echo "== tests (byte-verified)"
timeout 240 "$bin" -test.count=1 -test.v -test.timeout 230s > "$out/tests.log" 2>&1 \
	|| { tail -50 "$out/tests.log"; echo "gpu-check: FAIL (tests), log in $out/tests.log"; exit 1; }
grep -E '^(--- |ok|PASS|FAIL)' "$out/tests.log" | grep -v '^    ' | grep -E 'CUDA|^PASS|^FAIL' || true

echo "== benchmarks"
timeout 300 "$bin" -test.run '^$' -test.bench 'CUDA' -test.benchtime 10x -test.count 1 -test.timeout 290s \
	> "$out/bench.log" 2>&1 || { tail -30 "$out/bench.log"; echo "gpu-check: FAIL (benchmarks)"; exit 1; }

# Summary: every kernel figure beside the DMA copy of the same bytes in the same direction.
awk '
	/^BenchmarkCUDA/ { for (i = 1; i <= NF; i++) if ($(i+1) == "MB/s") mbs[$1] = $i; names[++n] = $1 }
	END {
		for (k in mbs) { if (k ~ /MemcpyReference\/DtoH/) d2h = mbs[k]; if (k ~ /MemcpyReference\/HtoD/) h2d = mbs[k] }
		printf "# %-58s %10s %8s\n", "benchmark", "GB/s", "vs_DMA"
		for (i = 1; i <= n; i++) {
			k = names[i]; ref = (k ~ /Gather/) ? d2h : (k ~ /Scatter/) ? h2d : mbs[k]
			printf "  %-58s %10.2f %8.2f\n", k, mbs[k] / 1000, (ref > 0) ? mbs[k] / ref : 0
		}
	}' "$out/bench.log" | tee "$out/summary.txt"
echo "gpu-check: PASS"
