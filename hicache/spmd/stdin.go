package spmd

// --trace -: a trace on standard input, as gen-trace writes one to standard output by default.
// mpirun forwards standard input to world rank 0 only, while the workload is read by CP rank 0 of
// every group (and validate reads it once per pass), so world rank 0 reads it whole and broadcasts
// it, and each reading rank keeps it in a private temporary file that the trace reader then reads
// as any --trace. A FIFO on world rank 0's node can be read once too, by world rank 0 alone, so it
// travels the same way. The broadcast is the job's, not a command's: no command runs a collective
// itself.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// stdinChunkBytes is one broadcast's share of the trace, well under MPI's int count.
const stdinChunkBytes = 64 << 20

// stdinReadFailed in the length header says world rank 0 could not read standard input.
const stdinReadFailed = math.MaxUint64

// TraceFromStream is a --trace that can be read only once, named name ("-" for standard input):
// world rank 0 reads stream whole and broadcasts it to every rank, and CP rank 0 of every group
// (the ranks that read the workload) keeps it in a private temporary file, whose path it returns;
// the other ranks return "". A World collective. remove deletes the file (and is never nil); a
// signal's clean-up deletes it too. A stream that cannot be read or is empty fails every rank
// alike.
func (j *Job) TraceFromStream(
	stream io.Reader,
	name string,
) (path string, remove func(), err error) {
	remove = func() {}
	t := j.Topo
	var data []byte
	var readErr error
	header := make([]byte, 8)
	if t.WorldRank == 0 {
		data, readErr = io.ReadAll(stream)
		length := uint64(len(data))
		if readErr != nil {
			length = stdinReadFailed
		}
		binary.LittleEndian.PutUint64(header, length)
	}
	if err := t.World.BcastBytes(header, 0); err != nil {
		return "", remove, err
	}
	length := binary.LittleEndian.Uint64(header)
	if length == stdinReadFailed {
		if readErr == nil {
			readErr = errors.New("world rank 0 could not read it")
		}
		return "", remove, &JobWide{
			Err: fmt.Errorf("--trace %s: reading %s: %w", name, streamWhat(name), readErr),
		}
	}
	if length == 0 {
		return "", remove, &JobWide{
			Err: fmt.Errorf(
				"--trace %s: %s is empty (pipe a trace in, e.g. cphicache gen-trace | mpirun ... cphicache run --trace -)",
				name,
				streamWhat(name),
			),
		}
	}
	if t.WorldRank != 0 {
		data = make([]byte, length)
	}
	for off := uint64(0); off < length; off += stdinChunkBytes {
		if err := t.World.BcastBytes(data[off:min(length, off+stdinChunkBytes)], 0); err != nil {
			return "", remove, err
		}
	}
	var keepErr error
	if t.CPRank == 0 {
		var forget func()
		// A signal's clean-up removes it too; a normal end removes it and forgets the clean-up.
		if path, forget, keepErr = keepTrace(data, j.Cleanup); keepErr == nil {
			kept := path
			remove = func() { os.Remove(kept); forget() }
		}
	}
	if err := AgreeOnFailure(t.World, keepErr); err != nil {
		remove()
		return "", func() {}, err
	}
	return path, remove, nil
}

// streamWhat names a stream in a message: standard input for "-", else its path.
func streamWhat(name string) string {
	if name == "-" {
		return "standard input"
	}
	return name
}

// keepTrace writes data to a private temporary file and returns its path and the function that
// drops its removal from cleanup. The file is made and its removal registered as one step
// (Cleanup.Create), so that a signal while it is written, or just before it is made, leaves no file
// behind.
func keepTrace(data []byte, cleanup *Cleanup) (path string, forget func(), err error) {
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
