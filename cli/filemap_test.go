package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// fileMapEntry is a line of the package doc's file map: "//   - a.go: ..." or "//   - a.go, b.go: ...".
var fileMapEntry = regexp.MustCompile(`(?m)^//   - ((?:[a-z0-9_]+\.go(?:, )?)+):`)

// TestFileMapNamesEveryFile: the file map in the package doc (doc.go) names every non-test Go file
// of cli/ and no file that does not exist, as TestDesignReferencesExist holds DESIGN.md's citations
// to its headings.
func TestFileMapNamesEveryFile(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var mapped []string
	for _, m := range fileMapEntry.FindAllStringSubmatch(string(doc), -1) {
		mapped = append(mapped, strings.Split(m[1], ", ")...)
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var code []string
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			code = append(code, f)
		}
	}
	if len(code) < 10 || len(mapped) < 10 {
		t.Fatalf(
			"%d files in cli/ and %d in doc.go's map: the test reads the folder or the map wrong",
			len(code),
			len(mapped),
		)
	}
	for _, f := range code {
		if !slices.Contains(mapped, f) {
			t.Errorf("%s is not in the file map of the package doc (doc.go): say what it holds", f)
		}
	}
	for _, f := range mapped {
		if !slices.Contains(code, f) {
			t.Errorf(
				"doc.go's file map names %s, which is not a file of cli/ (renamed or removed?)",
				f,
			)
		}
	}
	for i, f := range mapped {
		if slices.Contains(mapped[:i], f) {
			t.Errorf("doc.go's file map names %s twice", f)
		}
	}
}
