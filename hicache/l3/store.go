package l3

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cphicache/cphicache/internal/errscope"
)

// Store is one namespace's blocks under an L3 directory. Its methods are safe for concurrent use,
// and several Stores (in this process or in other jobs) may share a directory: a file is only ever
// published whole (by rename) and removed whole, so each sees blocks appear and disappear, never
// change.
type Store struct {
	root, dir string // the --l3-dir, and this namespace's directory under it
	ns        Namespace
	// the group's node whose part-files this Store reads and writes (0 on one node)
	node          int
	partSuffix    string // ".p<node>of<nodes>" before ".blk" on a group over several nodes, else ""
	readOnly      bool   // the directory refused writes at Open (openForWrites)
	fingerprint   uint64
	capacityBytes int64

	mu       sync.Mutex
	lru      *lruIndex
	counters Counters

	fs FS // the filesystem the blocks are on
	// Seams for the tests: the clock, and how a temporary file is created (to make a full
	// filesystem).
	now        func() time.Time
	createTemp func(dir, pattern string) (TempFile, error)
}

// Counters are this Store's events since Open.
type Counters struct {
	Hits, Misses, Corrupt, Writes, Evictions, StaleTempsRemoved int64
}

// staleTempAge is how old a temporary file must be before Open removes it as a dead writer's. A
// live write takes milliseconds; ten minutes leaves room for a slow shared filesystem.
const staleTempAge = 10 * time.Minute

// Unbounded is the capacity of a Store that never evicts: it reads, writes and checks blocks for a
// job whose budget another Store keeps, so Open skips the scan that seeds the LRU order (and the
// stale-file cleanup, the keeper's too), the cost of a start-up that grows with the directory.
const Unbounded = int64(math.MaxInt64)

// Open opens (creating if needed) ns's directory under dir, removes stale temporary files, and
// seeds the LRU order from the blocks' modification times; blocks beyond capacityBytes are evicted,
// oldest first. A Store of Unbounded capacity does none of the three.
func Open(dir string, ns Namespace, capacityBytes int64) (*Store, error) {
	return OpenFS(OSFS{}, dir, ns, capacityBytes)
}

// OpenFS is Open on the filesystem fsys (a simulated one, in the simulator).
func OpenFS(fsys FS, dir string, ns Namespace, capacityBytes int64) (*Store, error) {
	return OpenPart(fsys, dir, ns, 0, capacityBytes)
}

// OpenPart is OpenFS for the ranks of the group's node node (its index among the group's nodes, in
// [0, ns.Nodes)): a block of a group over several nodes is one part-file a node (NODES.md, "The
// L3"), and this Store reads, writes, finds, budgets and evicts its node's only. The namespace
// directory is the group's.
func OpenPart(fsys FS, dir string, ns Namespace, node int, capacityBytes int64) (*Store, error) {
	if err := ns.Validate(); err != nil {
		return nil, err
	}
	if node < 0 || node >= ns.nodes() {
		return nil, fmt.Errorf("l3: node %d of a group over %d nodes", node, ns.nodes())
	}
	if capacityBytes < 1 {
		return nil, &errscope.ConfigError{
			Flag:   "l3-bytes",
			Reason: fmt.Sprintf("%d bytes: the L3 needs a budget of 1 byte or more", capacityBytes),
		}
	}
	if err := checkDir(fsys, dir); err != nil {
		return nil, err
	}
	fp := ns.Fingerprint()
	s := &Store{
		root:          dir,
		dir:           filepath.Join(dir, fmt.Sprintf("%016x", fp)),
		ns:            ns,
		node:          node,
		fingerprint:   fp,
		capacityBytes: capacityBytes,
		lru:           newLRU(),
		fs:            fsys,
		now:           time.Now,
		createTemp:    fsys.CreateTemp,
	}
	if ns.nodes() > 1 {
		s.partSuffix = fmt.Sprintf(".p%dof%d", node, ns.nodes())
	}
	if c, ok := fsys.(interface{ Now() time.Time }); ok {
		s.now = c.Now // a simulated filesystem keeps its own clock: a replay's mtimes are the same
	}
	if err := s.openForWrites(); err != nil {
		return nil, &errscope.ConfigError{
			Flag:   "l3-dir",
			Reason: fmt.Sprintf("%s is not writable: %v", dir, err),
		}
	}
	if capacityBytes == Unbounded || s.readOnly {
		return s, nil
	}
	if err := s.seed(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evictOverBudget()
	return s, nil
}

// openForWrites writes the namespace's description and proves that a block can be created beside
// it. A directory that refuses both as read-only (a read-only mount: a pre-warmed cache shared by
// many jobs; or no permission) opens the Store read-only: its blocks are served, nothing is
// written, removed or evicted (ReadOnly), and the Store never scans it, as one of Unbounded
// capacity does not.
func (s *Store) openForWrites() error {
	err := s.writeNamespaceFile()
	if err == nil {
		var f TempFile
		if f, err = s.fs.CreateTemp(s.dir, ".cphicache-probe-*.tmp"); err == nil {
			err = errors.Join(f.Close(), s.fs.Remove(f.Name()))
		}
	}
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		s.readOnly = true
		return nil
	}
	return err
}

// ReadOnly says whether the Store's directory refused writes when it was opened: Write then skips
// every block (ErrReadOnly).
func (s *Store) ReadOnly() bool { return s.readOnly }

// ErrReadOnly is Write's answer on a read-only Store: the block is skipped, not failed.
var ErrReadOnly = errors.New("l3: the directory is read-only: block not written")

// CheckDir refuses an L3 directory that is not there: creating it would hide a mistyped path or an
// unmounted filesystem, and the blocks would silently go to the wrong disk.
func CheckDir(dir string) error { return checkDir(OSFS{}, dir) }

func checkDir(fsys FS, dir string) error {
	if dir == "" {
		return &errscope.ConfigError{Flag: "l3-dir", Reason: "no directory given"}
	}
	info, err := fsys.Stat(dir)
	if err != nil {
		return &errscope.ConfigError{Flag: "l3-dir", Reason: fmt.Sprintf("%s: %v", dir, err)}
	}
	if !info.IsDir() {
		return &errscope.ConfigError{
			Flag:   "l3-dir",
			Reason: fmt.Sprintf("%s is not a directory", dir),
		}
	}
	return nil
}

// Adopt records a block that another rank of this job wrote, as its file now shows it, so that this
// Store's budget counts it; blocks beyond the budget are then evicted. A block that is not there is
// forgotten.
func (s *Store) Adopt(key uint64) {
	info, err := s.fs.Stat(s.blockPath(key))
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil || !info.Mode().IsRegular() {
		s.lru.remove(key)
		return
	}
	s.lru.place(key, info.Size(), info.ModTime())
	s.evictOverBudget()
}

// Namespace, Node and Fingerprint are what the Store was opened with.
func (s *Store) Namespace() Namespace { return s.ns }
func (s *Store) Node() int            { return s.node }
func (s *Store) Fingerprint() uint64  { return s.fingerprint }

// Counters returns a copy of the counters.
func (s *Store) Counters() Counters {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counters
}

// UsedBytes is the size of the blocks this Store knows of (its own writes and hits, and what Open
// found).
func (s *Store) UsedBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lru.totalBytes
}

// blockPath is DIR/<fingerprint>/<key hex[0:2]>/<key hex>.blk: 256 fan-out directories keep any one
// directory small enough for a shared filesystem's lookups. A part-file of a group over k nodes is
// <key hex>.p<i>of<k>.blk. It is built by hand, in one allocation: fmt and filepath.Join cost a 32
// KiB read from the page cache 7% of its time here.
func (s *Store) blockPath(key uint64) string {
	const digits = "0123456789abcdef"
	var name [16]byte
	for i := range name {
		name[i] = digits[key>>(60-4*i)&15]
	}
	var b strings.Builder
	b.Grow(len(s.dir) + 4 + len(name) + len(s.partSuffix) + len(".blk"))
	b.WriteString(s.dir)
	b.Write([]byte{filepath.Separator, name[0], name[1], filepath.Separator})
	b.Write(name[:])
	b.WriteString(s.partSuffix)
	b.WriteString(".blk")
	return b.String()
}

// Exists says whether key's block is there now, as a regular file (anything else is a corrupt block
// that Read refuses: counting it would agree a prefetch that fails); the prefetch counts with it. A
// block another job wrote joins this Store's LRU view. A true answer promises nothing: the block
// may be evicted before Read, which then misses.
func (s *Store) Exists(key uint64) bool {
	info, err := s.fs.Stat(s.blockPath(key))
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil ||
		!info.Mode().IsRegular() { // a FIFO, a directory, a socket, a device: Read calls it corrupt
		s.lru.remove(key)
		return false
	}
	if !s.lru.has(key) {
		s.lru.place(key, info.Size(), info.ModTime())
	}
	return true
}

// Read loads key's payload into into (which must hold it) and returns its token count. An absent
// block is a *MissError; a bad one a *CorruptError, after Read has removed it; any other error
// (EIO, a buffer too small) is a failure of this reader, and the file stays. A hit refreshes the
// block: its mtime, and its LRU place. A path that is not a regular file (a FIFO, a directory, a
// socket, a device, or a symbolic link to one) is a corrupt block, found without blocking and never
// read: a FIFO's reader would wait for a writer forever.
func (s *Store) Read(key uint64, into []byte) (tokenCount int, err error) {
	path := s.blockPath(key)
	f, opened, err := s.fs.OpenRegular(path)
	if errors.Is(err, fs.ErrNotExist) {
		s.miss(key)
		return 0, &MissError{Key: key}
	}
	var notRegular *notRegularError
	if errors.As(err, &notRegular) {
		s.removeCorrupt(notRegular.info, path, key)
		return 0, &CorruptError{Path: path, Key: key, Reason: notRegular.reason()}
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	h, err := s.readVerified(f, opened.Size(), path, key, into)
	var corrupt *CorruptError
	if errors.As(err, &corrupt) {
		s.removeCorrupt(opened, path, key)
		return 0, err
	}
	if err != nil {
		return 0, err
	}
	if h.key != key || int64(h.payloadBytes) != s.ns.PayloadBytes(int(h.tokenCount)) {
		panic(
			brokenBlock(
				h,
				s.ns,
				"a verified read of block %016x returned another block's header",
				key,
			),
		)
	}
	s.refresh(key, path, f, headerBytes+int64(h.payloadBytes))
	return int(h.tokenCount), nil
}

// oneReadPayloadBytes is the largest payload read with its header in one system call. A larger
// block's header is read alone first, then its payload a chunk at a time: on a file not in the page
// cache, that small first read led the kernel's readahead to read the rest 1.5 to 3 times faster
// than a first read of the header and a 1 MiB chunk (bench l3 --cold, 256 KiB to 16 MiB, this VM's
// disk), and the extra call costs a block from the page cache about 1 us. 128 KiB is Linux's
// default readahead window: a block within it is read whole anyway.
const oneReadPayloadBytes = 128 << 10

// readChunkBytes is what one read system call asks for: sixteen checksum pieces (4 MiB), hashed as
// soon as the chunk is in. Measured with bench l3 (page-cache reads, this 2-CPU AMD EPYC VM,
// alternating binaries): at 4 and 16 MiB blocks, ours/plain read 0.53-0.66 with 1 MiB chunks,
// 0.42-0.47 with 256 KiB, 0.67-0.80 with 4 MiB and 0.68-0.80 with one read of the whole payload: a
// chunk this size is still in the last-level cache when hashed, and fewer, larger copies from the
// page cache go faster than many small ones.
const readChunkBytes = 16 * sumChunkBytes

// BlockPath is where key's block lives (for messages).
func (s *Store) BlockPath(key uint64) string { return s.blockPath(key) }
