package runner

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/shm"
	"github.com/cphicache/cphicache/hicache/sizing"
	"github.com/cphicache/cphicache/hicache/transport"
	"github.com/cphicache/cphicache/internal/errscope"
	"github.com/cphicache/cphicache/pool"
)

// Local checks with no collective: every rank runs them alike.

func TestGeometryErrorsNameTheirFlag(t *testing.T) {
	good := pool.Geometry{
		CPSize:           2,
		Layers:           4,
		PayloadsPerLayer: 2,
		PageTokens:       16,
		TokenBytes:       32,
		Slots:            64,
		SlabBytesMax:     1 << 20,
	}
	for flag, mutate := range map[string]func(*pool.Geometry){
		"layers":         func(g *pool.Geometry) { g.Layers = 1 << 60 },
		"payloads":       func(g *pool.Geometry) { g.PayloadsPerLayer = 0 },
		"page-tokens":    func(g *pool.Geometry) { g.PageTokens = -1 },
		"token-bytes":    func(g *pool.Geometry) { g.TokenBytes = 1 << 60 },
		"l2-slots":       func(g *pool.Geometry) { g.Slots = 1 << 40 },
		"slab-bytes-max": func(g *pool.Geometry) { g.SlabBytesMax = 100 },
		"cp":             func(g *pool.Geometry) { g.CPSize = 0 },
	} {
		g := good
		mutate(&g)
		var ce *errscope.ConfigError
		if err := g.Validate(); !errors.As(err, &ce) || ce.Flag != flag ||
			strings.Contains(err.Error(), "Geometry") {
			t.Errorf(
				"%s: %v, want a errscope.ConfigError naming --%s, not the Go field",
				flag,
				err,
				flag,
			)
		}
	}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestTablesThatCannotFitAreRefused(t *testing.T) {
	g := pool.Geometry{
		CPSize:           8,
		Layers:           1,
		PayloadsPerLayer: 1,
		PageTokens:       1,
		TokenBytes:       8,
		Slots:            1 << 20,
		SlabBytesMax:     1 << 30,
	}
	o := &config.Options{DevicePages: 0}
	available := func(bytes int64) sizing.NodeMemory {
		return sizing.NodeMemory{
			AvailableBytes: bytes, ShmFreeBytes: -1,
		}
	}
	need := g.TableBytes()*8 + shm.SegmentBytes(g) // /dev/shm's slab is the node's memory too
	if err := checkMemoryFits(o, g, 8, 1, available(need)); err != nil {
		t.Fatalf("tables that just fit beside the slab: %v", err)
	}
	var ce *errscope.ConfigError
	if err := checkMemoryFits(o, g, 8, 1, available(need-1)); !errors.As(err, &ce) ||
		ce.Flag != "l2-slots" ||
		!strings.Contains(err.Error(), "8 rank(s)") {
		t.Fatalf("tables one byte too large for 8 ranks: %v, want --l2-slots refused", err)
	}
	// Sized in bytes, the L2 is refused by the flag the user gave (and its advice names it too).
	o.L2Bytes = 1 << 30
	if err := checkMemoryFits(o, g, 8, 1, available(need-1)); !errors.As(err, &ce) ||
		ce.Flag != "l2-bytes" ||
		!strings.Contains(err.Error(), "lower --l2-bytes") {
		t.Fatalf("with --l2-bytes: %v, want --l2-bytes refused", err)
	}
	if err := checkMemoryFits(o, g, 8, 1, sizing.NodeMemory{AvailableBytes: -1, ShmFreeBytes: 1 << 20}); !errors.As(
		err,
		&ce,
	) ||
		ce.Flag != "l2-bytes" ||
		!strings.Contains(err.Error(), "/dev/shm has 1 MiB free; lower --l2-bytes") {
		t.Fatalf("a slab larger than /dev/shm, with --l2-bytes: %v, want --l2-bytes refused", err)
	}
	if err := checkMemoryFits(o, g, 8, 1, sizing.NodeMemory{AvailableBytes: -1, ShmFreeBytes: -1}); err != nil {
		t.Fatalf("without /proc/meminfo or /dev/shm the check must stand aside: %v", err)
	}
	if free, err := sizing.MemAvailableBytes(); err != nil || free <= 0 {
		t.Fatalf("MemAvailable: %d, %v", free, err)
	}
}

// TestL1ThatCannotFitIsRefused: in the CPU build L1 is host memory: --device-pages (or
// --device-bytes) that the node's ranks cannot hold beside the tables is refused, not left to the
// Go runtime's "out of memory".
func TestL1ThatCannotFitIsRefused(t *testing.T) {
	if !transport.DeviceInHostMemory {
		t.Skip("the GPU build keeps L1 in GPU memory")
	}
	g := pool.Geometry{
		CPSize:           2,
		Layers:           4,
		PayloadsPerLayer: 2,
		PageTokens:       16,
		TokenBytes:       32,
		Slots:            64,
		SlabBytesMax:     1 << 20,
	}
	o := &config.Options{DevicePages: 100_000_000}
	var ce *errscope.ConfigError
	err := checkMemoryFits(o, g, 2, 1, sizing.NodeMemory{AvailableBytes: 1 << 30, ShmFreeBytes: -1})
	if !errors.As(err, &ce) || ce.Flag != "device-pages" ||
		!strings.Contains(
			err.Error(),
			"L1 of 100000000 pages needs 390625 MiB of memory per rank",
		) {
		t.Fatalf(
			"an L1 of 100M pages in 1 GiB: %v, want --device-pages refused with the numbers",
			err,
		)
	}
	o.DeviceBytes = 400 << 30
	if err := checkMemoryFits(o, g, 2, 1, sizing.NodeMemory{AvailableBytes: 1 << 30, ShmFreeBytes: -1}); !errors.As(
		err,
		&ce,
	) ||
		ce.Flag != "device-bytes" {
		t.Fatalf("sized by --device-bytes: %v, want --device-bytes refused", err)
	}
	o.DevicePages, o.DeviceBytes = 512, 0
	if err := checkMemoryFits(o, g, 2, 1, sizing.NodeMemory{AvailableBytes: 1 << 30, ShmFreeBytes: -1}); err != nil {
		t.Fatalf("the default L1: %v", err)
	}
	// Each fits on its own (the slab in /dev/shm, L1 in memory), but not together: /dev/shm is
	// memory too.
	o.DevicePages, o.DeviceBytes = 100_000, 1 // sized by --device-bytes
	slab, l1 := shm.SegmentBytes(g), 2*(g.TableBytes()+cache.DeviceBytes(g, o.DevicePages))
	both := sizing.NodeMemory{AvailableBytes: slab + l1 - 1, ShmFreeBytes: slab}
	if err := checkMemoryFits(o, g, 2, 1, both); !errors.As(err, &ce) ||
		ce.Flag != "device-bytes" ||
		!strings.Contains(err.Error(), "MiB together") {
		t.Fatalf(
			"a %d MiB slab beside %d MiB of L1 in %d MiB: %vwant --device-bytes refused for the sum",
			slab>>10,
			l1>>20,
			both.AvailableBytes>>20,
			err,
		)
	}
}

// TestCgroupLimitIsReadAndChecked: the tightest limit on the way to the root is read, in cgroup v2
// (memory.max, "max" for none) and v1 (memory.limit_in_bytes, 2^63 rounded down for none), also
// from a container that sees the host's path; and a cache that fits MemAvailable but not the cgroup
// is refused, naming the limit and --mem.
func TestCgroupLimitIsReadAndChecked(t *testing.T) {
	write := func(path, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root := t.TempDir()
	proc := filepath.Join(root, "proc-self-cgroup")
	// v2: the job's limit (Slurm's job cgroup) sits above the task's, which has none.
	write(filepath.Join(root, "slurm/job_7/memory.max"), "1073741824\n")
	write(filepath.Join(root, "slurm/job_7/memory.current"), "104857600\n")
	write(filepath.Join(root, "slurm/job_7/step_0/task_0/memory.max"), "max\n")
	write(filepath.Join(root, "slurm/job_7/step_0/task_0/memory.current"), "4096\n")
	write(proc, "0::/slurm/job_7/step_0/task_0\n")
	m, ok := sizing.ReadCgroupMemory(root, proc)
	if !ok || m.LimitBytes != 1<<30 || m.UsageBytes != 100<<20 ||
		!strings.HasSuffix(m.Path, "job_7/memory.max") {
		t.Fatalf("v2: %+v %v, want the job's 1 GiB limit with 100 MiB used", m, ok)
	}
	// v1, from a container whose /proc/self/cgroup names a path its mount does not have: the
	// mount's own limit.
	v1 := t.TempDir()
	write(filepath.Join(v1, "memory/memory.limit_in_bytes"), "536870912\n")
	write(filepath.Join(v1, "memory/memory.usage_in_bytes"), "0\n")
	write(proc, "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n")
	if m, ok := sizing.ReadCgroupMemory(v1, proc); !ok || m.LimitBytes != 512<<20 {
		t.Fatalf("v1: %+v %v, want the 512 MiB limit at the mount", m, ok)
	}
	write(filepath.Join(v1, "memory/memory.limit_in_bytes"), "9223372036854771712\n")
	if m, ok := sizing.ReadCgroupMemory(v1, proc); ok {
		t.Fatalf("v1 without a limit: %+v, want none", m)
	}
	g := pool.Geometry{
		CPSize:           2,
		Layers:           4,
		PayloadsPerLayer: 2,
		PageTokens:       16,
		TokenBytes:       32,
		Slots:            1 << 18,
		SlabBytesMax:     64 << 20,
	}
	o := &config.Options{DevicePages: 512, L2Bytes: 2 << 30}
	mem := sizing.NodeMemory{
		AvailableBytes: 64 << 30,
		ShmFreeBytes:   64 << 30,
		Cgroup: sizing.CgroupMemory{
			Path:       "/sys/fs/cgroup/slurm/job_7/memory.max",
			LimitBytes: 1 << 30,
			UsageBytes: 100 << 20,
		},
		CgroupLimited: true,
	}
	var ce *errscope.ConfigError
	err := checkMemoryFits(o, g, 2, 1, mem)
	if !errors.As(err, &ce) || ce.Flag != "l2-bytes" ||
		!strings.Contains(err.Error(), "job_7/memory.max (1024 MiB, 100 MiB in use)") ||
		!strings.Contains(err.Error(), "--mem") {
		t.Fatalf(
			"a 2 GiB slab under a 1 GiB cgroup: %v, want --l2-bytes refused naming the limit and --mem",
			err,
		)
	}
	mem.Cgroup.LimitBytes = 64 << 30
	if err := checkMemoryFits(o, g, 2, 1, mem); err != nil {
		t.Fatalf("under a 64 GiB cgroup: %v", err)
	}
}

func TestInjectionOutsideTheWorldIsRefused(t *testing.T) {
	o := &config.Options{InjectHang: config.Injection{Rank: 3, Step: 1, Set: true}}
	if err := o.CheckInjectionRanks(4, 4); err != nil {
		t.Fatalf("rank 3 of 4: %v", err)
	}
	var ce *errscope.ConfigError
	if err := o.CheckInjectionRanks(3, 3); !errors.As(err, &ce) || ce.Flag != "inject-hang" {
		t.Fatalf("rank 3 of 3: %v, want --inject-hang refused", err)
	}
}

// TestADivergenceNeedsAGroupThatCompares: at cp 1 no placement is compared, so an injected
// divergence could not be caught and is refused, naming the flag; at cp 2 it runs.
func TestADivergenceNeedsAGroupThatCompares(t *testing.T) {
	o := &config.Options{InjectDivergence: config.Injection{Rank: 1, Step: 3, Set: true}}
	var ce *errscope.ConfigError
	if err := o.CheckInjectionRanks(2, 1); !errors.As(err, &ce) || ce.Flag != "inject-divergence" ||
		!strings.Contains(ce.Reason, "cp 1") {
		t.Fatalf("a divergence in CP groups of 1: %v, want --inject-divergence refused", err)
	}
	if err := o.CheckInjectionRanks(2, 2); err != nil {
		t.Fatalf("a divergence in a CP group of 2: %v", err)
	}
}
