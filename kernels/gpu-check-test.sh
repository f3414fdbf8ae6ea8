#!/usr/bin/env bash
# gpu-check-test.sh: tests of kernels/gpu-check.sh that run here, without a GPU (make test-gpu-check-script).
#
#   1. The real kit (build/gpu-check-kit, when make gpu-check built it) on this machine: no GPU, no NCCL. The run
#      must FAIL, with the nccl step FAIL (NCCL expected, not found: never SKIP or PASS), the bench SKIP (the
#      kernels failed), and exactly summary.txt and the log archive in $OUT.
#   2. A fake kit, each binary a stub that passes (one carried without its mode bits), beside a fake nvidia-smi
#      and an NCCL installed where the nvidia-nccl-cu13 wheel puts it (nvidia/nccl/lib/libnccl.so.2 on Python's
#      path): every step PASS but e2e-np2 (one GPU), each one-rank test's "proves:" line in the summary, the
#      NCCL tests run with NCCL_DEBUG=INFO.
#   3. The same without NCCL: nccl FAIL and the run FAIL; with GPU_CHECK_EXPECT_NCCL=0, nccl SKIP and the run
#      PASS, the transport tests told to skip NCCL.
#   4. A kernels stub that fails: the bench step SKIP and the kernels binary never asked to benchmark.
#   5. A step that hangs, and the run sent SIGTERM: the step's process ended, summary and archive still
#      written, the steps that did not run listed as FAIL.
#   6. Binaries whose libraries do not resolve: the step FAIL quoting ldd, or SKIP when only libmpi is missing
#      (the MPI-only steps on a machine without MPI).
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
script=$repo/kernels/gpu-check.sh
real_kit=${1:-}
tmp=$(mktemp -d /tmp/gpu-check-test.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
fails=0

fail() { echo "FAIL: gpu-check.sh: $*"; fails=$((fails + 1)); }

# ok says a case passed, when none of its checks failed since the last ok.
seen=0
ok() {
	[ "$fails" = "$seen" ] && echo "ok   gpu-check.sh, $*"
	seen=$fails
}

# expect_out checks $OUT holds exactly the two files, the archive readable and holding the summary and env.txt.
expect_out() { # case out
	local files
	files=$(cd "$2" && find . -type f | sed 's|^\./||' | sort | tr '\n' ' ')
	[ "$files" = "gpu-check-logs.tar.gz summary.txt " ] || fail "$1: \$OUT holds '$files', want exactly gpu-check-logs.tar.gz and summary.txt"
	tar -tzf "$2/gpu-check-logs.tar.gz" > "$tmp/list" 2>&1 || fail "$1: the archive does not read: $(head -1 "$tmp/list")"
	for f in summary.txt env.txt; do grep -qx "./$f" "$tmp/list" || fail "$1: the archive lacks $f"; done
}

# expect_step checks one step's status in a summary.
expect_step() { # case out step status
	grep -qE "^$3 +$4 " "$2/summary.txt" || fail "$1: want '$3 $4', summary says: $(grep -E "^$3 " "$2/summary.txt" || echo nothing)"
}

# run_check runs the script with a clean NCCL environment (make exports the ncclshim's path) and returns its
# exit status; extra environment assignments come first.
run_check() { # out env-assignments... -- script
	local out=$1
	shift
	env -u CPHICACHE_NCCL_LIB -u NCCL_DEBUG OUT="$out" "$@" > "$out.log" 2>&1
}

# --- 1. the real kit, here
if [ -n "$real_kit" ]; then
	out=$tmp/real && mkdir -p "$out"
	run_check "$out" PYTHONPATH= "$real_kit/gpu-check.sh"
	rc=$?
	[ "$rc" = 1 ] || fail "real kit without a GPU: exit $rc, want 1"
	expect_out "real kit" "$out"
	head -1 "$out/summary.txt" | grep -q '^gpu-check: FAIL' || fail "real kit: the summary's first line is not the FAIL verdict"
	expect_step "real kit" "$out" nccl FAIL
	expect_step "real kit" "$out" bench SKIP
	grep -q 'NCCL is expected' "$out/summary.txt" || fail "real kit: the nccl line does not say NCCL was expected"
	ok "real kit without a GPU or NCCL: FAIL, nccl FAIL, bench SKIP, two files in \$OUT"
fi

# --- a fake kit: every binary a stub that records how it was called
kit=$tmp/kit
mkdir -p "$kit/bin" "$kit/hicache" "$tmp/path" "$tmp/site/nvidia/nccl/lib"
cp "$script" "$kit/gpu-check.sh"
printf 'version: fake\nneeds: GLIBC_2.17\n' > "$kit/build-info.txt"
cat > "$tmp/stub" <<'EOF'
#!/usr/bin/env bash
name=$(basename "$0")
echo "$name NCCL_DEBUG=${NCCL_DEBUG:-} $*" >> "$FAKE_CALLS"
# As NCCL does: its debug lines go to NCCL_DEBUG_FILE, %p the pid.
[ -n "${NCCL_DEBUG_FILE:-}" ] && echo "NCCL INFO fake $name" >> "${NCCL_DEBUG_FILE//%p/$$}"
if [ "${FAKE_HANG:-}" = "$name" ]; then echo $$ > "$FAKE_CALLS.hang"; exec sleep 300; fi
if [ "${FAKE_FAIL:-}" = "$name" ]; then printf -- '--- FAIL: TestCUDAFake (0.00s)\nFAIL\n'; exit 1; fi
case "$name $*" in
*-test.bench*)
	printf 'BenchmarkCUDAGather/a-16 10 1 ns/op 20000.00 MB/s\nBenchmarkCUDAScatter/a-16 10 1 ns/op 30000.00 MB/s\n'
	printf 'BenchmarkCUDAMemcpyReference/DtoH-16 10 1 ns/op 25000.00 MB/s\nBenchmarkCUDAMemcpyReference/HtoD-16 10 1 ns/op 25000.00 MB/s\n'
	printf 'BenchmarkWritingCheckRoundTrip-16 2000 12000 ns/op\nPASS\n' ;;
cphicache-gpu*)
	collective=mpi report=/dev/null
	while [ $# -gt 0 ]; do
		case "$1" in --collective) collective=$2 ;; --report) report=$2 ;; esac
		shift
	done
	echo "{\"collective\": \"$collective\"}" > "$report"
	printf '  verify: fake\n  result: OK\n' ;;
*)
	for t in TestCUDAOne TestStartOne TestStartTwo TestFour TestFive TestSix TestSeven TestEight TestNine TestTen; do
		printf -- '=== RUN   %s\n    fake_test.go:1: proves: %s by %s\n--- PASS: %s (0.00s)\n' "$t" "$t" "$name" "$t"
	done
	echo PASS ;;
esac
EOF
chmod +x "$tmp/stub"
for b in kernels-cuda.test ncclcheck-cuda.test transport-cuda.test hicache-cuda.test bin/cphicache-gpu; do cp "$tmp/stub" "$kit/$b"; done
cat > "$tmp/path/nvidia-smi" <<'EOF'
#!/bin/sh
case "$*" in
-L) echo "GPU 0: NVIDIA H200 (UUID: GPU-fake)" ;;
*noheader*) echo "NVIDIA H200, 580.65.06" ;;
*) echo "| NVIDIA-SMI 580.65.06   Driver Version: 580.65.06   CUDA Version: 13.0 |" ;;
esac
EOF
chmod +x "$tmp/path/nvidia-smi"
touch "$tmp/site/nvidia/nccl/lib/libnccl.so.2" # nvidia/ and nvidia/nccl/ are namespace packages, as in the wheel
fake=(PATH="$tmp/path:$PATH" FAKE_CALLS="$tmp/calls")

# --- 2. everything there; one binary has lost its mode bits on the way, which the script restores
out=$tmp/pass && mkdir -p "$out"
: > "$tmp/calls"
chmod a-x "$kit/transport-cuda.test"
run_check "$out" "${fake[@]}" PYTHONPATH="$tmp/site" "$kit/gpu-check.sh"
rc=$?
[ "$rc" = 0 ] || fail "fake kit, all present: exit $rc, want 0: $(cat "$out/summary.txt")"
expect_out "all present" "$out"
for s in env kernels nccl nccl-bench transport hicache bench e2e-np1; do expect_step "all present" "$out" "$s" PASS; done
expect_step "all present" "$out" e2e-np2 SKIP
grep -q "NCCL $tmp/site/nvidia/nccl/lib/libnccl.so.2" "$out/summary.txt" || fail "all present: the env line does not name the wheel's libnccl.so.2"
grep -q 'proves: TestStartOne by transport-cuda.test' "$out/summary.txt" || fail "all present: the transport tests' proves: lines are not in the summary"
grep -q '^ncclcheck-cuda.test NCCL_DEBUG=INFO -test.count=1 -test.v' "$tmp/calls" || fail "all present: the NCCL tests did not run with NCCL_DEBUG=INFO"
tar -tzf "$out/gpu-check-logs.tar.gz" | grep -q '^\./nccl-debug\.[0-9]*\.log$' || fail "all present: NCCL's debug files are not in the archive"
ok "fake kit with NCCL from the wheel's path: every step PASS, proofs in the summary"

# --- 3. no NCCL: FAIL when expected, SKIP when told not to expect it
out=$tmp/nonccl && mkdir -p "$out"
run_check "$out" "${fake[@]}" PYTHONPATH= "$kit/gpu-check.sh"
rc=$?
[ "$rc" = 1 ] || fail "no NCCL: exit $rc, want 1"
expect_out "no NCCL" "$out"
expect_step "no NCCL" "$out" nccl FAIL
out=$tmp/optional && mkdir -p "$out"
: > "$tmp/calls"
run_check "$out" "${fake[@]}" PYTHONPATH= GPU_CHECK_EXPECT_NCCL=0 "$kit/gpu-check.sh"
rc=$?
[ "$rc" = 0 ] || fail "no NCCL, not expected: exit $rc, want 0"
expect_step "NCCL not expected" "$out" nccl SKIP
grep -q '^transport-cuda.test .*-test.skip NCCL' "$tmp/calls" || fail "NCCL not expected: the transport tests were not told to skip NCCL"
ok "no NCCL: nccl FAIL and the run FAIL; with GPU_CHECK_EXPECT_NCCL=0 a SKIP"

# --- 4. kernels fail: no benchmark
out=$tmp/kfail && mkdir -p "$out"
: > "$tmp/calls"
run_check "$out" "${fake[@]}" PYTHONPATH="$tmp/site" FAKE_FAIL=kernels-cuda.test "$kit/gpu-check.sh"
rc=$?
[ "$rc" = 1 ] || fail "kernels failing: exit $rc, want 1"
expect_step "kernels failing" "$out" kernels FAIL
expect_step "kernels failing" "$out" bench SKIP
! grep -q '^kernels-cuda.test .*-test.bench' "$tmp/calls" || fail "kernels failing: the benchmark ran anyway"
ok "kernels failing: bench SKIP, never run"

# --- 5. a hung step, then SIGTERM: the report is still written, the step's process ended
out=$tmp/term && mkdir -p "$out"
: > "$tmp/calls"
rm -f "$tmp/calls.hang"
env -u CPHICACHE_NCCL_LIB OUT="$out" "${fake[@]}" PYTHONPATH="$tmp/site" FAKE_HANG=hicache-cuda.test "$kit/gpu-check.sh" > "$out.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -s "$tmp/calls.hang" ] && break; sleep 0.1; done
kill -TERM "$pid"
# The script must end within seconds of the signal, not when the hung step's bound runs out.
for _ in $(seq 100); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
kill -0 "$pid" 2> /dev/null && { fail "SIGTERM: the script still runs 10 s after the signal"; kill -KILL "$pid"; }
wait "$pid"
rc=$?
[ "$rc" -ne 0 ] || fail "SIGTERM during a step: exit 0"
expect_out "SIGTERM" "$out"
head -1 "$out/summary.txt" | grep -q '^gpu-check: FAIL' || fail "SIGTERM: the summary's verdict is not FAIL"
expect_step "SIGTERM" "$out" bench FAIL
hung=$(cat "$tmp/calls.hang" 2>/dev/null)
sleep 0.5
[ -n "$hung" ] && ! kill -0 "$hung" 2> /dev/null || { fail "SIGTERM: the hung step (pid $hung) still runs"; kill "$hung" 2> /dev/null; }
ok "SIGTERM during a hung step: step ended, summary and archive written"

# --- 6. binaries whose libraries do not resolve here: a missing library fails the step with ldd's line; a
# missing libmpi alone makes the MPI-only step a SKIP. Real ELF programs, linked against libraries then removed
# (the MPI one under a soname of its own: this machine has a real libmpi.so.40).
lib=$tmp/lib && mkdir -p "$lib"
echo 'int fake(void) { return 0; }' > "$lib/fake.c"
echo 'int fake(void); int main(void) { return fake(); }' > "$lib/main.c"
if gcc -shared -fPIC -o "$lib/libgone.so" "$lib/fake.c" && gcc -shared -fPIC -Wl,-soname,libmpi_gpucheck.so.40 -o "$lib/libmpi_gpucheck.so.40" "$lib/fake.c" \
	&& gcc -o "$kit/kernels-cuda.test" "$lib/main.c" -L"$lib" -lgone \
	&& gcc -o "$kit/bin/cphicache-gpu" "$lib/main.c" "$lib/libmpi_gpucheck.so.40"; then
	rm -f "$lib"/*.so*
	out=$tmp/ldd && mkdir -p "$out"
	: > "$tmp/calls"
	run_check "$out" "${fake[@]}" PYTHONPATH="$tmp/site" "$kit/gpu-check.sh"
	expect_step "unresolved" "$out" kernels FAIL
	grep -q 'kernels-cuda.test cannot load here: libgone.so => not found' "$out/summary.txt" || fail "unresolved: the kernels line does not quote ldd: $(grep '^kernels' "$out/summary.txt")"
	expect_step "unresolved" "$out" e2e-np1 SKIP
	! grep -q '^kernels-cuda.test ' "$tmp/calls" || fail "unresolved: a binary that cannot load was run"
	ok "binaries that cannot load: FAIL quoting ldd, SKIP when only libmpi is missing"
else
	fail "could not build the test's ELF programs with gcc"
fi

[ "$fails" = 0 ] || exit 1
