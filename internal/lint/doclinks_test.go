package lint

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The documents are a small library (README.md, docs/, and the folders' own pages): a reader walks
// it by its links, so every link must lead somewhere. TestDocLinksResolve holds each relative link
// of every tracked Markdown file to a file that exists and each #anchor to a heading of that file,
// as GitHub makes anchors; and a document named in prose by its bare name ("SERVING.md says") is a
// link, not a name to search for.

var (
	// mdLink is an inline link or image, [text](target), its text possibly over several lines.
	mdLink = regexp.MustCompile(`!?\[([^\]]*)\]\(([^)\s]*)\)`)
	// mdHeading is an ATX heading: its level and its text.
	mdHeading = regexp.MustCompile(`^(#{1,6})[ \t]+(.*?)[ \t#]*$`)
	// mdFence opens or closes a fenced code block.
	mdFence = regexp.MustCompile("^[ \t]{0,3}(```|~~~)")
	// mdDocName is a Markdown file's name as prose would say it, with the path before it if any.
	mdDocName = regexp.MustCompile(`[A-Za-z0-9_./-]*\b([A-Za-z0-9_-]+\.md)\b`)
)

// TestDocLinksResolve: every relative link in a tracked Markdown file names a file of the
// repository that exists, every #anchor a heading of the file it points into (GitHub's anchors:
// lowercase, spaces to '-', punctuation other than '-' and '_' removed, a repeated heading's anchor
// suffixed -1, -2, ...), no link leaves the repository, and a document of the repository named in
// prose is named by a link.
func TestDocLinksResolve(t *testing.T) {
	root := moduleRoot(t)
	docs := trackedMarkdown(t, root)
	names := map[string]bool{}
	for _, rel := range docs {
		names[filepath.Base(rel)] = true
	}
	if !names["README.md"] || !names["DESIGN.md"] || len(docs) < 10 {
		t.Fatalf(
			"found %d Markdown files (%v): the test lists the repository wrong",
			len(docs),
			docs,
		)
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(rel string) map[string]bool {
		if a, ok := anchors[rel]; ok {
			return a
		}
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		anchors[rel] = headingAnchors(proseOf(string(b)))
		return anchors[rel]
	}
	for _, rel := range docs {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		text := proseOf(string(b))
		var bad []string
		for _, m := range mdLink.FindAllStringSubmatchIndex(text, -1) {
			target, line := text[m[4]:m[5]], 1+strings.Count(text[:m[0]], "\n")
			if why := checkLink(root, rel, target, anchorsOf); why != "" {
				bad = append(bad, sprintLine(line, text[m[0]:m[1]], why))
			}
		}
		// What is left once the links are blanked out is prose: a document's name in it is a link
		// not made.
		bare := mdLink.ReplaceAllStringFunc(text, func(s string) string {
			n := strings.Count(s, "\n")
			return strings.Repeat(" ", len(s)-n) + strings.Repeat("\n", n)
		})
		for _, m := range mdDocName.FindAllStringSubmatchIndex(bare, -1) {
			if name := bare[m[2]:m[3]]; names[name] {
				line := 1 + strings.Count(bare[:m[0]], "\n")
				bad = append(
					bad,
					sprintLine(line, bare[m[0]:m[1]], "a document named in prose: make it a link"),
				)
			}
		}
		if len(bad) > 0 {
			t.Errorf("%s has links that lead nowhere:\n\t%s", rel, strings.Join(bad, "\n\t"))
		}
	}
}

// checkLink says what is wrong with a link's target in the document rel, or "" when it resolves.
func checkLink(root, rel, target string, anchorsOf func(string) map[string]bool) string {
	if target == "" {
		return "an empty link"
	}
	if regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`).MatchString(target) {
		return "" // a URL: not the repository's to check
	}
	path, anchor, _ := strings.Cut(target, "#")
	file := rel
	if path != "" {
		if filepath.IsAbs(path) {
			return "an absolute path: link relative to the document"
		}
		file = filepath.Join(filepath.Dir(rel), filepath.FromSlash(path))
		if file == ".." || strings.HasPrefix(file, ".."+string(filepath.Separator)) {
			return "a link out of the repository"
		}
		if _, err := os.Stat(filepath.Join(root, file)); err != nil {
			return "no such file: " + file
		}
	}
	if anchor == "" {
		return ""
	}
	if filepath.Ext(file) != ".md" {
		return "an anchor into a file that is not Markdown"
	}
	if !anchorsOf(file)[anchor] {
		return "no heading of " + file + " has the anchor #" + anchor
	}
	return ""
}

// proseOf is a Markdown text with its code blocks (fenced, or indented four spaces after a blank
// line) blanked out, line for line: a link there is not one, and a name there is a command's. Code
// spans stay: a document named in one is still named in prose.
func proseOf(text string) string {
	lines := strings.Split(text, "\n")
	fenced, indented := false, false
	for i, line := range lines {
		switch {
		case mdFence.MatchString(line):
			fenced = !fenced
			lines[i] = ""
		case fenced:
			lines[i] = ""
		case (indented || i == 0 || strings.TrimSpace(lines[i-1]) == "") &&
			(strings.HasPrefix(line, "    ") || strings.HasPrefix(line, "\t")) && !inList(lines, i):
			indented = true
			lines[i] = ""
		default:
			indented = false
		}
	}
	return strings.Join(lines, "\n")
}

// inList says whether line i, indented, continues a list item above it (a paragraph of the item,
// not code).
func inList(lines []string, i int) bool {
	item := regexp.MustCompile(`^\s*(?:[-*+]|\d+\.)\s`)
	for j := i - 1; j >= 0; j-- {
		if item.MatchString(lines[j]) {
			return true
		}
		if s := lines[j]; s != "" && !strings.HasPrefix(s, " ") && !strings.HasPrefix(s, "\t") {
			return false
		}
	}
	return false
}

// headingAnchors are the anchors GitHub gives the headings of a document's prose.
func headingAnchors(prose string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range strings.Split(prose, "\n") {
		m := mdHeading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		a := githubAnchor(m[2])
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// githubAnchor is GitHub's anchor for a heading: lowercased, every character but letters, digits,
// spaces, '-' and '_' removed, and each space a '-'.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// trackedMarkdown lists git's Markdown files under root, tracked or new but not ignored, less test
// data and shared/ (or, without git, the Markdown files repoTextFiles finds).
func trackedMarkdown(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command(
		"git",
		"ls-files",
		"-z",
		"--cached",
		"--others",
		"--exclude-standard",
		"--",
		"*.md",
	)
	cmd.Dir = root
	out, err := cmd.Output()
	var docs []string
	if err != nil {
		for _, rel := range repoTextFiles(t, root) {
			if filepath.Ext(rel) == ".md" {
				docs = append(docs, rel)
			}
		}
		return docs
	}
	for _, rel := range strings.Split(string(out), "\x00") {
		parts := strings.Split(rel, "/")
		if rel == "" || parts[0] == "shared" || slices.Contains(parts, "testdata") {
			continue
		}
		docs = append(docs, filepath.FromSlash(rel))
	}
	return docs
}

// TestGitHubAnchors: the anchor rule as GitHub renders it, on headings of this repository's kind.
func TestGitHubAnchors(t *testing.T) {
	for _, c := range [][2]string{
		{"The L3 tier", "the-l3-tier"},
		{"Code map", "code-map"},
		{"Profiling a run: `run --timeline`", "profiling-a-run-run---timeline"},
		{"CPU profiles: `run --cpu-profile PREFIX`", "cpu-profiles-run---cpu-profile-prefix"},
		{"On a GPU machine: gpu-check.sh", "on-a-gpu-machine-gpu-checksh"},
		{"Real models and capacities in bytes", "real-models-and-capacities-in-bytes"},
		{"slurm/: running cphicache under Slurm", "slurm-running-cphicache-under-slurm"},
		{"What the ranks see (measured in both jobs, OpenMPI 4.1.4 mpirun under Slurm 22.05)",
			"what-the-ranks-see-measured-in-both-jobs-openmpi-414-mpirun-under-slurm-2205"},
		{"The allocator (pool/)", "the-allocator-pool"},
		{"MPICH and its family (Cray MPICH, Intel MPI, MVAPICH)",
			"mpich-and-its-family-cray-mpich-intel-mpi-mvapich"},
	} {
		if got := githubAnchor(c[0]); got != c[1] {
			t.Errorf("githubAnchor(%q) = %q, want %q", c[0], got, c[1])
		}
	}
	got := headingAnchors(proseOf("# A\n## Limits\n```\n## Not a heading\n```\n### Limits\n"))
	for _, a := range []string{"a", "limits", "limits-1"} {
		if !got[a] {
			t.Errorf("headingAnchors: no %q in %v", a, got)
		}
	}
	if got["not-a-heading"] {
		t.Errorf("headingAnchors read a heading inside a code block: %v", got)
	}
}
