package lint

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The code's comments and the docs point into DESIGN.md (docs/DESIGN.md; a Go comment may leave the
// folder out) by a section's or a subsection's title (`DESIGN.md, "The L3 tier"`, or `DESIGN.md
// ("The L3 tier")`, also broken over two comment lines); a title that is gone sends the reader
// nowhere, and a section number (the design's "section 7") or a list item (the design's invariant 6) is
// not a place a reader can find by its heading. The test lives beside the import rules, the other
// check of the whole repository.

var (
	// designRef is a citation of a DESIGN.md section by its title.
	designRef = regexp.MustCompile("DESIGN\\.md`?(?:,| \\(|\\(|, section)\\s*\"([^\"]+)\"")
	// sectionNumber is a citation of the design by a section number.
	sectionNumber = regexp.MustCompile(
		`(?i)design (?:section|§) *\d+|design \(section \d+\)|\(section \d+\)`,
	)
	// designItem is a citation of something in DESIGN.md that is not a heading: a numbered item, a
	// bullet, a paragraph, a table, by number or by a name in the citation's own words.
	designItem = regexp.MustCompile(`DESIGN\.md` + "`?" +
		`(?:,| \(|\()\s*(?:invariant|item|bullet|paragraph|table|rule)s? *\w*`)
	// designTitleAfter is a citation that names a heading after other words: the design's table of
	// this ("Title"), said with the file's name.
	designTitleAfter = regexp.MustCompile(`DESIGN\.md's [a-z -]{1,60}\("([^"]+)"\)`)
	// docRef is a citation of another document's section by its title, as of DESIGN.md's, the
	// document's path (slurm/README.md) or, for docs/ and the root, its name alone (SERVING.md).
	docRef = regexp.MustCompile(
		"((?:[a-z0-9_.-]+/)*)\\b([A-Z][A-Z0-9_]*\\.md)`?(?:,| \\(|\\()\\s*\"([^\"]+)\"",
	)
	// commentLead is what begins a comment's continuation line: indentation and the comment marker.
	commentLead = regexp.MustCompile(`^\s*(?://|#|\*)?\s*`)
)

// staleDesignRefs are files with stale citations that another change is rewriting (issue 21 moves
// the hicache root's controller files): the test tolerates them, and fails once one is clean so
// that the list only shrinks.
var staleDesignRefs = []string{}

// TestDesignReferencesExist: every citation of a DESIGN.md section by title names a heading (## or
// ###) of DESIGN.md, nothing cites the design by a section number or a list item, and every
// citation of another document's section by title names one of its headings, in every source,
// script and document of the repository.
func TestDesignReferencesExist(t *testing.T) {
	root := moduleRoot(t)
	design, err := os.ReadFile(filepath.Join(root, "docs", "DESIGN.md"))
	if err != nil {
		t.Fatal(err)
	}
	titles := map[string]bool{}
	for _, line := range strings.Split(string(design), "\n") {
		if m := mdHeading.FindStringSubmatch(line); m != nil && (m[1] == "##" || m[1] == "###") {
			titles[m[2]] = true
		}
	}
	if !titles["The L3 tier"] || !titles["Code map"] || !titles["The shared slab"] {
		t.Fatalf("DESIGN.md's headings not found (%d read): the test reads them wrong", len(titles))
	}
	docTitles := otherDocTitles(t, root)
	stale := map[string][]string{}
	for _, rel := range repoTextFiles(t, root) {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		for i, line := range lines {
			// A citation may run on into the next line: read each line with the next one's text
			// after it, and count only the citations that begin on this line.
			pair := line
			if i+1 < len(lines) {
				pair += " " + commentLead.ReplaceAllString(lines[i+1], "")
			}
			starts := func(loc []int) bool { return loc[0] < len(line) }
			for _, m := range designRef.FindAllStringSubmatchIndex(pair, -1) {
				if title := pair[m[2]:m[3]]; starts(m) && !titles[title] {
					stale[rel] = append(
						stale[rel],
						sprintLine(i+1, pair[m[0]:m[1]], "no such heading in DESIGN.md"),
					)
				}
			}
			for _, m := range docRef.FindAllStringSubmatchIndex(pair, -1) {
				doc, title := citedDoc(root, pair[m[2]:m[3]], pair[m[4]:m[5]]), pair[m[6]:m[7]]
				if titles, ok := docTitles[doc]; ok && starts(m) && !titles[title] {
					why := "no such heading in " + doc
					stale[rel] = append(stale[rel], sprintLine(i+1, pair[m[0]:m[1]], why))
				}
			}
			for _, m := range designTitleAfter.FindAllStringSubmatchIndex(pair, -1) {
				if title := pair[m[2]:m[3]]; starts(m) && !titles[title] {
					stale[rel] = append(
						stale[rel],
						sprintLine(i+1, pair[m[0]:m[1]], "no such heading in DESIGN.md"),
					)
				}
			}
			for _, m := range designItem.FindAllStringIndex(pair, -1) {
				if starts(m) {
					why := "not a heading of DESIGN.md: cite the heading it is under by its title"
					stale[rel] = append(stale[rel], sprintLine(i+1, pair[m[0]:m[1]], why))
				}
			}
			for _, m := range sectionNumber.FindAllString(line, -1) {
				stale[rel] = append(
					stale[rel],
					sprintLine(
						i+1,
						m,
						"DESIGN.md's sections have titles, not numbers: cite the title",
					),
				)
			}
		}
	}
	for rel, refs := range stale {
		if !slices.Contains(staleDesignRefs, rel) {
			t.Errorf(
				"%s cites a document where it has no such heading:\n\t%s",
				rel,
				strings.Join(refs, "\n\t"),
			)
		}
	}
	for _, rel := range staleDesignRefs {
		if stale[rel] == nil {
			t.Errorf("%s has no stale design citation any more: take it off staleDesignRefs", rel)
		}
	}
}

// otherDocTitles are the headings (## and below) of every document but DESIGN.md, by its path in
// the repository: a citation of one by a title must name one of its headings.
func otherDocTitles(t *testing.T, root string) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	for _, rel := range repoTextFiles(t, root) {
		if filepath.Ext(rel) != ".md" || rel == filepath.Join("docs", "DESIGN.md") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		out[rel] = map[string]bool{}
		for _, line := range strings.Split(proseOf(string(b)), "\n") {
			if m := mdHeading.FindStringSubmatch(line); m != nil && len(m[1]) > 1 {
				out[rel][m[2]] = true
			}
		}
	}
	if len(out[filepath.Join("docs", "SERVING.md")]) == 0 || len(out["README.md"]) == 0 {
		t.Fatalf(
			"the documents' headings not found (%d documents read): the test reads them wrong",
			len(out),
		)
	}
	return out
}

// citedDoc is the document a citation names, by its path in the repository: the path it gives (less
// any "../"), else the name in docs/, else at the root.
func citedDoc(root, dir, name string) string {
	for strings.HasPrefix(dir, "../") {
		dir = strings.TrimPrefix(dir, "../")
	}
	if dir != "" {
		return filepath.FromSlash(dir + name)
	}
	if _, err := os.Stat(filepath.Join(root, "docs", name)); err == nil {
		return filepath.Join("docs", name)
	}
	return name
}

func sprintLine(
	n int,
	what, why string,
) string {
	return fmt.Sprintf("line %d: %s: %s", n, what, why)
}

// repoTextFiles lists the repository's sources, scripts and documents (Go, C, CUDA, Markdown,
// shell, make, Python, sbatch), relative to root, in order; test data, hidden folders and build
// outputs are not among them.
func repoTextFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root &&
				(strings.HasPrefix(name, ".") || slices.Contains([]string{"testdata", "shared", "bin", "build"}, name)) {
				return filepath.SkipDir
			}
			return nil
		}
		if slices.Contains(
			[]string{".go", ".c", ".h", ".cu", ".md", ".sh", ".mk", ".py", ".sbatch"},
			filepath.Ext(name),
		) ||
			name == "Makefile" {
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
