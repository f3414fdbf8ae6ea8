package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The tests of what a run leaves for its user to file and trust: a configuration that records the
// job that ran, and files that never say OK of a job that did not end well.

// TestTheConfigurationIsTheJobsOwn: the provenance's configuration shows the values the job ran
// with where they are derived (the per-rank --token-bytes of the default model at cp 2, a model's
// --layers, the --l2-slots of an --l2-bytes given through its environment variable), in the '#'
// header and the report alike; it used to show those flags' defaults, the record of another job.
func TestTheConfigurationIsTheJobsOwn(t *testing.T) {
	besideOthers(t)
	report := filepath.Join(t.TempDir(), "r.json")
	for _, tc := range []struct {
		env  []string
		args []string
		want map[string]string
	}{
		{nil, nil, map[string]string{"token-bytes": "128", "layers": "4", "payloads": "2"}},
		{[]string{"CPHICACHE_L2_BYTES=8MiB"}, []string{"--model", "llama-3.1-8b", "--copy-token-bytes", "8"},
			map[string]string{"layers": "32", "token-bytes": "1024", "l2-slots": "4", "copy-token-bytes": "8"}},
	} {
		args := append(
			[]string{
				"run",
				"--quiet",
				"--conversations",
				"4",
				"--turns-max",
				"2",
				"--report",
				report,
			},
			tc.args...)
		res := runMPIEnv(t, 2, 60*time.Second, tc.env, args...)
		if res.exitCode != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, res.exitCode, res.stdout, res.stderr)
		}
		var r struct {
			Provenance struct {
				Config map[string]string `json:"config"`
			} `json:"provenance"`
		}
		readJSON(t, report, &r)
		header := strings.Join(strings.Fields(strings.ReplaceAll(res.stdout, "\n#", "")), " ")
		for flag, want := range tc.want {
			if !strings.Contains(header, " --"+flag+"="+want+" ") {
				t.Errorf(
					"%v %v: the header has no --%s=%s:\n%s",
					tc.env,
					args,
					flag,
					want,
					res.stdout,
				)
			}
			if got := r.Provenance.Config[flag]; got != want {
				t.Errorf(
					"%v %v: the report's configuration has %s=%q, want %q",
					tc.env,
					args,
					flag,
					got,
					want,
				)
			}
		}
	}
}

// TestAnInjectedFaultThatNeverFiredFails: a fault asked for at a step past the workload's end never
// happens, so the run tested nothing it was asked to: it ends FAILED (exit 1), saying so in the
// result line and the report, where it used to end "result: OK" with exit 0, which a validation
// script reads as a detector that missed.
func TestAnInjectedFaultThatNeverFiredFails(t *testing.T) {
	besideOthers(t)
	report := filepath.Join(t.TempDir(), "r.json")
	for _, flag := range []string{"--inject-divergence", "--inject-copy-error", "--inject-hang"} {
		res := runMPI(
			t,
			2,
			60*time.Second,
			"run",
			"--quiet",
			"--conversations",
			"6",
			"--turns-max",
			"2",
			flag,
			"1@99999",
			"--report",
			report,
		)
		want := "result: FAILED: injection; " + flag + " 1@99999 never fired: world rank 1's replay ended before step 99999"
		if res.exitCode != 1 || !strings.Contains(res.stdout, want) {
			t.Errorf(
				"%s 1@99999: exit %d, want 1 and %q:\n%s%s",
				flag,
				res.exitCode,
				want,
				res.stdout,
				res.stderr,
			)
		}
		var r struct {
			Result  string `json:"result"`
			Failure struct {
				Check string `json:"check"`
			} `json:"failure"`
		}
		if readJSON(t, report, &r); r.Result != "FAILED" || r.Failure.Check != "injection" {
			t.Errorf("%s 1@99999: the report says %+v, want FAILED by the injection", flag, r)
		}
	}
}

// TestAnOutputThatCouldNotBeWrittenFailsTheResult: a --timeline or --metrics-file whose write fails
// (/dev/full: a full disk) ends the job with exit 1, and the summary and the report written after
// it say FAILED by that output; they used to say OK of a job that exited 1.
func TestAnOutputThatCouldNotBeWrittenFailsTheResult(t *testing.T) {
	besideOthers(t)
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skipf("no /dev/full here: %v", err)
	}
	report := filepath.Join(t.TempDir(), "r.json")
	for _, flag := range []string{"--timeline", "--metrics-file"} {
		res := runMPI(
			t,
			2,
			60*time.Second,
			"run",
			"--quiet",
			"--conversations",
			"6",
			"--turns-max",
			"2",
			flag,
			"/dev/full",
			"--report",
			report,
		)
		want := "result: FAILED: output; " + flag + " /dev/full: "
		if res.exitCode != 1 || !strings.Contains(res.stdout, want) {
			t.Errorf(
				"%s /dev/full: exit %d, want 1 and %q:\n%s%s",
				flag,
				res.exitCode,
				want,
				res.stdout,
				res.stderr,
			)
		}
		var r struct {
			Result string `json:"result"`
		}
		if readJSON(t, report, &r); r.Result != "FAILED" {
			t.Errorf("%s /dev/full: the report says %q, want FAILED", flag, r.Result)
		}
	}
}

// TestARunThatWritesNothingLeavesNoOldResult: a run that ends without writing its outputs (a rank
// that exits, as after a crash) leaves no file at its --report, --metrics-file and --timeline
// paths, where the previous job's stayed and its report said "OK" of a job that failed; so does
// validate at its --report.
func TestARunThatWritesNothingLeavesNoOldResult(t *testing.T) {
	besideOthers(t)
	dir := t.TempDir()
	paths := []string{
		filepath.Join(dir, "r.json"),
		filepath.Join(dir, "m.prom"),
		filepath.Join(dir, "t.json"),
	}
	for _, p := range paths {
		if err := os.WriteFile(p, []byte(`{"result": "OK"}`+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res := runMPI(
		t,
		2,
		60*time.Second,
		"run",
		"--quiet",
		"--conversations",
		"6",
		"--turns-max",
		"2",
		"--inject-exit",
		"1@2",
		"--report",
		paths[0],
		"--metrics-file",
		paths[1],
		"--timeline",
		paths[2],
	)
	if res.exitCode != 4 {
		t.Fatalf("exit %d, want 4 (--inject-exit)\n%s%s", res.exitCode, res.stdout, res.stderr)
	}
	for _, p := range paths {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there after a run that wrote nothing: %v", p, err)
		}
	}
	if err := os.WriteFile(paths[0], []byte(`{"result": "OK"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res = runMPI(
		t,
		2,
		120*time.Second,
		"validate",
		"--quiet",
		"--conversations",
		"6",
		"--turns-max",
		"2",
		"--inject-exit",
		"1@2",
		"--report",
		paths[0],
	)
	if _, err := os.Stat(paths[0]); res.exitCode != 4 || !os.IsNotExist(err) {
		t.Errorf(
			"validate ended by a rank's exit: exit %d (want 4), its --report %v (want none)\n%s%s",
			res.exitCode,
			err,
			res.stdout,
			res.stderr,
		)
	}
}

// TestAnOutputThatNamesTheTraceIsRefused: run's --report over the --trace it replays or its
// --prefill-profile, and sweep's --json over its --trace, are refused before start-up naming the
// flag, and the trace is left whole; the report used to replace the user's trace.
func TestAnOutputThatNamesTheTraceIsRefused(t *testing.T) {
	besideOthers(t)
	dir := t.TempDir()
	trace := filepath.Join(dir, "t.jsonl")
	if out, err := exec.Command(binPath, "gen-trace", "--conversations", "4", "--turns-max", "2", "-o", trace).CombinedOutput(); err != nil {
		t.Fatalf("gen-trace: %v\n%s", err, out)
	}
	before, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	res := runMPI(t, 2, 60*time.Second, "run", "--quiet", "--trace", trace, "--report", trace)
	if want := "invalid --report: " + trace + " is the same file as --trace"; res.exitCode != 2 ||
		!strings.Contains(res.stderr, want) {
		t.Errorf(
			"--report over --trace: exit %d, want 2 and %q:\n%s%s",
			res.exitCode,
			want,
			res.stdout,
			res.stderr,
		)
	}
	if after, _ := os.ReadFile(trace); string(after) != string(before) {
		t.Errorf("the trace was changed: %d bytes, were %d", len(after), len(before))
	}
	out, err := exec.Command(binPath, "sweep", "--l2-slots", "64", "--trace", trace, "--json", trace).
		CombinedOutput()
	if want := "invalid --json: " + trace + " is the same file as --trace"; !strings.Contains(
		string(out),
		want,
	) {
		t.Errorf("sweep --json over --trace: %v, want %q:\n%s", err, want, out)
	}
	profile := filepath.Join(dir, "prof.txt")
	if err := os.WriteFile(profile, []byte("1024 0 50\n2048 0 90\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(binPath, "run", "--quiet", "--conversations", "4", "--prefill-profile", profile, "--request-rate", "5", "--report", profile).
		CombinedOutput()
	if want := "invalid --report: " + profile + " is the same file as --prefill-profile"; !strings.Contains(
		string(out),
		want,
	) {
		t.Errorf("run --report over --prefill-profile: %v, want %q:\n%s", err, want, out)
	}
}

// TestDevStdoutIsWrittenInPlace: --report /dev/stdout, with standard output a pipe or a file (a
// shell's `>>`), appends the report after the summary and leaves the file the user's: /dev/stdout
// links to a descriptor, which the run writes through and never removes.
func TestDevStdoutIsWrittenInPlace(t *testing.T) {
	besideOthers(t)
	args := []string{
		"run",
		"--quiet",
		"--conversations",
		"4",
		"--turns-max",
		"2",
		"--report",
		"/dev/stdout",
	}
	piped, err := exec.Command(binPath, args...).Output()
	if err != nil || !strings.Contains(string(piped), "result: OK") ||
		!strings.Contains(string(piped), `"result": "OK`) {
		t.Errorf("to a pipe: %v, want the summary and the report:\n%s", err, piped)
	}
	log := filepath.Join(t.TempDir(), "out.log")
	if err := os.WriteFile(log, []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binPath, args...)
	cmd.Stdout = f
	err = cmd.Run()
	f.Close()
	b, _ := os.ReadFile(log)
	if s := string(b); err != nil || !strings.HasPrefix(s, "kept\n# cphicache ") ||
		!strings.Contains(s, "result: OK") ||
		!strings.Contains(s, `"result": "OK`) {
		t.Errorf(
			">> out.log: %v; it holds:\n%s\nwant the line before, the summary and the report",
			err,
			s,
		)
	}
}
