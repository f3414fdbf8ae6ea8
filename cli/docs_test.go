package cli

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/internal/errscope"
)

// TestReadmeL3CommandsWorkOnAFreshMachine: --l3-dir must exist (a typo is refused, not created), so
// every command of the README and of docs/ that names a literal --l3-dir makes it first, in the
// same block.
func TestReadmeL3CommandsWorkOnAFreshMachine(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil || len(docs) < 8 {
		t.Fatalf("docs/*.md: %d files, %v", len(docs), err)
	}
	var all []byte
	for _, doc := range append([]string{filepath.Join("..", "README.md")}, docs...) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	if !strings.Contains(string(all), "--l3-dir /tmp/l3") {
		t.Fatal("no document runs --l3-dir /tmp/l3: the test reads the wrong files")
	}
	l3Dir := regexp.MustCompile(`--l3-dir[= ](/[^ ]+)`)
	for _, block := range strings.Split(string(all), "```")[1:] {
		made := map[string]bool{}
		for _, line := range strings.Split(block, "\n") {
			for _, f := range regexp.MustCompile(`mkdir -p ([^ ;&]+)`).FindAllStringSubmatch(line, -1) {
				made[f[1]] = true
			}
			for _, m := range l3Dir.FindAllStringSubmatch(line, -1) {
				if !made[m[1]] {
					t.Errorf("the docs run --l3-dir %s without making it first:\n%s", m[1], line)
				}
			}
		}
	}
}

// TestManPageShowsValuesAndHasEnvironmentAndExitStatus: each flag shows the kind of value it takes
// (N, DURATION, the allowed values), never urfave's --flag=""; every CPHICACHE_* variable of every
// flag is in ENVIRONMENT, and every exit status in EXIT STATUS.
func TestManPageShowsValuesAndHasEnvironmentAndExitStatus(t *testing.T) {
	app := newApp()
	page := manPage(app)
	for _, want := range []string{".SH ENVIRONMENT", ".SH EXIT STATUS", `\fB\-\-cp\fR \fIN\fR`, `\fB\-\-watchdog\-timeout\fR \fIDURATION\fR`,
		`\fB\-\-layout\fR \fIlayer_first|page_first\fR`, `(default: 2m0s)`, ".TP\n\\fB128+N\\fR\n"} {
		if !strings.Contains(page, want) {
			t.Errorf("the man page has no %q", want)
		}
	}
	if strings.Contains(page, `=""`) {
		t.Error(`the man page shows a flag as --flag=""`)
	}
	env := page[strings.Index(page, ".SH ENVIRONMENT"):]
	var walk func([]*cli.Command)
	walk = func(cmds []*cli.Command) {
		for _, cmd := range cmds {
			for _, f := range cmd.Flags {
				if doc, ok := f.(cli.DocGenerationFlag); ok {
					for _, e := range doc.GetEnvVars() {
						if !strings.Contains(env, `\fB`+strings.ReplaceAll(e, "-", `\-`)+`\fR`) {
							t.Errorf(
								"%s (--%s of %s) is not in ENVIRONMENT",
								e,
								f.Names()[0],
								cmd.Name,
							)
						}
					}
				}
			}
			walk(cmd.Subcommands)
		}
	}
	walk(app.Commands)
}

// TestCompletionOffersEnumeratedValues: after a flag with a fixed set of values, bash completion
// offers them.
func TestCompletionOffersEnumeratedValues(t *testing.T) {
	script := filepath.Join(t.TempDir(), "cphicache.bash")
	if err := os.WriteFile(script, []byte(bashCompletion), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("bash", "-c", `source "$1"; COMP_WORDS=(cphicache run --layout ""); COMP_CWORD=3; _cphicache_complete; printf "%s\n" "${COMPREPLY[@]}"`, "_", script).
		CombinedOutput()
	if err != nil || strings.Fields(string(out))[0] != "layer_first" ||
		!strings.Contains(string(out), "page_first") {
		t.Errorf("completing --layout: %v\n%s", err, out)
	}
}

// TestEnumValuesAreAccepted: every value completion and the man page offer is one its flag accepts.
func TestEnumValuesAreAccepted(t *testing.T) {
	// A flag that does nothing alone is given what it needs (TestUnusedFlagsAreRefused).
	needs := map[string][]string{
		"trace-format":  {"--trace", "t.jsonl"},
		"gpu":           {"--model", "deepseek-v3", "--request-rate", "1"},
		"prefill-model": {"--gpu", "h200", "--request-rate", "1"},
		// fp4 needs a GPU with an fp4 rate
		"prefill-dtype": {"--gpu", "b200", "--model", "deepseek-v3", "--request-rate", "1"},
	}
	for flag, values := range enumValues {
		for _, v := range values {
			args := append(
				[]string{"cphicache", "run", "--" + flag, v, "--l3-dir", t.TempDir()},
				needs[flag]...)
			if flag == "format" {
				args = []string{
					"cphicache",
					"gen-trace",
					"--format",
					v,
					"--output",
					filepath.Join(t.TempDir(), "t"),
				}
			}
			o := &runOptions{}
			app := newApp()
			if args[1] == "run" { // parse and check only: no job
				flags := append(
					append(o.flags(), o.metricsFlags()...),
					servingFlags(&o.serving, false)...)
				app = &cli.App{
					Commands: []*cli.Command{
						{
							Name:   "run",
							Flags:  flags,
							Before: o.before,
							Action: func(*cli.Context) error { return nil },
						},
					},
				}
			}
			err := app.Run(args)
			var ce *errscope.ConfigError
			if errors.As(err, &ce) && ce.Flag == flag &&
				!strings.Contains(err.Error(), "GPU build") {
				t.Errorf("--%s %s is offered but refused: %v", flag, v, err)
			}
		}
	}
}

// TestEveryFlagHasAnEnvironmentVariableNamedForIt: every flag (as STYLE.md and the man page say)
// has a CPHICACHE_ variable ending in the flag's name in capitals, without a word twice
// (CPHICACHE_BENCH_L3_L3_DIR), and an output flag a command shares by name only (--json, --format)
// is prefixed with its command.
func TestEveryFlagHasAnEnvironmentVariableNamedForIt(t *testing.T) {
	var walk func(path string, cmds []*cli.Command)
	walk = func(path string, cmds []*cli.Command) {
		for _, cmd := range cmds {
			name := strings.TrimSpace(path + " " + cmd.Name)
			for _, f := range cmd.Flags {
				doc, ok := f.(cli.DocGenerationFlag)
				flag := f.Names()[0]
				if !ok || flag == "help" {
					continue
				}
				envs := doc.GetEnvVars()
				want := strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
				if len(envs) == 0 {
					t.Errorf("%s --%s has no environment variable", name, flag)
					continue
				}
				words := strings.Split(envs[0], "_")
				for i := 1; i < len(words); i++ {
					if words[i] == words[i-1] {
						t.Errorf("%s --%s: %s repeats %s", name, flag, envs[0], words[i])
					}
				}
				if !strings.HasPrefix(envs[0], "CPHICACHE_") ||
					!strings.HasSuffix(envs[0], want) &&
						!strings.HasSuffix(
							want,
							strings.TrimPrefix(envs[0], "CPHICACHE_BENCH_L3_"),
						) {
					t.Errorf("%s --%s: %s is not CPHICACHE_..._%s", name, flag, envs[0], want)
				}
				// The Slurm scripts' settings are CPHICACHE_SBATCH_*: no flag may read one
				// (slurm/cp8.sbatch).
				if strings.HasPrefix(envs[0], "CPHICACHE_SBATCH_") {
					t.Errorf("%s --%s: %s is the Slurm scripts' namespace", name, flag, envs[0])
				}
				if (flag == "json" || flag == "plot" || flag == "format" || flag == "output") &&
					envs[0] == "CPHICACHE_"+want {
					t.Errorf("%s --%s: %s does not say which command's", name, flag, envs[0])
				}
			}
			walk(name, cmd.Subcommands)
		}
	}
	walk("", newApp().Commands)
}
