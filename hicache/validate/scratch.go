package validate

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Validate's L3 directory is scratch that can outlive its job: a signal's clean-up removes it, but
// mpirun sends SIGKILL one second after SIGTERM, and removing the thousands of blocks of a large
// job takes longer on a loaded node. So each rank that makes it writes an owner file into it (which
// process made it, on which boot of which kernel, in which PID namespace), every removal takes the
// owner files last, and the next validate on the node removes a directory of validate's name, of
// its own user, whose every owner file names a process of this boot and PID namespace that no
// longer runs. A directory it cannot prove stale (no owner file, one from another node or boot, a
// running owner, another user's) is left alone: a removal that guessed could take a live job's L3.

const (
	validateDirPrefix   = "cphicache-validate-l3-"
	validateOwnerPrefix = ".cphicache-validate-owner-"
	ownerFileBytesMax   = 4096
)

// processID says which process made a scratch directory: a PID means nothing without the kernel's
// boot and the PID namespace it was given in, and the process's start time (clock ticks after boot)
// tells a reused PID apart.
type processID struct {
	Boot, PIDNamespace string
	PID                int
	Start              string
}

// selfID is this process's processID, or an error where /proc does not say it (nothing is then
// swept).
func selfID() (processID, error) {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return processID{}, err
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return processID{}, err
	}
	start, err := processStart(os.Getpid())
	if err != nil {
		return processID{}, err
	}
	return processID{
		Boot:         strings.TrimSpace(string(boot)),
		PIDNamespace: ns,
		PID:          os.Getpid(),
		Start:        start,
	}, nil
}

// processStart is field 22 of /proc/PID/stat, the process's start time; fs.ErrNotExist when no such
// process runs.
func processStart(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	// The command name (field 2) is in parentheses and may hold spaces: count fields after its
	// closing one.
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(fields) < 20 {
		return "", fmt.Errorf(
			"/proc/%d/stat: %d fields after the command name, want 20 or more",
			pid,
			len(fields),
		)
	}
	return fields[19], nil
}

func (p processID) String() string {
	return fmt.Sprintf(
		"boot %s\npidns %s\npid %d\nstart %s\n",
		p.Boot,
		p.PIDNamespace,
		p.PID,
		p.Start,
	)
}

func parseProcessID(b []byte) (processID, bool) {
	var p processID
	_, err := fmt.Sscanf(
		string(b),
		"boot %s\npidns %s\npid %d\nstart %s\n",
		&p.Boot,
		&p.PIDNamespace,
		&p.PID,
		&p.Start,
	)
	return p, err == nil && p.PID > 0
}

// writeOwnerFile records this process as an owner of dir, under a name of its own (rank: unique in
// the job, so that the ranks of one job that share a filesystem keep one each).
func writeOwnerFile(dir string, rank int) error {
	me, err := selfID()
	if err != nil {
		return nil // no /proc: the directory is removed as before, but never swept
	}
	return os.WriteFile(
		filepath.Join(dir, fmt.Sprintf("%s%d", validateOwnerPrefix, rank)),
		[]byte(me.String()),
		0o644,
	)
}

// removeScratchDir removes a scratch directory with its owner files last, so that a removal cut
// short still leaves a directory the next validate can prove stale.
func removeScratchDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var first error
	keep := func(err error) {
		if first == nil && err != nil && !errors.Is(err, fs.ErrNotExist) {
			first = err
		}
	}
	keep(err)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), validateOwnerPrefix) {
			keep(os.RemoveAll(filepath.Join(dir, e.Name())))
		}
	}
	if first != nil {
		return first // the owner files stay: what is left can still be proved stale
	}
	return os.RemoveAll(dir)
}

// staleScratchDir says whether dir is validate's scratch directory, made by this user, whose every
// owner is a process of this boot and PID namespace that no longer runs.
func staleScratchDir(dir string, me processID) bool {
	var st syscall.Stat_t
	if err := syscall.Lstat(dir, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFDIR ||
		int(st.Uid) != os.Geteuid() {
		return false
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	owners := 0
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), validateOwnerPrefix) {
			continue
		}
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() || info.Size() > ownerFileBytesMax {
			return false
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		owner, ok := parseProcessID(b)
		if err != nil || !ok || owner.Boot != me.Boot || owner.PIDNamespace != me.PIDNamespace {
			return false
		}
		if start, err := processStart(owner.PID); err == nil && start == owner.Start {
			return false // it runs
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false // unknown: not proved gone
		}
		owners++
	}
	return owners > 0
}

// sweepStaleScratchDirs removes, under base, the scratch directories that validates killed before
// their clean-up ended left behind (staleScratchDir). Each is first renamed to a name of this
// process's: a rename is atomic, so two validates sweeping at once never remove one directory
// together, and the renamed one keeps its owner files.
func sweepStaleScratchDirs(base string, log *slog.Logger) {
	me, err := selfID()
	if err != nil {
		return
	}
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for i, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), validateDirPrefix) {
			continue
		}
		dir := filepath.Join(base, e.Name())
		if !staleScratchDir(dir, me) {
			continue
		}
		swept := filepath.Join(
			base,
			validateDirPrefix+"swept-"+strconv.Itoa(me.PID)+"-"+strconv.Itoa(i),
		)
		if err := os.Rename(dir, swept); err != nil {
			continue // another validate took it first
		}
		if err := removeScratchDir(swept); err != nil {
			log.Warn(
				"validate: could not remove the L3 directory of a validate that was killed",
				"dir",
				dir,
				"err",
				err,
			)
			continue
		}
		log.Info(
			"validate: removed the L3 directory of a validate that was killed before its clean-up ended",
			"dir",
			dir,
		)
	}
}
