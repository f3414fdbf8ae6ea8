package cli

// The settings prove themselves complete: every flag of every command, given another value on one
// rank than on another, is refused naming it, unless it is rank-own (rankOwnFlags). The walk runs
// in process against commandSettings, what spmd.StartJob compares; the real refusal under mpirun is
// TestRanksGivenDifferentSettingsStopNamingThem's.

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/hicache/spmd"
)

// flagAt is one flag where a command line can give it: the app's own before the command (app), a
// parent's (bench's, l3's) before the subcommand, or the command's own after it.
type flagAt struct {
	path   []string // the command's words: "bench", "step"
	flag   cli.Flag
	before int // how many of path's words come before the flag: 0 for the app's own
}

// everyFlag is every flag of every command of app (each a leaf of its command tree, with the app's
// flags, its parents' and the help flag urfave/cli adds to each), and how many commands there are.
func everyFlag() (flags []flagAt, commands int) {
	app := newApp()
	app.Setup() // adds the app's --help and --version
	var walk func(path []string, parents []*cli.Command, cmds []*cli.Command)
	walk = func(path []string, parents, cmds []*cli.Command) {
		for _, cmd := range cmds {
			if cmd.Name == "help" { // urfave/cli's (Setup adds it): it prints help, no job
				continue
			}
			p := append(slices.Clone(path), cmd.Name)
			if len(cmd.Subcommands) > 0 {
				walk(p, append(slices.Clone(parents), cmd), cmd.Subcommands)
				continue
			}
			commands++
			for _, f := range app.Flags {
				flags = append(flags, flagAt{path: p, flag: f})
			}
			for i, c := range append(slices.Clone(parents), cmd) {
				for _, f := range append(slices.Clone(c.Flags), cli.HelpFlag) {
					flags = append(flags, flagAt{path: p, flag: f, before: i + 1})
				}
			}
		}
	}
	walk(nil, nil, app.Commands)
	return flags, commands
}

// settingsOf is what commandSettings gives the command at path run with args inserted after
// before of path's words, in process. No command's Before runs: a value its checks refuse is
// refused naming the flag before any comparison, and the comparison takes the parsed value
// whatever the checks would say. ran is false when the command line ended before the command's
// Action (--help, --version): no job starts then.
func settingsOf(path []string, before int, args ...string) (
	settings []spmd.Setting, ran bool, err error,
) {
	app := newApp()
	app.Writer, app.ErrWriter = io.Discard, io.Discard
	app.ExitErrHandler = func(*cli.Context, error) {}
	line := append(append(slices.Clone(path[:before]), args...), path[before:]...)
	cmds := app.Commands
	var cmd *cli.Command
	for _, word := range path {
		i := slices.IndexFunc(cmds, func(c *cli.Command) bool { return c.Name == word })
		cmd = cmds[i]
		cmd.Before = nil
		cmds = cmd.Subcommands
	}
	cmd.Action = func(c *cli.Context) error {
		settings, ran = commandSettings(c, line), true
		return nil
	}
	err = app.Run(append([]string{"cphicache"}, line...))
	return settings, ran, err
}

// otherValue is a value f parses and that differs from its default. Enumerations and sizes need no
// valid member here: settingsOf runs no check (see there).
func otherValue(f cli.Flag) string {
	switch f := f.(type) {
	case *cli.BoolFlag:
		return fmt.Sprint(!f.Value)
	case *cli.IntFlag:
		return fmt.Sprint(f.Value + 1)
	case *cli.Int64Flag:
		return fmt.Sprint(f.Value + 1)
	case *cli.Uint64Flag:
		return fmt.Sprint(f.Value + 1)
	case *cli.Float64Flag:
		return fmt.Sprint(f.Value + 0.5)
	case *cli.DurationFlag:
		return (f.Value + 1500*time.Millisecond).String()
	case *cli.StringFlag:
		return f.Value + "-other"
	case *cli.IntSliceFlag, *cli.Int64SliceFlag:
		return "12345,6789" // no default of cphicache's is this list
	}
	return "" // a kind of flag the walk does not know: settingsProblems says so
}

// compared is what spmd.AgreeOnSettings finds between two ranks holding a and b: the names of the
// settings of their common prefix that both know and that differ (by name or value, as its hash
// has them), and whether the lists of names are the same.
func compared(a, b []spmd.Setting) (differ []string, sameList bool) {
	sameList = len(a) == len(b)
	for i := range min(len(a), len(b)) {
		sameList = sameList && a[i].Name == b[i].Name
		if !a[i].Unknown && !b[i].Unknown && (a[i].Name != b[i].Name || a[i].Value != b[i].Value) {
			differ = append(differ, b[i].Name)
		}
	}
	return differ, sameList
}

// settingsProblems walks every flag of every command: rank A runs the command with the defaults,
// rank B with another value of one flag, given on the command line and then from each of its
// environment variables; the comparison must find that flag alone, the lists of names the same
// (the message would otherwise say that the ranks run different builds), unless the flag is
// rank-own, which must take no part; given its default explicitly on rank B alone, it must differ
// in nothing. It returns what is wrong, and how many flags (each name once per command) and
// commands it walked.
func settingsProblems(t *testing.T) (problems []string, flags, commands int) {
	all, commands := everyFlag()
	defaults := map[string][]spmd.Setting{}
	seen := map[string]bool{} // "command --flag" and each rank-own name
	for _, at := range all {
		cmd, name := strings.Join(at.path, " "), at.flag.Names()[0]
		if _, ok := defaults[cmd]; !ok {
			a, _, err := settingsOf(at.path, 0)
			if err != nil {
				t.Fatalf("%s with its defaults: %v", cmd, err)
			}
			defaults[cmd] = a
		}
		if !seen[cmd+" --"+name] {
			seen[cmd+" --"+name], seen[name] = true, true
			flags++
		}
		value := otherValue(at.flag)
		if value == "" {
			problems = append(problems, fmt.Sprintf("%s --%s: a kind of flag (%T) otherValue "+
				"does not know: give it a value", cmd, name, at.flag))
			continue
		}
		problems = append(problems, flagProblems(t, at, defaults[cmd], value)...)
		problems = append(problems, defaultProblems(at, defaults[cmd])...)
	}
	for _, own := range rankOwnFlags {
		if !seen[own.name] || own.why == "" {
			problems = append(problems, fmt.Sprintf("rankOwnFlags names --%s (why: %q): no "+
				"command has it, or it says not why", own.name, own.why))
		}
	}
	return problems, flags, commands
}

// flagProblems is what is wrong with one flag's place in the comparison (settingsProblems): rank
// B's settings, with value given to the flag at on the command line and then from each of its
// environment variables, against rank A's, a.
func flagProblems(t *testing.T, at flagAt, a []spmd.Setting, value string) []string {
	cmd, name := strings.Join(at.path, " "), at.flag.Names()[0]
	ways := []string{""} // "": the command line; else the environment variable
	if withEnv, ok := at.flag.(interface{ GetEnvVars() []string }); ok && at.before > 0 {
		ways = append(ways, withEnv.GetEnvVars()...)
	}
	var problems []string
	for _, env := range ways {
		var b []spmd.Setting
		var ran bool
		var err error
		if env == "" {
			b, ran, err = settingsOf(at.path, at.before, "--"+name+"="+value)
		} else {
			// Put back at once as rank A had it (TestMain sets CPHICACHE_JOB_ID): "" would be a
			// value of its own for the flags after.
			was, set := os.LookupEnv(env)
			t.Setenv(env, value)
			b, ran, err = settingsOf(at.path, at.before)
			if os.Unsetenv(env); set {
				os.Setenv(env, was)
			}

		}
		from := cmp.Or(env, "the command line")
		how := fmt.Sprintf("%s --%s %q (from %s)", cmd, name, value, from)
		differ, sameList := compared(a, b)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: not taken (%v): give it a value",
				how, err))
		case rankOwn(name) && len(differ) > 0:
			problems = append(problems, fmt.Sprintf("%s: rank-own, but %v differ", how, differ))
		case rankOwn(name):
		case !ran:
			problems = append(problems, fmt.Sprintf("%s: ended the command before its Action "+
				"and is not rank-own", how))
		case len(differ) == 0:
			problems = append(problems, fmt.Sprintf("%s: not compared, and not rank-own "+
				"(rankOwnFlags)", how))
		case !sameList || !slices.Equal(differ, []string{"--" + name}):
			problems = append(problems, fmt.Sprintf("%s: the comparison finds %v (the same "+
				"list of names: %v), want --%s alone", how, differ, sameList, name))
		}
	}
	return problems
}

// Every flag of every command is compared across ranks, or is rank-own by design (rankOwnFlags,
// each with why): ranks given different values of a compared flag are refused naming it, and it
// alone; a rank given a flag's default explicitly is not refused. Dropping a flag from
// commandSettings fails this (TestTheSettingsWalkCatchesAFlagLeftOut).
func TestEveryFlagOfEveryCommandIsComparedUnlessRankOwn(t *testing.T) {
	problems, flags, commands := settingsProblems(t)
	for _, p := range problems {
		t.Error(p)
	}
	if flags < 200 || commands < 15 {
		t.Errorf("walked %d flags of %d commands: the walk misses the command tree",
			flags, commands)
	}
	all, _ := everyFlag()
	own := map[string]bool{} // "command --flag", once each
	for _, at := range all {
		if name := at.flag.Names()[0]; rankOwn(name) {
			own[strings.Join(at.path, " ")+" --"+name] = true
		}
	}
	t.Logf("walked %d flags of %d commands: %d compared, %d rank-own", flags, commands,
		flags-len(own), len(own))
}

// defaultValue is f's default as the command line would give it.
func defaultValue(f cli.Flag) string {
	switch f := f.(type) {
	case *cli.IntSliceFlag:
		return commaList(f.Value.Value())
	case *cli.Int64SliceFlag:
		return commaList(f.Value.Value())
	case *cli.DurationFlag:
		return f.Value.String()
	case interface{ GetValue() string }:
		return f.GetValue()
	}
	return ""
}

// commaList is a slice flag's list as its command line gives it: "1,2".
func commaList[T any](list []T) string {
	words := make([]string, len(list))
	for i, v := range list {
		words[i] = fmt.Sprint(v)
	}
	return strings.Join(words, ",")
}

// defaultProblems is what is wrong when rank B gives the flag at its default explicitly and rank
// A leaves it unset: nothing may differ (one rank's explicit default is no other job). A flag whose
// environment variable this process sets (TestMain's CPHICACHE_JOB_ID) has no default here.
func defaultProblems(at flagAt, a []spmd.Setting) []string {
	cmd, name := strings.Join(at.path, " "), at.flag.Names()[0]
	if withEnv, ok := at.flag.(interface{ GetEnvVars() []string }); ok {
		for _, env := range withEnv.GetEnvVars() {
			if _, set := os.LookupEnv(env); set {
				return nil
			}
		}
	}
	value := defaultValue(at.flag)
	b, ran, err := settingsOf(at.path, at.before, "--"+name+"="+value)
	if differ, _ := compared(a, b); err == nil && ran && len(differ) > 0 {
		return []string{fmt.Sprintf("%s --%s %q, its default, given on one rank only: the "+
			"comparison finds %v, want nothing", cmd, name, value, differ)}
	}
	return nil
}
