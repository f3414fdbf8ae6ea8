package lint

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// Lines a reader sees whole: a Go line holds at most goLineMax columns (a tab counts tabColumns) outside its
// string literals, whose text a reader greps for whole and so may run on; at most wideShareMax of all Go lines
// are wider than goLineWide; and Markdown prose (not tables, code or a lone link) holds at most goLineMax
// columns too. Generated Go files are left out. etcd raft has 1.4% of its lines over 100 columns, pebble 0.7%.
const (
	tabColumns   = 4
	goLineMax    = 120
	goLineWide   = 100
	wideShareMax = 0.02
)

// generatedGo is the header Go's convention gives a generated file.
var generatedGo = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

// columns is how wide line shows, a tab counted as tabColumns.
func columns(line string) int {
	return len(strings.ReplaceAll(line, "\t", strings.Repeat(" ", tabColumns)))
}

// withoutStrings is line with the text inside its string literals taken out (the quotes kept), and whether a raw
// string is still open at its end; inRaw says one was open at its start.
func withoutStrings(line string, inRaw bool) (string, bool) {
	var b strings.Builder
	inStr := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case inRaw:
			if c == '`' {
				inRaw = false
				b.WriteByte(c)
			}
		case inStr:
			if c == '\\' {
				i++
			} else if c == '"' {
				inStr = false
				b.WriteByte(c)
			}
		case c == '/' && strings.HasPrefix(line[i:], "//"):
			b.WriteString(line[i:])
			return b.String(), false
		default:
			inRaw, inStr = c == '`', c == '"' // a string opens here, or neither does
			b.WriteByte(c)
		}
	}
	return b.String(), inRaw
}

// TestGoLinesFit: no Go line is wider than goLineMax outside its string literals, and at most wideShareMax of
// the lines are wider than goLineWide.
func TestGoLinesFit(t *testing.T) {
	root := moduleRoot(t)
	lines, wide := 0, 0
	for _, rel := range repoTextFiles(t, root) {
		if filepath.Ext(rel) != ".go" {
			continue
		}
		src, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		if generatedGo.Match(src) {
			continue
		}
		inRaw := false
		for n, line := range strings.Split(string(src), "\n") {
			lines++
			if columns(line) > goLineWide {
				wide++
			}
			var code string
			wasRaw := inRaw
			code, inRaw = withoutStrings(line, inRaw)
			if !wasRaw && columns(code) > goLineMax {
				t.Errorf("%s:%d is %d columns outside its strings, over %d: wrap it by meaning (an argument or a "+
					"clause a line)", rel, n+1, columns(code), goLineMax)
			}
		}
	}
	share := float64(wide) / float64(max(1, lines))
	t.Logf("%d Go lines, %d (%.2f%%) wider than %d columns", lines, wide, 100*share, goLineWide)
	if lines < 1000 {
		t.Fatalf("%d Go lines read: the test reads the tree wrong", lines)
	}
	if share > wideShareMax {
		t.Errorf("%.2f%% of the Go lines are wider than %d columns, over %.0f%%", 100*share, goLineWide,
			100*wideShareMax)
	}
}

// markdownLink is a link or an image whose target cannot be broken across lines.
var markdownLink = regexp.MustCompile(`!?\[[^\]]*\]\([^)]*\)|<https?://[^>]*>|https?://\S+`)

// TestMarkdownProseFits: every line of Markdown prose is at most goLineMax columns, but for what cannot be
// wrapped: a table row, a fenced or indented code block, a heading, and a link's target.
func TestMarkdownProseFits(t *testing.T) {
	root := moduleRoot(t)
	var over []string
	for _, rel := range repoTextFiles(t, root) {
		if filepath.Ext(rel) != ".md" {
			continue
		}
		f, err := os.Open(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		fenced := false
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			trimmed := strings.TrimSpace(line)
			if strings.HasPrefix(trimmed, "```") {
				fenced = !fenced
				continue
			}
			code := strings.HasPrefix(line, "    ") && !strings.HasPrefix(trimmed, "-") || strings.HasPrefix(line, "\t")
			if fenced || code || strings.HasPrefix(trimmed, "|") || strings.HasPrefix(trimmed, "#") {
				continue
			}
			if prose := markdownLink.ReplaceAllString(line, "[link]"); columns(prose) > goLineMax {
				over = append(over, rel+":"+strconv.Itoa(n))
			}
		}
		f.Close()
	}
	sort.Strings(over)
	for _, at := range over {
		t.Errorf("%s: a prose line over %d columns: wrap it by meaning (a clause a line)", at, goLineMax)
	}
}
