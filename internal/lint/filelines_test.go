package lint

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// maxFileLines is the house rule: a file longer than this is split by topic.
const maxFileLines = 400

// longFilesBeingSplit are files over maxFileLines that another change is rewriting (issue 21 moves
// the hicache root's controller and its tests into a package of their own): the test tolerates
// them, and fails once one is short enough or gone, so that the list only shrinks.
var longFilesBeingSplit = []string{}

// TestNoFileOverTheLineLimit: no source, script or document of the repository is over maxFileLines
// lines.
func TestNoFileOverTheLineLimit(t *testing.T) {
	root := moduleRoot(t)
	long := map[string]int{}
	for _, rel := range repoTextFiles(t, root) {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(b, []byte("\n")); n > maxFileLines {
			long[rel] = n
		}
	}
	for rel, n := range long {
		if !slices.Contains(longFilesBeingSplit, rel) {
			t.Errorf(
				"%s has %d lines, over the house limit of %d: split it by topic",
				rel,
				n,
				maxFileLines,
			)
		}
	}
	for _, rel := range longFilesBeingSplit {
		if long[rel] == 0 {
			t.Errorf(
				"%s is no longer over %d lines (or is gone): take it off longFilesBeingSplit",
				rel,
				maxFileLines,
			)
		}
	}
}
