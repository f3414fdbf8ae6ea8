package mpi

/*
#include "cph_mpi.h"
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"unsafe"
)

// Op is a reduction operator.
type Op int

// The reductions cphicache uses. MIN is the consensus operator: a frontier is complete on the group
// only when the slowest rank has reached it.
const (
	Min Op = C.CPH_MIN
	Max Op = C.CPH_MAX
	Sum Op = C.CPH_SUM
)

func (o Op) String() string {
	switch o {
	case Min:
		return "MIN"
	case Max:
		return "MAX"
	case Sum:
		return "SUM"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Error is a failed MPI call: the function, MPI's error code and MPI's own description of it.
type Error struct {
	Call    string
	Code    int
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("mpi: %s failed: %s (MPI error %d)", e.Call, e.Message, e.Code)
}

func check(call string, rc C.int) error {
	if rc == C.MPI_SUCCESS {
		return nil
	}
	buf := make([]byte, int(C.cph_max_error_string())+1)
	var n C.int
	C.cph_error_string(rc, (*C.char)(unsafe.Pointer(&buf[0])), &n)
	msg := strings.TrimSpace(string(buf[:int(n)]))
	if msg == "" {
		msg = "unknown MPI error"
	}
	return &Error{Call: call, Code: int(rc), Message: msg}
}

// collectiveDone is check for the blocking collectives: it also counts the call for the scheduler
// pass (schedpass.go).
func collectiveDone(call string, rc C.int) error {
	pass.afterCall()
	return check(call, rc)
}

// Init initialises MPI with MPI_THREAD_FUNNELED and locks the calling goroutine to its OS thread;
// every later MPI call must come from that goroutine. It then chooses how collectives wait
// (YieldEnv); every rank must call it, as MPI_Init. Calling Init when MPI is already initialised is
// harmless.
func Init() error {
	// A bad setting fails before MPI starts, as a bad flag does.
	if _, err := decideYield(os.Getenv(YieldEnv), false, 0, 0); err != nil {
		return err
	}
	runtime.LockOSThread()
	var provided C.int
	if err := check("MPI_Init_thread", C.cph_init(&provided)); err != nil {
		return err
	}
	if provided < C.cph_thread_funneled() {
		return fmt.Errorf(
			"mpi: the MPI library provides thread level %d, below MPI_THREAD_FUNNELED",
			int(provided),
		)
	}
	return chooseYield()
}

// Initialized reports whether MPI_Init has been called.
func Initialized() bool {
	var flag C.int
	return C.cph_initialized(&flag) == C.MPI_SUCCESS && flag != 0
}

// Finalized reports whether MPI_Finalize has been called.
func Finalized() bool {
	var flag C.int
	return C.cph_finalized(&flag) == C.MPI_SUCCESS && flag != 0
}

// Finalize shuts MPI down. It is a no-op when MPI was never initialised or is already finalised.
func Finalize() error {
	if !Initialized() || Finalized() {
		return nil
	}
	return check("MPI_Finalize", C.cph_finalize())
}

// Wtime is MPI's wall clock in seconds.
func Wtime() float64 { return float64(C.MPI_Wtime()) }

// ProcessorName is the name MPI uses for this rank's node (the host name with OpenMPI and MPICH).
func ProcessorName() (string, error) {
	buf := make([]byte, int(C.cph_max_processor_name())+1)
	var n C.int
	if err := check("MPI_Get_processor_name", C.cph_processor_name((*C.char)(unsafe.Pointer(&buf[0])), &n)); err != nil {
		return "", err
	}
	return string(buf[:int(n)]), nil
}

// Version is the MPI standard version the library implements.
func Version() (major, minor int, err error) {
	var ma, mi C.int
	err = check("MPI_Get_version", C.cph_version(&ma, &mi))
	return int(ma), int(mi), err
}

// LibraryVersion names the MPI library and its version, from the first line of
// MPI_Get_library_version (libraryName says how).
func LibraryVersion() (string, error) {
	buf := make([]byte, int(C.cph_max_library_version())+1)
	var n C.int
	if err := check("MPI_Get_library_version", C.cph_library_version((*C.char)(unsafe.Pointer(&buf[0])), &n)); err != nil {
		return "", err
	}
	return libraryName(string(buf[:int(n)])), nil
}

// libraryName shortens a library version string to its first line, with MPICH's "MPICH
// Version:\t4.0.2" form (MVAPICH's too) read as "MPICH 4.0.2". OpenMPI's "Open MPI v4.1.4, package:
// ..." and Intel MPI's "Intel(R) MPI Library 2021.9 for Linux* OS" already say both, and Cray
// MPICH's "MPI VERSION : CRAY MPICH version 8.1.26 ..." says them after the colon.
func libraryName(s string) string {
	s = strings.TrimLeft(s, "\x00 \t\n")
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimRight(s, "\x00 \t\r,")
	if key, value, ok := strings.Cut(s, ":"); ok {
		key = strings.TrimSpace(key)
		if name, found := strings.CutSuffix(strings.ToLower(key), "version"); found {
			name = strings.TrimSpace(key[:len(name)])
			s = strings.TrimSpace(value)
			if name != "" && !strings.EqualFold(name, "MPI") {
				s = name + " " + s
			}
		}
	}
	return strings.Join(strings.Fields(s), " ")
}
