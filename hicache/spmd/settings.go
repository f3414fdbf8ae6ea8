package spmd

import (
	"fmt"
	"hash/fnv"
	"math"
	"strings"
	"time"

	"github.com/cphicache/cphicache/mpi"
)

// Every rank proves that it runs the same job (README.md's failure behaviour): ranks given
// different flags (a per-node environment under Slurm makes it easy) must never run, hang or
// report. Before any shared state (the topology included: ranks with different --cp values split
// the world differently and wait forever), the ranks compare their settings over the world
// communicator and stop with a usage error, naming the settings.

// Setting is one value of a command's effective configuration: a flag's (from the command line, the
// environment or its default), the command's name, the build, a file's identity.
type Setting struct {
	Name  string // as the message names it: "--seed", "the command", "--trace's content"
	Value string // compared, as text
	// where the value came from ("CPHICACHE_SEED"), for the message only: not compared
	Source string
	// Unknown marks a value this rank cannot tell (a trace it cannot open, which only the ranks
	// that read the workload need): it takes no part, and the ranks that know it compare theirs.
	Unknown bool
}

// SettingsTimeout bounds the start-up agreement: every rank enters it right after MPI_Init, which
// returns on every rank together, so only a rank that runs something else (another program, a
// debugger's stop) can be missing; the watchdog ends the job then instead of waiting for it.
const SettingsTimeout = 60 * time.Second

// notKnown is a setting's hash on a rank that does not know it, in both halves of the MIN
// all-reduce: it never wins. A known setting's hash has its top bit clear (settingHash), so it is
// never notKnown, nor its complement.
const notKnown = math.MaxUint64

// AgreeOnSettings compares settings across world (a World collective, two all-reduces of a few
// words each), and returns a *SettingsError on every rank when any setting differs. The first
// all-reduce compares the list of names (the command and its flags: the same on ranks that run the
// same build and command) and finds the shortest list; the second compares each setting of that
// common prefix, MIN and MAX of its hash in one MIN all-reduce over the hashes and their
// complements.
func AgreeOnSettings(world *mpi.Comm, settings []Setting) error {
	names := fnv.New64a()
	for _, s := range settings {
		names.Write([]byte(s.Name))
		names.Write([]byte{0})
	}
	n, count := names.Sum64(), uint64(len(settings))
	head := []uint64{n, ^n, count, ^count}
	if err := world.AllreduceUint64(head, head, mpi.Min); err != nil {
		return err
	}
	sameList := head[0] == ^head[1] && head[2] == ^head[3]
	common := int(head[2]) // the fewest settings any rank holds
	hashes := make([]uint64, 2*common)
	for i, s := range settings[:common] {
		hashes[i], hashes[common+i] = notKnown, notKnown
		if !s.Unknown {
			h := settingHash(s)
			hashes[i], hashes[common+i] = h, ^h
		}
	}
	if err := world.AllreduceUint64(hashes, hashes, mpi.Min); err != nil {
		return err
	}
	e := &SettingsError{SameList: sameList}
	for i, s := range settings[:common] {
		lowest, highest := hashes[i], ^hashes[common+i]
		if lowest != notKnown && lowest != highest { // notKnown: no rank knows it
			e.Differ = append(e.Differ, s)
		}
	}
	if len(e.Differ) == 0 && sameList {
		return nil
	}
	return e
}

// settingHash is a setting's name and value, hashed, with the top bit clear (notKnown's).
func settingHash(s Setting) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s.Name))
	h.Write([]byte{0})
	h.Write([]byte(s.Value))
	return h.Sum64() >> 1
}

// SettingsError is ranks that were not given the same job: the settings that differ, with this
// rank's values.
type SettingsError struct {
	Differ   []Setting // in the command's order; empty when only the lists differ
	SameList bool      // every rank has the same list of settings (the same build and command)
}

// settingsShownMax bounds how many differing settings the message shows with their values.
const settingsShownMax = 4

func (e *SettingsError) Error() string {
	var b strings.Builder
	b.WriteString("the ranks were not given the same job: ")
	for i, s := range e.Differ {
		if i == settingsShownMax {
			fmt.Fprintf(&b, "; and %d more", len(e.Differ)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s is %q here", s.Name, s.Value)
		if s.Source != "" {
			fmt.Fprintf(&b, " (from %s)", s.Source)
		}
		if i == 0 {
			b.WriteString(" and differs on another rank")
		}
	}
	if !e.SameList {
		if len(e.Differ) > 0 {
			b.WriteString("; ")
		}
		b.WriteString("the ranks run different commands or builds (their lists of flags differ)")
	}
	b.WriteString(". Give every rank the same command line, CPHICACHE_* environment and trace")
	return b.String()
}

// Scope: each rank holds its own values, so each rank prints its own.
func (e *SettingsError) Scope() Scope { return RankScope }
