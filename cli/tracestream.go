package cli

// A --trace that can be read only once: standard input, a FIFO, /dev/stdin (a process
// substitution's /dev/fd path too, in a run without mpirun: mpirun does not hand that descriptor to
// the ranks). Opened by every rank that reads the workload, and by the provenance for its checksum,
// such a trace was drained by its first reader while the next waited for a writer for good.

import (
	"io"
	"os"

	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/spmd"
)

// traceFromStream reads a --trace that is "-" or, on world rank 0's node, neither a regular file
// nor a directory, once: the job broadcasts it to the ranks that read the workload
// (spmd.Job.TraceFromStream), whose opts then name the file it is kept in. World rank 0 says
// whether the path is such a stream (a broadcast: the path names its own node's file). A World
// collective when a trace is given; remove deletes the kept file.
func traceFromStream(job *spmd.Job, opts *config.Options) (remove func(), err error) {
	if opts.TracePath == "" {
		return func() {}, nil
	}
	stream := []byte{0}
	if job.Topo.WorldRank == 0 && (opts.TracePath == "-" || isStreamPath(opts.TracePath)) {
		stream[0] = 1
	}
	if err := job.Topo.World.BcastBytes(stream, 0); err != nil {
		return func() {}, err
	}
	if stream[0] == 0 {
		return func() {}, nil
	}
	var in io.Reader = os.Stdin
	if opts.TracePath != "-" && job.Topo.WorldRank == 0 {
		f, err := os.Open(
			opts.TracePath,
		) // a FIFO's open waits for its writer, as any reader of it does
		if err != nil {
			in = failingReader{err} // every rank then fails alike, naming the trace
		} else {
			defer f.Close()
			in = f
		}
	}
	path, remove, err := job.TraceFromStream(in, opts.TracePath)
	if err == nil && path != "" {
		opts.TracePath = path
	}
	return remove, err
}

// isStreamPath says whether path exists and is neither a regular file nor a directory.
func isStreamPath(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && !fi.Mode().IsRegular()
}

// failingReader is a stream that could not be opened: its every read fails with err.
type failingReader struct{ err error }

func (r failingReader) Read([]byte) (int, error) { return 0, r.err }
