package hicache

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/pool"
)

// The start-up checks that need the job's size: they run in setUp, after the workload is read and before any
// shared memory exists, and fail naming the flag at fault.

// geometryFlags names the flag behind each pool.Geometry field.
var geometryFlags = map[string]string{
	"CPSize": "cp", "Layers": "layers", "PayloadsPerLayer": "payloads", "PageTokens": "page-tokens",
	"TokenBytes": "token-bytes", "Slots": "l2-slots", "SlabBytesMax": "slab-bytes-max", "Layout": "layout",
	"MaxObjects": "l2-slots",
}

// checkJobLimits checks the options against the launched job: fault injections name a rank of the world, the
// geometry is valid, and the allocator tables of every rank of a node fit in its memory. Every rank reaches the
// same verdict on the first two; the memory check reads each node's own memory and is agreed over the World.
func (rs *runState) checkJobLimits(g pool.Geometry) error {
	t := rs.job.Topo
	if err := rs.opts.checkInjectionRanks(t.World.Size()); err != nil {
		return err
	}
	if err := geometryConfigError(g.Validate()); err != nil {
		return err
	}
	return spmd.AgreeOnFailure(t.World, checkTablesFit(g, t.NodeSize, memAvailableBytes))
}

// checkInjectionRanks refuses a fault injection aimed at a rank the job does not have: it would silently not
// happen, and a validation that expects it would pass for the wrong reason.
func (o *Options) checkInjectionRanks(worldSize int) error {
	for _, inj := range []struct {
		flag string
		inj  Injection
	}{{"inject-divergence", o.InjectDivergence}, {"inject-hang", o.InjectHang}, {"inject-exit", o.InjectExit},
		{"inject-copy-error", o.InjectCopyError}, {"inject-stuck-copy", o.InjectStuckCopy}, {"inject-setup-error", o.InjectSetupError}} {
		if inj.inj.Set && inj.inj.Rank >= worldSize {
			return &spmd.ConfigError{Flag: inj.flag, Reason: fmt.Sprintf("rank %d is outside the job's %d ranks (world ranks 0 to %d)", inj.inj.Rank, worldSize, worldSize-1)}
		}
	}
	return nil
}

// geometryConfigError names the flag behind a pool.FieldError.
func geometryConfigError(err error) error {
	var fe *pool.FieldError
	if err == nil || !errors.As(err, &fe) {
		return err
	}
	flag, ok := geometryFlags[fe.Field]
	if !ok {
		flag = "l2-slots"
	}
	return &spmd.ConfigError{Flag: flag, Reason: err.Error()}
}

// checkTablesFit refuses a pool whose allocator tables, built by each of the node's ranks, would not fit in the
// node's available memory: without it the Go runtime dies with "out of memory" while building them, or the
// node swaps. The tables are fresh zero memory touched as the pool fills, so a full pool needs all of it.
func checkTablesFit(g pool.Geometry, ranksOnNode int, available func() (int64, error)) error {
	free, err := available()
	if err != nil {
		return nil // no /proc/meminfo: nothing to compare with, and building the tables will tell
	}
	perRank := g.TableBytes()
	if need := perRank * int64(ranksOnNode); need > free {
		return &spmd.ConfigError{Flag: "l2-slots", Reason: fmt.Sprintf("%d slots need %d MiB of allocator tables per rank, %d MiB for the %d rank(s) of this node, but it has %d MiB of memory available; lower --l2-slots",
			g.Slots, perRank>>20, need>>20, ranksOnNode, free>>20)}
	}
	return nil
}

// memAvailableBytes reads MemAvailable from /proc/meminfo: what can be allocated without swapping.
func memAvailableBytes() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		if value, ok := strings.CutPrefix(scanner.Text(), "MemAvailable:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
			return kib << 10, err
		}
	}
	return 0, errors.Join(scanner.Err(), errors.New("/proc/meminfo has no MemAvailable"))
}
