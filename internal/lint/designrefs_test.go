package lint

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The code's comments and the docs point into DESIGN.md by a section's title (`DESIGN.md, "The L3 tier"`, or
// `DESIGN.md ("The L3 tier")`); a title that is gone sends the reader nowhere, and a section number ("design
// section 7") never meant anything: DESIGN.md's sections are not numbered. The test lives beside the import
// rules, the other check of the whole repository.

var (
	// designRef is a citation of a DESIGN.md section by its title.
	designRef = regexp.MustCompile("DESIGN\\.md`?(?:,| \\(|\\(|, section)\\s*\"([^\"]+)\"")
	// sectionNumber is a citation of the design by a section number.
	sectionNumber = regexp.MustCompile(`(?i)design (?:section|§) *\d+|design \(section \d+\)|\(section \d+\)`)
)

// staleDesignRefs are files with stale citations that another change is rewriting (issue 21 moves the hicache
// root's controller files): the test tolerates them, and fails once one is clean so that the list only shrinks.
var staleDesignRefs = []string{}

// TestDesignReferencesExist: every citation of a DESIGN.md section by title names a heading of DESIGN.md, and
// nothing cites the design by a section number, in every source, script and document of the repository.
func TestDesignReferencesExist(t *testing.T) {
	root := moduleRoot(t)
	design, err := os.ReadFile(filepath.Join(root, "DESIGN.md"))
	if err != nil {
		t.Fatal(err)
	}
	titles := map[string]bool{}
	for _, line := range strings.Split(string(design), "\n") {
		if title, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " "); ok && strings.HasPrefix(line, "#") {
			titles[title] = true
		}
	}
	if !titles["The L3 tier"] || !titles["Code map"] {
		t.Fatalf("DESIGN.md's headings not found (%d read): the test reads them wrong", len(titles))
	}
	stale := map[string][]string{}
	for _, rel := range repoTextFiles(t, root) {
		if rel == "DESIGN.md" {
			continue
		}
		f, err := os.Open(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			for _, m := range designRef.FindAllStringSubmatch(line, -1) {
				if !titles[m[1]] {
					stale[rel] = append(stale[rel], sprintLine(n, m[0], "no such heading in DESIGN.md"))
				}
			}
			for _, m := range sectionNumber.FindAllString(line, -1) {
				stale[rel] = append(stale[rel], sprintLine(n, m, "DESIGN.md's sections have titles, not numbers: cite the title"))
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
	}
	for rel, refs := range stale {
		if !slices.Contains(staleDesignRefs, rel) {
			t.Errorf("%s cites the design where it has no section:\n\t%s", rel, strings.Join(refs, "\n\t"))
		}
	}
	for _, rel := range staleDesignRefs {
		if stale[rel] == nil {
			t.Errorf("%s has no stale design citation any more: take it off staleDesignRefs", rel)
		}
	}
}

func sprintLine(n int, what, why string) string { return fmt.Sprintf("line %d: %s: %s", n, what, why) }

// repoTextFiles lists the repository's sources, scripts and documents (Go, C, CUDA, Markdown, shell, make,
// Python, sbatch), relative to root, in order; test data, hidden folders and build outputs are not among them.
func repoTextFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || slices.Contains([]string{"testdata", "shared", "bin", "build"}, name)) {
				return filepath.SkipDir
			}
			return nil
		}
		if slices.Contains([]string{".go", ".c", ".h", ".cu", ".md", ".sh", ".mk", ".py", ".sbatch"}, filepath.Ext(name)) || name == "Makefile" {
			rel, err := filepath.Rel(root, path)
			out = append(out, rel)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 50 {
		t.Fatalf("found %d files under %s, expected the repository", len(out), root)
	}
	return out
}
