package sim

import (
	"errors"
	"slices"
)

// simFS is the L3 directory of a simulated job, shared by its CP groups: block files by key, as the store would
// leave them (published whole), and the faults a real directory has: reads that fail, corrupt or short files,
// paths that are not regular files, reads that never return, writes that fail, a rank whose view lags, and
// another job that evicts blocks or clears the namespace. The store's own code is tested against a real
// filesystem in hicache/l3; here the core meets what the store reports.
type simFS struct {
	r      *rng
	f      L3Faults
	blocks map[uint64]*simBlock
	keys   []uint64 // in publication order, for the other job's evictions (no map iteration)
}

// simBlock is one published block: its bytes, and what is wrong with its file.
type simBlock struct {
	data       []byte
	corrupt    bool // flipped bytes: the checksum fails
	truncated  bool
	nonRegular bool // a FIFO or a directory stands at its path
	hiddenFrom int  // a CP rank whose existence check misses it; -1 none
}

var (
	errSimEIO     = errors.New("input/output error (simulated)")
	errSimENOSPC  = errors.New("no space left on device (simulated)")
	errSimMiss    = errors.New("l3: block not present (simulated)")
	errSimCorrupt = errors.New("l3: corrupt block: payload checksum mismatch (simulated)")
	errSimShort   = errors.New("l3: corrupt block: short payload (simulated)")
	errSimNotFile = errors.New("l3: corrupt block: not a regular file (simulated)")
)

func newSimFS(r *rng, f L3Faults) *simFS {
	return &simFS{r: r, f: f, blocks: map[uint64]*simBlock{}}
}

// exists is rank cpRank's existence check: a corrupt or short file exists (the read finds out), a non-regular
// path does not, and a lagging view misses a block that is there.
func (s *simFS) exists(cpRank int, key uint64) bool {
	b := s.blocks[key]
	return b != nil && !b.nonRegular && b.hiddenFrom != cpRank
}

// write publishes a block (the writer found none there), or fails as a full or broken disk would.
func (s *simFS) write(key uint64, data []byte, cpSize int) error {
	if s.r.chance(s.f.WriteErrorPerMille) {
		return pick(s.r, errSimENOSPC, errSimEIO)
	}
	if b := s.blocks[key]; b != nil && !b.nonRegular {
		return nil // there already
	}
	b := &simBlock{data: data, hiddenFrom: -1}
	b.corrupt = s.r.chance(s.f.CorruptPerMille)
	b.truncated = !b.corrupt && s.r.chance(s.f.TruncatedPerMille)
	b.nonRegular = !b.corrupt && !b.truncated && s.r.chance(s.f.NonRegularPerMille)
	if s.r.chance(s.f.HideFromRankPerMill) {
		b.hiddenFrom = s.r.intn(cpSize)
	}
	if _, had := s.blocks[key]; !had {
		s.keys = append(s.keys, key)
	}
	s.blocks[key] = b
	return nil
}

// read returns a block's verified bytes, or the error the store would: a miss, a corrupt block (which the store
// removes), an I/O error. hung says the read never returns by itself.
func (s *simFS) read(key uint64) (data []byte, hung bool, err error) {
	if s.r.chance(s.f.HungReadPerMille) {
		return nil, true, nil
	}
	if s.r.chance(s.f.FailReadPerMille) {
		return nil, false, errSimEIO
	}
	b := s.blocks[key]
	switch {
	case b == nil:
		return nil, false, errSimMiss
	case b.corrupt, b.truncated, b.nonRegular:
		delete(s.blocks, key) // the store removes a bad block, so that it is written anew
		switch {
		case b.corrupt:
			return nil, false, errSimCorrupt
		case b.truncated:
			return nil, false, errSimShort
		}
		return nil, false, errSimNotFile
	}
	return b.data, false, nil
}

// otherJob is another job sharing the directory, once a step: it may evict a block, or clear the namespace.
func (s *simFS) otherJob() {
	if !s.r.chance(s.f.OtherJobPerMille) || len(s.keys) == 0 {
		return
	}
	if s.r.chance(50) {
		clear(s.blocks)
		s.keys = s.keys[:0]
		return
	}
	i := s.r.intn(len(s.keys))
	delete(s.blocks, s.keys[i])
	s.keys = slices.Delete(s.keys, i, i+1)
}
