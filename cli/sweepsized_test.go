package cli

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/hicache/sweep"
)

// TestSweepRecordsTheL2PolicyAsGiven: the configuration a sweep records (its header's and its
// JSON's provenance) has --l2-policy as the user gave it, a list or all, not the first policy of
// it, which is what the per-rank copies and no L2 run.
func TestSweepRecordsTheL2PolicyAsGiven(t *testing.T) {
	for _, given := range []string{"all", "slru,lru", "admit_seen"} {
		app := newApp()
		cmd := sweepCommand()
		var got string
		cmd.Action = func(c *cli.Context) error { // parse and check only: no job
			got = newProvenance(c).Config["l2-policy"]
			return nil
		}
		app.Commands = []*cli.Command{cmd}
		if err := app.Run([]string{"cphicache", "sweep", "--l2-slots", "64", "--l2-policy",
			given}); err != nil {
			t.Fatalf("--l2-policy %s: %v", given, err)
		}
		if got != given {
			t.Errorf("--l2-policy %s is recorded as %q", given, got)
		}
	}
}

// TestSweepSaysTheL1ItSized: given a model and a GPU and no L1 size, the sweep sizes L1 from them
// as run does (Llama-3.1-8B in bf16 over 2 H100s: about 977K tokens over the group) and says so:
// the header states that L1 with its rule, MODELLED, and the per-rank copies' L1 of whole copies;
// the configuration records the --device-pages and --l2-slots it ran, not the flags' defaults; the
// JSON has the same, with the rule of its L2 sizes.
func TestSweepSaysTheL1ItSized(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.json")
	out := singleton(t, "sweep", "--json", path, "--group-gpus", "2", "--gpu", "h100",
		"--prefill-model", "llama-3.1-8b", "--conversations", "16", "--turns-max", "4",
		"--request-rate", "40", "--layers", "1", "--payloads", "1", "--token-bytes", "8")
	var res sweep.Result
	readJSON(t, path, &res)
	if res.DeviceTokens < 950_000 || res.DeviceTokens > 1_000_000 ||
		!strings.Contains(res.SizedBy, "llama-3.1-8b's bf16 weights over 2 GPUs") ||
		res.L2SizedBy != sweep.DefaultSizesRule() || res.PerRankDevicePages != res.DevicePages/2 {
		t.Fatalf("sweep %+v: want L1 of about 977K tokens, the rules that sized L1 and L2, and the "+
			"per-rank copies' L1 of half the pages", res)
	}
	for _, want := range []string{
		"# L1: " + strconv.Itoa(res.DevicePages) + " pages = ",
		"of llama-3.1-8b's KV a GPU",
		"# L1 sized from the model and the GPU (no --device-pages or --device-bytes given), " +
			"MODELLED: " + res.SizedBy,
		"# per-rank copies: each GPU's L1 and each rank's L2 pool hold whole copies, 1/2 of the " +
			"tokens of the same bytes: L1 " + strconv.Itoa(res.PerRankDevicePages) + " pages",
		"# no --l2-bytes or --l2-slots given: " + sweep.DefaultSizesRule(),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the sweep lacks %q:\n%s", want, out)
		}
	}
	slots := make([]string, len(res.Points))
	for i, p := range res.Points {
		slots[i] = strconv.Itoa(p.L2Slots)
	}
	config := res.Provenance.Config
	if config["device-pages"] != strconv.Itoa(res.DevicePages) ||
		config["l2-slots"] != strings.Join(slots, ",") {
		t.Errorf("the JSON's configuration has --device-pages=%s --l2-slots=%s, want the sweep's %d "+
			"and %s", config["device-pages"], config["l2-slots"], res.DevicePages, strings.Join(slots, ","))
	}
	// The header wraps its configuration: the flag is on one of its lines.
	header := regexp.MustCompile(`--device-pages=(\d+)`).FindStringSubmatch(out)
	if header == nil || header[1] != strconv.Itoa(res.DevicePages) {
		t.Errorf("the header's configuration has --device-pages %v, want %d", header, res.DevicePages)
	}
}
