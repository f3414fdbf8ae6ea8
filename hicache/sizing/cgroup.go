package sizing

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The job's cgroup memory limit. Under Slurm's --mem (and in a container) the kernel's OOM killer
// ends a job that outgrows its cgroup long before MemAvailable runs out, and the shared L2 in
// /dev/shm is charged to the cgroup of the rank that reserved it. So the start-up memory checks
// compare with the room left under the tightest limit on the way from this process's cgroup to the
// root, as well as with MemAvailable.

// CgroupMemory is the tightest memory limit above this process, and what its cgroup uses now.
type CgroupMemory struct {
	Path                   string // the limit's file, for the message
	LimitBytes, UsageBytes int64
}

// roomBytes is what the cgroup can still take.
func (m CgroupMemory) RoomBytes() int64 { return max(0, m.LimitBytes-m.UsageBytes) }

// cgroupUnlimitedBytes: a v1 limit at or above this (the kernel writes 2^63 rounded down to a page)
// is no limit.
const cgroupUnlimitedBytes = 1 << 62

// ReadCgroupMemory finds the tightest limit, cgroup v2 first, then v1, under root (/sys/fs/cgroup)
// for the cgroups listed in procCgroup (/proc/self/cgroup). ok is false when no limit applies or
// none can be read.
func ReadCgroupMemory(root, procCgroup string) (m CgroupMemory, ok bool) {
	f, err := os.Open(procCgroup)
	if err != nil {
		return m, false
	}
	defer f.Close()
	var v2Path, v1Path string
	scanner := bufio.NewScanner(f)
	for scanner.Scan() { // lines are ID:CONTROLLERS:PATH; v2's is 0::PATH
		parts := strings.SplitN(scanner.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2Path = parts[2]
		case strings.Contains(","+parts[1]+",", ",memory,"):
			v1Path = parts[2]
		}
	}
	if v2Path != "" {
		if m, ok := tightestLimit(root, v2Path, "memory.max", "memory.current"); ok {
			return m, true
		}
	}
	if v1Path != "" {
		return tightestLimit(
			filepath.Join(root, "memory"),
			v1Path,
			"memory.limit_in_bytes",
			"memory.usage_in_bytes",
		)
	}
	return m, false
}

// tightestLimit walks from the cgroup at mount/path up to mount, taking the smallest room (limit -
// usage) among the limits it can read. A path that does not exist under the mount (a container
// without a cgroup namespace sees the host's path) is walked up until it does, so that the
// container's own limit at the mount is read.
func tightestLimit(mount, path, limitFile, usageFile string) (best CgroupMemory, found bool) {
	dir := filepath.Join(mount, filepath.Clean("/"+path))
	for {
		if limit, ok := readCgroupBytes(filepath.Join(dir, limitFile)); ok &&
			limit < cgroupUnlimitedBytes {
			usage, _ := readCgroupBytes(filepath.Join(dir, usageFile))
			m := CgroupMemory{
				Path:       filepath.Join(dir, limitFile),
				LimitBytes: limit,
				UsageBytes: usage,
			}
			if !found || m.RoomBytes() < best.RoomBytes() {
				best, found = m, true
			}
		}
		if dir == mount || len(dir) <= len(mount) {
			return best, found
		}
		dir = filepath.Dir(dir)
	}
}

// readCgroupBytes reads a cgroup file holding one number of bytes, or "max" (no limit: not ok).
func readCgroupBytes(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil
}

func (m CgroupMemory) String() string {
	return fmt.Sprintf(
		"the cgroup memory limit %s (%d MiB, %d MiB in use)",
		m.Path,
		m.LimitBytes>>20,
		m.UsageBytes>>20,
	)
}
