package sizing

import (
	"bufio"
	"errors"
	"os"
	"strconv"
	"strings"
)

// NodeMemory is what a node offers the job, read once at start; tests give their own.
type NodeMemory struct {
	AvailableBytes int64 // MemAvailable; negative when unknown
	ShmFreeBytes   int64 // free in /dev/shm; negative when unknown
	Cgroup         CgroupMemory
	CgroupLimited  bool // Cgroup holds the tightest limit above the process
}

// ReadNodeMemory reads this node's: MemAvailable, the free bytes of /dev/shm (shmFree), the
// cgroup's limit.
func ReadNodeMemory(shmFree func() (int64, error)) NodeMemory {
	m := NodeMemory{AvailableBytes: -1, ShmFreeBytes: -1}
	if free, err := MemAvailableBytes(); err == nil {
		m.AvailableBytes = free
	}
	if free, err := shmFree(); err == nil {
		m.ShmFreeBytes = free
	}
	m.Cgroup, m.CgroupLimited = ReadCgroupMemory("/sys/fs/cgroup", "/proc/self/cgroup")
	return m
}

// MemAvailableBytes reads MemAvailable from /proc/meminfo: what can be allocated without swapping.
func MemAvailableBytes() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		if value, ok := strings.CutPrefix(scanner.Text(), "MemAvailable:"); ok {
			kib, err := strconv.ParseInt(
				strings.TrimSuffix(strings.TrimSpace(value), " kB"),
				10,
				64,
			)
			return kib << 10, err
		}
	}
	return 0, errors.Join(scanner.Err(), errors.New("/proc/meminfo has no MemAvailable"))
}
