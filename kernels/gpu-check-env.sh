# gpu-check-env.sh: gpu-check.sh's env step, sourced by it (never run alone): the GPUs, NCCL, the loader's view
# of the kit's binaries, glibc, /dev/shm, the locked-memory limit, the network and mpirun, each fact written to the
# summary as soon as it is known. It uses gpu-check.sh's functions (fact, result, within) and sets what the later
# steps read (nccl_lib, gpus, ldd_missing, ...).
# shellcheck shell=bash

# --- env: facts first, each into the summary as soon as it is known. No bound around them all can lose them:
# the commands that may be slow (nvidia-smi, ldd, ldconfig, df, ip) start at once, side by side, each under its
# own cap, and their facts are written in the order later steps need them (the GPUs, NCCL, ldd first); so a slow
# or wedged command costs its cap, 10 s, never a fact found by another. (Each takes milliseconds on a healthy
# machine; 3-5 s caps lost facts on one loaded far beyond its cores, as the self-test's cases side by side are.)
# Python is asked for its folders only when NCCL is not where the shell looks first (10 s more). The
# archive-only records get what is left of the step's bound.
env_deadline=$((SECONDS + bound[env]))
start_capped() { # file seconds command...: the command in the background, its output into file
	timeout -k 1 "$2" "${@:3}" > "$1" 2>&1 &
	env_pids+=($!)
}
finished() { # pid: waits for one started command; its exit status
	local rc
	wait "$1"
	rc=$?
	local p kept=()
	for p in ${env_pids[@]+"${env_pids[@]}"}; do [ "$p" = "$1" ] || kept+=("$p"); done
	env_pids=(${kept[@]+"${kept[@]}"})
	return "$rc"
}
kit_binaries=(kernels-cuda.test ncclcheck-cuda.test transport-cuda.test hicache-cuda.test)
start_capped "$logs/nvidia-smi.txt" 10 nvidia-smi -q; smi_pid=$!
start_capped "$logs/ldd.txt" 10 ldd "${kit_binaries[@]/#/$kit/}"; ldd_pid=$!
start_capped "$logs/ldconfig.txt" 10 ldconfig -p; ldconfig_pid=$!
shm_dir=${GPU_CHECK_SHM_DIR:-/dev/shm}
start_capped "$logs/shm.txt" 10 df -PkT "$shm_dir"; shm_pid=$!
has_ip=""
command -v ip > /dev/null 2>&1 && has_ip=1
if [ -n "$has_ip" ]; then
	start_capped "$logs/net.txt" 10 ip -br addr
else
	start_capped "$logs/net.txt" 10 hostname -I
fi
net_pid=$!
nccl_start_search

# The GPUs: nvidia-smi once (-q has the driver, the CUDA version, the count and every GPU's details); its output
# goes into the archive as nvidia-smi.txt.
finished "$smi_pid"
smi_rc=$?
gpus=0 gpu="" driver="" cuda="" persistence=""
while IFS=: read -r key value; do
	key=${key%"${key##*[![:space:]]}"} key=${key#"${key%%[![:space:]]*}"} value=${value# }
	case "$key" in
	"Attached GPUs") gpus=$value ;;
	"Driver Version") driver=$value ;;
	"CUDA Version") cuda=$value ;;
	"Product Name") [ -n "$gpu" ] || gpu=$value ;;
	"Persistence Mode") [ -n "$persistence" ] || persistence=$value ;;
	esac
done < "$logs/nvidia-smi.txt"
[[ $gpus =~ ^[0-9]+$ ]] || gpus=0
nodes=(/dev/nvidia[0-9]*)
[ -e "${nodes[0]}" ] || nodes=()
if [ "$smi_rc" = 0 ]; then
	fact gpus "$gpus x ${gpu:-unnamed GPU}, driver ${driver:-?}, CUDA ${cuda:-?}, persistence mode ${persistence:-?} (nvidia-smi -q; ${#nodes[@]} /dev/nvidia<n> nodes)"
else
	gpus=0
	smi_why=$(tail -c 100 "$logs/nvidia-smi.txt" | tr '\n' ' ')
	{ [ "$smi_rc" = 124 ] || [ "$smi_rc" = 137 ]; } && smi_why="timed out after 10 s"
	fact gpus "nvidia-smi -q failed (exit $smi_rc: ${smi_why:-no output}); ${#nodes[@]} /dev/nvidia<n> nodes"
fi

# NCCL (gpu-check-nccl.sh): its python3 and filesystem search were started with the other commands.
nccl_find

# ldd of every kit binary at once: what a step's binary cannot resolve here (missing, or too old a glibc) fails
# the step before it runs, quoting ldd. ldd exits non-zero when one file is not dynamic; its sections are still
# there, one a binary.
declare -A ldd_missing
finished "$ldd_pid"
ldd_done="" current=""
while IFS= read -r line; do
	case "$line" in
	*:) current=${line%:} current=${current##*/} ldd_done=1 ;;
	*"not found"*)
		line=${line#"${line%%[![:space:]]*}"}
		[ -n "$current" ] && ldd_missing[$current]+="${line% (0x*};" ;;
	esac
done < "$logs/ldd.txt"
{ echo "### the kit's libraries, as the loader resolves them"; cat "$logs/ldd.txt"; echo; } >> "$logs/env.txt"
rm -f "$logs/ldd.txt"
if [ -z "$ldd_done" ]; then
	fact ldd "did not finish within 10 s: the steps run without the pre-check"
else
	# (An empty associative array is "unbound" to set -u: the binaries are listed by name.)
	unresolved_all=""
	for b in "${kit_binaries[@]##*/}"; do [ -z "${ldd_missing[$b]:-}" ] || unresolved_all+="$b: ${ldd_missing[$b]} "; done
	[ -n "$unresolved_all" ] || unresolved_all="every kit binary's libraries resolve"
	fact ldd "$unresolved_all"
fi

glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null)
glibc=${glibc##* }
needs=""
while IFS= read -r line; do [[ $line == "needs: GLIBC_"* ]] && needs=${line#needs: GLIBC_}; done < "$kit/build-info.txt"
fact glibc "${glibc:-unknown} (the kit needs ${needs:-?})"
finished "$shm_pid"
. "$kit/gpu-check-shm.sh"
mem_kib=""
while read -r key value _; do [ "$key" = MemTotal: ] && mem_kib=$value; done < /proc/meminfo
cpus=$(nproc 2> /dev/null)
fact limits "locked memory $(ulimit -l) KiB, open files $(ulimit -n), ${cpus:-?} CPUs, $((${mem_kib:-0} / 1048576)) GiB memory"
# NCCL's bootstrap needs an interface that is up (lo only as a last resort); NCCL_SOCKET_IFNAME picks one.
finished "$net_pid"
net=""
if [ -n "$has_ip" ]; then
	while read -r name state addrs; do net+="${net:+; }$name $state${addrs:+ $addrs}"; done < "$logs/net.txt"
else # no iproute2: each interface's state, and the addresses of them all
	for d in /sys/class/net/*; do [ -e "$d/operstate" ] && read -r state < "$d/operstate" && net+="${net:+; }${d##*/} $state"; done
	net+="; addresses (hostname -I): $(tr '\n' ' ' < "$logs/net.txt")"
fi
ib=(/sys/class/infiniband/*)
[ -e "${ib[0]}" ] || ib=()
ibs="${ib[*]##*/}"
fact network "${net:-unknown}; InfiniBand: ${ibs:-none}; NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-unset}"
libmpi=$(grep -m1 -o 'libmpi\.so\.[0-9]*' "$logs/ldconfig.txt" | head -1)
fact mpi "mpirun $(command -v mpirun || echo none), ${libmpi:-no libmpi.so} in the loader's cache"

# The rest, for the archive only (beside nvidia-smi.txt), in one command given what is left of the bound.
{
	echo "### kit"; cat "$kit/build-info.txt"; echo
	echo "### libraries in the loader's cache"; grep -E 'libcuda\.so|libnccl|libmpi\.so|libcudart' "$logs/ldconfig.txt" || echo none; echo
	echo "### network"; cat "$logs/net.txt"; echo
	echo "### python's nvidia packages (their metadata folders, not pip)"
	while IFS= read -r dir; do for d in "$dir"/nvidia_*.dist-info "$dir"/nccl*.dist-info; do [ -e "$d" ] && echo "$d"; done; done < <(nccl_site_dirs); echo
} >> "$logs/env.txt"
rm -f "$logs/ldconfig.txt" "$logs/net.txt"
left=$((env_deadline - SECONDS))
if [ "$left" -ge 1 ]; then
	within "$left" bash -c 'for c in "cat /proc/driver/nvidia/version" "uname -a" "cat /etc/os-release" "python3 --version" "ip addr" \
		"cat /etc/hosts" "mount" "free -g" "ulimit -a" "command -v mpirun compute-sanitizer nvcc" "env"; do
		echo "### $c"; case "$c" in mount) mount | grep -E " /dev/shm " ;; env) env | grep -E "^(CUDA_|NCCL_|CPHICACHE_|LD_LIBRARY_PATH)" ;; *) $c ;; esac 2>&1; echo; done' >> "$logs/env.txt" 2>&1
else
	echo "### the rest: not recorded, the env step's ${bound[env]} s ran out" >> "$logs/env.txt"
fi

env_detail="${gpu:-no GPU seen by nvidia-smi} x$gpus, CUDA ${cuda:-unknown}, glibc ${glibc:-unknown}, NCCL $(yes_no "$nccl_lib"), mpirun $(yes_no "$(command -v mpirun)")"
if [ "$smi_rc" != 0 ] || [ "$gpus" -lt 1 ]; then
	result env FAIL "$env_detail"
elif [ -n "$needs" ] && [ -n "$glibc" ] && [ "$(printf '%s\n%s\n' "$needs" "$glibc" | sort -V | head -1)" != "$needs" ]; then
	result env FAIL "glibc $glibc is older than the kit's $needs: $env_detail"
else
	result env PASS "$env_detail"
fi
