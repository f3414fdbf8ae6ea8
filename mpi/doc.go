// Package mpi is cphicache's thin cgo binding to the system MPI library (OpenMPI by default, MPICH
// with the `mpich` build tag).
//
// It owns MPI start-up and shutdown, communicators and the handful of collectives the rest of the
// program needs: barrier, all-reduce of int64 and uint64 slices (MIN, MAX, SUM), broadcast of
// bytes, all-gather and abort. Each collective crosses into C once per slice, never once per
// element.
//
// Only the files that import "C" know about C. Communicator handles are kept as Fortran integer
// handles (MPI_Comm_c2f) on the Go side and converted back inside C, so the binding makes no
// assumption about whether MPI_Comm is a pointer (OpenMPI) or an int (MPICH). Every MPI return code
// is checked and returned as an *Error that carries MPI's own error string; communicators use
// MPI_ERRORS_RETURN so that a failure reaches Go instead of aborting inside the library. Nothing in
// this package logs or exits, except Abort, which exists to end the whole job on purpose.
//
// Two things differ by library. Whether unsigned 64-bit MIN and MAX need the sign-bit workaround is
// asked of the library at start-up (MPICH 4.0.2 orders them as signed; cph_mpi.c,
// MPI_Reduce_local). Whether collectives wait by yielding the core is decided at start-up too
// (yield.go): the mpich build does on a node with more ranks than CPUs, because MPICH's ch4 device
// cannot be told to yield and such a node then crawls.
//
// Threading: MPI is initialised with MPI_THREAD_FUNNELED. Init locks the calling goroutine to its
// OS thread and every later MPI call must come from that same goroutine (in cphicache, the main
// goroutine).
//
// Cost per call: one cgo crossing, no allocation. The C side caches the conversion of communicator
// handles (OpenMPI's takes a lock above MPI_THREAD_SINGLE), and the blocking collectives pass the
// goroutine through Go's scheduler once per few milliseconds of MPI calls, without which the
// runtime's system monitor keeps taking the goroutine's P away in a run of back-to-back collectives
// (schedpass.go explains).
//
// This package must not import any other cphicache package.
package mpi
