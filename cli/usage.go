package cli

// The command line's own errors, said the way the rest of cphicache says errors: with the
// --double-dash flag name, what the value should look like, where a value came from when the
// environment gave it, and exit status 2 (spmd.ExitUsage) for all of them. urfave/cli and Go's flag
// package say "flag -x: parse error", ignore stray arguments and exit 3 (the watchdog's status) on
// an unknown command; harden fixes each.

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/internal/errscope"
)

var (
	// Go's flag package: a value on the command line that does not parse, and a flag it does not
	// know.
	badValuePattern  = regexp.MustCompile(`^invalid value "(.*)" for flag -+([A-Za-z0-9-]+): (.*)$`)
	undefinedPattern = regexp.MustCompile(`^flag provided but not defined: -+(.*)$`)
	// urfave/cli: a value from the environment that does not parse.
	badEnvPattern = regexp.MustCompile(
		`^could not parse "(.*)" as (\S+) value from environment variable "([A-Z0-9_]+)" for flag ([A-Za-z0-9-]+): (.*)$`,
	)
)

// harden gives every command the behaviour above, and the exit statuses in its --help.
func harden(app *cli.App) {
	var commandLine []string // the words after the program's name, for fromEnvironment
	app.Before = func(c *cli.Context) error {
		commandLine = c.Args().Slice()
		return nil
	}
	app.Action = func(c *cli.Context) error {
		if c.Args().Present() {
			return usageError{
				fmt.Errorf(
					"unknown command %q; the commands are %s",
					c.Args().First(),
					strings.Join(commandNames(app.Commands), ", "),
				),
			}
		}
		return cli.ShowAppHelp(c)
	}
	app.CustomAppHelpTemplate = cli.AppHelpTemplate + "\n" + exitStatusHelp
	var walk func(cmds []*cli.Command)
	walk = func(cmds []*cli.Command) {
		for _, cmd := range cmds {
			cmd.OnUsageError = onUsageError
			if len(cmd.Subcommands) > 0 {
				cmd.CustomHelpTemplate = cli.SubcommandHelpTemplate + "\n" + exitStatusHelp
				walk(cmd.Subcommands)
				continue
			}
			cmd.CustomHelpTemplate = cli.CommandHelpTemplate + "\n" + exitStatusHelp
			if action := cmd.Action; action != nil {
				// Errors found once the job runs (a --cp the launch cannot hold, a cache the node's
				// memory cannot) say where their value came from too: withJob annotates before a
				// rank prints.
				cmd.Action = func(c *cli.Context) error {
					annotateError = func(err error) error { return fromEnvironment(c, commandLine, err) }
					jobSettings = func() []spmd.Setting { return commandSettings(c, commandLine) }
					return annotateError(action(c))
				}
			}
			before := cmd.Before
			cmd.Before = func(c *cli.Context) error {
				if err := refuseArguments(c); err != nil {
					return err
				}
				if err := checkEnvironment(app); err != nil {
					return err
				}
				if before == nil {
					return nil
				}
				return fromEnvironment(c, commandLine, before(c))
			}
		}
	}
	walk(app.Commands)
}

func commandNames(cmds []*cli.Command) []string {
	var names []string
	for _, cmd := range cmds {
		if !cmd.Hidden {
			names = append(names, cmd.Name)
		}
	}
	return names
}

// refuseArguments refuses words a command does not take (only a command with ArgsUsage takes any):
// a trace given without --trace, or a flag after such a word, which flag parsing stops at, would be
// silently ignored.
func refuseArguments(c *cli.Context) error {
	if !c.Args().Present() || c.Command.ArgsUsage != "" {
		return nil
	}
	hint := ""
	if first := c.Args().First(); strings.HasSuffix(first, ".jsonl") ||
		strings.HasSuffix(first, ".json") {
		hint = fmt.Sprintf(" (a trace is given as --trace %s)", first)
	}
	return usageError{
		fmt.Errorf(
			"%s takes flags only, not the argument %q%s; flags after it are not read either",
			commandPath(c),
			c.Args().First(),
			hint,
		),
	}
}

// commandPath is the command's full name, "l3 stat" (urfave/cli's FullName leaves out the parents).
func commandPath(c *cli.Context) string {
	var names []string
	for _, l := range c.Lineage() {
		if l.Command != nil && l.Command.Name != "" &&
			(len(names) == 0 || names[0] != l.Command.Name) {
			names = append([]string{l.Command.Name}, names...)
		}
	}
	return strings.Join(names, " ")
}

// annotateError is fromEnvironment for the command that runs (set by harden's Action); withJob
// applies it to a job's error before a rank prints it.
var annotateError = func(err error) error { return err }

// fromEnvironment adds where a refused value came from, when a CPHICACHE_* variable gave it rather
// than the command line: a setting exported long ago (or by a job script) is the last place a user
// looks. The reason is changed in place, so that an agreed error keeps the wrapper that says which
// rank prints it.
func fromEnvironment(c *cli.Context, commandLine []string, err error) error {
	var ce *errscope.ConfigError
	if !errors.As(err, &ce) || strings.Contains(ce.Reason, "(the value came from ") {
		return err
	}
	for _, f := range c.Command.Flags {
		names := f.Names()
		if !slices.Contains(names, ce.Flag) || onCommandLine(commandLine, names) {
			continue
		}
		if withEnv, ok := f.(interface{ GetEnvVars() []string }); ok {
			for _, env := range withEnv.GetEnvVars() {
				if _, set := os.LookupEnv(env); set {
					ce.Reason = fmt.Sprintf("%s (the value came from %s)", ce.Reason, env)
					return err
				}
			}
		}
	}
	return err
}

// onCommandLine reports whether one of a flag's names is among the words, as -x, --x or --x=value.
func onCommandLine(words, names []string) bool {
	for _, w := range words {
		if w == "--" {
			return false
		}
		name, _, _ := strings.Cut(strings.TrimLeft(w, "-"), "=")
		if strings.HasPrefix(w, "-") && slices.Contains(names, name) {
			return true
		}
	}
	return false
}

// onUsageError turns the flag packages' messages into cphicache's: the flag with two dashes, and
// what its value should look like (a duration's own parse error, such as "missing unit").
func onUsageError(c *cli.Context, err error, _ bool) error {
	text := err.Error()
	if m := badValuePattern.FindStringSubmatch(text); m != nil {
		return &errscope.ConfigError{Flag: m[2], Reason: valueReason(flagKind(c, m[2]), m[1], "")}
	}
	if m := badEnvPattern.FindStringSubmatch(text); m != nil {
		return &errscope.ConfigError{Flag: m[4], Reason: valueReason(m[2], m[1], m[3])}
	}
	if m := undefinedPattern.FindStringSubmatch(text); m != nil {
		hint := ""
		if near := closestName(m[1], commandFlagNames(c)); near != "" {
			hint = fmt.Sprintf(
				" (did you mean --%s?)",
				near,
			) // as a misspelled CPHICACHE_ variable gets
		}
		return usageError{fmt.Errorf("unknown flag --%s%s", m[1], hint)}
	}
	return usageError{err}
}

// commandFlagNames are the names of the flags c's command takes (closestName's set), none without a
// command.
func commandFlagNames(c *cli.Context) map[string]bool {
	names := map[string]bool{}
	if c == nil || c.Command == nil {
		return names
	}
	for _, f := range c.Command.Flags {
		for _, name := range f.Names() {
			names[name] = true
		}
	}
	return names
}

// flagKind is the kind of value the named flag takes, in urfave/cli's words (int, duration, ...).
func flagKind(c *cli.Context, name string) string {
	if c == nil || c.Command == nil {
		return ""
	}
	for _, f := range c.Command.Flags {
		if slices.Contains(f.Names(), name) {
			switch f.(type) {
			case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag, *cli.Uint64Flag:
				return "int"
			case *cli.DurationFlag:
				return "duration"
			case *cli.Float64Flag:
				return "float"
			case *cli.BoolFlag:
				return "bool"
			}
		}
	}
	return ""
}

// valueReason says why value is not a kind, and where it came from when env gave it.
func valueReason(kind, value, env string) string {
	from := ""
	if env != "" {
		from = " (from " + env + ")"
	}
	switch {
	case kind == "duration":
		_, err := time.ParseDuration(value)
		why := "not a duration"
		if err != nil {
			why = strings.TrimPrefix(err.Error(), "time: ")
		}
		return fmt.Sprintf(
			"%q%s is not a duration (%s): give a number with a unit, e.g. 120s, 2m, 500ms",
			value,
			from,
			why,
		)
	case strings.HasPrefix(kind, "int") || strings.HasPrefix(kind, "uint"):
		return fmt.Sprintf("%q%s is not a whole number", value, from)
	case kind == "float" || kind == "float64":
		return fmt.Sprintf("%q%s is not a number", value, from)
	case kind == "bool":
		return fmt.Sprintf("%q%s is not true or false", value, from)
	}
	return fmt.Sprintf("%q%s does not parse", value, from)
}
