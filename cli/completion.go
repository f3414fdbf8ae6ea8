package cli

// `cphicache completion bash|zsh`: the completion scripts make install installs. The scripts ask
// the binary itself for its words, so they cannot disagree with --help; the man page (man.go) is
// the other command make install runs.

import (
	"fmt"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/hicache/prefill"
	"github.com/cphicache/cphicache/hicache/sizing"
	"github.com/cphicache/cphicache/pool"
)

// The completion scripts ask the program itself for the words that may come next: urfave/cli
// answers --generate-bash-completion (EnableBashCompletion) with the commands, or with the flags
// after a word that starts with a dash, without running anything. They complete the GPU and MPICH
// builds' binaries too.
//
// After a flag that takes one of a fixed set of values (enumValues), they offer the values instead:
// the script carries them in a case statement, generated from the same table the man page shows.
var bashCompletion = `# bash completion for cphicache (cphicache completion bash)
_cphicache_complete() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} opts
	local words=("${COMP_WORDS[@]:0:COMP_CWORD}")
	case $prev in
` + enumCases("opts=%q") + `	esac
	if [[ -n $opts ]]; then
		:
	elif [[ $cur == -* ]]; then
		opts=$("${words[@]}" "$cur" --generate-bash-completion 2>/dev/null)
	else
		opts=$("${words[@]}" --generate-bash-completion 2>/dev/null)
	fi
	COMPREPLY=($(compgen -W "$opts" -- "$cur"))
}
complete -o bashdefault -o default -F _cphicache_complete cphicache cphicache-gpu cphicache-mpich
`

var zshCompletion = `#compdef cphicache cphicache-gpu cphicache-mpich
# zsh completion for cphicache (cphicache completion zsh): install as _cphicache in a directory of $fpath, or
# source it.
_cphicache() {
	local -a opts
	local cur=${words[CURRENT]}
	case ${words[CURRENT-1]} in
` + enumCases("opts=(%s)") + `	esac
	if [[ -n ${opts[1]} ]]; then
		:
	elif [[ $cur == -* ]]; then
		opts=("${(@f)$(${words[@]:0:CURRENT-1} $cur --generate-bash-completion 2>/dev/null)}")
	else
		opts=("${(@f)$(${words[@]:0:CURRENT-1} --generate-bash-completion 2>/dev/null)}")
	fi
	if [[ -n ${opts[1]} ]]; then
		_describe 'values' opts
	else
		_files
	fi
}
if [[ ${zsh_eval_context[-1]} == loadautofunc ]]; then
	_cphicache "$@"
else
	compdef _cphicache cphicache cphicache-gpu cphicache-mpich
fi
`

// enumValues are the values of the flags that take one of a fixed set, for completion and the man
// page; TestEnumValuesAreAccepted holds them to what the flags accept.
var enumValues = map[string][]string{
	"layout":             {"layer_first", "page_first"},
	"write-policy":       {"write_through", "write_through_selective", "write_back"},
	"l2-policy":          pool.PolicyNames(),
	"collective":         {"mpi", "nccl"},
	"trace-format":       {"auto", "tokens", "mooncake"},
	"format":             {"tokens", "mooncake"},
	"log-level":          {"debug", "info", "warn", "error"},
	"model":              sizing.ModelNames(),
	"prefill-model":      sizing.ModelNames(),
	"gpu":                prefill.GPUNames(),
	"prefill-dtype":      sizing.DTypeNames(),
	"l2-design":          l2DesignNames,
	"l3-write-policy":    {"write_through", "write_back"},
	"l3-prefetch-policy": {"best_effort", "wait_complete", "timeout"},
}

// enumCases is the case arms of a completion script, one per enumerated flag, each setting the
// values with assign (a format with one verb: the values, space-separated).
func enumCases(assign string) string {
	names := make([]string, 0, len(enumValues))
	for name := range enumValues {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		fmt.Fprintf(&b, "\t--%s) "+assign+" ;;\n", name, strings.Join(enumValues[name], " "))
	}
	return b.String()
}

func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print the shell completion script for bash or zsh (make install installs both)",
		ArgsUsage: "bash|zsh",
		Description: "bash: source <(cphicache completion bash), or install it as cphicache in " +
			"/usr/share/bash-completion/completions; zsh: install it as _cphicache in a directory of $fpath.",
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			scripts := map[string]string{"bash": bashCompletion, "zsh": zshCompletion}
			script, ok := scripts[c.Args().First()]
			if !ok || c.NArg() != 1 {
				return usageError{
					fmt.Errorf(
						"completion: give one shell, bash or zsh, not %q",
						strings.Join(c.Args().Slice(), " "),
					),
				}
			}
			fmt.Print(script)
			return nil
		},
	}
}
