#!/usr/bin/env bash
# gpu-check.sh: the one prepared check of the cuda build, for a GPU machine (an H100/H200 with a driver and
# NVIDIA's NCCL; no Go toolchain and no MPI needed). On the build machine `make gpu-check` assembles
# build/gpu-check-kit, which holds this script beside the binaries, and prints the command to run here:
#
#     bash build/gpu-check-kit/gpu-check.sh     (carry build/gpu-check-kit; give it 320 s)
#
# It writes exactly two files into $OUT (or results/ beside this script): summary.txt and gpu-check-logs.tar.gz,
# every log of the run. summary.txt grows as the run goes: each fact of the machine is appended as soon as it is
# known, and each step's line as soon as the step ends, so a run killed at any point (SIGKILL included) leaves
# every finished step in it under a first line that says RUNNING. At the end the first line becomes the verdict,
# and the archive is written: on every exit, a SIGTERM included. Steps, in this order, each bounded by
# `timeout -k`; the bounds add up to at most 300 s (the script refuses more); a step that will skip gives its
# time to steps that run; a benchmark's timeout is a WARN, never a FAIL:
#   env         facts first, each appended to the summary when known: the GPUs (nvidia-smi, called once; count
#               and persistence mode), NCCL (path and version; gpu-check-nccl.sh), whether every kit binary's
#               libraries resolve (ldd), glibc against the kit's needs, /dev/shm (mended to a tmpfs when it is
#               not one or is too small; gpu-check-shm.sh), gVisor, the locked-memory limit, the network, MPI;
#               the rest (OS, libraries, Python's nvidia wheels, tools) into env.txt of the archive;
#   kernels     the CUDA driver tests: the kernels package's tests, the CUDA engine's byte-verified round trips,
#               its registration chunks and item planning included;
#   module      the kernels binary with PTX JIT disabled (the sm_90 SASS must load, the PTX alone must not) and
#               with JIT forced (the PTX's build must copy byte for byte);
#   nccl        NVIDIA's NCCL on GPU memory through package nccl, with NCCL_DEBUG=INFO: a one-rank
#               communicator, its all-reduce into a separate buffer, and a pre-multiplied sum (x3) that only a
#               reduction run on the device gives (required); on failure up to two second tries with NCCL's
#               fallback settings, the ones that worked kept for the later steps; then the writing_check round
#               trip timed (nccl-bench, a FAIL when nothing was measured, a WARN when it timed out);
#   nccl-2rank  with NCCL 2.30 or later, two ranks of one communicator on the one GPU
#               (NCCL_MULTI_RANK_GPU_ENABLE=1): MIN and x3 sum across the ranks, the real multi-rank reduction;
#   transport   the production start-up at one rank (built with mpiself, a one-process MPI): transport.Start
#               over a /dev/shm slab, the CUDA engine copying through it, DeviceCount and GPUBusID, the NCCL
#               reducer's communicator made over the CP communicator and its device buffer carrying NCCL's x3;
#   hicache     the hicache SPMD tests of the cuda build at one rank (mpiself): its gate counts only the tests that
#               ran on the GPU (their on-device: lines), and with NCCL requires the whole run over the NCCL
#               reducer whose every reduction is proven on the device (TestRunOverNCCLProvesEveryReduction);
#   bench       the kernels' bandwidth beside cuMemcpy, only when the kernels step passed;
#   e2e-np1     bin/cphicache-gpu-self (the GPU binary built with mpiself: no launcher, no MPI library) runs
#               the main job's default workload, which must end "result: OK";
#   e2e-np2     bin/cphicache-gpu under mpirun at np 2, where MPI and two GPUs are.
# NCCL is expected: a libnccl.so.2 that is not found (gpu-check-nccl.sh says where it looks) fails the nccl step
# and the run; GPU_CHECK_EXPECT_NCCL=0 makes it a SKIP. Before each step ldd must resolve every library of the
# step's binary. Exit status 0 only when no step failed. No step reaches the network (no pip: its version check
# would try a registry the machine cannot reach). GPU_CHECK_BOUNDS="step=seconds,..." shortens steps' bounds, for
# the kit's self-test (kernels/gpu-check-test.sh).
set -uo pipefail

kit=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${OUT:-$kit/results}
summary=$out/summary.txt
kernels_test=$kit/kernels-cuda.test
nccl_test=$kit/ncclcheck-cuda.test
transport_test=$kit/transport-cuda.test
hicache_test=$kit/hicache-cuda.test
# The two GPU binaries travel gzipped (the kit must fit the device machine's 64 MiB beside the tree) and are
# unpacked into a folder of their own for the step that runs them: cphicache-gpu-self (mpiself: no MPI) for
# e2e-np1, cphicache-gpu (the system's MPI) for e2e-np2.
gpu_bin="" gpu_self="" unpacked=""
expect_nccl=${GPU_CHECK_EXPECT_NCCL:-1}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INDEX=1
# The device machine gives a command 10 minutes and a session 15, its start included: the whole run must end
# within 300 s so that a second, fresh try fits beside the first (docs/GPU.md). Each step's bound is its own; a step
# ended by SIGTERM at its bound gets kill_after_s more before SIGKILL; the archive gets archive_s at the end.
limit_s=300
kill_after_s=3
archive_s=10
steps=(env kernels module nccl nccl-2rank nccl-bench transport hicache bench e2e-np1 e2e-np2)
declare -A bound=([env]=15 [kernels]=35 [module]=20 [nccl]=30 [nccl-2rank]=12 [nccl-bench]=10 [transport]=25 [hicache]=50 [bench]=20 [e2e-np1]=25 [e2e-np2]=15)
declare -A fixed # the steps GPU_CHECK_BOUNDS set: their bounds are kept as given
if [ -n "${GPU_CHECK_BOUNDS:-}" ]; then
	for kv in ${GPU_CHECK_BOUNDS//,/ }; do
		[ -n "${bound[${kv%%=*}]:-}" ] && [[ ${kv#*=} =~ ^[0-9]+$ ]] || { echo "gpu-check: GPU_CHECK_BOUNDS: $kv is not step=seconds" >&2; exit 2; }
		bound[${kv%%=*}]=${kv#*=} fixed[${kv%%=*}]=1
	done
fi
worst_s=$archive_s
for s in "${steps[@]}"; do worst_s=$((worst_s + ${bound[$s]} + kill_after_s)); done
if [ "$worst_s" -gt "$limit_s" ]; then
	echo "gpu-check: the step bounds add up to $worst_s s, over $limit_s s: shorten them" >&2
	exit 2
fi
mkdir -p "$out" || exit 2
logs=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX") || exit 2

declare -A status
declare -a lines
failed=0
version=$(sed -n 's/^version: //p' "$kit/build-info.txt" 2>/dev/null)
started_at=$(date -u +%Y-%m-%dT%H:%M:%SZ)

# emit appends one line to the summary, in memory and on disk at once: a run killed at any point has left every
# line emitted before it in $out/summary.txt.
emit() {
	lines+=("$1")
	printf '%s\n' "$1" >> "$summary"
}
printf 'gpu-check: RUNNING (%s, started %s, worst case %s s): if this line is still here, the run was killed; the lines below are every fact and step that finished\n' \
	"${version:-unknown version}" "$started_at" "$worst_s" > "$summary"

result() { # step status detail
	status[$1]=$2
	emit "$(printf '%-10s %-4s %s' "$1" "$2" "$3")"
	echo "== $1: $2 $3"
	[ "$2" = FAIL ] && failed=1
	return 0
}

fact() { # name detail
	emit "$(printf '%-10s %s: %s' fact "$1" "$2")"
}

# proves adds a step's "proves: ..." lines (each test logs what it shows) to the summary.
proves() { # log
	local p
	while IFS= read -r p; do emit "           ${p#"${p%%proves:*}"}"; done < <(grep -o '[A-Za-z_0-9]*\.go:[0-9]*: proves: .*' "$1" 2>/dev/null | cut -c1-400)
}

# finish rewrites summary.txt with the verdict first and writes the archive of every log: on every exit but
# SIGKILL, so that an interrupted run reports too.
finish() {
	# The report must be written whatever state the run ended in: no unbound variable may abort it.
	set +u
	local verdict=PASS s
	[ "$failed" = 0 ] || verdict=FAIL
	for s in "${steps[@]}"; do
		[ -n "${status[$s]:-}" ] || { lines+=("$(printf '%-10s %-4s %s' "$s" FAIL "not run: the check ended before it")"); verdict=FAIL; }
	done
	{
		echo "gpu-check: $verdict (${version:-unknown version}, started $started_at, took $SECONDS s, worst case $worst_s s)"
		printf '%s\n' "${lines[@]}"
	} > "$out/.summary.txt.part" && mv -f "$out/.summary.txt.part" "$summary"
	cp "$summary" "$logs/summary.txt"
	# A log is clipped to its first and last MiBs so that the archive stays far below 16 MiB.
	find "$logs" -type f -size +8M | while read -r f; do
		{ head -c 1M "$f"; printf '\n[... clipped by gpu-check.sh ...]\n'; tail -c 6M "$f"; } > "$f.clip" && mv "$f.clip" "$f"
	done
	timeout -k 1 "$archive_s" tar -C "$logs" -czf "$out/.gpu-check-logs.tar.gz.part" . \
		&& mv -f "$out/.gpu-check-logs.tar.gz.part" "$out/gpu-check-logs.tar.gz" \
		|| { echo "gpu-check: archiving the logs failed" >&2; rm -f "$out/.gpu-check-logs.tar.gz.part"; }
	rm -rf "$logs"
	[ -z "$unpacked" ] || rm -rf "$unpacked"
	cat "$summary"
	[ "$verdict" = PASS ]
}
# A signal ends the commands in flight (timeout passes SIGTERM on to its command) and the run, which still
# reports: bash runs a trap only between commands, so every command that may take long runs in the background
# and is waited for. child is the step's command; env_pids are the env step's commands running side by side.
child=""
env_pids=()
trap 'finish; exit $?' EXIT
trap 'for p in $child ${env_pids[@]+"${env_pids[@]}"}; do kill -TERM "$p" 2> /dev/null; done; exit 143' TERM INT

within() { # seconds command...: the command, ended by SIGTERM after seconds and by SIGKILL kill_after_s later
	local s=$1 rc
	shift
	timeout -k "$kill_after_s" "$s" "$@" &
	child=$!
	wait "$child"
	rc=$?
	child=""
	return "$rc"
}

bounded() { # step command...: the command within the step's bound
	local s=${bound[$1]}
	shift
	within "$s" "$@"
}

# why is a failed step's first failing test, or else the last line of its log (a crash, a timeout).
# gorgonia.org/cu's cuInit failure, a long line with a URL, is cut to its cause.
why() {
	grep -m1 -E -- '^--- FAIL|^panic:|Error in initialization|no usable GPU|^cphicache: |^FAIL: ' "$1" \
		| sed -E 's/^Error in initialization.* on: (.*)$/cuInit failed: \1/' | cut -c1-160 && return
	local last
	last=$(grep -v '^[[:space:]-]*$' "$1" | tail -1 | cut -c1-160)
	echo "${last:-no output}"
}

yes_no() { [ -n "$1" ] && echo yes || echo no; }

for f in "$kit/bin/cphicache-gpu.gz" "$kit/bin/cphicache-gpu-self.gz"; do
	[ -f "$f" ] || { echo "gpu-check: $f not found: run make gpu-check on the build machine" >&2; result env FAIL "kit incomplete: $(basename "$f") missing"; exit 1; }
done
for f in "$kernels_test" "$nccl_test" "$transport_test" "$hicache_test"; do
	# A carried copy may have lost its mode bits: the kit's own binaries are made executable again.
	[ -f "$f" ] && [ ! -x "$f" ] && chmod u+x "$f" 2> /dev/null
	[ -x "$f" ] || { echo "gpu-check: $f not found: run make gpu-check on the build machine and carry build/gpu-check-kit" >&2; result env FAIL "kit incomplete: $(basename "$f") missing"; exit 1; }
done
echo "gpu-check: kit $kit, results in $out, worst case ${worst_s} s"

# --- env: facts first, each into the summary as soon as it is known (gpu-check-env.sh, sourced: it shares this
# script's functions and variables, and its facts are the later steps' inputs).
. "$kit/gpu-check-nccl.sh"
. "$kit/gpu-check-env.sh"

# The time held for a step that will skip goes to steps that run (the sum, and so the worst case, unchanged):
# e2e-np2 needs two GPUs, mpirun and NCCL, which the env step now knows about.
reclaim() { # step why
	local spare=$((bound[$1] + kill_after_s)) to=() s given=""
	for s in hicache e2e-np1; do [ -n "${fixed[$s]:-}" ] || to+=("$s"); done
	[ "${#to[@]}" -gt 0 ] || return 0
	bound[$1]=0
	for s in "${to[@]}"; do
		bound[$s]=$((bound[$s] + spare / ${#to[@]}))
		given+="${given:+, }$s now ${bound[$s]} s"
	done
	fact bounds "$1 will skip ($2): its $spare s go to the steps that run ($given)"
}
if [ "$gpus" -lt 2 ] || ! command -v mpirun > /dev/null 2>&1 || [ -z "$nccl_lib" ]; then
	reclaim e2e-np2 "$gpus GPUs, mpirun $(yes_no "$(command -v mpirun)"), NCCL $(yes_no "$nccl_lib")"
fi

# unpack_for unpacks one GPU binary for its step (into $unpacked, removed at the end), sets the variable named to
# its path, and finds what of its libraries ldd cannot resolve, as the env step did for the others; it FAILs the
# step when the binary cannot be unpacked.
unpack_for() { # step name variable
	[ -n "$unpacked" ] || unpacked=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check-bin.XXXXXX") \
		|| { result "$1" FAIL "cannot make a folder to unpack bin/$2.gz into"; return 1; }
	local path=$unpacked/$2
	gunzip -c "$kit/bin/$2.gz" > "$path" && chmod u+x "$path" || { result "$1" FAIL "cannot unpack bin/$2.gz"; return 1; }
	printf -v "$3" %s "$path"
	ldd_missing[$2]=$(within 10 ldd "$path" 2>&1 | grep 'not found' | sed -E 's/^[[:space:]]*//; s/ \(0x.*//' | tr '\n' ';')
	return 0 # (grep found nothing to quote: every library resolves)
}

unresolved() { # binary: the libraries the loader cannot resolve for it here, as the env step found them
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

# passed_test says whether a top-level test passed.
passed_test() { grep -q "^--- PASS: $2 " "$1"; }

# device_tests lists the top-level tests that passed and logged an on-device: line (they ran on the GPU).
device_tests() { # log
	awk '
		/^=== (RUN|CONT|NAME) / { name = $3; sub(/\/.*/, "", name) }
		/ on-device: / { device[name] = 1 }
		/^--- PASS: / && ($3 in device) { printf "%s ", $3 }' "$1"
}

# The gates: what a step's log must show beyond exit 0 and PASS. Each prints nothing when met, else what is
# missing (a binary that skips everything proves nothing).
gate_kernels() {
	[ "$(grep -c '^--- PASS: TestCUDA' "$1")" -ge 1 ] || echo "no TestCUDA* test passed: not the cuda build?"
}
gate_nccl() {
	passed_test "$1" TestOneRankPreMulSumComputesOnTheDevice || echo "TestOneRankPreMulSumComputesOnTheDevice (the only proof that NCCL reduced on the device) did not pass"
}
gate_transport() {
	[ "$(grep -c '^--- PASS: TestStart' "$1")" -ge 1 ] || { echo "no TestStart* test passed"; return; }
	[ -z "$nccl_lib" ] || passed_test "$1" TestStartMakesTheNCCLReducerOnTheDevice || echo "TestStartMakesTheNCCLReducerOnTheDevice did not pass"
}
hicache_device_min=10
gate_hicache() {
	local on_device
	on_device=$(device_tests "$1" | wc -w)
	[ "$on_device" -ge "$hicache_device_min" ] || { echo "$on_device tests ran on the GPU (on-device: lines), want $hicache_device_min"; return; }
	[ -z "$nccl_lib" ] || passed_test "$1" TestRunOverNCCLProvesEveryReduction || echo "TestRunOverNCCLProvesEveryReduction (a whole run over NCCL, every reduction proven on the device) did not pass"
}

# gotest runs one test binary for a step into its log and reports it: PASS needs exit 0, "PASS" printed, and the
# step's gate met. A run that failed registering the slab (cuMemHostRegister: a sandbox's GPU proxy may refuse a
# shared mapping) is run again, in what is left of the step's bound, with the copies staged through pinned
# memory the driver allocates (CPHICACHE_CUDA_STAGED=1, exported for every later step): its PASS says the slab
# was not registered.
gotest() { # step log binary args...
	local step=$1 log=$2 deadline=$((SECONDS + ${bound[$1]})) s=${bound[$1]}
	shift 2
	while :; do
		within "$s" "$@" -test.count=1 -test.v -test.timeout "$((s > 5 ? s - 3 : s))s" > "$log" 2>&1
		local rc=$? passed skipped missing
		passed=$(grep -c '^--- PASS' "$log")
		skipped=$(grep -c '^--- SKIP' "$log")
		missing=$("gate_$step" "$log")
		[ "$rc" = 0 ] && grep -q '^PASS$' "$log" && [ -z "$missing" ] && break
		s=$((deadline - SECONDS))
		[ -z "${CPHICACHE_CUDA_STAGED:-}" ] && [ "$s" -ge 5 ] && grep -q 'cuMemHostRegister(' "$log" || {
			tail -30 "$log"
			{ [ "$rc" = 124 ] || [ "$rc" = 137 ]; } && rc="$rc (timed out after ${bound[$step]} s)"
			[ "$rc" = 0 ] && rc="0 but $missing"
			result "$step" FAIL "exit $rc, $passed passed: $(why "$log")${staged_note:-}; log $(basename "$log") in the archive"
			return
		}
		staged_why=$(grep -m1 -o 'cuMemHostRegister([^;]*' "$log" | cut -c1-140)
		cp "$log" "${log%.log}.registered.log"
		export CPHICACHE_CUDA_STAGED=1
		staged_note=" (STAGED: the slab was NOT registered, copies went through cuMemHostAlloc staging)"
		emit "           $step: registering the slab failed ($staged_why): run again with CPHICACHE_CUDA_STAGED=1"
	done
	result "$step" PASS "$passed tests passed, $skipped skipped${staged_note:-}"
	proves "$log"
}

# --- kernels: the CUDA driver tests (at least one TestCUDA must pass: else the binary is not the cuda build)
if loadable kernels "$kernels_test"; then
	gotest kernels "$logs/kernels.log" "$kernels_test"
fi

# --- module: the kernels binary twice more, the driver told before it starts: with PTX JIT disabled the fatbin
# must load (so from its sm_90 SASS) while its PTX alone is refused; with JIT forced, the PTX's build must copy
# byte for byte. Each run gets half the step's bound.
module_run() { # log setting test
	within "$((bound[module] / 2))" env "$2" "$kernels_test" -test.run "^$3\$" -test.count=1 -test.v \
		-test.timeout "$((bound[module] / 2 - 1))s" > "$1" 2>&1 && grep -q "^--- PASS: $3 " "$1"
}
if [ "${status[kernels]:-}" = PASS ]; then
	module_failed=""
	module_run "$logs/module-sass.log" CUDA_DISABLE_PTX_JIT=1 TestCUDAModuleLoadsItsSASSWithoutJIT \
		|| module_failed="with CUDA_DISABLE_PTX_JIT=1: $(why "$logs/module-sass.log")"
	module_run "$logs/module-jit.log" CUDA_FORCE_PTX_JIT=1 TestCUDAModuleJITsItsPTX \
		|| module_failed+="${module_failed:+; }with CUDA_FORCE_PTX_JIT=1: $(why "$logs/module-jit.log")"
	if [ -z "$module_failed" ]; then
		result module PASS "the sm_90 SASS loaded with PTX JIT disabled; the PTX JIT-built kernel copied byte for byte"
		proves "$logs/module-sass.log"
		proves "$logs/module-jit.log"
	else
		result module FAIL "$module_failed; logs module-sass.log, module-jit.log in the archive"
	fi
else
	result module SKIP "the kernels step did not pass"
fi

# --- nccl: NVIDIA's NCCL on GPU memory, one rank, NCCL_DEBUG=INFO; then the writing_check round trip timed
export NCCL_DEBUG=${NCCL_DEBUG:-INFO}
# NCCL writes its debug lines to stdout unless told otherwise, where they could break the test output's lines;
# each process writes its own file instead (%p: its pid), archived with the logs.
export NCCL_DEBUG_FILE=${NCCL_DEBUG_FILE:-$logs/nccl-debug.%p.log}
if [ -z "$nccl_lib" ]; then
	looked="CPHICACHE_NCCL_LIB, ${nccl_layouts[*]} in every site-packages folder (pip install nvidia-nccl-cu13), python3's path, ldconfig -p, a search of $nccl_search_roots"
	if [ "$expect_nccl" = 0 ]; then
		result nccl SKIP "no libnccl.so.2 found ($looked); GPU_CHECK_EXPECT_NCCL=0"
	else
		result nccl FAIL "no libnccl.so.2 found, and NCCL is expected (looked in $looked; GPU_CHECK_EXPECT_NCCL=0 to skip)"
	fi
	result nccl-2rank SKIP "no NCCL"
	result nccl-bench SKIP "no NCCL"
else
	export CPHICACHE_NCCL_LIB=$nccl_lib # for the later steps too
	loadable nccl "$nccl_test" && nccl_step
	nccl_2rank_step
	if [ "${status[nccl]:-}" != PASS ]; then
		result nccl-bench SKIP "the nccl step did not pass"
	else
		bounded nccl-bench env NCCL_DEBUG=WARN "$nccl_test" -test.run '^$' -test.bench . -test.benchtime 2000x \
			-test.timeout "$((${bound[nccl-bench]} - 3))s" > "$logs/nccl-bench.log" 2>&1
		rc=$?
		round_trip=$(awk '/^BenchmarkWritingCheckRoundTrip/ { for (i = 1; i < NF; i++) if ($(i+1) == "ns/op") printf "%.1f us", $i / 1000 }' "$logs/nccl-bench.log")
		if [ "$rc" = 0 ] && [ -n "$round_trip" ]; then
			result nccl-bench PASS "one-rank writing_check round trip (upload, in-place MIN, download, sync): $round_trip"
		elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
			result nccl-bench WARN "timed out after ${bound[nccl-bench]} s: a benchmark, so a warning, not a FAIL; log nccl-bench.log in the archive"
		elif [ "$rc" = 0 ]; then
			result nccl-bench FAIL "exit 0 but nothing measured (no BenchmarkWritingCheckRoundTrip ns/op); log nccl-bench.log in the archive"
		else
			result nccl-bench FAIL "exit $rc: $(why "$logs/nccl-bench.log"); log nccl-bench.log in the archive"
		fi
	fi
fi

# --- transport: the production start-up at one rank, without MPI
transport_args=()
[ -z "$nccl_lib" ] && [ "$expect_nccl" = 0 ] && transport_args=(-test.skip 'NCCL')
if loadable transport "$transport_test"; then
	gotest transport "$logs/transport.log" "$transport_test" "${transport_args[@]}"
fi

# --- hicache: the SPMD tests at one rank on the CUDA engine, without MPI. Its NCCL tests need the library;
# the one that steers ncclshim's hang switch skips itself with NVIDIA's NCCL.
if loadable hicache "$hicache_test"; then
	# From hicache's folder, as go test runs it, so that its testdata paths resolve.
	gotest hicache "$logs/hicache.log" env -C "$kit/hicache" "$hicache_test"
	on_device=$(device_tests "$logs/hicache.log")
	[ -n "$on_device" ] && emit "$(printf '           on the GPU (%d tests, each logged on-device:): %s' "$(wc -w <<< "$on_device")" "$on_device" | cut -c1-400)"
	[ "${status[hicache]:-}" = PASS ] && grep -q '^--- SKIP: TestNCCLInitThatNeverCompletes' "$logs/hicache.log" \
		&& emit "           TestNCCLInitThatNeverCompletesIsAbortedOnEveryRank skipped: it needs ncclshim's NCCLSHIM_INIT_HANG"
fi

# --- bench, e2e-np1, e2e-np2 (gpu-check-late.sh)
. "$kit/gpu-check-late.sh"
# finish (the EXIT trap) writes the summary and the archive, and sets the exit status.
