package outfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cphicache/cphicache/internal/errscope"
)

// TestCheckNamesTheFlagAndTheMissingDirectory: a path in a directory that does not exist, or a
// directory itself, fails with the flag the user gave, before any work; a new file in an existing
// directory passes.
func TestCheckNamesTheFlagAndTheMissingDirectory(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "typo", "r.json"), "does not exist"},
		{dir, "is a directory"},
	} {
		err := Check("report", tc.path)
		var ce *errscope.ConfigError
		if !errors.As(err, &ce) || ce.Flag != "report" || !strings.Contains(err.Error(), tc.want) {
			t.Errorf(
				"Check(report, %s) = %v, want an invalid --report that says %q",
				tc.path,
				err,
				tc.want,
			)
		}
	}
	if err := Check("report", filepath.Join(dir, "r.json")); err != nil {
		t.Errorf("a new file in an existing directory: %v", err)
	}
}

// TestFailedWriteKeepsThePreviousFile: a write that fails half-way (a full disk) leaves the
// previous file whole and no temporary file behind, and says which flag's file it was.
func TestFailedWriteKeepsThePreviousFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	if err := Write("report", path, []byte("previous\n")); err != nil {
		t.Fatal(err)
	}
	full := errors.New("no space left on device")
	err := WriteFrom("report", path, func(w io.Writer) error {
		io.WriteString(w, "half a rep")
		return full
	})
	if !errors.Is(err, full) || !strings.Contains(err.Error(), "--report "+path) {
		t.Errorf("error %v, want the write's error named by --report and the path", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "previous\n" {
		t.Errorf("after a failed write the file holds %q, want the previous one", b)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("the file's mode: %v %v, want 0644", fi.Mode(), err)
	}
}

// TestAStreamIsWrittenInPlace: a path that is not a regular file (a FIFO here; /dev/null,
// /dev/stdout) is written through itself and stays what it was: renamed over, /dev/null became a
// regular file (as root), which every later writer to /dev/null then filled.
func TestAStreamIsWrittenInPlace(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "out.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	if err := Check("report", fifo); err != nil {
		t.Fatalf("Check of a writable FIFO: %v", err)
	}
	got := make(chan string, 1)
	go func() {
		b, _ := os.ReadFile(fifo) // opens for reading, which lets Write's open for writing return
		got <- string(b)
	}()
	if err := Write("report", fifo, []byte("whole\n")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf(
			"%s is no longer a FIFO: %v %v",
			fifo,
			fi.Mode(),
			err,
		) // and the reader waits for a writer for good
	}
	if s := <-got; s != "whole\n" {
		t.Errorf("the reader got %q", s)
	}
}

// TestRemoveLeavesAStream: a job's clean-up removes its regular file, but never a path that is not
// one: a periodic --metrics-file /dev/null removed at a signal would take /dev/null from every
// later job (as root).
func TestRemoveLeavesAStream(t *testing.T) {
	dir := t.TempDir()
	file, fifo := filepath.Join(dir, "m.prom"), filepath.Join(dir, "m.fifo")
	if err := os.WriteFile(file, []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	for _, p := range []string{file, fifo, filepath.Join(dir, "gone")} {
		if err := Remove(p); err != nil {
			t.Errorf("Remove(%s): %v", p, err)
		}
	}
	if _, err := os.Lstat(file); !os.IsNotExist(err) {
		t.Errorf("the regular file is still there: %v", err)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO was removed or replaced: %v", err)
	}
}

// TestALinkIsWrittenThroughAndKept: a path that is a symbolic link (a `latest.json` a user keeps
// pointed at this run's file) is written at the file it names, whole as ever, and stays a link:
// renamed over, the link became a copy and the file it named kept the previous result. A link to a
// file not yet made makes that file; a link into a missing directory is refused at the start like
// any missing directory; Remove removes the file named and leaves the user's link.
func TestALinkIsWrittenThroughAndKept(t *testing.T) {
	dir := t.TempDir()
	results := filepath.Join(dir, "results")
	if err := os.Mkdir(results, 0o755); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(results, "run.json")
	if err := os.WriteFile(target, []byte("previous\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	latest, next, bad := filepath.Join(
		dir,
		"latest.json",
	), filepath.Join(
		dir,
		"next.json",
	), filepath.Join(
		dir,
		"bad.json",
	)
	for link, to := range map[string]string{latest: "results/run.json", next: "results/run2.json", bad: "typo/run.json"} {
		if err := os.Symlink(to, link); err != nil {
			t.Fatal(err)
		}
	}
	if err := Check("report", bad); err == nil ||
		!strings.Contains(
			err.Error(),
			bad+" (a link to "+filepath.Join(dir, "typo", "run.json")+"): the directory",
		) {
		t.Errorf("Check of a link into a missing directory: %v, want a refusal", err)
	}
	for path, file := range map[string]string{latest: target, next: filepath.Join(results, "run2.json")} {
		if err := Check("report", path); err != nil {
			t.Fatalf("Check(%s): %v", path, err)
		}
		if err := Write("report", path, []byte("new\n")); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s is no longer a link: %v", path, err)
		}
		if b, _ := os.ReadFile(file); string(b) != "new\n" {
			t.Errorf("%s, named by %s, holds %q, want the new result", file, path, b)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(results, ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if err := Remove(latest); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Errorf("Remove of a link left the file it names: %v", err)
	}
	if _, err := os.Lstat(latest); err != nil {
		t.Errorf("Remove took the user's link: %v", err)
	}
}

// TestAnOutputMustNotBeAnotherFile: an output naming the input (by the same path, another spelling
// of it, a link or a hard link) or another output is refused naming the output's flag; two outputs
// to /dev/null, an input given as "-" and different files pass.
func TestAnOutputMustNotBeAnotherFile(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "t.jsonl")
	if err := os.WriteFile(trace, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link, hard := filepath.Join(dir, "link.jsonl"), filepath.Join(dir, "hard.jsonl")
	if err := os.Symlink("t.jsonl", link); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(trace, hard); err != nil {
		t.Fatal(err)
	}
	in := []File{{"trace", trace}}
	for _, out := range []string{trace, filepath.Join(dir, ".", "t.jsonl"), link, hard} {
		var ce *errscope.ConfigError
		err := CheckDistinct([]File{{"report", out}}, in)
		if !errors.As(err, &ce) || ce.Flag != "report" ||
			!strings.Contains(
				err.Error(),
				"the same file as --trace "+trace+": writing it would destroy that input",
			) {
			t.Errorf("--report %s over --trace %s: %v, want --report refused", out, trace, err)
		}
	}
	r := filepath.Join(dir, "r.json")
	if err := CheckDistinct([]File{{"report", r}, {"metrics-file", r}}, nil); err == nil ||
		!strings.Contains(
			err.Error(),
			"--metrics-file: "+r+" is the same file as --report "+r+": each would replace",
		) {
		t.Errorf("two outputs to one file: %v, want the second refused", err)
	}
	if err := CheckDistinct([]File{{"report", "/dev/null"}, {"metrics-file", "/dev/null"}, {"timeline", r}, {"cpu", ""}}, []File{{"trace", "-"}, {"l3", ""}}); err != nil {
		t.Errorf("distinct outputs: %v", err)
	}
}

// TestADescriptorPathIsWrittenThroughAndKept: /dev/stdout of a shell's `>> out.log` is a link to
// /proc/self/fd/1, which names out.log itself: such a path is appended to through itself and never
// removed or renamed over. Followed to out.log, the run's clean-up removed the user's log and the
// write made a new file.
func TestADescriptorPathIsWrittenThroughAndKept(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "out.log")
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString("printed before\n")
	fd := fmt.Sprintf("/proc/self/fd/%d", f.Fd())
	link := filepath.Join(dir, "stdout") // as /dev/stdout links to /proc/self/fd/1
	if err := os.Symlink(fd, link); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fd, link} {
		if err := Check("report", path); err != nil {
			t.Fatalf("Check(%s): %v", path, err)
		}
		if err := Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := Write("report", path, []byte("report\n")); err != nil {
			t.Fatalf("Write(%s): %v", path, err)
		}
	}
	if b, err := os.ReadFile(log); err != nil || string(b) != "printed before\nreport\nreport\n" {
		t.Errorf("out.log holds %q (%v), want what was printed and both reports after it", b, err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 2 {
		t.Errorf("files in the directory: %v, want out.log and the link", left)
	}
}

// TestARelativeLinkIsReadAsTheKernelReadsIt: a relative link in a linked directory names a file
// against the directory's real path ("../shared/x" from results -> data/run42 is data/shared/x),
// not against the path as written (a textual ".." named work/shared/x, which Remove then deleted).
func TestARelativeLinkIsReadAsTheKernelReadsIt(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"data/run42", "data/shared", "work/shared"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	real, decoy := filepath.Join(
		root,
		"data/shared/latest.json",
	), filepath.Join(
		root,
		"work/shared/latest.json",
	)
	for _, p := range []string{real, decoy} {
		if err := os.WriteFile(p, []byte("old\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root, "data/run42"), filepath.Join(root, "work/results")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../shared/latest.json", filepath.Join(root, "data/run42/latest.json")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "work/results/latest.json")
	if err := Write("report", path, []byte("new\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(real); string(b) != "new\n" {
		t.Errorf("the file the link names holds %q, want the new report", b)
	}
	if err := Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(real); !os.IsNotExist(err) {
		t.Errorf("Remove left the file the link names: %v", err)
	}
	if b, err := os.ReadFile(decoy); err != nil || string(b) != "old\n" {
		t.Errorf("another file was touched: %q, %v", b, err)
	}
}
