package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mooncakeExcerpt is the first 200 requests of the Mooncake FAST'25 synthetic trace (its README
// names the source).
var mooncakeExcerpt = filepath.Join(
	"..",
	"hicache",
	"workload",
	"testdata",
	"mooncake",
	"synthetic_first200.jsonl",
)

// mooncakeFlags keep the excerpt's 2.7M prompt tokens (prompts up to 83k tokens) quick at 8 ranks
// on 2 cores: 8 bytes per token, one layer; L1 holds the longest prompt (5177 pages of 16 tokens),
// L2 four times that.
var mooncakeFlags = []string{
	"--page-tokens",
	"16",
	"--token-bytes",
	"8",
	"--layers",
	"1",
	"--device-pages",
	"8192",
	"--l2-slots",
	"32768",
}

// TestRunReplaysTheMooncakeExcerpt: the real trace replays clean at 8 ranks from its compact form,
// and the report's ideal hit count is present and bounds what the cache achieved.
func TestRunReplaysTheMooncakeExcerpt(t *testing.T) {
	report := filepath.Join(t.TempDir(), "report.json")
	args := append(
		[]string{"run", "--quiet", "--trace", mooncakeExcerpt, "--report", report},
		mooncakeFlags...)
	res := runMPI(t, 8, 120*time.Second, args...)
	if res.exitCode != 0 || !strings.Contains(res.stdout, "result: OK") ||
		!strings.Contains(res.stdout, "; ideal hit ") {
		t.Fatalf(
			"exit %d, want 0, OK and the ideal rate in the summary:\n%s%s",
			res.exitCode,
			res.stdout,
			res.stderr,
		)
	}
	m := readReport(t, report)
	for _, key := range []string{"placement.divergences", "verify.mismatches", "verify.audit_mismatches", "verify.copy_errors"} {
		if v := reportNumber(t, m, key); v != 0 {
			t.Errorf("%s = %v, want 0", key, v)
		}
	}
	if v := reportNumber(t, m, "requests"); v != 200 {
		t.Errorf("requests = %v, want the excerpt's 200", v)
	}
	ideal, achieved := reportNumber(
		t,
		m,
		"hits.ideal_tokens",
	), reportNumber(
		t,
		m,
		"hits.l1_tokens",
	)+reportNumber(
		t,
		m,
		"hits.l2_tokens",
	)
	if achieved <= 0 || ideal < achieved {
		t.Errorf(
			"hits.ideal_tokens = %v, L1 + L2 hits = %v: want 0 < achieved <= ideal",
			ideal,
			achieved,
		)
	}
	checkNoSegments(t)
}

// TestTraceLimitAndGenTraceMooncake: --trace-limit replays the first N requests of either format,
// and gen-trace writes the synthetic workload as a Mooncake trace that run replays request for
// request.
func TestTraceLimitAndGenTraceMooncake(t *testing.T) {
	dir := t.TempDir()
	gen := filepath.Join(dir, "gen.jsonl")
	if out, err := exec.Command(binPath, "gen-trace", "--format", "mooncake", "--trace-block-tokens", "64",
		"--conversations", "12", "--output", gen).CombinedOutput(); err != nil {
		t.Fatalf("gen-trace: %v\n%s", err, out)
	}
	tokens := filepath.Join(dir, "tokens.jsonl")
	if out, err := exec.Command(binPath, "gen-trace", "--conversations", "12", "--output", tokens).CombinedOutput(); err != nil {
		t.Fatalf("gen-trace: %v\n%s", err, out)
	}
	data, err := os.ReadFile(gen)
	if err != nil || !strings.HasPrefix(string(data), `{"timestamp":0,"input_length":`) {
		t.Fatalf("gen-trace --format mooncake wrote %.100q (%v)", data, err)
	}
	requests := strings.Count(string(data), `"hash_ids"`)
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"--trace", mooncakeExcerpt, "--trace-limit", "30"}, 30},
		{[]string{"--trace", tokens, "--trace-limit", "7"}, 7},
		{[]string{"--trace", gen, "--trace-block-tokens", "64"}, requests},
	} {
		report := filepath.Join(dir, "report.json")
		args := append(
			append([]string{"run", "--quiet", "--report", report}, mooncakeFlags...),
			tc.args...)
		res := runMPI(t, 2, 60*time.Second, args...)
		if res.exitCode != 0 {
			t.Fatalf("%v: exit %d\n%s%s", tc.args, res.exitCode, res.stdout, res.stderr)
		}
		if got := reportNumber(t, readReport(t, report), "requests"); int(got) != tc.want {
			t.Errorf("%v: %v requests replayed, want %d", tc.args, got, tc.want)
		}
	}
}

// TestBadMooncakeTraceFailsWithFileAndLine: a bad line ends the job before it starts, in one line
// naming it.
func TestBadMooncakeTraceFailsWithFileAndLine(t *testing.T) {
	besideOthers(t)
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	trace := `{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [1, 2]}` + "\n" +
		`{"timestamp": 5, "input_length": 600, "output_length": 1, "hash_ids": [1]}` + "\n"
	if err := os.WriteFile(bad, []byte(trace), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--trace", bad}, "bad.jsonl:2: hash_ids holds 1 ids, want ceil(input_length 600 / block tokens 512) = 2"},
		{[]string{"--trace", bad, "--trace-format", "tokens"}, `bad.jsonl:1: unknown field "timestamp"`},
		{[]string{"--trace", bad, "--trace-block-tokens", "0"}, "invalid --trace-block-tokens"},
		{[]string{"--trace", bad, "--trace-format", "csv"}, "invalid --trace-format"},
	} {
		t.Run("flags "+strings.Join(tc.args[2:], " "), func(t *testing.T) { // after --trace FILE
			t.Parallel() // side by side: each job ends before it starts, so start-up is all of it
			res := runMPI(t, 2, 60*time.Second, append([]string{"run"}, tc.args...)...)
			lines := strings.Split(strings.TrimSpace(cphicacheLines(res.stderr)), "\n")
			if res.exitCode == 0 || len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
				t.Errorf(
					"%v: exit %d, want non-zero and one line naming %q; got:\n%s",
					tc.args,
					res.exitCode,
					tc.want,
					res.stderr,
				)
			}
		})
	}
	t.Cleanup(func() { checkNoSegments(t) })
}

// TestTraceFromStandardInput: gen-trace's output piped into run --trace - at dp 2 (two groups read
// the workload, and mpirun forwards standard input to world rank 0 only) replays the same requests
// as the file, and leaves no temporary copy behind.
func TestTraceFromStandardInput(t *testing.T) {
	trace, err := exec.Command(binPath, "gen-trace", "--conversations", "8", "--turns-max", "2").
		Output()
	if err != nil {
		t.Fatal(err)
	}
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "cphicache-stdin-trace-*"))
	ctx, cancel := context.WithTimeout(context.Background(), loaded(60*time.Second))
	defer cancel()
	cmd := mpirunCommand(ctx, t, 4, "run", "--quiet", "--cp", "2", "--trace", "-")
	cmd.Stdin = bytes.NewReader(trace)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "# cphicache run: 4 ranks, cp 2, dp 2") {
		t.Fatalf("run --trace - at dp 2: %v\n%s", err, out)
	}
	path := filepath.Join(t.TempDir(), "t.jsonl")
	if err := os.WriteFile(path, trace, 0o644); err != nil {
		t.Fatal(err)
	}
	fromFile := runMPI(t, 4, 60*time.Second, "run", "--quiet", "--cp", "2", "--trace", path)
	requests := regexp.MustCompile(`requests \d+ in \d+ steps`)
	if got, want := requests.FindString(string(out)), requests.FindString(fromFile.stdout); got == "" ||
		got != want {
		t.Errorf("from standard input %q, from the file %q", got, want)
	}
	if after, _ := filepath.Glob(filepath.Join(os.TempDir(), "cphicache-stdin-trace-*")); len(
		after,
	) > len(
		before,
	) {
		t.Errorf("temporary copies left: %v", after)
	}
	checkNoSegments(t)
}

// TestATraceFromAFIFOIsReadOnce: a --trace that is a FIFO (as `mkfifo t; gen-trace > t &` makes) is
// read once, on world rank 0, and reaches both CP groups of a CP2DP2 job: the job replays exactly
// what the same trace from a regular file replays. It used to be drained by the provenance's
// checksum, and the run then waited for a writer for good.
func TestATraceFromAFIFOIsReadOnce(t *testing.T) {
	besideOthers(t)
	dir := t.TempDir()
	file, fifo := filepath.Join(dir, "t.jsonl"), filepath.Join(dir, "t.fifo")
	if out, err := exec.Command(binPath, "gen-trace", "--conversations", "8", "--turns-max", "2", "-o", file).CombinedOutput(); err != nil {
		t.Fatalf("gen-trace: %v\n%s", err, out)
	}
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil { // waits for the run's reader
			w.Write(data)
			w.Close()
		}
	}()
	hits := regexp.MustCompile(`(?m)^  prompt tokens: .*$`)
	fromFIFO := runMPI(t, 4, 60*time.Second, "run", "--quiet", "--cp", "2", "--trace", fifo)
	fromFile := runMPI(t, 4, 60*time.Second, "run", "--quiet", "--cp", "2", "--trace", file)
	if fromFIFO.exitCode != 0 || fromFile.exitCode != 0 {
		t.Fatalf(
			"exit %d from the FIFO, %d from the file:\n%s%s\n%s%s",
			fromFIFO.exitCode,
			fromFile.exitCode,
			fromFIFO.stdout,
			fromFIFO.stderr,
			fromFile.stdout,
			fromFile.stderr,
		)
	}
	if a, b := hits.FindString(fromFIFO.stdout), hits.FindString(fromFile.stdout); a == "" ||
		a != b {
		t.Errorf("from the FIFO %q, from the file %q: want the same replay", a, b)
	}
}

// TestATraceWhoseTimestampsGoBackSaysSoOnce: a Mooncake trace with lines earlier than a line before
// them replays (the serving clock queues each behind the line before), and the summary and the
// report say it once: how many lines and the first one's number. A trace in order says nothing in
// the summary, and 0 in the report.
func TestATraceWhoseTimestampsGoBackSaysSoOnce(t *testing.T) {
	besideOthers(t)
	excerpt, err := os.ReadFile(mooncakeExcerpt)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(excerpt), "\n")[:20]
	inOrder, back := filepath.Join(
		t.TempDir(),
		"in-order.jsonl",
	), filepath.Join(
		t.TempDir(),
		"back.jsonl",
	)
	swapped := slices.Clone(lines)
	// line 7 is later than lines 8 to 13, which go back
	swapped[6], swapped[12] = swapped[12], swapped[6]
	for path, text := range map[string][]string{inOrder: lines, back: swapped} {
		if err := os.WriteFile(path, []byte(strings.Join(text, "")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		trace, want string
		clock       []string
		backwards   float64
	}{
		{back, "trace: 6 request lines have a timestamp earlier than a line before (the first: line 8); timestamps the serving clock queued each",
			[]string{"--gpu", "h200", "--prefill-model", "deepseek-v3", "--time-scale", "50"}, 6},
		{back, "trace: 6 request lines have a timestamp earlier than a line before (the first: line 8); timestamps unused here", nil, 6},
		{inOrder, "", nil, 0},
	} {
		reportPath := filepath.Join(t.TempDir(), "r.json")
		args := append(
			append(
				[]string{"run", "--quiet", "--trace", tc.trace, "--report", reportPath},
				mooncakeFlags...),
			tc.clock...)
		res := runMPI(t, 2, 120*time.Second, args...)
		if res.exitCode != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, res.exitCode, res.stdout, res.stderr)
		}
		if n := strings.Count(res.stdout+res.stderr, "trace: "); (tc.want == "" && n != 0) ||
			(tc.want != "" && (n != 1 || !strings.Contains(res.stdout, tc.want))) {
			t.Errorf(
				"%v: said 'trace: ' %d times, want %q once (or none for a trace in order):\n%s%s",
				args,
				n,
				tc.want,
				res.stdout,
				res.stderr,
			)
		}
		m := readReport(t, reportPath)
		if v := reportNumber(t, m, "trace.timestamps_backwards"); v != tc.backwards {
			t.Errorf("%v: trace.timestamps_backwards = %v, want %v", args, v, tc.backwards)
		}
		if tc.backwards > 0 && reportNumber(t, m, "trace.first_backwards_line") != 8 {
			t.Errorf(
				"%v: trace.first_backwards_line = %v, want 8",
				args,
				reportNumber(t, m, "trace.first_backwards_line"),
			)
		}
	}
}
