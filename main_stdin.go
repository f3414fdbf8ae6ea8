package main

// --trace -: a trace on standard input, as gen-trace writes one to standard output by default. mpirun forwards
// standard input to world rank 0 only, while the workload is read by CP rank 0 of every group (and validate
// reads it once per pass), so world rank 0 reads it whole and broadcasts it, and each reading rank keeps it in a
// private temporary file that the trace reader then reads as any --trace.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/cphicache/cphicache/hicache"
	"github.com/cphicache/cphicache/hicache/spmd"
)

// stdinChunkBytes is one broadcast's share of the trace, well under MPI's int count.
const stdinChunkBytes = 64 << 20

// stdinReadFailed in the length header says world rank 0 could not read standard input.
const stdinReadFailed = math.MaxUint64

// traceFromStdin replaces --trace - with a temporary file holding standard input, on every rank that reads the
// workload; it is a World collective when opts.TracePath is "-", and does nothing otherwise. remove deletes the
// file.
func traceFromStdin(job *spmd.Job, opts *hicache.Options, stdin io.Reader) (remove func(), err error) {
	remove = func() {}
	if opts.TracePath != "-" {
		return remove, nil
	}
	t := job.Topo
	var data []byte
	var readErr error
	header := make([]byte, 8)
	if t.WorldRank == 0 {
		data, readErr = io.ReadAll(stdin)
		length := uint64(len(data))
		if readErr != nil {
			length = stdinReadFailed
		}
		binary.LittleEndian.PutUint64(header, length)
	}
	if err := t.World.BcastBytes(header, 0); err != nil {
		return remove, err
	}
	length := binary.LittleEndian.Uint64(header)
	if length == stdinReadFailed {
		if readErr == nil {
			readErr = errors.New("world rank 0 could not read it")
		}
		return remove, &spmd.JobWide{Err: fmt.Errorf("--trace -: reading standard input: %w", readErr)}
	}
	if length == 0 {
		return remove, &spmd.JobWide{Err: errors.New("--trace -: standard input is empty (pipe a trace in, e.g. cphicache gen-trace | mpirun ... cphicache run --trace -)")}
	}
	if t.WorldRank != 0 {
		data = make([]byte, length)
	}
	for off := uint64(0); off < length; off += stdinChunkBytes {
		if err := t.World.BcastBytes(data[off:min(length, off+stdinChunkBytes)], 0); err != nil {
			return remove, err
		}
	}
	var keepErr error
	if t.CPRank == 0 {
		var path string
		var forget func()
		// A signal's clean-up removes it too; a normal end removes it and forgets the clean-up.
		if path, forget, keepErr = keepTrace(data, job.Cleanup); keepErr == nil {
			opts.TracePath, remove = path, func() { os.Remove(path); forget() }
		}
	}
	if err := spmd.AgreeOnFailure(t.World, keepErr); err != nil {
		remove()
		return func() {}, err
	}
	return remove, nil
}

// keepTrace writes data to a private temporary file and returns its path and the function that drops its
// removal from cleanup. The file is made and its removal registered as one step (spmd.Cleanup.Create), so that
// a signal while it is written, or just before it is made, leaves no file behind.
func keepTrace(data []byte, cleanup *spmd.Cleanup) (path string, forget func(), err error) {
	var f *os.File
	forget, err = cleanup.Create(func() (func(), error) {
		var err error
		if f, err = os.CreateTemp("", "cphicache-stdin-trace-*.jsonl"); err != nil {
			return nil, err
		}
		name := f.Name()
		return func() { os.Remove(name) }, nil
	})
	if err != nil {
		return "", nil, fmt.Errorf("--trace -: keep standard input in a temporary file: %w", err)
	}
	failed := func(err error) (string, func(), error) {
		os.Remove(f.Name())
		forget()
		return "", nil, fmt.Errorf("--trace -: keep standard input in %s: %w", f.Name(), err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return failed(err)
	}
	if err := f.Close(); err != nil {
		return failed(err)
	}
	return f.Name(), forget, nil
}
