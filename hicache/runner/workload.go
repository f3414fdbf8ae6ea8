package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/cphicache/cphicache/internal/errscope"
)

// The workload: CP rank 0 of each group reads the trace (or makes the synthetic workload) and keeps its
// replica's share; a bad trace fails every rank alike, before anything is created.

// loadWorkload has CP-rank 0 of each group read (or generate) its replica's share; the others get
// events by broadcast during the replay. A bad trace fails on every rank, before anything is
// created.
func (rs *runState) loadWorkload() ([]workload.Event, error) {
	t := rs.job.Topo
	var events []workload.Event
	var loadErr error
	if t.CPRank == 0 {
		events, loadErr = rs.readWorkload()
		if loadErr == nil && rs.opts.Serving != nil && !rs.opts.Serving.Virtual {
			// the whole workload's, on every group alike
			loadErr = checkServedGeometry(rs.opts, t.CPSize, t.NodeSize/t.NodeParts, events)
		}
		if loadErr == nil {
			events = workload.ShardForReplica(events, t.DPSize, t.CPGroup)
			cfg := workload.IdealConfig{
				PageTokens:      rs.opts.PageTokens,
				VocabSize:       rs.opts.VocabSize,
				BatchRequests:   rs.opts.BatchRequests,
				FlushEverySteps: rs.opts.FlushEvery,
			}
			rs.idealHit = make(chan []int64, 1)
			rs.startOfflineBound(events, cfg)
			if rs.opts.Serving != nil && cfg.FlushEverySteps > 0 {
				// --flush-every counts the serving clock's steps, which it forms as the replay
				// goes: the ideal waits for them (idealByClockSteps).
				rs.idealEvents, rs.idealConfig = events, cfg
			} else {
				// reads events only
				go func(events []workload.Event) { rs.idealHit <- workload.IdealHitsByRequest(events, cfg) }(events)
			}
		}
	}
	err := wrapWorkload(loadErr)
	if err == nil && t.CPRank == 0 {
		err = rs.opts.Serving.CheckArrivals(events)
	}
	if err := spmd.AgreeOnFailure(t.World, err); err != nil {
		return nil, err
	}
	return events, nil
}

// readWorkload reads the trace, or generates the synthetic workload. A Mooncake trace's requests
// stay compact (block ids) here and in the step broadcast; nextStep expands them on every rank.
func (rs *runState) readWorkload() ([]workload.Event, error) { return readWorkload(rs.opts) }

// readTraceFileAs reads the trace at path (workload, which the IO-free core imports, opens no
// file).
func readTraceFileAs(path string, o workload.TraceOptions) ([]workload.Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err // *os.PathError names the path
	}
	defer f.Close()
	return workload.ReadTraceAs(f, path, o)
}

func wrapWorkload(err error) error {
	if err == nil {
		return nil
	}
	return &WorkloadError{err}
}

// readWorkload reads o's trace or generates its synthetic workload. A trace that cannot be opened
// (missing, unreadable) is a bad --trace, said as a usage error naming the flag, as a missing
// --l3-dir is.
func readWorkload(o *config.Options) ([]workload.Event, error) {
	if o.TracePath == "" {
		return workload.GenerateSynthetic(o.Synthetic)
	}
	events, err := readTraceFileAs(
		o.TracePath,
		workload.TraceOptions{Format: o.TraceFormat, VocabSize: o.VocabSize,
			BlockTokens: o.TraceBlockTokens, LimitRequests: o.TraceLimit},
	)
	var open *fs.PathError
	if errors.As(err, &open) && open.Op == "open" && open.Path == o.TracePath {
		return nil, &errscope.ConfigError{
			Flag:   "trace",
			Reason: fmt.Sprintf("%s: %v", o.TracePath, open.Err),
		}
	}
	return events, err
}

// WorkloadError is a bad workload (trace file); every reading rank finds the same one.
type WorkloadError struct{ Err error }

func (e *WorkloadError) Error() string { return e.Err.Error() }
func (e *WorkloadError) Unwrap() error { return e.Err }

// Scope: every rank that reads the workload finds the same error, and every rank learns it.
func (e *WorkloadError) Scope() spmd.Scope { return spmd.JobScope }
