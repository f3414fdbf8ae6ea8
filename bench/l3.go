package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/cphicache/cphicache/hicache/l3"
	"github.com/cphicache/cphicache/hicache/l3block"
)

// L3Config sizes the L3 store benchmark: for every block size, Blocks blocks written and read back
// per side and round, in a fresh directory under Dir that the benchmark removes again.
type L3Config struct {
	Dir        string  // an existing directory, on the filesystem to measure
	BlockBytes []int64 // block payload sizes, whole pages of l3BenchNamespace
	Blocks     int     // blocks (ours) and files (the reference) per side, size and round, at least
	// RoundBytes raises the blocks of a small size until a round moves at least this many payload
	// bytes per side and direction: a round of 16 blocks of 32 KiB lasts a few hundred
	// microseconds, less than one scheduler tick given to a neighbour of the shared machine, which
	// then decides the median alone. 0: Blocks always.
	RoundBytes int64
	Rounds     int
	// ours: Store.Write's fsync (the file and its directory); the reference: fsync of each file
	Fsync bool
	// Cold drops every file's pages from the page cache between the writes and the reads (untimed),
	// on both sides, so that reads come from the device, as an L3 read of a block no longer in
	// memory does.
	Cold bool
}

// l3BenchNamespace is `cphicache run`'s default geometry (4 layers, K and V, 16-token pages of 32
// bytes per token), so that a block of the benchmark is a block of a run: one page is 4 KiB of
// payload.
var l3BenchNamespace = l3.Namespace{
	Layers:     4,
	Payloads:   2,
	PageTokens: 16,
	TokenBytes: 32,
	CPSize:     1,
	Name:       "cphicache bench l3",
}

// l3TokenBytes is one token's payload in a block: every layer's and payload's part.
var l3TokenBytes = l3BenchNamespace.PayloadBytes(1)

// Validate returns a *errscope.ConfigError (the l3 package's for the directory) naming the first
// unusable field as its flag of `cphicache bench l3`.
func (c L3Config) Validate() error {
	if err := l3.CheckDir(c.Dir); err != nil {
		return err
	}
	if len(c.BlockBytes) == 0 {
		return configErrorf("block-bytes", "no block sizes")
	}
	page := l3BenchNamespace.PayloadBytes(l3BenchNamespace.PageTokens)
	for _, b := range c.BlockBytes {
		if b < page || b%page != 0 || b > 1<<30 {
			return configErrorf(
				"block-bytes",
				"%d bytes: a block is whole pages of %d bytes (%s), up to 1 GiB",
				b,
				page,
				l3BenchNamespace,
			)
		}
	}
	if c.RoundBytes < 0 || c.RoundBytes > 1<<34 {
		return configErrorf("round-bytes", "%d bytes: 0 to 16 GiB", c.RoundBytes)
	}
	return firstBelow(bound{"blocks", c.Blocks, 1}, bound{"rounds", c.Rounds, 1})
}

// L3Row is one block size: our store's write and read bandwidth beside plain files of the same
// bytes.
type L3Row struct {
	BlockBytes    int64   `json:"block_bytes"` // payload; ours adds a 64-byte header to each file
	Blocks        int     `json:"blocks"`      // per side and round
	Rounds        int     `json:"rounds"`      // timed, after one untimed round that also validates
	OursWriteMBps float64 `json:"ours_write_mb_per_s"`
	RefWriteMBps  float64 `json:"ref_write_mb_per_s"`
	WriteRatio    float64 `json:"write_ratio"` // ours / ref
	OursReadMBps  float64 `json:"ours_read_mb_per_s"`
	RefReadMBps   float64 `json:"ref_read_mb_per_s"`
	ReadRatio     float64 `json:"read_ratio"` // ours / ref
	// blocks or files read back with other bytes, and blocks the store lost
	Wrong int64 `json:"wrong"`
}

// RunL3 measures every block size. Everything happens in one fresh directory under cfg.Dir, removed
// again on every return, errors and a cancelled ctx (the command's SIGINT and SIGTERM) included:
// the benchmark may be pointed at a real L3 directory, and must leave it as it found it.
func RunL3(ctx context.Context, cfg L3Config) (rows []L3Row, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp(cfg.Dir, "cphicache-bench-l3-*")
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(work)) }()
	for _, size := range cfg.BlockBytes {
		c, err := newL3Case(cfg, size, work)
		if err != nil {
			return rows, err
		}
		row, err := c.measure(ctx)
		if err != nil {
			return rows, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// l3Case is one block size: each side's directory, the payload both sides write, the buffer both
// read into, and the keys.
type l3Case struct {
	cfg             L3Config
	oursDir, refDir string
	tokens          int
	payload         []byte
	into            []byte
	keys            []uint64
}

// blocksOf is a size's blocks per side and round: Blocks, or enough to move RoundBytes.
func (c L3Config) blocksOf(size int64) int {
	return max(c.Blocks, int((c.RoundBytes+size-1)/size))
}

func newL3Case(cfg L3Config, size int64, work string) (*l3Case, error) {
	c := &l3Case{
		cfg:     cfg,
		tokens:  int(size / l3TokenBytes),
		payload: make([]byte, size),
		into:    make([]byte, size),
	}
	var err error
	if c.oursDir, err = os.MkdirTemp(work, "ours-*"); err != nil {
		return nil, err
	}
	if c.refDir, err = os.MkdirTemp(work, "ref-*"); err != nil {
		return nil, err
	}
	fillPattern(c.payload, uint64(size))
	fillPattern(c.into, 1) // touched before timing, as in bench copy
	// Chained keys, as a conversation's blocks have: they spread over the store's fan-out
	// directories as real ones do.
	var key uint64
	for i := range cfg.blocksOf(size) {
		key = l3block.ChainKey(key, []int32{int32(i)})
		c.keys = append(c.keys, key)
	}
	return c, nil
}

// stamp makes block i's bytes its own (its index in the first word), so a read of another block is
// seen.
func (c *l3Case) stamp(i int) { binary.LittleEndian.PutUint64(c.payload, uint64(i)) }

// l3Times is one side's round: seconds to write every block, seconds to read every block back, and
// what came back wrong.
type l3Times struct {
	write, read float64
	wrong       int64
}

// measure runs one untimed round that validates every byte read back, then cfg.Rounds timed rounds
// in which each side writes and reads its blocks, alternating which side goes first; the median
// round of each is reported, so that a round slowed by another tenant of the shared machine moves
// neither number.
func (c *l3Case) measure(ctx context.Context) (L3Row, error) {
	row := L3Row{BlockBytes: int64(len(c.payload)), Blocks: len(c.keys), Rounds: c.cfg.Rounds}
	var ours, ref []l3Times
	for round := range 1 + c.cfg.Rounds { // round 0 validates and is not timed
		for side := range 2 {
			isOurs := (round+side)%2 == 0
			t, err := c.runSide(ctx, isOurs, round == 0)
			if err != nil {
				return row, err
			}
			row.Wrong += t.wrong
			switch {
			case round == 0:
			case isOurs:
				ours = append(ours, t)
			default:
				ref = append(ref, t)
			}
		}
	}
	mb := float64(row.BlockBytes) * float64(row.Blocks) / 1e6
	row.OursWriteMBps, row.RefWriteMBps = mb/median(
		seconds(ours, true),
	), mb/median(
		seconds(ref, true),
	)
	row.OursReadMBps, row.RefReadMBps = mb/median(
		seconds(ours, false),
	), mb/median(
		seconds(ref, false),
	)
	row.WriteRatio, row.ReadRatio = row.OursWriteMBps/row.RefWriteMBps, row.OursReadMBps/row.RefReadMBps
	return row, nil
}

// runSide runs one side's round, then removes the files it wrote (untimed).
func (c *l3Case) runSide(ctx context.Context, ours, validate bool) (l3Times, error) {
	run, dir := c.runRef, c.refDir
	if ours {
		run, dir = c.runOurs, c.oursDir
	}
	t, err := run(ctx, validate)
	if err != nil {
		return t, err
	}
	return t, removeBlockFiles(dir)
}

func seconds(times []l3Times, write bool) []float64 {
	s := make([]float64, len(times))
	for i, t := range times {
		s[i] = t.read
		if write {
			s[i] = t.write
		}
	}
	return s
}

// removeBlockFiles removes the files a side's round wrote (untimed), keeping the directories: each
// round's writes then create new files, as a job's do, rather than replace the last round's; and
// the store's fan-out directories, each made once in a namespace's life (about 50 us on ext4 here),
// stay made, as in a store in use.
func removeBlockFiles(dir string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "namespace.txt" {
			return err
		}
		return os.Remove(path)
	})
}

// runOurs is ours: a Store opened (untimed) with a budget that never evicts, as a job opens it,
// Write of every block, then Read of every block (header, payload, checksum and length checked by
// Read).
func (c *l3Case) runOurs(ctx context.Context, validate bool) (l3Times, error) {
	var t l3Times
	s, err := l3.Open(c.oursDir, l3BenchNamespace, math.MaxInt64)
	if err != nil {
		return t, err
	}
	start := time.Now()
	for i, key := range c.keys {
		if err := ctx.Err(); err != nil {
			return t, err
		}
		c.stamp(i)
		if err := s.Write(key, c.tokens, c.payload, c.cfg.Fsync); err != nil {
			return t, err
		}
	}
	t.write = time.Since(start).Seconds()
	if err := c.dropCached(c.oursDir); err != nil {
		return t, err
	}
	start = time.Now()
	for i, key := range c.keys {
		if err := ctx.Err(); err != nil {
			return t, err
		}
		tokens, err := s.Read(key, c.into)
		switch {
		case l3.IsMiss(err) || (err == nil && tokens != c.tokens):
			// a block lost or read back wrong is a wrong result, not the benchmark's failure
			t.wrong++
		case err != nil:
			return t, err
		default:
			t.wrong += c.check(validate, i)
		}
	}
	t.read = time.Since(start).Seconds()
	return t, nil
}

// check compares the buffer with block i's bytes, in the untimed round only: a compare in the timed
// rounds would be timed with them.
func (c *l3Case) check(validate bool, i int) int64 {
	if !validate {
		return 0
	}
	c.stamp(i)
	if !bytes.Equal(c.into, c.payload) {
		return 1
	}
	return 0
}

var l3Table = table{
	{"block", "(B)", "%d", 10}, {"blocks", "", "%d", 6},
	{
		"ours-write",
		"(MB/s)",
		"%.0f",
		10,
	}, {"ref-write", "(MB/s)", "%.0f", 10}, {"ours/ref", "(write)", "%.3f", 8},
	{
		"ours-read",
		"(MB/s)",
		"%.0f",
		10,
	}, {"ref-read", "(MB/s)", "%.0f", 10}, {"ours/ref", "(read)", "%.3f", 8},
	{"#wrong", "", "%d", 6},
}

// WriteL3Table prints the rows and the lowest ratio of each direction, against PERFORMANCE.md's
// goal.
func WriteL3Table(w io.Writer, rows []L3Row) {
	l3Table.writeHeader(w)
	lowWrite, lowRead := math.Inf(1), math.Inf(1)
	for _, r := range rows {
		l3Table.writeRow(
			w,
			r.BlockBytes,
			r.Blocks,
			r.OursWriteMBps,
			r.RefWriteMBps,
			r.WriteRatio,
			r.OursReadMBps,
			r.RefReadMBps,
			r.ReadRatio,
			r.Wrong,
		)
		lowWrite, lowRead = min(lowWrite, r.WriteRatio), min(lowRead, r.ReadRatio)
	}
	fmt.Fprintf(
		w,
		"# lowest ours/ref: write %.3f, read %.3f (goal: 0.8 or more, bench/PERFORMANCE.md)\n",
		lowWrite,
		lowRead,
	)
}

// L3Wrong sums the #wrong column.
func L3Wrong(rows []L3Row) int64 {
	var n int64
	for _, r := range rows {
		n += r.Wrong
	}
	return n
}
