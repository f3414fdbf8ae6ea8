package nccl

/*
#include "cph_nccl.h"
*/
import "C"

import (
	"fmt"
)

// Result is an NCCL result code (ncclResult_t). A Result is itself an error, so that
// errors.Is(err, nccl.InvalidArgument) picks out a class of failure.
type Result int

// The result codes of nccl.h.
const (
	Success            Result = 0
	UnhandledCudaError Result = 1
	SystemError        Result = 2
	InternalError      Result = 3
	InvalidArgument    Result = 4
	InvalidUsage       Result = 5
	RemoteError        Result = 6
	InProgress         Result = 7
	Timeout            Result = 8
)

var resultNames = map[Result]string{
	Success:            "ncclSuccess",
	UnhandledCudaError: "ncclUnhandledCudaError",
	SystemError:        "ncclSystemError",
	InternalError:      "ncclInternalError",
	InvalidArgument:    "ncclInvalidArgument",
	InvalidUsage:       "ncclInvalidUsage",
	RemoteError:        "ncclRemoteError",
	InProgress:         "ncclInProgress",
	Timeout:            "ncclTimeout",
}

func (r Result) String() string {
	if name, ok := resultNames[r]; ok {
		return name
	}
	return fmt.Sprintf("ncclResult(%d)", int(r))
}

func (r Result) Error() string { return "nccl: " + r.String() }

// Error is a failed NCCL call: the entry point, NCCL's result code, NCCL's own string for that code
// (ncclGetErrorString) and, when the library has ncclGetLastError, its description of the last
// failure. NCCL keeps that description per process, not per call, so Detail is a hint: with several
// communicators failing at once it may describe another one's failure.
type Error struct {
	Call    string
	Code    Result
	Message string
	Detail  string
}

func (e *Error) Error() string {
	msg := fmt.Sprintf(
		"nccl: %s failed: %s (%s = %d)",
		e.Call,
		e.Message,
		e.Code.String(),
		int(e.Code),
	)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Is makes errors.Is(err, code) true when err is an *Error with that code.
func (e *Error) Is(target error) bool {
	code, ok := target.(Result)
	return ok && code == e.Code
}

// check turns a result code into nil or an *Error with the library's strings. comm may be nil
// (calls made before a communicator exists); NCCL then reports the last error of the process.
func (l *Library) check(call string, rc C.ncclResult_t, comm C.ncclComm_t) error {
	if rc == 0 {
		return nil
	}
	e := &Error{Call: call, Code: Result(rc), Message: l.ErrorString(Result(rc))}
	if detail := C.cph_nccl_last_error(l.c, comm); detail != nil {
		e.Detail = C.GoString(detail)
	}
	return e
}

// ErrorString is the library's own description of a result code (ncclGetErrorString).
func (l *Library) ErrorString(code Result) string {
	s := C.cph_nccl_error_string(l.c, C.ncclResult_t(code))
	if s == nil {
		return "unknown NCCL result"
	}
	return C.GoString(s)
}
