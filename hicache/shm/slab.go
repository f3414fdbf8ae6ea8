// Package shm owns a CP group's shared L2 in host memory: the POSIX shared-memory segment that CP
// rank 0 creates (unpredictable name with the job id, O_EXCL, mode 0600, its memory reserved at
// once), that every rank of the group maps slab by slab, and whose name is unlinked as soon as all
// have mapped it. Until then the unlink waits in the job's clean-up, so that no exit path leaks it.
//
// It imports mpi, pool (the geometry) and spmd, and must not import hicache.
package shm

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"syscall"

	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/internal/errscope"
	"github.com/cphicache/cphicache/mpi"
	"github.com/cphicache/cphicache/pool"
)

// Dir is where POSIX shared memory lives on Linux: shm_open(name) is open("/dev/shm/name").
const Dir = "/dev/shm"

// NamePrefix starts the name of every segment cphicache creates, so that leaks are easy to find.
const NamePrefix = "cphicache-"

// mapAlignBytes is the alignment of each slab inside the segment: mmap offsets must be page
// aligned, and 2 MiB also suits huge pages and GPU host registration.
const mapAlignBytes = 2 << 20

// Segment names a CP group's segment and says how its memory is reserved.
type Segment struct {
	JobID   string
	Group   int
	Reserve func(f *os.File, bytes int64) error // nil: Fallocate; tests make it fail
}

// SharedSlab is one CP group's L2: a POSIX shared-memory segment that every rank of the group maps,
// carved into the pool's slabs, each mapped separately so that no mapping exceeds the slab bound.
type SharedSlab struct {
	Name       string   // the segment's name; unlinked once every rank has mapped it
	Slabs      [][]byte // one mapping per pool slab
	TotalBytes int64
	unlinked   bool
	// drops the segment's unlink from the job's clean-up, once it is unlinked (CP rank 0)
	forget func()
}

// FreeBytes is the space left in /dev/shm.
func FreeBytes() (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(Dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", Dir, err)
	}
	return int64(st.Bavail) * st.Bsize, nil
}

// slabOffsets lays the pool's slabs out in one segment, each at an aligned offset. It returns each
// slab's offset and the segment's size.
func slabOffsets(g pool.Geometry) ([]int64, int64) {
	offsets := make([]int64, g.SlabCount())
	var next int64
	for s := range offsets {
		offsets[s] = next
		next += (g.SlabBytes(s) + mapAlignBytes - 1) / mapAlignBytes * mapAlignBytes
	}
	return offsets, next
}

// CheckFits fails, naming the flags that size the slab, when one node's slabs (one per CP group on
// the node) cannot fit in /dev/shm. It runs before any shared state is created.
func CheckFits(g pool.Geometry, groupsOnNode int) error {
	return CheckFitsAs(g, groupsOnNode, "l2-slots")
}

// CheckFitsAs is CheckFits naming sizeFlag, the flag the user sized the L2 with (--l2-slots or
// --l2-bytes).
func CheckFitsAs(g pool.Geometry, groupsOnNode int, sizeFlag string) error {
	segmentBytes := SegmentBytes(g)
	free, err := FreeBytes()
	if err != nil {
		return err
	}
	need := segmentBytes * int64(groupsOnNode)
	if need > free {
		return &errscope.ConfigError{
			Flag: sizeFlag,
			Reason: fmt.Sprintf(
				"the L2 slab needs %d MiB of shared memory per node (%d CP group(s) x %d MiB) but %s has %d MiB free; lower --%s or the page size",
				need>>20,
				groupsOnNode,
				segmentBytes>>20,
				Dir,
				free>>20,
				sizeFlag,
			),
		}
	}
	return nil
}

// SegmentBytes is the size of one CP group's segment: its slabs, each aligned.
func SegmentBytes(g pool.Geometry) int64 {
	_, segmentBytes := slabOffsets(g)
	return segmentBytes
}

// OpenSharedSlab creates (CP-rank 0) or opens (the others) the group's segment and maps it on every
// rank of cp. It is a collective over cp. The name is unpredictable and includes the job id; the
// segment is unlinked as soon as every rank has mapped it, so a crash after that point leaks
// nothing; until then CP rank 0 keeps the unlink in cleanup, which the watchdog and the signal
// handler run before they end the process.
func OpenSharedSlab(
	cp *mpi.Comm,
	g pool.Geometry,
	seg Segment,
	cleanup *spmd.Cleanup,
) (*SharedSlab, error) {
	offsets, segmentBytes := slabOffsets(g)
	nameBuf := make([]byte, 128)
	var createErr error
	forget := func() {}
	if cp.Rank() == 0 {
		name, drop, err := createSegment(seg, segmentBytes, cleanup)
		createErr = err
		copy(nameBuf, name)
		if err == nil {
			forget = drop
		}
	}
	// Rank 0 sends the name, or an empty one when creation failed, so that no rank waits for a
	// segment that does not exist.
	if err := cp.BcastBytes(nameBuf, 0); err != nil {
		if cp.Rank() == 0 &&
			createErr == nil { // the name never reached the group: nobody else will unlink it
			os.Remove(filepath.Join(Dir, nameOf(nameBuf)))
			forget()
		}
		return nil, err
	}
	name := nameOf(nameBuf)
	if name == "" {
		if createErr == nil {
			createErr = errors.New("CP-rank 0 could not create the shared L2 segment")
		}
		return nil, createErr
	}
	s := &SharedSlab{Name: name, TotalBytes: segmentBytes, forget: forget}
	mapErr := s.mapAll(g, offsets)
	// Everyone has tried to map before the name goes away; the outcome is agreed so that all ranks
	// fail alike.
	failed := []int64{0}
	if mapErr != nil {
		failed[0] = 1
	}
	if err := cp.AllreduceInt64(failed, failed, mpi.Max); err != nil {
		mapErr = errors.Join(mapErr, err)
	}
	if cp.Rank() == 0 {
		if err := s.unlink(); err != nil {
			mapErr = errors.Join(mapErr, err)
		}
	}
	if mapErr == nil && failed[0] != 0 {
		mapErr = errors.New("another rank of the CP group could not map the shared L2 segment")
	}
	if mapErr != nil {
		s.Close()
		return nil, mapErr
	}
	return s, nil
}

// nameOf is the name a broadcast's buffer holds, its zero padding cut off.
func nameOf(buf []byte) string { return string(bytes.TrimRight(buf, "\x00")) }

// createSegment makes the segment with O_EXCL and mode 0600 and sizes it. The file is made and its
// removal put in cleanup as one step (spmd.Cleanup.Create), kept there until the caller has
// unlinked it (forget drops it then): a signal or the watchdog that ends the process while the
// segment is made and reserved (seconds for a large one), or just before, leaves no segment behind.
// (Found by a fresh-clone make test: a SIGTERM 1.5 s into a run on a loaded machine left an 8 MiB
// segment, whose removal was registered only once it was reserved.)
func createSegment(
	seg Segment,
	segmentBytes int64,
	cleanup *spmd.Cleanup,
) (name string, forget func(), err error) {
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return "", nil, err
	}
	name = fmt.Sprintf(
		"%sg%d-%s",
		SegmentPrefix(seg.JobID),
		seg.Group,
		hex.EncodeToString(nonce[:]),
	)
	path := filepath.Join(Dir, name)
	var f *os.File
	forget, err = cleanup.Create(func() (func(), error) {
		var err error
		if f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err != nil {
			return nil, err
		}
		return func() { os.Remove(path) }, nil
	})
	if err != nil {
		return "", nil, fmt.Errorf("create shared L2 segment: %w", err)
	}
	defer f.Close()
	discard := func() { // what the clean-up would do, now
		os.Remove(path)
		forget()
	}
	if err := f.Truncate(segmentBytes); err != nil {
		discard()
		return "", nil, fmt.Errorf(
			"size shared L2 segment %s to %d bytes: %w",
			name,
			segmentBytes,
			err,
		)
	}
	reserve := seg.Reserve
	if reserve == nil {
		reserve = Fallocate
	}
	if err := reserve(f, segmentBytes); err != nil {
		discard()
		freeText := "unknown"
		// after the unlink: what the segment could not have
		if free, statErr := FreeBytes(); statErr == nil {
			freeText = fmt.Sprintf("%d bytes (%d MiB)", free, free>>20)
		}
		return "", nil, fmt.Errorf(
			"reserve the %d bytes (%d MiB) of the shared L2 segment in %s: %w; %s has %s free: free shared memory, or lower --l2-slots or the page size",
			segmentBytes,
			segmentBytes>>20,
			Dir,
			err,
			Dir,
			freeText,
		)
	}
	return name, forget, nil
}

// Fallocate allocates [0, size) of f: it gives the segment its memory now, so that a /dev/shm that
// fills up after CheckFits (another job, a leak) fails here, at start and agreed by every rank,
// instead of with SIGBUS in the middle of a copy, which is what touching a page of a sparse tmpfs
// file that tmpfs cannot back does. tmpfs zeroes and charges the pages; a large reservation can be
// interrupted by a signal and resumes where it stopped.
func Fallocate(f *os.File, size int64) error {
	for {
		err := syscall.Fallocate(int(f.Fd()), 0, 0, size)
		if err != syscall.EINTR {
			return err
		}
	}
}

func sanitize(s string) string {
	out := []byte(s)
	for i, c := range out {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_') {
			out[i] = '_'
		}
	}
	if len(out) > 40 {
		out = out[:40]
	}
	return string(out)
}

func (s *SharedSlab) mapAll(g pool.Geometry, offsets []int64) error {
	f, err := os.OpenFile(filepath.Join(Dir, s.Name), os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open shared L2 segment: %w", err)
	}
	defer f.Close()
	for slab, off := range offsets {
		b, err := syscall.Mmap(
			int(f.Fd()),
			off,
			int(g.SlabBytes(slab)),
			syscall.PROT_READ|syscall.PROT_WRITE,
			syscall.MAP_SHARED,
		)
		if err != nil {
			return fmt.Errorf(
				"map slab %d of %s (%d bytes at %d): %w",
				slab,
				s.Name,
				g.SlabBytes(slab),
				off,
				err,
			)
		}
		s.Slabs = append(s.Slabs, b)
	}
	return nil
}

func (s *SharedSlab) unlink() error {
	if s.unlinked {
		return nil
	}
	s.unlinked = true
	// The removal first, then its clean-up entry: a signal in between then finds the name gone, not
	// a name that no one will remove.
	err := os.Remove(filepath.Join(Dir, s.Name))
	if s.forget != nil {
		s.forget()
	}
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("unlink shared L2 segment: %w", err)
	}
	return nil
}

// Close unmaps every slab. Calling it twice is harmless.
func (s *SharedSlab) Close() error {
	var errs []error
	for _, b := range s.Slabs {
		if err := syscall.Munmap(b); err != nil {
			errs = append(errs, err)
		}
	}
	s.Slabs = nil
	return errors.Join(errs...)
}

// JobSegments lists the segments of job jobID present in Dir: CP rank 0 unlinks each as soon as its
// group has mapped it, so any listed after a job ended is a leak. Only jobID's names are listed,
// because other jobs on the same node (another user's run, a concurrent test suite) own theirs and
// may still be running.
func JobSegments(jobID string) ([]string, error) {
	entries, err := os.ReadDir(Dir)
	if err != nil {
		return nil, err
	}
	ofJob := regexp.MustCompile(
		`^` + regexp.QuoteMeta(SegmentPrefix(jobID)) + `g[0-9]+-[0-9a-f]{16}$`,
	)
	var names []string
	for _, e := range entries {
		if ofJob.MatchString(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// SegmentPrefix starts the name of every segment of job jobID (the job id as names carry it, then
// its group).
func SegmentPrefix(jobID string) string {
	return NamePrefix + sanitize(jobID) + "-"
}
