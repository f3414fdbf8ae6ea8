package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The product's side of docs/PUBLISHED.md's rows 7 to 15 ("The product reproduces them too"): each
// command is read from the page as a user would copy it, run, and its printed figures checked
// against the ones the page quotes, which these tests pin (and find on the page, so that the two
// cannot drift apart unnoticed).

// publishedCommand is the mpirun command of docs/PUBLISHED.md's indented block whose first line
// starts with prefix: its rank count and the binary's arguments, with paths made relative to
// cli/ (the tests' directory). The page's text is returned too, its whitespace collapsed.
func publishedCommand(t *testing.T, prefix string) (np int, args []string, page string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "docs", "PUBLISHED.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	var block []string
	for i, line := range lines {
		if !strings.HasPrefix(line, "    "+prefix) {
			continue
		}
		for _, l := range lines[i:] {
			if !strings.HasPrefix(l, "    ") {
				break
			}
			block = append(block, strings.TrimSuffix(strings.TrimSpace(l), "\\"))
		}
		break
	}
	fields := strings.Fields(strings.Join(block, " "))
	at := -1
	for i, f := range fields {
		if f == "bin/cphicache" {
			at = i
		}
	}
	if len(fields) < 3 || fields[0] != "mpirun" || fields[1] != "-np" || at < 0 {
		t.Fatalf("docs/PUBLISHED.md has no command starting %q: %q", prefix, fields)
	}
	if np, err = strconv.Atoi(fields[2]); err != nil {
		t.Fatalf("docs/PUBLISHED.md: -np %q: %v", fields[2], err)
	}
	args = append([]string(nil), fields[at+1:]...)
	for i := range args {
		if i > 0 && args[i-1] == "--trace" {
			args[i] = filepath.Join("..", args[i])
		}
	}
	return np, args, strings.Join(strings.Fields(string(raw)), " ")
}

// TestPublishedProductCommandsReproduce runs row 9's command and rows 14 and 15's, as PUBLISHED.md
// gives them (with --sync-copies, so that the hits do not depend on how fast this machine's copies
// finish against the modelled step: without it, 3 of 4 runs of rows 14 and 15's command on a loaded
// machine printed "L2 hit 0" and a TTFT p50 of 8.14 s), and checks each figure the page quotes.
func TestPublishedProductCommandsReproduce(t *testing.T) {
	besideOthers(t)
	for _, tc := range []struct {
		name, prefix string
		want         []string // the figures the page quotes after the command
	}{
		{"row 9", "mpirun -np 8", []string{"1 requests, 10127 prompt tokens/s", "TTFT p50 6.55 s"}},
		{"rows 14 and 15", "mpirun -np 1", []string{
			"L2 hit 399872",
			"TTFT p50 217.2 ms, p90 8.14 s",
			"mean TTFT 2.85 s = queue 0 s + L3 prefetch wait 0 s + load wait 136.5 ms + compute 2.71 s",
		}},
	} {
		np, args, page := publishedCommand(t, tc.prefix)
		if !strings.Contains(strings.Join(args, " "), "--sync-copies") {
			t.Errorf("%s: the page's command has no --sync-copies: %q", tc.name, args)
		}
		res := runMPI(t, np, 30*time.Second, args...)
		if res.exitCode != 0 {
			t.Fatalf("%s: exit %d\n%s%s", tc.name, res.exitCode, res.stdout, res.stderr)
		}
		for _, want := range tc.want {
			if !strings.Contains(page, "`"+want) && !strings.Contains(page, want+"`") {
				t.Errorf("%s: docs/PUBLISHED.md no longer quotes %q", tc.name, want)
			}
			if !strings.Contains(res.stdout, want) {
				t.Errorf("%s: the run does not print %q:\n%s", tc.name, want, res.stdout)
			}
		}
	}
}
