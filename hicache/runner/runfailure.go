package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/mpi"
)

// A run that fails part-way (a placement divergence, a wrong byte, a failed copy) still has every
// rank alive and agreed on the failure (spmd.AgreeOnFailure), so the World can aggregate the
// counters as after a run that ended well. The report then says what ended the run, as the rank
// that reports the failure knows it, so that a user or a script reads `placement.divergences` and
// `result: FAILED` in the report rather than in a log.

// finalReport is the report after runPass, which returned replayErr: the aggregated report, with
// the failure in it when the replay failed (agreed: a *spmd.SharedError on every rank) or counted
// wrong results; a World collective. Another error (the World itself failing) returns no report.
func (rs *runState) finalReport(replayErr error) (*report.Report, error) {
	var shared *spmd.SharedError
	if replayErr != nil && !errors.As(replayErr, &shared) {
		return nil, replayErr
	}
	r, err := rs.report()
	if replayErr == nil {
		if err == nil && r.Failed() { // the same verdict on every rank: the report is aggregated
			r.Failure, err = rs.describeCounted(r)
		}
		return r, err
	}
	if err == nil {
		r.Failure, err = rs.describeFailure(shared)
	}
	if err != nil { // the run's own failure is the one to tell
		return nil, replayErr
	}
	return r, replayErr
}

// failureReportBytesMax bounds the broadcast description; a longer message is cut to fit.
const failureReportBytesMax = 4096

// describeFailure is a World collective after an agreed failure: the speaking rank describes its
// failure and broadcasts the description, so that world rank 0 can put it in the report.
func (rs *runState) describeFailure(shared *spmd.SharedError) (*report.FailureReport, error) {
	t := rs.job.Topo
	speaker := []int64{math.MaxInt64}
	if shared.Speaker {
		speaker[0] = int64(t.WorldRank)
	}
	if err := t.World.AllreduceInt64(speaker, speaker, mpi.Min); err != nil {
		return nil, err
	}
	// AgreeOnFailure names one speaker; without one there is nothing to say
	if speaker[0] == math.MaxInt64 {
		return &report.FailureReport{
			Check:     "error",
			Step:      rs.stepsDone(),
			WorldRank: -1,
			Message:   shared.Error(),
		}, nil
	}
	var buf []byte
	if shared.Speaker {
		buf = encodeFailure(rs.failureOf(shared.Err))
	} else {
		buf = make([]byte, failureReportBytesMax)
	}
	if err := t.World.BcastBytes(buf, int(speaker[0])); err != nil {
		return nil, err
	}
	f := &report.FailureReport{}
	if err := json.Unmarshal(bytes.TrimRight(buf, "\x00"), f); err != nil {
		return nil, fmt.Errorf("the failure's description from rank %d: %w", speaker[0], err)
	}
	return f, nil
}

// failureOf describes err, this rank's own failure, as the report shows it.
func (rs *runState) failureOf(err error) *report.FailureReport {
	t := rs.job.Topo
	f := &report.FailureReport{
		Check:     "error",
		Step:      rs.stepsDone(),
		WorldRank: t.WorldRank,
		CPGroup:   t.CPGroup,
		CPRank:    t.CPRank,
		Message:   err.Error(),
	}
	var div *cache.DivergenceError
	var peer *cache.PeerFailure
	var local *cache.LocalFailure
	switch {
	case errors.As(err, &div):
		f.Check, f.Step = "placement", div.Step
	case errors.As(err, &peer):
		f.Check, f.Step = peer.Code.String(), peer.Step
	case errors.As(err, &local):
		f.Check = local.Code.String()
	}
	return f
}

// encodeFailure is f as a fixed-size broadcast buffer: JSON, cut to fit, zero-padded (JSON has no
// zero byte).
func encodeFailure(f *report.FailureReport) []byte {
	buf := make([]byte, failureReportBytesMax)
	for {
		b, _ := json.Marshal(f)
		if len(b) <= len(buf) {
			copy(buf, b)
			return buf
		}
		f.Message = f.Message[:len(f.Message)-(len(b)-len(buf))-1]
	}
}

// describeCounted is a World collective after a replay that ran to its end with wrong results
// counted (a load-back or an audit with a wrong byte, a copy that failed, a divergence recorded, a
// load-back left unverified): it names the checks and the world ranks that counted them, for the
// report. Counts are kept per rank without their step, so Step is -1.
func (rs *runState) describeCounted(r *report.Report) (*report.FailureReport, error) {
	t := rs.job.Topo
	c := rs.counters()
	mine := int64(0)
	// a rank's pages loaded back and verified differ by its own Env: they are its own counts
	unverified := int64(0)
	if c.PagesLoadedBack != c.PagesChecked {
		unverified = 1
	}
	for bit, n := range []int64{c.Mismatches, c.AuditMismatches, c.CopyErrs, c.Divergences, unverified} {
		if n > 0 {
			mine |= 1 << bit
		}
	}
	all := make([]int64, t.World.Size())
	if err := t.World.AllgatherInt64([]int64{mine}, all); err != nil {
		return nil, err
	}
	names := []string{
		"load-back mismatch", "audit mismatch", "page copy error", "placement", report.UnverifiedCheck,
	}
	var checks []string
	var ranks []int
	for bit, name := range names {
		var these []int
		for rank, bits := range all {
			if bits&(1<<bit) != 0 {
				these = append(these, rank)
			}
		}
		if len(these) > 0 {
			checks = append(checks, fmt.Sprintf("%s (world ranks %v)", name, these))
			ranks = append(ranks, these...)
		}
	}
	f := &report.FailureReport{
		Check:     strings.Join(checks, ", "),
		Step:      -1,
		WorldRank: -1,
		CPGroup:   -1,
		CPRank:    -1,
		Message: (&report.RunFailed{Divergences: r.Placement.Divergences, Mismatches: r.Verify.Mismatches,
			AuditMismatches: r.Verify.AuditMismatches, CopyErrors: r.Verify.CopyErrors,
			PagesLoadedBack: r.Verify.PagesLoadedBack, PagesChecked: r.Verify.PagesChecked}).Error(),
	}
	if len(ranks) > 0 {
		f.WorldRank = slices.Min(ranks)
	}
	return f, nil
}
