package validate

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/runner"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/internal/errscope"
)

// The L3 row of validate: two passes over a directory of their own, the first storing blocks, the
// second loading them back with the last CP rank of every group failing each of its reads. Every
// block that comes back must verify byte for byte, every failed read must be a miss the whole group
// agreed on (no divergence), and the directory is removed afterwards. At cp 1 no rank fails its
// reads (there is no group to agree a failure with), so the row is at best a skip. It lies under
// --l3-dir when given (that filesystem is the one to trust), else under the system's temporary
// directory.

// validateL3BlockPages is the validation's block size: small, so that the default workload's
// prompts make many.
const validateL3BlockPages = 4

// l3Passes runs the fill and the faulty read pass in dir (validationL3Dir).
func l3Passes(
	job *spmd.Job,
	opts *config.Options,
	mode runner.Pass,
	tst *runner.Testing,
	dir string,
	progress func(pass int, what string),
) (fill, read *pass, err error) {
	l3opts := config.L3Options{
		Dir:               dir,
		Bytes:             1 << 40,
		Namespace:         opts.L3.Namespace + "/cphicache-validate",
		BlockTokens:       validateL3BlockPages * opts.PageTokens,
		PrefetchPolicy:    cache.PrefetchWaitComplete,
		PrefetchThreshold: opts.PageTokens,
	}
	fillOpts := *opts
	fillOpts.L3 = l3opts
	progress(4, "storing blocks in an L3 of its own, "+dir)
	if fill, err = runPass(job, &fillOpts, mode, tst); err != nil {
		return nil, nil, err
	}
	t := job.Topo
	readPass := mode
	readPass.FailL3Reads = t.CPSize > 1 && t.CPRank == t.CPSize-1
	readPass.L3ReadFailuresExpected = readPass.FailL3Reads
	what := "loading them back, the last CP rank of each group failing its reads"
	if t.CPSize == 1 {
		what = "loading them back (no read failures injected: a single-rank CP group has no rank to agree them with)"
	}
	progress(5, what)
	read, err = runPass(job, &fillOpts, readPass, tst)
	return fill, read, err
}

// validationL3Dir makes the passes' directory, named by world rank 0 for the whole job, on every
// rank (a node without a shared filesystem makes its own), before the first pass: a base where it
// cannot be made fails the job before any pass has run. The ranks that remove it at the end
// (removeValidationL3Dir) first sweep their node's stale ones (validate_scratch.go), then make it
// through the job's clean-up, so that a signal or the watchdog ending the job removes it too;
// forget drops that once it is removed.
func validationL3Dir(job *spmd.Job, base string) (dir string, forget func(), err error) {
	if base == "" {
		base = os.TempDir()
	}
	name := make([]byte, 4096)
	if job.Topo.WorldRank == 0 {
		// The random part keeps apart the directories of two jobs sharing a filesystem whose rank
		// 0s have one PID.
		copy(
			name,
			filepath.Join(
				base,
				fmt.Sprintf("%s%d-%08x", validateDirPrefix, os.Getpid(), rand.Uint32()),
			),
		)
	}
	if err := job.Topo.World.BcastBytes(name, 0); err != nil {
		return "", nil, err
	}
	dir = string(bytes.TrimRight(name, "\x00"))
	forget = func() {}
	if job.Topo.NodePart == 0 {
		sweepStaleScratchDirs(base, job.Log)
		forget, err = job.Cleanup.Create(func() (func(), error) {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
			if err := writeOwnerFile(dir, job.Topo.WorldRank); err != nil {
				os.RemoveAll(dir)
				return nil, err
			}
			return func() { removeScratchDir(dir) }, nil
		})
	} else {
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		forget = func() {}
		err = &errscope.ConfigError{
			Flag:   "l3-dir",
			Reason: fmt.Sprintf("validate's L3 directory %s: %v", dir, err),
		}
	}
	return dir, forget, spmd.AgreeOnFailure(job.Topo.World, err)
}

// removeValidationL3Dir removes the directory once every rank is done with it; the lowest rank of
// each CP group on each of its nodes removes it there (on a shared filesystem the later removals
// find nothing, which is fine; a group over several nodes without one leaves no node's directory
// behind).
func removeValidationL3Dir(job *spmd.Job, dir string, forget func()) {
	if err := job.Topo.World.Barrier(); err != nil {
		return // the failing exit runs the clean-up, which removes it
	}
	if job.Topo.NodePart == 0 {
		if err := removeScratchDir(dir); err != nil {
			job.Log.Warn("validate: could not remove its L3 directory", "dir", dir, "err", err)
		}
		forget()
	}
}

// checkL3: blocks stored by the fill pass come back in the read pass, verified, and the injected
// read failures became agreed misses.
func checkL3(fill, read *pass) (report.Check, error) {
	var wrong, written int64
	for _, rs := range []*pass{fill, read} {
		c := rs.Counters
		v, err := rs.sumOverGroups(
			[]int64{c.Divergences},
			[]int64{c.Mismatches, c.AuditMismatches, c.L3Corrupt, c.L3WriteMismatches, c.L3Writes},
		)
		if err != nil {
			return report.Check{}, err
		}
		wrong, written = wrong+v[0]+v[1]+v[2]+v[3]+v[4], written+v[5]
	}
	c := read.Counters
	v, err := read.sumOverGroups(
		[]int64{c.L3HitTokens, c.L3PrefetchMisses, read.Steps},
		[]int64{c.L3Reads, c.PagesChecked},
	)
	if err != nil {
		return report.Check{}, err
	}
	hits, misses, steps, reads, checked := v[0], v[1], v[2], v[3], v[4]
	t := read.job.Topo
	check := report.Check{Name: "l3_roundtrip", Ranks: t.World.Size(), Steps: steps, Wrong: wrong,
		Detail: fmt.Sprintf(
			"%d blocks stored, %d read back (%d hit tokens, %d pages verified); %d prefetches cut short by the last CP rank's failed reads",
			written,
			reads,
			hits,
			checked,
			misses,
		)}
	if t.CPSize == 1 {
		// The round trip ran and a wrong byte fails the row; but its other half, failed reads
		// becoming misses the group agreed on, needs a second rank: no read was made to fail, so
		// the row cannot pass.
		check.Detail = fmt.Sprintf(
			"%d blocks stored, %d read back (%d hit tokens, %d pages verified); no read failures injected: a single-rank CP group has no rank to agree them with",
			written,
			reads,
			hits,
			checked,
		)
		if wrong > 0 {
			return verdict(check, false), nil
		}
		return singleRankSkip(check, check.Detail), nil
	}
	// Reads the last CP rank was made to fail must have become agreed misses; a pass that read
	// nothing had none.
	injected := misses > 0
	return coveredVerdict(
		check,
		wrong == 0 && (injected || reads == 0),
		written > 0 && reads > 0 && hits > 0 && injected,
	), nil
}
