package spmd

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"
)

// stdinNotForwarded is the standard input of a rank other than world rank 0: mpirun forwards none
// there, so reading it is a bug.
type stdinNotForwarded struct{ t *testing.T }

func (r stdinNotForwarded) Read([]byte) (int, error) {
	r.t.Error("a rank other than world rank 0 read standard input")
	return 0, io.EOF
}

// TestTraceFromStdinReachesEveryReadingRank: world rank 0's standard input, and only it, is read;
// it arrives whole in a private file on CP rank 0 of every group (the other ranks get no path),
// remove deletes the file, and an empty standard input fails every rank alike.
func TestTraceFromStdinReachesEveryReadingRank(t *testing.T) {
	topo, err := NewTopology(testWorld, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer topo.Close()
	job := &Job{Topo: topo, Cleanup: &Cleanup{}}
	want := bytes.Repeat([]byte(`{"op": "flush"}`+"\n"), 1000)
	stdin := func(data []byte) io.Reader {
		if topo.WorldRank == 0 {
			return bytes.NewReader(data)
		}
		return stdinNotForwarded{t}
	}
	path, remove, err := job.TraceFromStream(stdin(want), "-")
	if err != nil {
		t.Fatalf("rank %d: %v", topo.WorldRank, err)
	}
	if topo.CPRank != 0 && path != "" {
		t.Errorf(
			"rank %d (CP rank %d) kept the trace in %s; only CP rank 0 reads the workload",
			topo.WorldRank,
			topo.CPRank,
			path,
		)
	}
	if topo.CPRank == 0 {
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
			t.Errorf(
				"rank %d: %s holds %d bytes (%v), want the %d of standard input",
				topo.WorldRank,
				path,
				len(got),
				err,
				len(want),
			)
		}
	}
	remove()
	if _, err := os.Stat(path); path != "" && !errors.Is(err, os.ErrNotExist) {
		t.Errorf("rank %d: %s is left after remove: %v", topo.WorldRank, path, err)
	}

	_, remove, err = job.TraceFromStream(stdin(nil), "-")
	remove()
	var jobWide *JobWide
	if !errors.As(err, &jobWide) {
		t.Errorf(
			"rank %d: an empty standard input gave %v, want one job-wide error on every rank",
			topo.WorldRank,
			err,
		)
	}
}
