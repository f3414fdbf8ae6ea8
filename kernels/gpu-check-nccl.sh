# gpu-check-nccl.sh: finding NCCL (for the env step) and the nccl step with its second tries, sourced by
# gpu-check.sh (never run alone). It uses gpu-check.sh's functions (fact, result, within, start_capped, finished,
# emit) and sets what the later steps read (nccl_lib, nccl_settings).
# shellcheck shell=bash

# --- Finding libnccl.so.2, in this order, the first found winning: CPHICACHE_NCCL_LIB; the wheels' layouts
# (nvidia-nccl-cu12/cu13 put it in nvidia/nccl/lib, CUDA 13's cu13 wheels may use nvidia/cu13/lib) in every
# site-packages folder the shell can name without running Python (PYTHONPATH, the active virtual or conda
# environment, the prefix of the python3 on PATH, which a venv's bin/python3 gives, ~/.local, /usr/local, /usr,
# every environment under /opt, conda's envs); the folders python3 itself names; the loader's cache; last, a
# search of the filesystem. python3 and the search start at once beside the env step's other commands, each
# under its own cap, so that they cost nothing when an earlier place has it. GPU_CHECK_OPT_DIR and
# GPU_CHECK_SEARCH_ROOTS stand in for /opt and / in the self-test.
nccl_layouts=(nvidia/nccl/lib nvidia/cu13/lib nvidia/cu12/lib)
nccl_opt=${GPU_CHECK_OPT_DIR:-/opt}
nccl_search_roots=${GPU_CHECK_SEARCH_ROOTS:-/}

nccl_site_dirs() { # the site-packages folders the shell names, one a line
	local py prefix
	py=$(command -v python3 2> /dev/null)
	prefix=${py:+$(dirname "$(dirname "$py")")}
	shopt -s nullglob
	local dirs=(${PYTHONPATH//:/ } ${VIRTUAL_ENV:+$VIRTUAL_ENV/lib/python3*/site-packages}
		${CONDA_PREFIX:+$CONDA_PREFIX/lib/python3*/site-packages} ${prefix:+$prefix/lib/python3*/site-packages}
		"${HOME:-/nonexistent}"/.local/lib/python3*/site-packages /usr/local/lib/python3*/{site,dist}-packages
		/usr/lib/python3*/{site,dist}-packages /usr/lib/python3/dist-packages
		"$nccl_opt"/*/lib/python3*/site-packages "$nccl_opt"/*/*/lib/python3*/site-packages
		"$nccl_opt"/conda/envs/*/lib/python3*/site-packages)
	shopt -u nullglob
	printf '%s\n' "${dirs[@]}"
}

nccl_in_dirs() { # how: the first folder on standard input holding libnccl.so.2 in a wheel's layout
	local dir layout
	while IFS= read -r dir; do
		[ -n "$dir" ] || continue
		for layout in "${nccl_layouts[@]}"; do
			[ -e "$dir/$layout/libnccl.so.2" ] || continue
			nccl_lib=$dir/$layout/libnccl.so.2 nccl_how="$layout in $1"
			return 0
		done
	done
	return 1
}

# nccl_start_search starts python3's folders and the filesystem search in the background (env's start).
nccl_start_search() {
	if command -v python3 > /dev/null 2>&1; then
		start_capped "$logs/python-path.txt" 10 python3 -c 'import site, sys; print("\n".join(site.getsitepackages() + [site.getusersitepackages()] + sys.path))'
		nccl_python_pid=$!
	fi
	start_capped "$logs/nccl-search.txt" 10 find $nccl_search_roots \( -path /proc -o -path /sys -o -path /dev -o -path /run \) -prune \
		-o -name 'libnccl.so.2*' \( -type f -o -type l \) -print
	nccl_search_pid=$!
}

# nccl_version_of: the version the wheel's metadata or the file's name gives, or nothing.
nccl_version_of() { # lib
	local site=${1%/nvidia/*} d v
	for d in "$site"/nvidia_nccl_cu*-*.dist-info; do
		[ -e "$d" ] || continue
		v=${d##*/} v=${v%.dist-info}
		echo "${v##*-} (${d##*/})"
		return
	done
	v=$(readlink -f "$1" 2> /dev/null)
	[[ ${v##*/} =~ ^libnccl\.so\.([0-9]+\.[0-9]+\.[0-9]+)$ ]] && echo "${BASH_REMATCH[1]} (its file name)"
}

nccl_find() {
	nccl_lib="" nccl_how=""
	if [ -n "${CPHICACHE_NCCL_LIB:-}" ]; then
		if [ -e "$CPHICACHE_NCCL_LIB" ]; then
			nccl_lib=$CPHICACHE_NCCL_LIB nccl_how=CPHICACHE_NCCL_LIB
		else
			echo "### CPHICACHE_NCCL_LIB=$CPHICACHE_NCCL_LIB does not exist" >> "$logs/env.txt"
		fi
	fi
	[ -n "$nccl_lib" ] || nccl_in_dirs "a site-packages folder" < <(nccl_site_dirs)
	if [ -n "${nccl_python_pid:-}" ]; then
		finished "$nccl_python_pid"
		[ -n "$nccl_lib" ] || nccl_in_dirs "python3's path" < "$logs/python-path.txt"
		{ echo "### python3's folders"; cat "$logs/python-path.txt"; echo; } >> "$logs/env.txt"
		rm -f "$logs/python-path.txt"
	fi
	finished "$ldconfig_pid"
	if [ -z "$nccl_lib" ]; then
		while read -r soname _ _ path; do
			[ "$soname" = libnccl.so.2 ] && { nccl_lib=$path nccl_how="the loader's cache"; break; }
		done < "$logs/ldconfig.txt"
	fi
	finished "$nccl_search_pid"
	local found
	[ -n "$nccl_lib" ] || found=$(grep -m1 '/libnccl\.so\.2$' "$logs/nccl-search.txt")
	[ -z "${found:-}" ] || nccl_lib=$found nccl_how="a search of $nccl_search_roots (10 s at most)"
	{ echo "### libnccl.so.2* found by the search"; cat "$logs/nccl-search.txt"; echo; } >> "$logs/env.txt"
	rm -f "$logs/nccl-search.txt"
	if [ -n "$nccl_lib" ]; then
		nccl_version=$(nccl_version_of "$nccl_lib")
		fact nccl "$nccl_lib ($nccl_how), version ${nccl_version:-not in its name or metadata: the nccl step logs it}"
	else
		fact nccl "not found (CPHICACHE_NCCL_LIB, ${nccl_layouts[*]} in every site-packages folder, python3's path, ldconfig -p, a search of $nccl_search_roots)"
	fi
}

# --- The nccl step: NCCL's tests, and when they fail, up to two second tries within the step's bound with the
# documented fallbacks for what the review feared inside a VM: the bootstrap on an interface that does not
# connect (NCCL tries lo last; NCCL_SOCKET_IFNAME=lo, no InfiniBand), then the cuMem host allocations that
# crashed on some drivers, NVLink SHARP and the shared-memory transport (NCCL_CUMEM_ENABLE=0,
# NCCL_CUMEM_HOST_ENABLE=0, NCCL_NVLS_ENABLE=0, NCCL_SHM_DISABLE=1). The settings that passed are kept for every
# later step (exported), and the summary says which. NCCL's INFO lines of bootstrap, init, transport and
# environment go to nccl-debug.PID.log in the archive.
nccl_tries=("" "NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1"
	"NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_CUMEM_ENABLE=0 NCCL_CUMEM_HOST_ENABLE=0 NCCL_NVLS_ENABLE=0 NCCL_SHM_DISABLE=1")
nccl_settings=""
nccl_defaults="NCCL's defaults"

nccl_step() {
	local try left_s try_s log tried="" n=${#nccl_tries[@]} i rc
	local deadline=$((SECONDS + bound[nccl]))
	for i in "${!nccl_tries[@]}"; do
		try=${nccl_tries[$i]} log=$logs/nccl.try$((i + 1)).log
		left_s=$((deadline - SECONDS))
		try_s=$((left_s / (n - i)))
		[ "$try_s" -ge 3 ] || break
		# shellcheck disable=SC2086 # the settings are words, KEY=VALUE each
		within "$try_s" env $try "$nccl_test" -test.count=1 -test.v -test.timeout "$((try_s > 5 ? try_s - 2 : try_s))s" > "$log" 2>&1
		rc=$?
		tried+="${tried:+; }try $((i + 1)) (${try:-$nccl_defaults}): exit $rc"
		if [ "$rc" = 0 ] && grep -q '^PASS$' "$log" && [ -z "$(gate_nccl "$log")" ]; then
			cp "$log" "$logs/nccl.log"
			nccl_settings=$try
			result nccl PASS "$(grep -c '^--- PASS' "$log") tests passed on try $((i + 1)) of $n, with ${try:-$nccl_defaults}"
			[ "$i" = 0 ] || emit "           second try: ${try} worked after $tried"
			proves "$log"
			local v
			v=$(grep -m1 -o 'NCCL [0-9.]* from [^ ]*' "$log")
			[ -z "$v" ] || emit "           $v"
			# shellcheck disable=SC2163,SC2086 # export each KEY=VALUE word for the later steps
			[ -z "$try" ] || export $try
			return
		fi
		tail -30 "$log"
		cp "$log" "$logs/nccl.log"
	done
	result nccl FAIL "$(why "$logs/nccl.log"); ${tried:-no try fitted the bound}; logs nccl.try*.log in the archive"
}

# --- The nccl-2rank step: NCCL 2.30 and later put several ranks of a communicator on one GPU when
# NCCL_MULTI_RANK_GPU_ENABLE=1, which runs the multi-rank reduction a one-rank communicator skips. The version is
# the one the nccl step's binary printed ("NCCL 2.32.3 from ...").
nccl_2rank_step() {
	local v major minor log=$logs/nccl-2rank.log test=TestTwoRanksOnOneGPUReduceAcrossRanks
	[ "${status[nccl]:-}" = PASS ] || { result nccl-2rank SKIP "the nccl step did not pass"; return; }
	v=$(grep -m1 -o 'NCCL [0-9]*\.[0-9]*\.[0-9]* from' "$logs/nccl.log" | cut -d' ' -f2)
	IFS=. read -r major minor _ <<< "$v"
	if [ -z "$v" ] || [ "$major" -lt 2 ] || { [ "$major" = 2 ] && [ "$minor" -lt 30 ]; }; then
		result nccl-2rank SKIP "NCCL ${v:-of unknown version} is older than 2.30: one GPU holds one rank of a communicator (\"Duplicate GPU detected\"); a reduction across ranks needs two GPUs (e2e-np2)"
		return
	fi
	bounded nccl-2rank env NCCL_MULTI_RANK_GPU_ENABLE=1 "$nccl_test" -test.run "^$test\$" -test.count=1 -test.v \
		-test.timeout "$((bound[nccl-2rank] - 2))s" > "$log" 2>&1
	local rc=$?
	if [ "$rc" = 0 ] && grep -q "^--- PASS: $test " "$log"; then
		result nccl-2rank PASS "NCCL $v, two ranks on one GPU (NCCL_MULTI_RANK_GPU_ENABLE=1): MIN and x3 sum across the ranks"
		proves "$log"
	else
		tail -30 "$log"
		{ [ "$rc" = 124 ] || [ "$rc" = 137 ]; } && rc="$rc (timed out after ${bound[nccl-2rank]} s)"
		result nccl-2rank FAIL "exit $rc: $(why "$log"); log nccl-2rank.log in the archive"
	fi
}

# NCCL_DEBUG_SUBSYS: NCCL's default (INIT, BOOTSTRAP, ENV) and the transports a one-GPU run sets up.
export NCCL_DEBUG_SUBSYS=${NCCL_DEBUG_SUBSYS:-INIT,BOOTSTRAP,ENV,NET,SHM,P2P}
