# gpu-check-shm.sh: /dev/shm checked and mended, and the sandbox recorded, for gpu-check.sh's env step (sourced
# by gpu-check-env.sh once df has answered into $logs/shm.txt; never run alone).
# shellcheck shell=bash
#
# The CP group's slab is POSIX shared memory in /dev/shm, registered with the GPU (cuMemHostRegister), which
# wants it a tmpfs; a container's /dev/shm is often a 64 MiB tmpfs, and a microVM may give another filesystem.
# When it is not a tmpfs or has less free than shm_need_kib, the script mounts a tmpfs of shm_mount_size there
# (the device machine runs as root) and says so; a mount that fails is said too, and the steps run as they can.
# GPU_CHECK_SHM_DIR stands in for /dev/shm in the self-test, which fakes mount.
# shm_need_kib: the transport and hicache steps' slabs are tens of MiB and the main job's default run maps
# well under 1 GiB; 2 GiB leaves room for both at once.
shm_need_kib=$((2 * 1024 * 1024))
shm_mount_size=8g

shm_describe() { # df -PkT output file: "type size, free free, mounted on dir", or nothing
	awk 'NR == 2 { printf "%s %.1fG, %.1fG free, mounted on %s", $2, $3 / 1048576, $5 / 1048576, $7 }' "$1"
}
shm_type=$(awk 'NR == 2 { print $2 }' "$logs/shm.txt")
shm_free_kib=$(awk 'NR == 2 { print $5 }' "$logs/shm.txt")
shm=$(shm_describe "$logs/shm.txt")
shm_note=""
if [ -n "$shm_type" ] && { [ "$shm_type" != tmpfs ] || [ "${shm_free_kib:-0}" -lt "$shm_need_kib" ]; }; then
	why="$shm_type with $((${shm_free_kib:-0} / 1024)) MiB free, the kit wants a tmpfs with $((shm_need_kib / 1024)) MiB"
	if within 10 mount -t tmpfs -o "size=$shm_mount_size,mode=1777" tmpfs "$shm_dir" > "$logs/shm-mount.txt" 2>&1 \
		&& within 10 df -PkT "$shm_dir" > "$logs/shm.txt" 2>&1; then
		shm_note="; mended: was $why, mounted a tmpfs of $shm_mount_size on $shm_dir"
		shm=$(shm_describe "$logs/shm.txt")
	else
		shm_note="; NOT mended: $why, and mount -t tmpfs failed: $(head -c 120 "$logs/shm-mount.txt" | tr '\n' ' ')"
	fi
	cat "$logs/shm-mount.txt" >> "$logs/env.txt"
	rm -f "$logs/shm-mount.txt"
fi
fact /dev/shm "${shm:-unknown (df -PkT: $(head -c 100 "$logs/shm.txt"))}$shm_note"
rm -f "$logs/shm.txt"

# gVisor: its kernel reports 4.4.0 and its dmesg starts "Starting gVisor..."; its GPU proxy refuses some memory
# calls that work natively, which a failed registration or NCCL init should be read beside.
sandbox_kernel=$(uname -r 2> /dev/null)
sandbox_dmesg=$(within 5 dmesg 2> /dev/null | grep -m1 -i gvisor | cut -c1-80)
if [ -n "$sandbox_dmesg" ]; then
	sandbox="gVisor (dmesg: $sandbox_dmesg; kernel $sandbox_kernel)"
elif [ "$sandbox_kernel" = 4.4.0 ]; then
	sandbox="gVisor most likely (kernel 4.4.0, as gVisor reports; dmesg silent)"
else
	sandbox="no gVisor seen (kernel ${sandbox_kernel:-unknown}, dmesg names none)"
fi
fact sandbox "$sandbox"
