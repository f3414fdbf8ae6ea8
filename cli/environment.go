package cli

// The CPHICACHE_* environment: a misspelled variable (CPHICACHE_L2_SLOT for CPHICACHE_L2_SLOTS)
// would be ignored without a word while a misspelled flag is refused, so a command refuses, as a
// usage error, any CPHICACHE_* variable that is neither a flag's nor one of the few settings read
// outside the flags (otherSettings).

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/hicache/transport"
	"github.com/cphicache/cphicache/kernels"
	"github.com/cphicache/cphicache/mpi"
)

// otherSettings are the CPHICACHE_* variables that are no flag's: the binary's own, read where they
// apply, and those of the project's scripts and tests, which run the binary with them set.
var otherSettings = []string{
	spmd.NodeNameEnv, mpi.YieldEnv, transport.NCCLLibEnv, transport.NCCLHostBuffersEnv, kernels.CUDALibEnv,
	kernels.CUDAStagedEnv,
	"CPHICACHE_BIN", // the CLI tests' binary (Makefile, cli/main_test.go)
}

// otherSettingPrefixes are families of script settings: the sbatch scripts' (CPHICACHE_SBATCH_*)
// and the local Slurm cluster test's (CPHICACHE_SLURM_*).
var otherSettingPrefixes = []string{"CPHICACHE_SBATCH_", "CPHICACHE_SLURM_"}

// knownVariables is every CPHICACHE_* name cphicache reads: each flag's over every command, and
// otherSettings.
func knownVariables(cmds []*cli.Command) map[string]bool {
	known := map[string]bool{}
	for _, name := range otherSettings {
		known[name] = true
	}
	var walk func([]*cli.Command)
	walk = func(cmds []*cli.Command) {
		for _, cmd := range cmds {
			for _, f := range cmd.Flags {
				if withEnv, ok := f.(interface{ GetEnvVars() []string }); ok {
					for _, env := range withEnv.GetEnvVars() {
						known[env] = true
					}
				}
			}
			walk(cmd.Subcommands)
		}
	}
	walk(cmds)
	return known
}

// unknownVariables refuses the first (by name) CPHICACHE_* variable of environ that cphicache does
// not read, naming the closest one it does.
func unknownVariables(environ []string, known map[string]bool) error {
	var unknown []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "CPHICACHE_") || known[name] ||
			hasAnyPrefix(name, otherSettingPrefixes) {
			continue
		}
		unknown = append(unknown, name)
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	hint := ""
	if near := closestName(unknown[0], known); near != "" {
		hint = fmt.Sprintf(" (did you mean %s?)", near)
	}
	return usageError{
		fmt.Errorf(
			"unknown environment variable %s%s: cphicache reads CPHICACHE_<FLAG> for each flag "+
				"(--l2-slots is CPHICACHE_L2_SLOTS; bench's CPHICACHE_BENCH_<SUB>_<FLAG>) and %s; unset it or correct its name",
			unknown[0],
			hint,
			strings.Join(otherSettings[:5], ", "),
		),
	}
}

func hasAnyPrefix(name string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// closestName is the known name nearest to name by edit distance, when it is near enough (a third
// of its length) to be a slip of the keyboard.
func closestName(name string, known map[string]bool) string {
	best, bestDistance := "", len(name)/3+1
	for k := range known {
		if d := editDistance(name, k); d < bestDistance || (d == bestDistance && k < best) {
			best, bestDistance = k, d
		}
	}
	return best
}

// editDistance is Levenshtein's distance between a and b.
func editDistance(a, b string) int {
	previous := make([]int, len(b)+1)
	for j := range previous {
		previous[j] = j
	}
	for i := 1; i <= len(a); i++ {
		current := make([]int, len(b)+1)
		current[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			current[j] = min(previous[j]+1, current[j-1]+1, previous[j-1]+cost)
		}
		previous = current
	}
	return previous[len(b)]
}

// checkEnvironment is unknownVariables over this process's environment, for a command about to run.
func checkEnvironment(app *cli.App) error {
	return unknownVariables(os.Environ(), knownVariables(app.Commands))
}
