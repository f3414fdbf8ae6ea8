package sim

import (
	"errors"
	"io/fs"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/l3"
)

// The L3 directory of a simulated job, shared by its CP groups: the real L3 store (hicache/l3) on
// every rank, over one filesystem in memory (l3.MemFS), with the faults a real directory has. Reads
// fail (EIO), writes fail (ENOSPC, EIO), a published block file is corrupted, cut short or replaced
// by a FIFO, a rank's view lags behind the others' (it does not see a block that is there), and
// another job sharing the directory evicts blocks or clears the namespace. The store's checks (the
// header, the checksum, regular files only) meet each of them as they would on a disk; the core
// meets what the store reports.
type simL3 struct {
	r      *rng
	f      L3Faults
	mem    *l3.MemFS
	ns     l3.Namespace
	hidden map[string]int // a block file's path, and the CP rank whose view does not have it
}

// l3Dir is where the simulated directory is mounted.
const l3Dir = "/l3"

var (
	errSimEIO    = errors.New("input/output error (simulated)")
	errSimENOSPC = errors.New("no space left on device (simulated)")
)

func newSimL3(r *rng, f L3Faults, cfg *JobConfig) *simL3 {
	s := &simL3{r: r, f: f, mem: l3.NewMemFS(), hidden: map[string]int{}}
	g := cfg.Geometry
	s.ns = l3.Namespace{
		Layers:      g.Layers,
		Payloads:    g.PayloadsPerLayer,
		PageTokens:  g.PageTokens,
		TokenBytes:  g.TokenBytes,
		CPSize:      g.CPSize,
		Nodes:       g.Nodes,
		ContentSeed: cfg.Seed | 1,
		Content:     cache.ContentVersion,
		Name:        "sim",
	}
	if err := s.mem.MkdirAll(l3Dir, 0o755); err != nil {
		panic(err)
	}
	return s
}

// arm turns the faults on, once every rank's store is open.
func (s *simL3) arm() { s.mem.Inject = s.inject }

// inject fails reads and writes as a bad disk or a full filesystem would.
func (s *simL3) inject(op, _ string) error {
	switch op {
	case "read":
		if s.r.chance(s.f.FailReadPerMille) {
			return errSimEIO
		}
	case "create", "write":
		if s.r.chance(s.f.WriteErrorPerMille) {
			return pick(s.r, errSimENOSPC, errSimEIO)
		}
	}
	return nil
}

// store opens rank cpRank's store of its node's block files: the real one, on its view of the
// directory (one directory all nodes share). Only the real runner's keepers keep a budget; here
// none does (another job's evictions stand in for it), so every store is unbounded.
func (s *simL3) store(cpRank, node int) *l3.Store {
	st, err := l3.OpenPart(
		rankView{MemFS: s.mem, s: s, rank: cpRank},
		l3Dir,
		s.ns,
		node,
		l3.Unbounded,
	)
	if err != nil {
		panic("sim: open the simulated L3: " + err.Error())
	}
	return st
}

// published is told of a block file just written: it may go wrong on its disk, or be missed by a
// rank's view.
func (s *simL3) published(st *l3.Store, key uint64, cpSize int) {
	p := st.BlockPath(key)
	switch {
	case s.r.chance(s.f.CorruptPerMille):
		s.mem.Corrupt(p)
	case s.r.chance(s.f.TruncatedPerMille):
		s.mem.Truncate(p)
	case s.r.chance(s.f.NonRegularPerMille):
		s.mem.MakeNonRegular(p)
	}
	if s.r.chance(s.f.HideFromRankPerMill) {
		s.hidden[p] = s.r.intn(cpSize)
	}
}

// otherJob is another job sharing the directory, once a step: it may evict a block, or clear the
// namespace.
func (s *simL3) otherJob() {
	if !s.r.chance(s.f.OtherJobPerMille) {
		return
	}
	files := s.mem.Files(l3Dir)
	var blocks []string
	for _, f := range files {
		if len(f) > 4 && f[len(f)-4:] == ".blk" {
			blocks = append(blocks, f)
		}
	}
	if len(blocks) == 0 {
		return
	}
	if s.r.chance(50) {
		for _, b := range blocks {
			s.mem.Remove(b)
		}
		return
	}
	s.mem.Remove(blocks[s.r.intn(len(blocks))])
}

// rankView is one rank's view of the directory: the shared filesystem, less the blocks its view
// lags behind on. The other operations (and the logical clock) are the filesystem's own.
type rankView struct {
	*l3.MemFS
	s    *simL3
	rank int
}

func (v rankView) lags(p string) bool {
	r, ok := v.s.hidden[p]
	return ok && r == v.rank
}

func (v rankView) Stat(p string) (fs.FileInfo, error) {
	if v.lags(p) {
		return nil, &fs.PathError{Op: "stat", Path: p, Err: fs.ErrNotExist}
	}
	return v.MemFS.Stat(p)
}

func (v rankView) OpenRegular(p string) (l3.ReadFile, fs.FileInfo, error) {
	if v.lags(p) {
		return nil, nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
	}
	return v.MemFS.OpenRegular(p)
}

// Rename publishes a new file at a path: every view sees it.
func (v rankView) Rename(oldPath, newPath string) error {
	delete(v.s.hidden, newPath)
	return v.MemFS.Rename(oldPath, newPath)
}
