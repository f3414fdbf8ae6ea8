package main

import (
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// Every bench flag can be set from the environment (under Slurm and mpirun -x), with a CPHICACHE_BENCH_ name
// that is unique, so that one exported variable never sets two benchmarks' files.
func TestBenchFlagsHaveUniqueEnvironmentVariables(t *testing.T) {
	seen := map[string]string{}
	for _, sub := range benchCommand().Subcommands {
		for _, f := range sub.Flags {
			envs := f.(interface{ GetEnvVars() []string }).GetEnvVars()
			name := sub.Name + " --" + f.Names()[0]
			if len(envs) != 1 || !strings.HasPrefix(envs[0], "CPHICACHE_BENCH_") {
				t.Errorf("%s: environment variables %v", name, envs)
				continue
			}
			if other, ok := seen[envs[0]]; ok {
				t.Errorf("%s and %s share %s", name, other, envs[0])
			}
			seen[envs[0]] = name
			if f.(cli.DocGenerationFlag).GetUsage() == "" {
				t.Errorf("%s has no usage", name)
			}
		}
	}
}
