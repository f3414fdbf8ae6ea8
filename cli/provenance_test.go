package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// What produced a result, said by every command, and what a real model will copy.

// TestEveryResultSaysWhatProducedIt: run's output opens with '#' lines (the build and MPI library,
// the command line, the start and hosts, the trace's checksum, every flag's effective value) and
// its JSON report holds the same provenance; sweep, validate, topo and sim open with them too, and
// bench's header has the command line.
func TestEveryResultSaysWhatProducedIt(t *testing.T) {
	besideOthers(t)
	dir := t.TempDir()
	trace, report := filepath.Join(dir, "t.jsonl"), filepath.Join(dir, "r.json")
	if out, err := exec.Command(binPath, "gen-trace", "--conversations", "6", "--turns-max", "3", "-o", trace).CombinedOutput(); err != nil ||
		!strings.Contains(string(out), "# command line: "+binPath+" gen-trace") {
		t.Fatalf("gen-trace -o: %v; no provenance on its standard output:\n%s", err, out)
	}
	b, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	res := runMPI(
		t,
		2,
		60*time.Second,
		"run",
		"--quiet",
		"--trace",
		trace,
		"--page-tokens",
		"32",
		"--report",
		report,
	)
	if res.exitCode != 0 {
		t.Fatalf("exit %d\n%s%s", res.exitCode, res.stdout, res.stderr)
	}
	for _, want := range []string{"# cphicache ", ", MPI library: ", "# command line: " + binPath + " run --quiet --trace " + trace,
		"# started ", " (2 ranks)", "# trace " + trace + ", sha256 " + hex.EncodeToString(sum[:]), "# configuration: ", "--cp=2", "--page-tokens=32", "--seed=1", "--model=\"\""} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("run's output has no %q:\n%s", want, res.stdout)
		}
	}
	if !strings.HasPrefix(res.stdout, "# cphicache ") {
		t.Errorf("run's output does not open with its provenance:\n%s", res.stdout)
	}
	var r struct {
		Provenance *struct {
			Version     string            `json:"version"`
			MPILibrary  string            `json:"mpi_library"`
			CommandLine []string          `json:"command_line"`
			Config      map[string]string `json:"config"`
			Hosts       []string          `json:"hosts"`
			StartTime   string            `json:"start_time"`
			TraceSHA256 string            `json:"trace_sha256"`
		} `json:"provenance"`
	}
	readJSON(t, report, &r)
	if p := r.Provenance; p == nil || p.Version == "" || p.MPILibrary == "" ||
		len(p.CommandLine) < 2 || p.Config["seed"] != "1" ||
		p.Config["page-tokens"] != "32" || p.Config["trace"] != trace || p.Config["model"] != "" ||
		len(p.Hosts) != 1 ||
		p.StartTime == "" ||
		p.TraceSHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("the report's provenance: %+v", r.Provenance)
	}
	sweepJSON := filepath.Join(dir, "sweep.json")
	for _, args := range [][]string{
		{"sweep", "--l2-slots", "64,128", "--conversations", "4", "--turns-max", "2", "--json", sweepJSON},
		// its rows then count what a loaded machine does not change
		{"validate", "--quiet", "--conversations", "8", "--turns-max", "3", "--device-pages", "64", "--sync-copies"},
		{"topo"},
		{"sim", "--steps", "200"},
	} {
		out, err := exec.Command(binPath, args...).Output()
		if err != nil || !strings.HasPrefix(string(out), "# cphicache ") ||
			!strings.Contains(string(out), "# command line: "+binPath+" "+args[0]) {
			t.Errorf("%v: %v; its output does not open with its provenance:\n%s", args, err, out)
		}
	}
	var s struct {
		Provenance *struct {
			CommandLine []string          `json:"command_line"`
			Config      map[string]string `json:"config"`
		} `json:"provenance"`
	}
	if readJSON(t, sweepJSON, &s); s.Provenance == nil ||
		s.Provenance.Config["l2-slots"] != "64,128" ||
		len(s.Provenance.CommandLine) < 2 {
		t.Errorf("sweep's JSON provenance: %+v", s.Provenance)
	}
	out, err := exec.Command(binPath, "bench", "reserve", "--min-seconds", "0.001", "--slots-log2", "10", "--pages", "1").
		Output()
	if err != nil || !strings.Contains(string(out), "command line") {
		t.Errorf("bench reserve: %v; no command line in its header:\n%s", err, out)
	}
	checkNoSegments(t)
}

// TestRealModelSaysWhatItWillCopy: a run of a real model at its real KV size says, before the
// replay, how many bytes a rank may copy and how to copy less; the run is ended there by a signal.
func TestRealModelSaysWhatItWillCopy(t *testing.T) {
	besideOthers(t)
	res, marked := runMPIOnMarker(
		t,
		2,
		60*time.Second,
		"this run copies up to",
		func(cmd *exec.Cmd) {
			cmd.Process.Signal(syscall.SIGTERM)
		},
		"run",
		"--model",
		"llama-3.1-8b",
	)
	if marked.IsZero() || !strings.Contains(res.stderr, "GiB device-to-host per rank") ||
		!strings.Contains(res.stderr, "--copy-token-bytes 8") {
		t.Errorf("no word of the bytes to copy and of --copy-token-bytes:\n%s", res.stderr)
	}
	checkNoSegments(t)
}

// TestDefaultModelIsTheSameAtEveryCP: without --model or --token-bytes, a token's KV is 2 KiB over
// the CP group at every CP size, so layouts compared with default flags compare one model; a
// --token-bytes given is per rank.
func TestDefaultModelIsTheSameAtEveryCP(t *testing.T) {
	besideOthers(t)
	small := []string{"run", "--quiet", "--conversations", "4", "--turns-max", "2"}
	for _, tc := range []struct {
		np   int
		args []string
		want float64
	}{
		{2, nil, 2048},
		{4, nil, 2048},
		{2, []string{"--token-bytes", "32"}, 2 * 4 * 2 * 32},
	} {
		report := filepath.Join(t.TempDir(), "r.json")
		res := runMPI(
			t,
			tc.np,
			60*time.Second,
			append(append(small, tc.args...), "--report", report)...)
		if res.exitCode != 0 {
			t.Fatalf(
				"np %d %v: exit %d\n%s%s",
				tc.np,
				tc.args,
				res.exitCode,
				res.stdout,
				res.stderr,
			)
		}
		if got := reportNumber(t, readReport(t, report), "capacity.token_bytes"); got != tc.want {
			t.Errorf(
				"np %d %v: KV %v bytes a token over the CP group, want %v",
				tc.np,
				tc.args,
				got,
				tc.want,
			)
		}
	}
	checkNoSegments(t)
}
