#!/usr/bin/env bash
# gpu-start-test.sh BINARY: the cuda build starts where there is no GPU (make test-cuda-build runs it on this
# machine, which has the toolkit's driver stub and no GPU). kernels/cudadriver loads libcuda.so.1 on the first
# cuInit instead of at load time and keeps cu's package-init failure, so:
#   - the binary needs no libcuda.so.1 to load (readelf: no NEEDED libcuda);
#   - with the driver stub (cuInit: no device) and with no driver at all (CPHICACHE_CUDA_LIB naming no file),
#     --help, version, topo, sim, gen-trace, l3 stat exit 0 and a flag error exits 2;
#   - run, which needs the GPU, exits 2 (a usage error's status) with one line naming what is missing.
# Before cudadriver, every one of these printed gorgonia.org/cu's "Error in initialization ... NoDevice" and
# exited 1.
set -uo pipefail
bin=$(realpath "${1:?usage: gpu-start-test.sh bin/cphicache-gpu}") || exit 2
tmp=$(mktemp -d /tmp/gpu-start-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $bin without a GPU: $*"; fails=$((fails + 1)); }

if readelf -d "$bin" | grep -q 'NEEDED.*libcuda'; then
	fail "it needs libcuda at load time; add these to kernels/cudadriver/symbols.h: $(nm -D --undefined-only "$bin" | awk '$2 ~ /^cu[A-Z]/ { printf "%s ", $2 }')"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$tmp/l3"
for driver in "" "$tmp/no-such-libcuda.so.1"; do
	where="with the driver stub"
	[ -n "$driver" ] && where="with no driver (CPHICACHE_CUDA_LIB=$driver)"
	expect() { # status command...
		local want=$1 rc
		shift
		( cd "$tmp" && CPHICACHE_CUDA_LIB=$driver timeout 120 "$bin" "$@" ) > "$tmp/out" 2> "$tmp/err"
		rc=$?
		[ "$rc" = "$want" ] || fail "$where: '$*' exited $rc, want $want: $(head -c 400 "$tmp/err")"
	}
	expect 0 --help
	expect 0 version
	expect 0 topo
	grep -q 'none' "$tmp/out" || fail "$where: topo does not say the rank has no GPU: $(cat "$tmp/out")"
	expect 0 sim --steps 20
	expect 0 gen-trace -o "$tmp/trace.jsonl"
	[ -s "$tmp/trace.jsonl" ] || fail "$where: gen-trace wrote nothing"
	expect 0 l3 stat --l3-dir "$tmp/l3"
	expect 2 run --no-such-flag
	expect 2 run --quiet
	[ "$(wc -l < "$tmp/err")" = 1 ] && grep -q '^cphicache: run needs a GPU in this build' "$tmp/err" \
		|| fail "$where: run's refusal is not one line saying a GPU is needed: $(cat "$tmp/err")"
	want_why="cuInit failed: CUDA_ERROR_"
	[ -n "$driver" ] && want_why="no CUDA driver: $driver"
	grep -qF "$want_why" "$tmp/err" || fail "$where: run's refusal does not name what is missing ($want_why): $(cat "$tmp/err")"
done
[ "$fails" = 0 ] || exit 1
echo "ok   $bin starts without a GPU: no load-time libcuda; --help, version, topo, sim, gen-trace, l3 work with the driver stub and with no driver; run refuses in one line, exit 2"
