package nccl

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/cphicache/cphicache/mpi"
)

// These tests are SPMD, like the mpi package's: the Makefile runs this test binary under mpirun at
// several rank counts, and plain `go test` runs it as one rank. Every rank runs every test, so each
// test enters the same collectives in the same order on every rank.
//
// They load ncclshim (testdata/ncclshim.c), a libnccl.so.2 stand-in that does NCCL's work with MPI
// on host memory: real dlopen, real symbol look-ups, real argument passing, no GPU.
// CPHICACHE_NCCL_LIB names the shim (nccl.mk builds it and sets it), with its legacy build at
// legacy/libnccl.so.2 beside it; without it, rank 0 builds both with mpicc into a temporary folder.

const shimEnv = "CPHICACHE_NCCL_LIB"

// testInitTimeout bounds each communicator's init in these tests: generous for 16 oversubscribed
// ranks.
const testInitTimeout = 60 * time.Second

var (
	world      *mpi.Comm
	shimPath   string // the current shim, posing as NCCL 2.21.5
	legacyPath string // the legacy shim, posing as NCCL 2.7.8, without ncclGetLastError
	shim       *Library
)

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	if err := mpi.Init(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var err error
	if world, err = mpi.World(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	code := 0
	cleanup, err := findShim()
	if err == nil {
		shim, err = Load(shimPath)
	}
	if err != nil {
		// Every test needs the shim: no shim is a failure, never a skip.
		fmt.Fprintln(os.Stderr, "nccl tests: no usable shim:", err)
		code = 2
	} else {
		code = m.Run()
	}
	return finish(code, cleanup)
}

// finish makes every rank exit with the same code, removes a shim this run built, and finalises
// MPI.
func finish(code int, cleanup func()) int {
	failed := []int64{int64(code)}
	if err := world.AllreduceInt64(failed, failed, mpi.Max); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 2
	} else if failed[0] != 0 && code == 0 {
		code = 1
	}
	cleanup()
	if err := mpi.Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 2
	}
	return code
}

// findShim sets shimPath and legacyPath, from CPHICACHE_NCCL_LIB or by building the shim on rank 0
// and broadcasting its folder. The returned cleanup removes what was built; it runs after the last
// collective.
func findShim() (cleanup func(), err error) {
	cleanup = func() {}
	if p := os.Getenv(shimEnv); p != "" {
		shimPath, legacyPath = p, filepath.Join(filepath.Dir(p), "legacy", "libnccl.so.2")
		return cleanup, nil
	}
	// Byte 0: 1 when rank 0 built the shim; then the folder's path, or the build error, NUL-padded.
	buf := make([]byte, 4096)
	if world.Rank() == 0 {
		dir, buildErr := buildShim()
		msg := dir
		if buildErr == nil {
			buf[0] = 1
			cleanup = func() { os.RemoveAll(dir) }
		} else {
			msg = buildErr.Error()
		}
		copy(buf[1:len(buf)-1], msg)
	}
	if err := world.BcastBytes(buf, 0); err != nil {
		return cleanup, err
	}
	text := string(bytes.TrimRight(buf[1:], "\x00"))
	if buf[0] != 1 {
		return cleanup, fmt.Errorf("building the shim on rank 0: %s", text)
	}
	shimPath, legacyPath = filepath.Join(
		text,
		"libnccl.so.2",
	), filepath.Join(
		text,
		"legacy",
		"libnccl.so.2",
	)
	return cleanup, nil
}

// buildShim compiles testdata/ncclshim.c twice, as nccl.mk does, into a new temporary folder.
func buildShim() (string, error) {
	dir, err := os.MkdirTemp("", "ncclshim-")
	if err != nil {
		return "", err
	}
	if err := os.Mkdir(filepath.Join(dir, "legacy"), 0o755); err != nil {
		return "", err
	}
	flags := []string{
		"-shared",
		"-fPIC",
		"-O2",
		"-Wall",
		"-Wextra",
		"-Werror",
		"-fvisibility=hidden",
		"-Wl,-soname,libnccl.so.2",
	}
	for _, build := range []struct {
		out   string
		extra []string
	}{
		{filepath.Join(dir, "libnccl.so.2"), nil},
		{filepath.Join(dir, "legacy", "libnccl.so.2"), []string{"-DNCCLSHIM_LEGACY"}},
	} {
		args := append(
			append(append([]string{}, build.extra...), flags...),
			"-o",
			build.out,
			"testdata/ncclshim.c",
		)
		if out, err := exec.Command("mpicc", args...).CombinedOutput(); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("mpicc %v: %v\n%s", args, err, out)
		}
	}
	return dir, nil
}

// hostPtr gives the address of s[0] for the shim, which takes host memory where NCCL takes device
// memory. The slice is pinned until the test ends so that the address stays valid while C reads and
// writes through it.
func hostPtr[T any](t testing.TB, s []T) uintptr {
	var pinner runtime.Pinner
	pinner.Pin(&s[0])
	t.Cleanup(pinner.Unpin)
	return uintptr(unsafe.Pointer(&s[0]))
}

// worldComm makes an NCCL communicator of every rank, destroyed when the test ends.
func worldComm(t *testing.T) *Comm {
	t.Helper()
	comm, err := NewCommOverMPI(shim, world, testInitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := comm.Destroy(); err != nil {
			t.Error(err)
		}
	})
	return comm
}

// asError is errors.As for *Error, failing the test when err is not one.
func asError(t *testing.T, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *nccl.Error", err, err)
	}
	return e
}
