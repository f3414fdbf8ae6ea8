package nccl

// #cgo LDFLAGS: -ldl
/*
#include <stdlib.h>
#include "cph_nccl.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"time"
	"unsafe"
)

// DefaultPath is the library Load opens when given no path: the soname NCCL 2 installs, found
// through the dynamic loader's usual search (LD_LIBRARY_PATH, ld.so.cache).
const DefaultPath = "libnccl.so.2"

// MinVersion is the oldest NCCL Load accepts, as an NCCL version code (2.7.0): 2.7 is the first
// release with all-reduce of int64/uint64 MIN and MAX on every transport cphicache meets, and
// ncclCommAbort, which we require, is older still.
const MinVersion = 2700

// NonBlockingVersion is the first NCCL with ncclCommInitRankConfig and non-blocking communicators
// (2.14.0).
const NonBlockingVersion = 21400

// A non-blocking call's state is polled after asyncPollFirstPause, then at pauses doubling up to
// asyncPollInterval: NCCL's init takes from tens of milliseconds to seconds, and a poll costs one
// function call.
const (
	asyncPollFirstPause = 5 * time.Microsecond
	asyncPollInterval   = 2 * time.Millisecond
)

// MultiRankGPUVersion is the first NCCL that puts several ranks of one communicator on one GPU,
// when the process sets NCCL_MULTI_RANK_GPU_ENABLE=1 (2.30.0; before it, NCCL's init refuses with
// "Duplicate GPU detected").
const MultiRankGPUVersion = 23000

// MultiRankGPUEnv is NCCL's own switch for several ranks of a communicator on one GPU
// (MultiRankGPUVersion).
const MultiRankGPUEnv = "NCCL_MULTI_RANK_GPU_ENABLE"

// UniqueIDBytes is the size of an NCCL unique id (NCCL_UNIQUE_ID_BYTES).
const UniqueIDBytes = 128

// UniqueID names one NCCL communicator clique: one rank makes it, every member passes the same one
// to InitRank.
type UniqueID [UniqueIDBytes]byte

// Library is one loaded NCCL library. It is safe to share between goroutines; it stays loaded until
// Close.
type Library struct {
	path    string
	c       *C.cph_nccl // in C memory: C keeps the function pointers and the dlopen handle
	version int
}

// Load opens an NCCL library (path "" means DefaultPath), looks up the entry points this package
// calls and checks that its version is at least MinVersion. The error names the library and carries
// dlerror()'s text.
func Load(path string) (*Library, error) {
	if path == "" {
		path = DefaultPath
	}
	l := &Library{path: path, c: (*C.cph_nccl)(C.calloc(1, C.sizeof_cph_nccl))}
	if l.c == nil {
		return nil, fmt.Errorf("nccl: load %s: out of memory", path)
	}
	cPath := C.CString(path)
	defer C.free(unsafe.Pointer(cPath))
	var errBuf [512]C.char
	if C.cph_nccl_open(cPath, l.c, &errBuf[0], C.size_t(len(errBuf))) != 0 {
		C.free(unsafe.Pointer(l.c))
		return nil, fmt.Errorf("nccl: cannot load %s: %s", path, C.GoString(&errBuf[0]))
	}
	if err := l.readVersion(); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func (l *Library) readVersion() error {
	var v C.int
	if err := l.check("ncclGetVersion", C.cph_nccl_get_version(l.c, &v), nil); err != nil {
		return fmt.Errorf("nccl: %s: %w", l.path, err)
	}
	l.version = int(v)
	if l.version < MinVersion {
		return fmt.Errorf(
			"nccl: %s is NCCL %s (version code %d), too old: cphicache needs NCCL %s or later",
			l.path,
			VersionString(l.version),
			l.version,
			VersionString(MinVersion),
		)
	}
	return nil
}

// Close releases the library. Every Comm made from it must have been destroyed first. The library
// itself stays mapped until the process exits (cph_nccl_open says why), so a later Load of it is
// cheap and finds NCCL's one-time set-up done.
func (l *Library) Close() {
	if l == nil || l.c == nil {
		return
	}
	C.cph_nccl_close(l.c)
	C.free(unsafe.Pointer(l.c))
	l.c = nil
}

// isMapped reports whether the library at path is loaded in this process (dlopen with RTLD_NOLOAD),
// for tests.
func isMapped(path string) bool {
	cPath := C.CString(path)
	defer C.free(unsafe.Pointer(cPath))
	return C.cph_nccl_is_mapped(cPath) != 0
}

// Path is the path the library was loaded from, as given to Load.
func (l *Library) Path() string { return l.path }

// Version is the library's NCCL version code (ncclGetVersion), e.g. 22105 for 2.21.5.
func (l *Library) Version() int { return l.version }

// HasLastError reports whether the library has ncclGetLastError (NCCL 2.13 and later), which fills
// Error.Detail.
func (l *Library) HasLastError() bool { return l.c != nil && l.c.get_last_error != nil }

// VersionString spells an NCCL version code as major.minor.patch. NCCL changed the encoding after
// 2.8: up to 2.8 the code is X*1000+Y*100+Z, from 2.9 on X*10000+Y*100+Z (NCCL_VERSION in nccl.h).
// The old codes are all below 10000, so the two ranges do not overlap and codes still compare in
// release order.
func VersionString(code int) string {
	if code >= 10000 {
		return fmt.Sprintf("%d.%d.%d", code/10000, code%10000/100, code%100)
	}
	return fmt.Sprintf("%d.%d.%d", code/1000, code%1000/100, code%100)
}

// UniqueID makes a new unique id (ncclGetUniqueId). One rank makes it and hands it to the others.
func (l *Library) UniqueID() (UniqueID, error) {
	var id UniqueID
	var cID C.ncclUniqueId
	if err := l.check("ncclGetUniqueId", C.cph_nccl_get_unique_id(l.c, &cID), nil); err != nil {
		return id, err
	}
	copy(id[:], unsafe.Slice((*byte)(unsafe.Pointer(&cID)), UniqueIDBytes))
	return id, nil
}

// InitRank joins the communicator named by id as rank of nranks (ncclCommInitRank). It blocks until
// all nranks members have joined, so every member must call it at about the same time. On a GPU the
// CUDA device must be chosen (cudaSetDevice) before the call. NCCL itself checks rank against
// nranks.
func (l *Library) InitRank(id UniqueID, nranks, rank int) (*Comm, error) {
	var cID C.ncclUniqueId
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&cID)), UniqueIDBytes), id[:])
	var handle C.ncclComm_t
	rc := C.cph_nccl_comm_init_rank(l.c, &handle, C.int(nranks), &cID, C.int(rank))
	if err := l.check("ncclCommInitRank", rc, nil); err != nil {
		return nil, err
	}
	return &Comm{lib: l, handle: handle, nranks: nranks, rank: rank}, nil
}

// HasPreMulSum reports whether the library has ncclRedOpCreatePreMulSum and ncclRedOpDestroy (NCCL
// 2.11 and later), which Comm.AllreducePreMulSumUint64 needs.
func (l *Library) HasPreMulSum() bool {
	return l.c != nil && l.c.redop_create_premulsum != nil && l.c.redop_destroy != nil
}

// HasNonBlockingInit reports whether InitRankWithin can bound NCCL's init (NCCL 2.14 and later);
// with an older library it falls back to the blocking ncclCommInitRank.
func (l *Library) HasNonBlockingInit() bool {
	return l.c != nil && l.c.comm_init_rank_config != nil && l.version >= NonBlockingVersion
}

// InitRankWithin joins like InitRank, but without blocking where the library allows
// (HasNonBlockingInit): the communicator is made non-blocking (ncclCommInitRankConfig with blocking
// = 0) and its state polled (ncclCommGetAsyncError) until the init succeeds, fails, or timeout
// passes; then the half-made communicator is aborted (ncclCommAbort) and the error wraps Timeout. A
// peer that never arrives thus costs a bounded wait and an error, not a thread stuck in NCCL.
// timeout <= 0 waits as long as the init takes. The returned Comm is non-blocking: its calls wait
// for NCCL themselves.
func (l *Library) InitRankWithin(
	id UniqueID,
	nranks, rank int,
	timeout time.Duration,
) (*Comm, error) {
	if !l.HasNonBlockingInit() {
		return l.InitRank(id, nranks, rank)
	}
	var cID C.ncclUniqueId
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&cID)), UniqueIDBytes), id[:])
	var handle C.ncclComm_t
	rc := C.cph_nccl_comm_init_rank_nonblocking(l.c, &handle, C.int(nranks), &cID, C.int(rank))
	if Result(rc) != InProgress {
		if err := l.check("ncclCommInitRankConfig", rc, nil); err != nil {
			if handle != nil {
				C.cph_nccl_comm_abort(l.c, handle)
			}
			return nil, err
		}
	}
	c := &Comm{lib: l, handle: handle, nranks: nranks, rank: rank, nonBlocking: true}
	if err := c.wait("ncclCommInitRankConfig", timeout); err != nil {
		return nil, errors.Join(err, c.Abort())
	}
	return c, nil
}
