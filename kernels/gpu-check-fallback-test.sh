# gpu-check-fallback-test.sh: the cases of kernels/gpu-check-test.sh for what can go wrong on the machine and
# the script's fallback within the same try (sourced by it; each case a function that start_case runs beside
# the others, with its own copy of the fake kit in $kit and its own record of calls in $calls):
#   7. steps that hang until their (shortened) bounds (below);
#   9. binaries whose libraries do not resolve (below);
#  10. NCCL in none of the usual places: found by the filesystem search; in a venv under /opt in the cu13 wheels'
#      layout, with the wheel's version; in the venv of the python3 on PATH, without asking Python; NCCL 2.29:
#      no two-rank step (with 2.32, case 3 of gpu-check-test.sh, it runs with NCCL_MULTI_RANK_GPU_ENABLE=1);
#  11. NCCL's init failing: the second or third try's settings pass, say which, and are kept for the later
#      steps; failing every time, the step FAIL naming each try;
#  12. /dev/shm not a tmpfs: a tmpfs mounted and said so, or the failed mount said; gVisor recorded; the SASS
#      load failing fails the module step; cuMemHostRegister refused: the step run again staged, every PASS
#      after it named as the staged path's;
#  13. two GPUs and mpirun: e2e-np2 runs (one GPU: its time goes to the steps that run); benchmarks that hang
#      past their bounds are WARNs and the run still PASSes.
# shellcheck shell=bash

# The machine's fakes beside nvidia-smi, python3 and pip (gpu-check-test.sh):
# mount, always first on the script's PATH here: no case may mount anything on this machine. It records its
# call, fails under FAKE_MOUNT_FAILS, else leaves a mark that the fake df reads.
cat > "$tmp/safe/mount" <<'EOF'
#!/bin/sh
echo "mount $*" >> "${FAKE_CALLS:-/dev/null}"
[ -n "${FAKE_MOUNT_FAILS:-}" ] && { echo "mount: $4: permission denied." >&2; exit 32; }
[ -n "${FAKE_CALLS:-}" ] && : > "$FAKE_CALLS.mounted"
exit 0
EOF
# df: under FAKE_SHM_TYPE, GPU_CHECK_SHM_DIR is a 10 GiB filesystem of that type until the fake mount made it
# an 8 GiB tmpfs; else the real df.
cat > "$tmp/path/df" <<'EOF'
#!/bin/sh
for last; do :; done
if [ -n "${FAKE_SHM_TYPE:-}" ] && [ "$last" = "${GPU_CHECK_SHM_DIR:-}" ]; then
	echo "Filesystem Type 1024-blocks Used Available Capacity Mounted on"
	if [ -e "$FAKE_CALLS.mounted" ]; then echo "tmpfs tmpfs 8388608 0 8388608 0% $last"
	else echo "/dev/vdb $FAKE_SHM_TYPE 10485760 0 10485760 0% $last"; fi
	exit 0
fi
exec /bin/df "$@"
EOF
# uname and dmesg as gVisor answers them under FAKE_GVISOR; mpirun runs its command once (np ranks of a stub
# would prove nothing more), so that no case depends on this machine's MPI.
printf '#!/bin/sh\n[ -n "${FAKE_GVISOR:-}" ] && [ "$1" = -r ] && { echo 4.4.0; exit 0; }\nexec /bin/uname "$@"\n' > "$tmp/path/uname"
printf '#!/bin/sh\n[ -n "${FAKE_GVISOR:-}" ] && { echo "[    0.000000] Starting gVisor..."; exit 0; }\nexit 1\n' > "$tmp/path/dmesg"
printf '#!/bin/sh\necho "mpirun $*" >> "$FAKE_CALLS"\n[ "$1" = -np ] && shift 2\nexec "$@"\n' > "$tmp/path/mpirun"
chmod +x "$tmp/path/"* "$tmp/safe/"*

# --- 7. steps that hang until their bounds (shortened here): each a FAIL that says so, the others still run;
# and a wedged nvidia-smi, ended at its 10 s cap, costs the GPU facts only: NCCL, ldd and the rest are found.
hung_steps() {
out=$tmp/hang && mkdir -p "$out"
run_check "$out" "${fake[@]}" PYTHONPATH="$tmp/site" GPU_CHECK_BOUNDS=kernels=2,hicache=2 FAKE_HANG="kernels-cuda.test hicache-cuda.test" FAKE_SMI_HANG=1 "$kit/gpu-check.sh"
rc=$?
[ "$rc" = 1 ] || fail "hung steps: exit $rc, want 1"
expect_out "hung steps" "$out"
expect_line "wedged nvidia-smi" "$out" '^fact +gpus: nvidia-smi -q failed \(exit 124' "the GPUs fact saying nvidia-smi timed out"
expect_line "wedged nvidia-smi" "$out" "^fact +nccl: $tmp/site/nvidia/nccl/lib/libnccl.so.2 " "the NCCL fact"
for f in ldd glibc /dev/shm limits network; do expect_line "wedged nvidia-smi" "$out" "^fact +$f: " "the $f fact"; done
expect_step "wedged nvidia-smi" "$out" env FAIL
expect_line "hung steps" "$out" '^kernels +FAIL exit 124 \(timed out after 2 s\)' "the kernels step timed out"
expect_line "hung steps" "$out" '^hicache +FAIL exit 124 \(timed out after 2 s\)' "the hicache step timed out"
for s in nccl nccl-bench transport e2e-np1; do expect_step "hung steps" "$out" "$s" PASS; done
expect_step "hung steps" "$out" bench SKIP
for p in $(cat "$calls.hang" 2> /dev/null); do kill -0 "$p" 2> /dev/null && { fail "hung steps: a hung step (pid $p) still runs"; kill "$p"; }; done
ok "steps hung past their bounds: FAIL timed out, every other step run; a wedged nvidia-smi loses no other fact"
}

# --- 9. binaries whose libraries do not resolve here: a missing library fails the step with ldd's line; a
# missing libmpi alone makes the MPI-only step a SKIP. Real ELF programs, linked against libraries then removed
# (the MPI one under a soname of its own: this machine has a real libmpi.so.40).
unresolved() {
lib=$tmp/lib && mkdir -p "$lib"
echo 'int fake(void) { return 0; }' > "$lib/fake.c"
echo 'int fake(void); int main(void) { return fake(); }' > "$lib/main.c"
if gcc -shared -fPIC -o "$lib/libgone.so" "$lib/fake.c" && gcc -shared -fPIC -Wl,-soname,libmpi_gpucheck.so.40 -o "$lib/libmpi_gpucheck.so.40" "$lib/fake.c" \
	&& gcc -o "$kit/kernels-cuda.test" "$lib/main.c" -L"$lib" -lgone \
	&& gcc -o "$lib/cphicache-gpu" "$lib/main.c" "$lib/libmpi_gpucheck.so.40" && gzip -c "$lib/cphicache-gpu" > "$kit/bin/cphicache-gpu.gz"; then
	rm -f "$lib"/*.so*
	out=$tmp/ldd && mkdir -p "$out"
	: > "$calls"
	# Two GPUs and mpirun: e2e-np2 would run the MPI-linked binary, whose libmpi is missing here.
	run_check "$out" "${fake[@]}" PYTHONPATH="$tmp/site" FAKE_GPUS=2 "$kit/gpu-check.sh"
	expect_step "unresolved" "$out" kernels FAIL
	grep -q 'kernels-cuda.test cannot load here: libgone.so => not found' "$out/summary.txt" || fail "unresolved: the kernels line does not quote ldd: $(grep '^kernels' "$out/summary.txt")"
	expect_line "unresolved" "$out" '^fact +ldd: .*kernels-cuda.test: libgone.so => not found' "the ldd fact naming the library"
	expect_step "unresolved" "$out" e2e-np2 SKIP
	expect_line "unresolved" "$out" '^e2e-np2 +SKIP no MPI installation' "e2e-np2 skipped for the missing libmpi"
	! grep -q '^kernels-cuda.test ' "$calls" || fail "unresolved: a binary that cannot load was run"
	ok "binaries that cannot load: FAIL quoting ldd, SKIP when only libmpi is missing"
else
	fail "could not build the test's ELF programs with gcc"
fi
}


# --- 10. NCCL where the usual places miss it
nccl_elsewhere() {
	local out lib
	out=$tmp/search && mkdir -p "$out" "$tmp/deep/a/b" && : > "$tmp/deep/a/b/libnccl.so.2"
	run_check "$out" "${fake[@]}" PYTHONPATH= GPU_CHECK_SEARCH_ROOTS="$tmp/deep" FAKE_NCCL_VERSION=2.29.7 "$kit/gpu-check.sh"
	expect_line "found by the search" "$out" "^fact +nccl: $tmp/deep/a/b/libnccl.so.2 \\(a search of $tmp/deep" "the NCCL the search found"
	expect_step "found by the search" "$out" nccl PASS
	expect_line "NCCL 2.29" "$out" '^nccl-2rank +SKIP NCCL 2\.29\.7 is older than 2\.30' "the two-rank step skipped below 2.30"
	! grep -q 'TestTwoRanks' "$calls" || fail "NCCL 2.29: the two-rank test was run"
	lib=$tmp/opt/venv/lib/python3.12/site-packages
	out=$tmp/optvenv && mkdir -p "$out" "$lib/nvidia/cu13/lib" "$lib/nvidia_nccl_cu13-2.32.3.dist-info"
	: > "$lib/nvidia/cu13/lib/libnccl.so.2"
	run_check "$out" "${fake[@]}" PYTHONPATH= GPU_CHECK_OPT_DIR="$tmp/opt" "$kit/gpu-check.sh"
	expect_line "venv under /opt" "$out" "^fact +nccl: $lib/nvidia/cu13/lib/libnccl.so.2 \\(nvidia/cu13/lib in a site-packages folder\\), version 2\\.32\\.3 " \
		"the cu13 layout in a venv under /opt, with the wheel's version"
	lib=$tmp/venv/lib/python3.11/site-packages
	out=$tmp/pyvenv && mkdir -p "$out" "$tmp/venv/bin" "$lib/nvidia/nccl/lib" && : > "$lib/nvidia/nccl/lib/libnccl.so.2"
	cp "$tmp/path/python3" "$tmp/venv/bin/python3"
	run_check "$out" "${fake[@]}" PATH="$tmp/venv/bin:$tmp/path:$tmp/safe:$PATH" PYTHONPATH= "$kit/gpu-check.sh"
	expect_line "python3's venv" "$out" "^fact +nccl: $lib/nvidia/nccl/lib/libnccl.so.2 \\(nvidia/nccl/lib in a site-packages folder\\)" \
		"the NCCL of the venv that the python3 on PATH belongs to"
	ok "NCCL found by the filesystem search, in a venv under /opt (cu13 layout, version named), in python3's venv; nccl-2rank SKIP below 2.30"
}

# --- 11. NCCL's init failing until a fallback setting is given (FAKE_NCCL_NEEDS)
nccl_second_try() {
	local out=$tmp/try2 && mkdir -p "$out"
	run_check "$out" "${fake[@]}" PYTHONPATH="$tmp/site" FAKE_NCCL_NEEDS=NCCL_SOCKET_IFNAME=lo "$kit/gpu-check.sh"
	expect_line "init fails once" "$out" '^nccl +PASS 2 tests passed on try 2 of 3, with NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1$' "the second try's PASS"
	expect_line "init fails once" "$out" '^ +second try: NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 worked after try 1 \(NCCL.s defaults\): exit 1' "which settings worked"
	grep -q '^transport-cuda.test .*\[ifname=lo\]$' "$calls" || fail "init fails once: the transport step did not get the settings that worked"
	tar -tzf "$out/gpu-check-logs.tar.gz" > "$out.archived" 2>&1
	grep -q '^\./nccl\.try1\.log$' "$out.archived" && grep -q '^\./nccl-debug\.[0-9]*\.log$' "$out.archived" \
		|| fail "init fails once: the archive lacks the first try's log or NCCL's INFO lines: $(tr '\n' ' ' < "$out.archived")"
	out=$tmp/try3 && mkdir -p "$out"
	run_check "$out" "${fake[@]}" PYTHONPATH="$tmp/site" FAKE_NCCL_NEEDS=NCCL_CUMEM_HOST_ENABLE=0 "$kit/gpu-check.sh"
	expect_line "init fails twice" "$out" '^nccl +PASS .* on try 3 of 3, with .*NCCL_CUMEM_HOST_ENABLE=0' "the third try's PASS"
	out=$tmp/trynever && mkdir -p "$out"
	run_check "$out" "${fake[@]}" PYTHONPATH="$tmp/site" FAKE_NCCL_NEEDS=NCCL_NEVER=1 "$kit/gpu-check.sh"
	expect_line "init always fails" "$out" '^nccl +FAIL .*try 1 .*exit 1; try 2 .*exit 1; try 3 .*exit 1' "each try named in the FAIL"
	expect_step "init always fails" "$out" nccl-bench SKIP
	ok "NCCL's init failing: the second or third try's settings PASS, named and kept; failing every try, a FAIL naming each"
}

# --- 12. /dev/shm on another filesystem (FAKE_SHM_TYPE, through GPU_CHECK_SHM_DIR: never this machine's), gVisor
shm_not_tmpfs() {
	local out=$tmp/shm && mkdir -p "$out" "$tmp/shmdir"
	run_check "$out" "${fake[@]}" PYTHONPATH="$tmp/site" GPU_CHECK_SHM_DIR="$tmp/shmdir" FAKE_SHM_TYPE=ext4 FAKE_GVISOR=1 \
		FAKE_NO_SASS=1 FAKE_NO_REGISTER=1 "$kit/gpu-check.sh"
	expect_line "not a tmpfs" "$out" "^fact +/dev/shm: tmpfs 8\\.0G, 8\\.0G free, mounted on $tmp/shmdir; mended: was ext4 with 10240 MiB free" "the mended /dev/shm"
	grep -q "^mount -t tmpfs -o size=8g,mode=1777 tmpfs $tmp/shmdir$" "$calls" || fail "not a tmpfs: no tmpfs mounted: $(grep '^mount' "$calls")"
	expect_line "gVisor" "$out" '^fact +sandbox: gVisor \(dmesg: .*Starting gVisor' "gVisor recorded"
	expect_line "no SASS" "$out" '^module +FAIL with CUDA_DISABLE_PTX_JIT=1' "the module step failing on the SASS load"
	expect_line "no registration" "$out" '^ +kernels: registering the slab failed \(cuMemHostRegister\(0x7f0000000000, 1073741824 bytes\): CUDA_ERROR_NOT_SUPPORTED \(801\)\): run again with CPHICACHE_CUDA_STAGED=1' \
		"the failed registration and the staged retry"
	for s in kernels transport hicache; do
		expect_line "no registration" "$out" "^$s +PASS .*\\(STAGED: the slab was NOT registered" "$s's PASS named as the staged path's"
	done
	grep -q '^hicache-cuda.test .*\[staged=1\]' "$calls" || fail "no registration: the hicache step did not run staged"
	rm -f "$calls.mounted"
	out=$tmp/shmfail && mkdir -p "$out"
	run_check "$out" "${fake[@]}" PYTHONPATH="$tmp/site" GPU_CHECK_SHM_DIR="$tmp/shmdir" FAKE_SHM_TYPE=ext4 FAKE_MOUNT_FAILS=1 "$kit/gpu-check.sh"
	expect_line "mount fails" "$out" "^fact +/dev/shm: ext4 10\\.0G.*; NOT mended: .*mount -t tmpfs failed: mount: .*permission denied" "the failed mount said"
	expect_step "mount fails" "$out" module PASS
	ok "/dev/shm not a tmpfs: a tmpfs mounted and said, a failed mount said; gVisor recorded; a SASS load failing fails module; registration refused: staged copies, named as such"
}

# --- 13. two GPUs and mpirun (a fake one: it runs its command once); the benchmarks hanging
two_gpus() {
	local out=$tmp/twogpus && mkdir -p "$out"
	run_check "$out" "${fake[@]}" PYTHONPATH="$tmp/site" FAKE_GPUS=2 FAKE_BENCH_HANG=1 GPU_CHECK_BOUNDS=nccl-bench=2,bench=2 "$kit/gpu-check.sh"
	local rc=$?
	[ "$rc" = 0 ] || fail "two GPUs, benchmarks hanging: exit $rc, want 0: $(cat "$out/summary.txt")"
	expect_step "two GPUs" "$out" e2e-np2 PASS
	grep -q '^mpirun -np 2 .*/cphicache-gpu run --quiet --collective nccl' "$calls" || fail "two GPUs: e2e-np2 did not run the unpacked binary under mpirun"
	! grep -q '^fact +bounds:' "$out/summary.txt" || fail "two GPUs: time taken from e2e-np2, which runs"
	expect_line "benchmarks hang" "$out" '^nccl-bench +WARN timed out after 2 s' "the NCCL benchmark's timeout as a WARN"
	expect_line "benchmarks hang" "$out" '^bench +WARN timed out after 2 s' "the kernels benchmark's timeout as a WARN"
	for p in $(cat "$calls.hang" 2> /dev/null); do kill "$p" 2> /dev/null; done
	ok "two GPUs: e2e-np2 runs under mpirun; benchmarks timed out are WARNs and the run PASSes"
}
