# gpu-check-late.sh: gpu-check.sh's last steps, sourced by it after the hicache step (never run alone): the
# kernels' bandwidth (bench), then the GPU binary itself (e2e-np1 without MPI, e2e-np2 under mpirun). It uses
# gpu-check.sh's functions (result, bounded, loadable, why) and the env step's facts (gpus, nccl_lib).
# shellcheck shell=bash

# --- bench: only over kernels that passed, each shape's bytes verified once before it is timed
if [ "${status[kernels]:-}" != PASS ]; then
	result bench SKIP "the kernels step did not pass: no benchmark of kernels that are wrong"
elif loadable bench "$kernels_test"; then
	if bounded bench "$kernels_test" -test.run '^$' -test.bench 'CUDA' -test.benchtime 20x -test.count 1 \
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
		shapes=$(grep -c -E '^  BenchmarkCUDA(Gather|Scatter)' "$logs/bench-summary.txt")
		refs=$(grep -c -E '^  BenchmarkCUDAMemcpyReference/(DtoH|HtoD)' "$logs/bench-summary.txt")
		if [ "$shapes" -ge 2 ] && [ "$refs" = 2 ]; then
			result bench PASS "$(awk '
				$1 ~ /Gather|Scatter/ { dir = ($1 ~ /Gather/) ? "Gather" : "Scatter"; n[dir]++
					if (!(dir in lo) || $3 < lo[dir]) lo[dir] = $3; if ($3 > hi[dir]) hi[dir] = $3 }
				END { printf "%d shapes verified; Gather %.2f-%.2fx DMA, Scatter %.2f-%.2fx DMA (table: bench-summary.txt)",
					n["Gather"] + n["Scatter"], lo["Gather"], hi["Gather"], lo["Scatter"], hi["Scatter"] }' "$logs/bench-summary.txt")"
		else
			result bench FAIL "exit 0 but measured $shapes kernel shapes and $refs of the 2 cuMemcpy references; log bench.log in the archive"
		fi
	elif rc=$? && { [ "$rc" = 124 ] || [ "$rc" = 137 ]; }; then
		result bench WARN "timed out after ${bound[bench]} s: a benchmark, so a warning, not a FAIL; log bench.log in the archive"
	else
		tail -30 "$logs/bench.log"
		result bench FAIL "$(why "$logs/bench.log"); log bench.log in the archive"
	fi
fi

# --- e2e-np1: the GPU binary itself, built with mpiself (a one-process MPI, no launcher, no MPI library): the
# main job's default workload over the CUDA engine (and the NCCL reducer where NCCL is), which must say
# result: OK. e2e-np2: the MPI-linked binary under mpirun at np 2, where MPI and two GPUs are.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
no_mpi="no MPI installation here (no libmpi.so.40): e2e-np1 ran the GPU binary without it"
launch=()
command -v mpirun > /dev/null 2>&1 && launch=(mpirun -np 1)
collective=mpi
[ -n "$nccl_lib" ] && collective=nccl
if unpack_for e2e-np1 cphicache-gpu-self gpu_self && loadable e2e-np1 "$gpu_self"; then
	proof="the CUDA engine under the whole data path, the GPU binary's start-up and report"
	[ "$collective" = nccl ] && proof="$proof; NCCL communicator made, writing_check not exercised (a one-rank CP group skips it)"
	if bounded e2e-np1 "$gpu_self" run --quiet --collective "$collective" --report "$logs/report-np1.json" > "$logs/run-np1.log" 2>&1 \
		&& grep -q '"collective": *"'"$collective"'"' "$logs/report-np1.json" && grep -q 'result: OK' "$logs/run-np1.log"; then
		result e2e-np1 PASS "cphicache-gpu run --collective $collective at np 1, no mpirun: $proof; $(grep -m1 -o 'verify: .*' "$logs/run-np1.log" | cut -c1-120)${staged_note:-}"
	else
		tail -30 "$logs/run-np1.log"
		result e2e-np1 FAIL "$(why "$logs/run-np1.log"); log run-np1.log in the archive"
	fi
fi
if [ "$collective" != nccl ] || [ "${#launch[@]}" = 0 ] || [ "$gpus" -lt 2 ]; then
	result e2e-np2 SKIP "needs NCCL, mpirun and two GPUs (here: NCCL $(yes_no "$nccl_lib"), mpirun $(yes_no "${launch[*]}"), $gpus GPUs)"
elif unpack_for e2e-np2 cphicache-gpu gpu_bin && loadable e2e-np2 "$gpu_bin" "$no_mpi"; then
	if bounded e2e-np2 mpirun -np 2 "$gpu_bin" run --quiet --collective nccl --report "$logs/report-np2.json" > "$logs/run-np2.log" 2>&1 \
		&& grep -q '"collective": *"nccl"' "$logs/report-np2.json" && grep -q 'result: OK' "$logs/run-np2.log"; then
		result e2e-np2 PASS "run --collective nccl at np 2 on two GPUs: writing_check over NCCL; $(grep -m1 -o 'verify: .*' "$logs/run-np2.log" | cut -c1-120)"
	else
		tail -30 "$logs/run-np2.log"
		result e2e-np2 FAIL "$(why "$logs/run-np2.log"); log run-np2.log in the archive"
	fi
fi
