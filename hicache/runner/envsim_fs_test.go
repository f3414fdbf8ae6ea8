package runner

import (
	"io/fs"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cphicache/cphicache/hicache/l3"
)

// The simulated filesystem of the runner's Env under simulation (envsim_test.go): one l3.MemFS
// shared by every rank of the job (the directory its groups share), behind one lock, since the
// runner's L3 goroutines use it at once and MemFS is for one thread of control. Each rank sees it
// through a view of its own (rankFS), so that a fault is known by the rank that met it. Its faults,
// drawn from the job's seed: a block file's open that hangs until the job ends (a hung filesystem),
// opens that fail (EIO), writes that fail (ENOSPC), and blocks that are corrupted as they are
// published (a byte flipped past the header: the read's checksum must refuse them).
type simFS struct {
	mu  sync.Mutex
	mem *l3.MemFS
	rng *rand.Rand // the faults' draws, under mu

	failOpenPer, failWritePer, corruptPer int // 1 in N of each fails (0: never)

	// the hangOpen-th block open of the job, by whichever rank (a reader), hangs (0: none)
	hangOpen    int
	opens       int       // block opens so far
	hungAt      time.Time // when the hang began; zero while none has
	hungRank    int       // the world rank whose open hangs
	release     chan struct{}
	releaseOnce sync.Once

	// the blocks some ranks' views lack (envsim_views_test.go), and how many lookups it hid
	view splitView
	hid  int64
}

func newSimFS(seed uint64) *simFS {
	f := &simFS{
		mem:     l3.NewMemFS(),
		rng:     rand.New(rand.NewPCG(seed, 0x5f5)),
		release: make(chan struct{}),
	}
	f.mem.Inject = f.inject
	return f
}

// inject is MemFS's fault hook, called under mu.
func (f *simFS) inject(op, path string) error {
	switch {
	case op == "open" && f.failOpenPer > 0 && f.rng.IntN(f.failOpenPer) == 0:
		return &fs.PathError{Op: op, Path: path, Err: syscall.EIO}
	case op == "write" && f.failWritePer > 0 && f.rng.IntN(f.failWritePer) == 0:
		return &fs.PathError{Op: op, Path: path, Err: syscall.ENOSPC}
	}
	return nil
}

// releaseHangs lets a hung open return (failing), as the end of the process would end it.
func (f *simFS) releaseHangs() { f.releaseOnce.Do(func() { close(f.release) }) }

// hang says when the injected hang began (zero: it did not), and on which world rank.
func (f *simFS) hang() (began time.Time, rank int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hungAt, f.hungRank
}

// rankFS is one rank's view of the job's filesystem: l3.FS, every call under the shared lock.
type rankFS struct {
	f    *simFS
	rank int
}

var _ l3.FS = rankFS{}

func (r rankFS) lock() func() {
	r.f.mu.Lock()
	return r.f.mu.Unlock
}

func (r rankFS) Now() time.Time { defer r.lock()(); return r.f.mem.Now() }
func (r rankFS) Stat(p string) (fs.FileInfo, error) {
	defer r.lock()()
	if r.f.hidden(r.rank, p) {
		return nil, &fs.PathError{Op: "stat", Path: p, Err: fs.ErrNotExist}
	}
	return r.f.mem.Stat(p)
}

// OpenRegular opens a block file; the chosen open hangs until the job ends, then fails.
func (r rankFS) OpenRegular(p string) (l3.ReadFile, fs.FileInfo, error) {
	r.f.mu.Lock()
	r.f.opens++
	hang := r.f.opens == r.f.hangOpen
	if hang {
		r.f.hungAt, r.f.hungRank = time.Now(), r.rank
	}
	r.f.mu.Unlock()
	if hang {
		<-r.f.release
		return nil, nil, &fs.PathError{Op: "open", Path: p, Err: syscall.EIO}
	}
	defer r.lock()()
	if r.f.hidden(r.rank, p) {
		return nil, nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
	}
	file, info, err := r.f.mem.OpenRegular(p)
	if err != nil {
		return nil, nil, err
	}
	return lockedReader{ReadFile: file, fs: r}, info, nil
}

func (r rankFS) CreateTemp(dir, pattern string) (l3.TempFile, error) {
	defer r.lock()()
	t, err := r.f.mem.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return lockedTemp{TempFile: t, fs: r}, nil
}

// Rename publishes a block, and now and then corrupts it at once, under the same lock: no reader
// sees it whole.
func (r rankFS) Rename(oldPath, newPath string) error {
	defer r.lock()()
	err := r.f.mem.Rename(oldPath, newPath)
	if err == nil && r.f.corruptPer > 0 && !strings.HasSuffix(newPath, "/") &&
		r.f.rng.IntN(r.f.corruptPer) == 0 {
		r.f.mem.Corrupt(newPath)
	}
	return err
}

func (r rankFS) Chtimes(p string, a, m time.Time) error {
	defer r.lock()()
	return r.f.mem.Chtimes(p, a, m)
}
func (r rankFS) Remove(p string) error { defer r.lock()(); return r.f.mem.Remove(p) }
func (r rankFS) MkdirAll(p string, m fs.FileMode) error {
	defer r.lock()()
	return r.f.mem.MkdirAll(p, m)
}
func (r rankFS) ReadDir(p string) ([]fs.DirEntry, error) {
	defer r.lock()()
	return r.f.mem.ReadDir(p)
}
func (r rankFS) SyncDir(p string) error         { defer r.lock()(); return r.f.mem.SyncDir(p) }
func (r rankFS) SameFile(a, b fs.FileInfo) bool { return r.f.mem.SameFile(a, b) }

// lockedTemp is a block file being written, its calls under the shared lock.
type lockedTemp struct {
	l3.TempFile
	fs rankFS
}

func (t lockedTemp) Write(b []byte) (int, error) { defer t.fs.lock()(); return t.TempFile.Write(b) }
func (t lockedTemp) Sync() error                 { defer t.fs.lock()(); return t.TempFile.Sync() }
func (t lockedTemp) Close() error                { defer t.fs.lock()(); return t.TempFile.Close() }

// lockedReader is a block file being read: its reads ask the fault hook, under the shared lock.
type lockedReader struct {
	l3.ReadFile
	fs rankFS
}

func (f lockedReader) Read(b []byte) (int, error) { defer f.fs.lock()(); return f.ReadFile.Read(b) }
