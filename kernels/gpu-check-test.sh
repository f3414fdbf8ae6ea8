#!/usr/bin/env bash
# gpu-check-test.sh: tests of kernels/gpu-check.sh that run here, without a GPU (make test-gpu-check-script).
#
#   1. The real kit (build/gpu-check-kit, when make gpu-check built it) on this machine: no GPU, no NCCL. The run
#      must FAIL, with the nccl step FAIL (NCCL expected, not found: never SKIP or PASS), the bench SKIP (the
#      kernels failed), and exactly summary.txt and the log archive in $OUT.
#   2. The budget: the step bounds add up to at most 300 s, which the script refuses to exceed; the device
#      call's timeout (GPU_CHECK_TIMEOUT_S, as make passes it and docs/GPU.md gives it) covers that worst case, and
#      two tries, each with a machine start, fit the device session's 15 minutes.
#   3. A fake kit, each binary a stub that passes (one carried without its mode bits), beside a fake nvidia-smi
#      and an NCCL installed where the nvidia-nccl-cu13 wheel puts it (nvidia/nccl/lib/libnccl.so.2 on Python's
#      path): every step PASS but e2e-np2 (one GPU: its time given to hicache and e2e-np1), each test's "proves:"
#      line and the facts in the summary, nvidia-smi called once, pip and mpirun never, NCCL_DEBUG=INFO.
#   4. No PASS that proves less than it says: an NCCL benchmark that measured nothing, hicache tests that pass
#      without running on the GPU, or without the whole run over NCCL, each FAIL their step.
#   5. The same without NCCL: nccl FAIL and the run FAIL; with GPU_CHECK_EXPECT_NCCL=0, nccl SKIP and the run
#      PASS, the transport tests told to skip NCCL.
#   6. A kernels stub that fails (in the same run as a fault of 4): the bench step SKIP and the kernels binary
#      never asked to benchmark.
#   8. A step that hangs, and the run sent SIGTERM: the step's process ended, summary and archive still
#      written, the steps that did not run listed as FAIL. Sent SIGKILL instead: summary.txt, written as the run
#      went, names every fact and every step that finished.
#   7, 9-13: hung steps, binaries that cannot load, and the machine's faults with their fallbacks (NCCL
#      elsewhere, NCCL's init failing, /dev/shm not a tmpfs, gVisor, two GPUs, benchmarks that time out):
#      kernels/gpu-check-fallback-test.sh.
# The waits are generous: it must pass on a machine loaded far beyond its cores.
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
	tar -tzf "$2/gpu-check-logs.tar.gz" > "$2.list" 2>&1 || fail "$1: the archive does not read: $(head -1 "$2.list")"
	for f in summary.txt env.txt; do grep -qx "./$f" "$2.list" || fail "$1: the archive lacks $f"; done
}

# expect_step checks one step's status in a summary.
expect_step() { # case out step status
	grep -qE "^$3 +$4 " "$2/summary.txt" || fail "$1: want '$3 $4', summary says: $(grep -E "^$3 " "$2/summary.txt" || echo nothing)"
}

# expect_line checks the summary holds a line matching an extended regular expression.
expect_line() { # case out regexp what
	grep -qE -- "$3" "$2/summary.txt" || fail "$1: the summary lacks $4 (/$3/): $(cat "$2/summary.txt")"
}

# safe keeps every case off this machine's own NCCL (the search looks in an empty folder, not /), its /opt, and
# its mounts (the fake mount comes first on PATH).
safe=(GPU_CHECK_SEARCH_ROOTS="$tmp/empty" GPU_CHECK_OPT_DIR="$tmp/empty" PATH="$tmp/safe:$PATH")

# run_check runs the script with a clean NCCL environment (make exports the ncclshim's path) and returns its
# exit status; extra environment assignments come first.
run_check() { # out env-assignments... -- script
	local out=$1
	shift
	env -u CPHICACHE_NCCL_LIB -u NCCL_DEBUG OUT="$out" "${safe[@]}" "$@" > "$out.log" 2>&1
}

# wait_for waits up to 5 minutes (a loaded machine) for a file to be non-empty.
wait_for() { # file
	for _ in $(seq 3000); do [ -s "$1" ] && return 0; sleep 0.1; done
	return 1
}

# Each case runs as a job of its own beside the others (start_case, below): they mostly wait on the script's
# bounds and sleeps, so side by side they take about as long as the longest one.

# --- 1. the real kit, here
real_kit_and_budget() {
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

# --- 2. the budget
worst=$(grep -o 'worst case [0-9]* s' "${out:-/dev/null}/summary.txt" 2> /dev/null | grep -o '[0-9]*')
bounds=$(sed -n 's/^declare -A bound=(\(.*\))$/\1/p' "$script")
kill_after=$(sed -n 's/^kill_after_s=//p' "$script")
archive=$(sed -n 's/^archive_s=//p' "$script")
[ "$(wc -w <<< "$bounds")" = 11 ] && [ -n "$kill_after" ] && [ -n "$archive" ] || fail "budget: cannot read the eleven step bounds, kill_after_s and archive_s from $script"
sum=${archive:-0}
for kv in $bounds; do kv=${kv#[}; sum=$((sum + ${kv#*]=} + kill_after)); done
[ "$sum" -le 300 ] || fail "budget: the bounds add up to $sum s, over 300 s"
[ -z "$worst" ] || [ "$worst" = "$sum" ] || fail "budget: the real kit's summary says worst case $worst s, the bounds add up to $sum s"
out=$tmp/over && mkdir -p "$out"
hicache_s=$(grep -o '\[hicache\]=[0-9]*' <<< "$bounds" | cut -d= -f2)
run_check "$out" GPU_CHECK_BOUNDS=hicache=$((hicache_s + 301 - sum)) "$script"
rc=$?
{ [ "$rc" = 2 ] && grep -q 'over 300 s' "$out.log"; } || fail "budget: bounds over 300 s were not refused: exit $rc, $(cat "$out.log")"
timeout_s=${GPU_CHECK_TIMEOUT_S:-}
start_s=${GPU_DEVICE_START_S:-120} session_s=${GPU_DEVICE_SESSION_S:-900}
if [ -n "$timeout_s" ]; then
	[ "$timeout_s" -ge $((sum + 10)) ] || fail "budget: the device call's timeout $timeout_s s leaves under 10 s beyond the worst case $sum s"
	[ $((2 * (start_s + timeout_s))) -le "$session_s" ] || fail "budget: two tries of $start_s s start + $timeout_s s exceed the session's $session_s s"
	grep -q "timeout_s=$timeout_s)" "$repo/docs/GPU.md" || fail "budget: docs/GPU.md does not give the device call with timeout_s=$timeout_s"
fi
ok "budget: bounds add up to $sum s (<= 300, refused above)${timeout_s:+; two device calls of $timeout_s s, each with a $start_s s start, fit $session_s s}"
}

# --- a fake kit: every binary a stub that records how it was called; each case runs a copy of its own
kit=$tmp/kit
mkdir -p "$kit/bin" "$kit/hicache" "$tmp/path" "$tmp/safe" "$tmp/empty" "$tmp/site/nvidia/nccl/lib"
cp "$script" "$kit/gpu-check.sh"
cp "$repo"/kernels/gpu-check-{env,nccl,shm,late}.sh "$kit/"
printf 'version: fake\nneeds: GLIBC_2.17\n' > "$kit/build-info.txt"
# Each binary prints the tests its real one has, as go test -v does. FAKE_HANG names binaries that hang,
# FAKE_FAIL one that fails; FAKE_NO_BENCH leaves the NCCL benchmark unmeasured; FAKE_CPU_ONLY has the hicache
# tests pass without running on the GPU (no on-device: lines); FAKE_NO_PROOF drops the NCCL whole run's test.
cat > "$tmp/stub" <<'EOF'
#!/usr/bin/env bash
name=$(basename "$0")
echo "$name NCCL_DEBUG=${NCCL_DEBUG:-} $* [staged=${CPHICACHE_CUDA_STAGED:-}] [ifname=${NCCL_SOCKET_IFNAME:-}]" >> "$FAKE_CALLS"
# As NCCL does: its debug lines go to NCCL_DEBUG_FILE, %p the pid.
[ -n "${NCCL_DEBUG_FILE:-}" ] && echo "NCCL INFO fake $name" >> "${NCCL_DEBUG_FILE//%p/$$}"
case " ${FAKE_HANG:-} " in *" $name "*) echo $$ >> "$FAKE_CALLS.hang"; exec sleep 300 ;; esac
if [ "${FAKE_FAIL:-}" = "$name" ]; then printf -- '--- FAIL: TestCUDAFake (0.00s)\nFAIL\n'; exit 1; fi
# FAKE_NCCL_NEEDS=VAR=VALUE: NCCL's init fails unless the environment has that setting (a bootstrap that needs lo).
if [ "$name" = ncclcheck-cuda.test ] && [ -n "${FAKE_NCCL_NEEDS:-}" ] && [[ $* != *-test.bench* ]] \
	&& [ "$(printenv "${FAKE_NCCL_NEEDS%%=*}")" != "${FAKE_NCCL_NEEDS#*=}" ]; then
	printf -- '--- FAIL: TestOneRankPreMulSumComputesOnTheDevice (0.00s)\n    ncclCommInitRankConfig: unhandled system error\nFAIL\n'
	exit 1
fi
case "$*" in *-test.bench*) [ -n "${FAKE_BENCH_HANG:-}" ] && exec sleep 300 ;; esac
# FAKE_NO_REGISTER: the engine's cuMemHostRegister refused, as a sandbox's GPU proxy might, unless staged.
case "$name" in kernels-cuda.test | transport-cuda.test | hicache-cuda.test)
	if [ -n "${FAKE_NO_REGISTER:-}" ] && [ "${CPHICACHE_CUDA_STAGED:-}" != 1 ]; then
		printf -- '--- FAIL: TestFake (0.00s)\n    kernels: cuMemHostRegister(0x7f0000000000, 1073741824 bytes): CUDA_ERROR_NOT_SUPPORTED (801)\nFAIL\n'
		exit 1
	fi ;;
esac
pass() { # test [log lines...]
	local t=$1 l
	shift
	printf '=== RUN   %s\n    fake_test.go:1: proves: %s by %s\n' "$t" "$t" "$name"
	for l in "$@"; do printf '    fake_test.go:2: %s\n' "$l"; done
	printf -- '--- PASS: %s (0.00s)\n' "$t"
}
case "$name $*" in
*-test.bench*)
	printf 'BenchmarkCUDAGather/a-16 20 1 ns/op 20000.00 MB/s\nBenchmarkCUDAScatter/a-16 20 1 ns/op 30000.00 MB/s\n'
	printf 'BenchmarkCUDAMemcpyReference/DtoH-16 20 1 ns/op 25000.00 MB/s\nBenchmarkCUDAMemcpyReference/HtoD-16 20 1 ns/op 25000.00 MB/s\n'
	[ -n "${FAKE_NO_BENCH:-}" ] || printf 'BenchmarkWritingCheckRoundTrip-16 2000 12000 ns/op\n'
	echo PASS ;;
cphicache-gpu*)
	collective=mpi report=/dev/null
	while [ $# -gt 0 ]; do
		case "$1" in --collective) collective=$2 ;; --report) report=$2 ;; esac
		shift
	done
	echo "{\"collective\": \"$collective\"}" > "$report"
	printf '  verify: fake\n  result: OK\n' ;;
kernels-cuda.test*-test.run*)
	[ "${CUDA_DISABLE_PTX_JIT:-}" = 1 ] && [ -z "${FAKE_NO_SASS:-}" ] && pass TestCUDAModuleLoadsItsSASSWithoutJIT
	[ "${CUDA_FORCE_PTX_JIT:-}" = 1 ] && pass TestCUDAModuleJITsItsPTX
	echo PASS ;;
kernels-cuda.test*)
	pass TestCUDAOne; pass TestCUDATwo; echo PASS ;;
ncclcheck-cuda.test*TestTwoRanks*)
	[ "${NCCL_MULTI_RANK_GPU_ENABLE:-}" = 1 ] && pass TestTwoRanksOnOneGPUReduceAcrossRanks
	echo PASS ;;
ncclcheck-cuda.test*)
	echo "NCCL ${FAKE_NCCL_VERSION:-2.32.3} from ${CPHICACHE_NCCL_LIB:-?} (non-blocking init: true, PreMulSum: true)"
	pass TestOneRankAllReduceWritesTheReceiveBuffer; pass TestOneRankPreMulSumComputesOnTheDevice; echo PASS ;;
transport-cuda.test*)
	pass TestGPULayoutSeesTheGPU; pass TestStartCopiesThroughTheSharedSlab
	case "$*" in *"-test.skip NCCL"*) ;; *) pass TestStartMakesTheNCCLReducerOnTheDevice ;; esac
	echo PASS ;;
hicache-cuda.test*)
	device="on-device: 1 CUDA engines made"
	[ -n "${FAKE_CPU_ONLY:-}" ] && device="no engine"
	pass TestParseRankInjection
	# A test whose engine is made in a subtest: its on-device: line is the subtest's.
	printf '=== RUN   TestRunInSubtests\n=== RUN   TestRunInSubtests/mpi\n    fake_test.go:3: %s\n    --- PASS: TestRunInSubtests/mpi (0.00s)\n--- PASS: TestRunInSubtests (0.00s)\n' "$device"
	for t in TestRun2 TestRun3 TestRun4 TestRun5 TestRun6 TestRun7 TestRun8 TestRun9 TestRun10; do pass "$t" "$device"; done
	if [ -z "${CPHICACHE_NCCL_LIB:-}" ]; then
		printf '=== RUN   TestRunOverNCCLProvesEveryReduction\n--- SKIP: TestRunOverNCCLProvesEveryReduction (0.00s)\n'
	elif [ -z "${FAKE_NO_PROOF:-}" ]; then
		pass TestRunOverNCCLProvesEveryReduction "$device"
	fi
	echo PASS ;;
esac
EOF
chmod +x "$tmp/stub"
for b in kernels-cuda.test ncclcheck-cuda.test transport-cuda.test hicache-cuda.test; do cp "$tmp/stub" "$kit/$b"; done
for b in cphicache-gpu cphicache-gpu-self; do gzip -c "$tmp/stub" > "$kit/bin/$b.gz"; done
# nvidia-smi as an H200 machine answers -q; every call is recorded (the script must call it once).
cat > "$tmp/path/nvidia-smi" <<'EOF'
#!/bin/sh
echo "nvidia-smi $*" >> "$FAKE_CALLS"
[ -n "${FAKE_SMI_HANG:-}" ] && exec sleep 300
case "$*" in
-q) printf '==============NVSMI LOG==============\n\nDriver Version                            : 580.65.06\nCUDA Version                              : 13.0\n\nAttached GPUs                             : %s\nGPU 00000000:1B:00.0\n    Product Name                          : NVIDIA H200\n    Persistence Mode                      : Disabled\n' "${FAKE_GPUS:-1}" ;;
*) echo "unexpected nvidia-smi call: $*" >&2; exit 9 ;;
esac
EOF
# python3 and pip, each call recorded: the script must never ask pip (its version check reaches for a registry).
printf '#!/bin/sh\necho "python3 $*" >> "$FAKE_CALLS"\nexec %s "$@"\n' "$(command -v python3)" > "$tmp/path/python3"
printf '#!/bin/sh\necho "pip $*" >> "$FAKE_CALLS"\nexit 1\n' > "$tmp/path/pip"
cp "$tmp/path/pip" "$tmp/path/pip3"
chmod +x "$tmp/path/"*
touch "$tmp/site/nvidia/nccl/lib/libnccl.so.2" # nvidia/ and nvidia/nccl/ are namespace packages, as in the wheel

# start_case runs a case (a function) as a background job with its own copy of the kit ($kit, which case 3
# finds with a mode bit lost and case 9 rebuilds) and its own record of calls ($calls), its output kept for the
# end; the job's status says whether any of its checks failed.
case_pids=() case_names=()
start_case() { # name function
	(
		kit=$tmp/kit.$1 calls=$tmp/calls.$1
		cp -a "$tmp/kit" "$kit" && : > "$calls" || fail "$1: cannot copy the fake kit"
		fake=(PATH="$tmp/path:$tmp/safe:$PATH" FAKE_CALLS="$calls")
		"$2"
		[ "$fails" = 0 ]
	) > "$tmp/case.$1.out" 2>&1 &
	case_pids+=($!) case_names+=("$1")
}

# --- 3. everything there; one binary has lost its mode bits on the way, which the script restores
all_present() {
out=$tmp/pass && mkdir -p "$out"
chmod a-x "$kit/transport-cuda.test"
run_check "$out" "${fake[@]}" PYTHONPATH="$tmp/site" "$kit/gpu-check.sh"
rc=$?
[ "$rc" = 0 ] || fail "fake kit, all present: exit $rc, want 0: $(cat "$out/summary.txt")"
expect_out "all present" "$out"
head -1 "$out/summary.txt" | grep -q '^gpu-check: PASS (fake, started .*, took [0-9]* s, worst case [0-9]* s)$' || fail "all present: the first line is not the verdict: $(head -1 "$out/summary.txt")"
for s in env kernels module nccl nccl-2rank nccl-bench transport hicache bench e2e-np1; do expect_step "all present" "$out" "$s" PASS; done
expect_line "all present" "$out" '^nccl-2rank +PASS NCCL 2\.32\.3, two ranks on one GPU' "the two-rank step on NCCL 2.32"
expect_line "all present" "$out" '^fact +bounds: e2e-np2 will skip \(1 GPUs.*\): its 18 s go to the steps that run \(hicache now 59 s, e2e-np1 now 34 s\)' "the skipped step's time given to others"
expect_line "all present" "$out" 'proves: TestCUDAModuleLoadsItsSASSWithoutJIT by kernels-cuda.test' "the module step's proof"
expect_line "all present" "$out" '^e2e-np1 +PASS cphicache-gpu run --collective nccl at np 1, no mpirun' "the GPU binary's run"
expect_step "all present" "$out" e2e-np2 SKIP
expect_line "all present" "$out" '^fact +gpus: 1 x NVIDIA H200, driver 580\.65\.06, CUDA 13\.0' "the GPUs fact"
expect_line "all present" "$out" "^fact +nccl: $tmp/site/nvidia/nccl/lib/libnccl.so.2 " "the NCCL fact naming the wheel's libnccl.so.2"
expect_line "all present" "$out" '^fact +ldd: every kit binary' "the ldd fact"
expect_line "all present" "$out" '^fact +glibc: [0-9.]+ \(the kit needs 2\.17\)' "the glibc fact"
expect_line "all present" "$out" '^fact +/dev/shm: [a-z0-9]+ [0-9.]+[KMGT]?' "/dev/shm's filesystem type and size"
expect_line "all present" "$out" '^fact +limits: locked memory ([0-9]+|unlimited) KiB' "the locked-memory limit"
expect_line "all present" "$out" '^fact +network: .*lo' "the network interfaces"
expect_line "all present" "$out" 'proves: TestStartMakesTheNCCLReducerOnTheDevice by transport-cuda.test' "the transport tests' proves: lines"
expect_line "all present" "$out" 'proves: TestRunOverNCCLProvesEveryReduction by hicache-cuda.test' "the NCCL whole run's proves: line"
expect_line "all present" "$out" '^ +on the GPU \(11 tests, each logged on-device:\): TestRunInSubtests TestRun2 ' "the tests that ran on the GPU"
! grep -q 'TestParseRankInjection' <(grep 'on the GPU' "$out/summary.txt") || fail "all present: a CPU-only test is counted as on the GPU"
[ "$(grep -c '^nvidia-smi' "$calls")" = 1 ] || fail "all present: nvidia-smi called $(grep -c '^nvidia-smi' "$calls") times, want once"
! grep -qE '^pip|^python3 .*-m pip' "$calls" || fail "all present: pip was asked: $(grep -E '^pip|pip' "$calls")"
grep -q '^ncclcheck-cuda.test NCCL_DEBUG=INFO -test.count=1 -test.v' "$calls" || fail "all present: the NCCL tests did not run with NCCL_DEBUG=INFO"
# (The listing is read whole first: under pipefail, grep -q quitting at its match could leave tar a SIGPIPE.)
tar -tzf "$out/gpu-check-logs.tar.gz" > "$out.archived" 2>&1
grep -q '^\./nccl-debug\.[0-9]*\.log$' "$out.archived" || fail "all present: NCCL's debug files are not in the archive"
grep -q '^\./nvidia-smi\.txt$' "$out.archived" || fail "all present: nvidia-smi -q's output is not in the archive"
! grep -q '^mpirun' "$calls" || fail "all present: mpirun was used with one GPU: $(grep '^mpirun' "$calls")"
ok "fake kit with NCCL from the wheel's path: every step PASS, facts and proofs in the summary, nvidia-smi once, no pip ($(grep -o 'took [0-9]* s' "$out/summary.txt"))"
}

# --- 4. no PASS that proves less than it says (two faults a run, in independent steps)
no_pass_that_proves_less() {
out=$tmp/noproof1 && mkdir -p "$out"
run_check "$out" "${fake[@]}" PYTHONPATH="$tmp/site" FAKE_NO_BENCH=1 FAKE_CPU_ONLY=1 "$kit/gpu-check.sh"
expect_step "nothing measured" "$out" nccl-bench FAIL
expect_line "nothing measured" "$out" '^nccl-bench +FAIL exit 0 but nothing measured' "why nccl-bench failed"
expect_step "not on the GPU" "$out" hicache FAIL
expect_line "not on the GPU" "$out" '^hicache +FAIL .*0 tests ran on the GPU' "why hicache failed"
# --- 6. (in the same run) kernels fail: no benchmark
out=$tmp/noproof2 && mkdir -p "$out"
: > "$calls"
run_check "$out" "${fake[@]}" PYTHONPATH="$tmp/site" FAKE_NO_PROOF=1 FAKE_FAIL=kernels-cuda.test "$kit/gpu-check.sh"
rc=$?
expect_step "no NCCL proof" "$out" hicache FAIL
expect_line "no NCCL proof" "$out" '^hicache +FAIL .*TestRunOverNCCLProvesEveryReduction' "why hicache failed"
ok "no PASS that proves less: nccl-bench measuring nothing, hicache off the GPU or without the NCCL whole run, each FAIL"
[ "$rc" = 1 ] || fail "kernels failing: exit $rc, want 1"
expect_step "kernels failing" "$out" kernels FAIL
expect_step "kernels failing" "$out" bench SKIP
! grep -q '^kernels-cuda.test .*-test.bench' "$calls" || fail "kernels failing: the benchmark ran anyway"
ok "kernels failing: bench SKIP, never run"
}

# --- 5. no NCCL: FAIL when expected, SKIP when told not to expect it
no_nccl() {
out=$tmp/nonccl && mkdir -p "$out"
run_check "$out" "${fake[@]}" PYTHONPATH= "$kit/gpu-check.sh"
rc=$?
[ "$rc" = 1 ] || fail "no NCCL: exit $rc, want 1"
expect_out "no NCCL" "$out"
expect_step "no NCCL" "$out" nccl FAIL
expect_line "no NCCL" "$out" '^fact +nccl: not found' "the NCCL fact"
out=$tmp/optional && mkdir -p "$out"
: > "$calls"
run_check "$out" "${fake[@]}" PYTHONPATH= GPU_CHECK_EXPECT_NCCL=0 "$kit/gpu-check.sh"
rc=$?
[ "$rc" = 0 ] || fail "no NCCL, not expected: exit $rc, want 0: $(cat "$out/summary.txt")"
expect_step "NCCL not expected" "$out" nccl SKIP
expect_step "NCCL not expected" "$out" hicache PASS
grep -q '^transport-cuda.test .*-test.skip NCCL' "$calls" || fail "NCCL not expected: the transport tests were not told to skip NCCL"
ok "no NCCL: nccl FAIL and the run FAIL; with GPU_CHECK_EXPECT_NCCL=0 a SKIP"
}

# --- 8. a hung step, then SIGTERM: the report is still written, the step's process ended
sigterm() {
out=$tmp/term && mkdir -p "$out"
env -u CPHICACHE_NCCL_LIB OUT="$out" "${safe[@]}" "${fake[@]}" PYTHONPATH="$tmp/site" FAKE_HANG=hicache-cuda.test "$kit/gpu-check.sh" > "$out.log" 2>&1 &
pid=$!
wait_for "$calls.hang" || fail "SIGTERM: the hicache step did not start within 5 minutes"
kill -TERM "$pid"
# The script must end soon after the signal (its archive takes at most 10 s), not when the hung step's 60 s
# bound runs out.
for _ in $(seq 450); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
kill -0 "$pid" 2> /dev/null && { fail "SIGTERM: the script still runs 45 s after the signal"; kill -KILL "$pid"; }
wait "$pid"
rc=$?
[ "$rc" -ne 0 ] || fail "SIGTERM during a step: exit 0"
expect_out "SIGTERM" "$out"
head -1 "$out/summary.txt" | grep -q '^gpu-check: FAIL' || fail "SIGTERM: the summary's verdict is not FAIL"
expect_step "SIGTERM" "$out" transport PASS
expect_step "SIGTERM" "$out" bench FAIL
hung=$(cat "$calls.hang" 2>/dev/null)
sleep 0.5
[ -n "$hung" ] && ! kill -0 "$hung" 2> /dev/null || { fail "SIGTERM: the hung step (pid $hung) still runs"; kill "$hung" 2> /dev/null; }
ok "SIGTERM during a hung step: step ended, summary and archive written"
}

# SIGKILL: nothing runs at the end, so summary.txt must already hold every fact and every finished step.
sigkill() {
out=$tmp/kill && mkdir -p "$out" "$tmp/tmpdir"
env -u CPHICACHE_NCCL_LIB OUT="$out" TMPDIR="$tmp/tmpdir" "${safe[@]}" "${fake[@]}" PYTHONPATH="$tmp/site" FAKE_HANG=hicache-cuda.test "$kit/gpu-check.sh" > "$out.log" 2>&1 &
pid=$!
wait_for "$calls.hang" || fail "SIGKILL: the hicache step did not start within 5 minutes"
# (bash reports a killed job on its standard error: not a failure here.)
exec 3>&2 2> /dev/null
kill -KILL "$pid"
wait "$pid"
exec 2>&3 3>&-
for p in $(cat "$calls.hang" 2> /dev/null); do kill "$p" 2> /dev/null; done # the orphaned step: ours to end
head -1 "$out/summary.txt" | grep -q '^gpu-check: RUNNING (fake, ' || fail "SIGKILL: the first line does not say the run did not finish: $(head -1 "$out/summary.txt")"
for s in env kernels nccl nccl-bench transport; do expect_step "SIGKILL" "$out" "$s" PASS; done
for f in gpus nccl ldd glibc /dev/shm limits network mpi; do expect_line "SIGKILL" "$out" "^fact +$f: " "the $f fact"; done
expect_line "SIGKILL" "$out" 'proves: TestStartMakesTheNCCLReducerOnTheDevice' "the finished steps' proves: lines"
! grep -qE '^(hicache|bench|e2e-np1|e2e-np2) ' "$out/summary.txt" || fail "SIGKILL: a step that never finished is in the summary"
ok "SIGKILL during a hung step: summary.txt, written as the run went, names every fact and finished step"
}

# Cases 7 and 9-13 (what goes wrong on the machine, and the script's fallbacks).
. "$repo/kernels/gpu-check-fallback-test.sh"

start_case real real_kit_and_budget
start_case pass all_present
start_case noproof no_pass_that_proves_less
start_case nonccl no_nccl
start_case hang hung_steps
start_case term sigterm
start_case kill sigkill
start_case ldd unresolved
start_case search nccl_elsewhere
start_case try nccl_second_try
start_case shm shm_not_tmpfs
start_case twogpus two_gpus
for i in "${!case_pids[@]}"; do
	wait "${case_pids[$i]}" || fails=$((fails + 1))
	cat "$tmp/case.${case_names[$i]}.out"
done
[ "$fails" = 0 ] || exit 1
