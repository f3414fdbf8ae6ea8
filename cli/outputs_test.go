package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The tests of what a run leaves for its user to file and trust: a configuration that, given back, makes the
// same job, and files that never say OK of a job that did not end well.

// TestTheConfigurationIsTheJobsOwn: the provenance's configuration shows the values the job ran with where they
// are derived (the per-rank --token-bytes of the default model at cp 2, a model's --layers, the --l2-slots of an
// --l2-bytes given through its environment variable), in the '#' header and the report alike, so that the
// configuration given back makes the same job; it used to show those flags' defaults.
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
		args := append([]string{"run", "--quiet", "--conversations", "4", "--turns-max", "2", "--report", report}, tc.args...)
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
				t.Errorf("%v %v: the header has no --%s=%s:\n%s", tc.env, args, flag, want, res.stdout)
			}
			if got := r.Provenance.Config[flag]; got != want {
				t.Errorf("%v %v: the report's configuration has %s=%q, want %q", tc.env, args, flag, got, want)
			}
		}
	}
}

// TestAnInjectedFaultThatNeverFiredFails: a fault asked for at a step past the workload's end never happens, so
// the run tested nothing it was asked to: it ends FAILED (exit 1), saying so in the result line and the report,
// where it used to end "result: OK" with exit 0, which a validation script reads as a detector that missed.
func TestAnInjectedFaultThatNeverFiredFails(t *testing.T) {
	besideOthers(t)
	report := filepath.Join(t.TempDir(), "r.json")
	for _, flag := range []string{"--inject-divergence", "--inject-copy-error", "--inject-hang"} {
		res := runMPI(t, 2, 60*time.Second, "run", "--quiet", "--conversations", "6", "--turns-max", "2", flag, "1@99999", "--report", report)
		want := "result: FAILED: injection; " + flag + " 1@99999 never fired: world rank 1's replay ended before step 99999"
		if res.exitCode != 1 || !strings.Contains(res.stdout, want) {
			t.Errorf("%s 1@99999: exit %d, want 1 and %q:\n%s%s", flag, res.exitCode, want, res.stdout, res.stderr)
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

// TestAnOutputThatCouldNotBeWrittenFailsTheResult: a --timeline or --metrics-file whose write fails (/dev/full:
// a full disk) ends the job with exit 1, and the summary and the report written after it say FAILED by that
// output; they used to say OK of a job that exited 1.
func TestAnOutputThatCouldNotBeWrittenFailsTheResult(t *testing.T) {
	besideOthers(t)
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skipf("no /dev/full here: %v", err)
	}
	report := filepath.Join(t.TempDir(), "r.json")
	for _, flag := range []string{"--timeline", "--metrics-file"} {
		res := runMPI(t, 2, 60*time.Second, "run", "--quiet", "--conversations", "6", "--turns-max", "2", flag, "/dev/full", "--report", report)
		want := "result: FAILED: output; " + flag + " /dev/full: "
		if res.exitCode != 1 || !strings.Contains(res.stdout, want) {
			t.Errorf("%s /dev/full: exit %d, want 1 and %q:\n%s%s", flag, res.exitCode, want, res.stdout, res.stderr)
		}
		var r struct {
			Result string `json:"result"`
		}
		if readJSON(t, report, &r); r.Result != "FAILED" {
			t.Errorf("%s /dev/full: the report says %q, want FAILED", flag, r.Result)
		}
	}
}

// TestARunThatWritesNothingLeavesNoOldResult: a run that ends without writing its outputs (a rank that exits,
// as after a crash) leaves no file at its --report, --metrics-file and --timeline paths, where the previous
// job's stayed and its report said "OK" of a job that failed.
func TestARunThatWritesNothingLeavesNoOldResult(t *testing.T) {
	besideOthers(t)
	dir := t.TempDir()
	paths := []string{filepath.Join(dir, "r.json"), filepath.Join(dir, "m.prom"), filepath.Join(dir, "t.json")}
	for _, p := range paths {
		if err := os.WriteFile(p, []byte(`{"result": "OK"}`+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res := runMPI(t, 2, 60*time.Second, "run", "--quiet", "--conversations", "6", "--turns-max", "2", "--inject-exit", "1@2",
		"--report", paths[0], "--metrics-file", paths[1], "--timeline", paths[2])
	if res.exitCode != 4 {
		t.Fatalf("exit %d, want 4 (--inject-exit)\n%s%s", res.exitCode, res.stdout, res.stderr)
	}
	for _, p := range paths {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there after a run that wrote nothing: %v", p, err)
		}
	}
}
