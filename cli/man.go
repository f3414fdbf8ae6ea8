package cli

// `cphicache man` (hidden; make install runs it): the man page, rendered from the command and flag
// definitions (so it cannot disagree with --help), in the sections a man page reader expects: NAME,
// SYNOPSIS, DESCRIPTION, COMMANDS (each flag with the kind of value it takes and its default),
// ENVIRONMENT (every CPHICACHE_* variable and the flag it sets) and EXIT STATUS. urfave/cli's own
// ToMan shows every flag as --flag="" and has neither of the last two sections.

import (
	"fmt"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"
)

// roffEscape makes text safe in a roff line: backslashes doubled, a leading dot or quote
// neutralised, and hyphens kept as hyphens (so that flags can be searched and copied).
func roffEscape(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// flagValueName is the placeholder of a flag's value in the man page: what kind of value it takes.
func flagValueName(f cli.Flag) string {
	switch f.(type) {
	case *cli.BoolFlag:
		return ""
	case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag, *cli.Uint64Flag:
		return "N"
	case *cli.DurationFlag:
		return "DURATION"
	case *cli.Float64Flag:
		return "X"
	}
	if values, ok := enumValues[f.Names()[0]]; ok {
		return strings.Join(values, "|")
	}
	return "VALUE"
}

// manPage renders the app as a section 1 man page.
func manPage(app *cli.App) string {
	var b strings.Builder
	fmt.Fprintf(&b, ".TH %s 1\n.SH NAME\n%s \\- %s\n", app.Name, app.Name, roffEscape(app.Usage))
	fmt.Fprintf(&b, ".SH SYNOPSIS\n\\fB%s\\fR \\fICOMMAND\\fR [\\fIFLAGS\\fR]\n", app.Name)
	fmt.Fprintf(&b, ".SH DESCRIPTION\n%s\n", roffParagraphs(app.Description))
	b.WriteString(".SH COMMANDS\n")
	env := map[string]string{}
	var walk func(prefix string, cmds []*cli.Command)
	walk = func(prefix string, cmds []*cli.Command) {
		for _, cmd := range cmds {
			if cmd.Hidden || cmd.Name == "help" {
				continue
			}
			name := strings.TrimSpace(prefix + " " + cmd.Name)
			fmt.Fprintf(&b, ".SS %s\n%s\n", roffEscape(name), roffEscape(cmd.Usage))
			if cmd.Description != "" {
				fmt.Fprintf(&b, ".PP\n%s\n", roffParagraphs(cmd.Description))
			}
			for _, f := range sortedFlags(cmd.Flags) {
				writeManFlag(&b, f, env)
			}
			walk(name, cmd.Subcommands)
		}
	}
	walk("", app.Commands)
	b.WriteString(
		".SH ENVIRONMENT\nEvery variable sets the flag named beside it, for every command that has the flag; a flag given on the command line wins.\n",
	)
	names := make([]string, 0, len(env))
	for name := range env {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(&b, ".TP\n\\fB%s\\fR\n%s\n", roffEscape(name), roffEscape(env[name]))
	}
	b.WriteString(".SH EXIT STATUS\n")
	for _, line := range strings.Split(strings.TrimSpace(exitStatusHelp), "\n")[1:] {
		status, meaning, _ := strings.Cut(strings.TrimSpace(line), " ")
		fmt.Fprintf(
			&b,
			".TP\n\\fB%s\\fR\n%s\n",
			roffEscape(status),
			roffEscape(strings.TrimSpace(meaning)),
		)
	}
	return b.String()
}

func sortedFlags(flags []cli.Flag) []cli.Flag {
	sorted := append([]cli.Flag(nil), flags...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Names()[0] < sorted[j].Names()[0] })
	return sorted
}

// writeManFlag writes one flag as a tagged paragraph: its names and value, then its usage, default
// and environment variable; it records the variable for ENVIRONMENT.
func writeManFlag(b *strings.Builder, f cli.Flag, env map[string]string) {
	doc, ok := f.(cli.DocGenerationFlag)
	if !ok {
		return
	}
	var names []string
	for _, n := range f.Names() {
		dashes := "--"
		if len(n) == 1 {
			dashes = "-"
		}
		names = append(names, `\fB`+roffEscape(dashes+n)+`\fR`)
	}
	tag := strings.Join(names, ", ")
	if value := flagValueName(f); value != "" {
		tag += ` \fI` + roffEscape(value) + `\fR`
	}
	text := doc.GetUsage()
	if def := strings.Trim(doc.GetDefaultText(), `"`); def != "" && doc.TakesValue() {
		text += " (default: " + def + ")"
	}
	for _, e := range doc.GetEnvVars() {
		text += " [$" + e + "]"
		env[e] = "sets --" + f.Names()[0]
	}
	fmt.Fprintf(b, ".TP\n%s\n%s\n", tag, roffEscape(text))
}

// roffParagraphs keeps a description's line breaks as paragraph breaks.
func roffParagraphs(s string) string {
	var out []string
	for _, p := range strings.Split(strings.TrimSpace(s), "\n") {
		out = append(out, roffEscape(p))
	}
	return strings.Join(out, "\n.PP\n")
}

// manCommand prints the man page, section 1, rendered by urfave/cli from the same command and flag
// definitions as --help. Hidden: make install runs it.
func manCommand() *cli.Command {
	return &cli.Command{
		Name:   "man",
		Usage:  "print the man page (roff) generated from the command definitions",
		Hidden: true,
		Action: func(c *cli.Context) error {
			fmt.Print(manPage(c.App))
			return nil
		},
	}
}
